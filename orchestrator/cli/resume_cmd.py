"""`orchestrator resume`: answer, decline or cancel a session's question, or see it again,
and run the session on (or, with --no-run, leave it to a worker).

`resume ID --part N --answer X --part M --choice Y` answers each part of a multi-part
question: Click hands a command each option's values, but not how options of different
names were interleaved, so `PartsCommand` (the class `resume` is registered with) reads
that order from the arguments before Click parses them (Click then parses and validates
them as usual), and `part_replies` turns it into one reply per part.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.core import Context  # Typer >= 0.24 carries its own Click
from typer._click.globals import get_current_context
from typer.core import TyperCommand, TyperOption

from orchestrator.cli.options import (
    DbOption,
    JsonOption,
    NoBrowserOption,
    NotifyOption,
    PublicUrlOption,
    UiOption,
    asking,
)
from orchestrator.cli.output import emit, finish, user_errors
from orchestrator.cli.runs import (
    collect_from_here_on,
    ctrl_c_said,
    question_shown,
    sessions_for,
)
from orchestrator.present.readout import handed_off_text
from orchestrator.present.render import command_line

__all__ = ["resume", "cli_flags", "PartsCommand", "part_replies"]

if TYPE_CHECKING:
    from orchestrator.domain.question import UserReply


def resume(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to continue.")],
    answer: Annotated[
        str | None, typer.Option("--answer", metavar="TEXT", help="Answer the open question.")
    ] = None,
    choice: Annotated[
        list[str] | None,
        typer.Option(
            "--choice",
            metavar="LABEL|N",
            help="Choose an option by its label or its number from 1 (repeat for a "
            "multi_select question). An answer of your own goes with --answer.",
        ),
    ] = None,
    decline: Annotated[
        bool, typer.Option("--decline", help="Resolve the question without an answer.")
    ] = False,
    part: Annotated[
        list[int] | None,
        typer.Option(
            "--part",
            metavar="N",
            help="Answer part N of a multi-part question: the --answer, --choice or "
            "--decline after it are that part's (repeat: --part 1 --choice A --part 2 "
            "--answer TEXT).",
        ),
    ] = None,
    cancel: Annotated[bool, typer.Option("--cancel", help="Stop the session.")] = False,
    reconcile: Annotated[
        bool,
        typer.Option(
            "--reconcile",
            help="Reconcile an ended session with its late answer (one given after the "
            "question was declined or timed out): the PM is told the answer and the "
            "assumptions it contradicts and re-plans the affected tasks.",
        ),
    ] = False,
    note: Annotated[
        str | None,
        typer.Option("--note", metavar="TEXT", help="A remark kept with your answer."),
    ] = None,
    no_run: Annotated[
        bool,
        typer.Option(
            "--no-run",
            help="Commit the answer (or decline, or --reconcile's reopening) and run nothing: "
            "`orchestrator worker` or `orchestrator serve` runs the session on. Exit 0 once "
            "it is committed.",
        ),
    ] = False,
    ui: UiOption = None,
    no_browser: NoBrowserOption = False,
    notify: NotifyOption = None,
    public_url: PublicUrlOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a paused session: answer, decline or cancel its question, or see it again."""
    with user_errors(as_json, session_id), ctrl_c_said(as_json, db, session_id):
        from orchestrator.domain.question import UserReply
        from orchestrator.errors import ConfigError

        if not no_run:  # --no-run runs no graph: no LangGraph to load
            from orchestrator.api.running import load_runtime

            load_runtime()  # LangGraph, before unfreezing gc
            collect_from_here_on()

        given = [
            name
            for name, on in (
                ("--answer", answer is not None),
                ("--choice", bool(choice)),
                ("--decline", decline),
                ("--cancel", cancel),
            )
            if on
        ]
        if part:
            given = ["--part"] if not cancel else ["--part", "--cancel"]
        if reconcile and "--cancel" in given:
            raise ConfigError("give at most one of --reconcile, --cancel")
        if reconcile and (given or note is not None):
            first = given[0] if given else "--note"
            then = command_line("resume", session_id, db, "--reconcile")
            raise ConfigError(
                f"--reconcile goes alone: give the late answer first ({first} without "
                f"--reconcile), then `{then}`"
            )
        if len(given) > 1:
            raise ConfigError(f"give at most one of {', '.join(given)}")
        if no_run and not (answer is not None or choice or decline or part or reconcile):
            raise ConfigError(
                "--no-run goes with --answer, --choice, --part or --decline (the answer to "
                "commit), or with --reconcile"
            )
        sessions = sessions_for(
            db,
            progress=not no_run,
            ui=ui,
            session_id=session_id,
            **asking(no_browser, notify, public_url),
        )
        reply = None
        if part:
            reply = UserReply(parts=part_replies(), note=note)
        elif answer is not None:
            reply = UserReply(text=answer, note=note)
        elif choice:
            reply = UserReply(choices=tuple(choice), note=note)
        elif decline:
            reply = UserReply(action="decline", note=note)
        elif cancel:
            reply = UserReply(action="cancel", note=note)
        elif note is not None:
            raise ConfigError("--note goes with --answer, --choice, --decline or --cancel")
        with cli_flags():
            if reconcile:
                view = dict(sessions.reconcile(session_id, run=not no_run))
            elif no_run:
                assert reply is not None
                view = dict(sessions.answer(session_id, reply))
            else:
                view = sessions.resume(session_id, reply)
    if no_run:
        emit(as_json, view, handed_off_text(view, db, reconcile=reconcile))
        raise typer.Exit(0)
    finish(
        as_json,
        view,
        db,
        question_shown=question_shown(session_id),
        answered=reply is not None and not reconcile,
    )


