"""`orchestrator resume`: answer, decline or cancel a session's question, or see it again,
and run the session on (or, with --no-run, leave it to a worker)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

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

__all__ = ["resume", "cli_flags"]


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
            from orchestrator.cli.part_args import part_replies

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
    finish(as_json, view, db, question_shown=question_shown(session_id))


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