# What the session API's answer fields are called on the command line.
_FLAGS = {
    "answer": "--answer TEXT",
    "choices": "--choice LABEL|N",
    "note": "--note TEXT",
    "parts": "--part N followed by that part's --answer, --choice or --decline",
}


@contextmanager
def cli_flags() -> Iterator[None]:
    """An invalid answer's message (worded for the session API) with the flags that give
    those fields here."""
    from orchestrator.errors import InvalidAnswer

    try:
        yield
    except InvalidAnswer as exc:
        if not exc.fields:
            raise
        flags = ", ".join(f"`{field}` is {_FLAGS[field]}" for field in exc.fields)
        said = exc.message if exc.message.endswith((".", "?", "!")) else f"{exc.message}."
        raise InvalidAnswer(f"{said} On the command line, {flags}.") from None


# -- --part: a multi-part question's answers, in the order given ----------------------------

_META = "orchestrator.resume_parts"
_ANSWERING = {"--part": "part", "--answer": "answer", "--choice": "choice", "--decline": "decline"}


class PartsCommand(TyperCommand):
    """A command that keeps the order of its --part/--answer/--choice/--decline options."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        takes_value = {
            name
            for param in self.params
            if isinstance(param, TyperOption) and not param.is_flag
            for name in (*param.opts, *param.secondary_opts)
        }
        ctx.meta[_META] = _scan(list(args), takes_value)
        return super().parse_args(ctx, args)


def _scan(args: list[str], takes_value: set[str]) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    at = 0
    while at < len(args):
        arg = args[at]
        if arg == "--":
            break
        name, eq, inline = arg.partition("=")
        if name in takes_value:
            value = inline if eq else (args[at + 1] if at + 1 < len(args) else None)
            at += 1 if eq else 2
            if name in _ANSWERING:
                found.append((_ANSWERING[name], value))
            continue
        if arg in _ANSWERING:
            found.append((_ANSWERING[arg], None))
        at += 1
    return found


def part_replies() -> tuple[UserReply, ...]:
    """The running command's replies, one per part, parts numbered from 1 with none left
    out (ConfigError else)."""
    from orchestrator.domain.question import UserReply
    from orchestrator.errors import ConfigError

    given: dict[int, dict[str, Any]] = {}
    current: int | None = None
    for kind, value in get_current_context().meta.get(_META, []):
        if kind == "part":
            if value is None or not value.strip().isdigit() or int(value) < 1:
                raise ConfigError(f"--part takes a part number from 1, got {value!r}")
            current = int(value)
            if current in given:
                raise ConfigError(f"--part {current} is given twice")
            given[current] = {"text": None, "choices": [], "decline": False}
        elif current is None:
            raise ConfigError(
                "with --part, each --answer, --choice or --decline follows the --part it answers"
            )
        elif kind == "answer":
            given[current]["text"] = value
        elif kind == "choice":
            given[current]["choices"].append(value)
        else:
            given[current]["decline"] = True
    missing = [n for n in range(1, max(given, default=0) + 1) if n not in given]
    if missing:
        raise ConfigError(f"answer every part: --part {missing[0]} is missing")
    replies = []
    for number in sorted(given):
        part = given[number]
        if part["decline"]:
            if part["text"] is not None or part["choices"]:
                raise ConfigError(f"--part {number}: --decline goes alone")
            replies.append(UserReply(action="decline"))
        elif part["text"] is None and not part["choices"]:
            raise ConfigError(f"--part {number} needs --answer, --choice or --decline")
        else:
            replies.append(UserReply(text=part["text"], choices=tuple(part["choices"])))
    return tuple(replies)
