"""Ask the session's one question at the terminal: arrow-key selects, checkboxes, free text.

Everything is drawn on stderr (stdout carries the `--json` document). Esc or Ctrl+C cancels
the session for real; a deadline that passes closes the prompt and returns None, and the
caller applies its timeout policy. Once answered, the prompt and the header above it are
erased and one summary line stays. When stdin or stderr is not a terminal, the question
is asked line by line instead.
"""

from __future__ import annotations

import asyncio
import os
import select
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.answers import UserReply

if TYPE_CHECKING:
    from questionary import Question

__all__ = ["ask", "summary_line", "OTHER"]

OTHER = "Other (type an answer)"

# Prompt results that are not answers. Identity-compared, never shown.
_CANCEL = object()
_TIMEOUT = object()
_OTHER = object()

_HINTS = {
    "free_text": "(enter sends · esc cancels)",
    "single_select": "(↑/↓ move · enter chooses · esc cancels)",
    "multi_select": "(↑/↓ move · space toggles · enter confirms · esc cancels)",
}


def ask(question: Mapping[str, Any], *, deadline: float | None = None) -> UserReply | None:
    """Ask `question`; a cancel is UserReply(action="cancel"), no answer in time is None.

    `deadline` is a time.time() timestamp; without it, the question's own ISO `deadline`
    (if any) applies.
    """
    if deadline is None:
        deadline = _parse_deadline(question.get("deadline"))
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return _ask_plain(question, deadline)

    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    with console.capture() as captured:
        console.print(_header(question, deadline))
    header = captured.get()
    console.file.write(header)
    console.file.flush()
    closed = False
    try:
        reply = _ask_interactive(question, deadline)
    except EOFError:  # Ctrl+D on an empty line, or the terminal went away
        reply, closed = None, True
    # The prompts erase themselves (erase_when_done); this erases the header above them.
    console.file.write(f"\x1b[{header.count(chr(10))}F\x1b[J")
    console.print(_styled(summary_line(question, reply, closed=closed)))
    return reply


def summary_line(
    question: Mapping[str, Any], reply: UserReply | None, *, closed: bool = False
) -> str:
    """The one line left on the terminal after the question: what was answered, or why not.

    `reply` None means no answer: the deadline passed, or (`closed`) the input ended.
    """
    whose = f"{question.get('asked_by') or 'the agent'}'s question"
    if reply is None:
        return f"⌛ {whose}: " + (
            "no answer (input closed)" if closed else "no answer before the deadline"
        )
    if reply.action == "cancel":
        return f"✖ {whose}: cancelled"
    if reply.action == "decline":
        return f"✔ {whose}: declined"
    answer = [*reply.choices, *([reply.text] if reply.text is not None else [])]
    return f"✔ {whose}: {', '.join(answer)}"


# -- the interactive prompt ---------------------------------------------------------------


def _ask_interactive(question: Mapping[str, Any], deadline: float | None) -> UserReply | None:
    import questionary

    kind = question.get("kind", "free_text")
    message = str(question["question"])
    if kind == "free_text":
        return _reply(_run(_text(message, _HINTS["free_text"]), deadline), text=True)

    options = list(question.get("options") or [])
    recommended = [o["label"] for o in options if o.get("recommended")]
    if not recommended and question.get("default") in [o["label"] for o in options]:
        recommended = [question["default"]]
    choices = [
        questionary.Choice(
            _title(option), value=option["label"], checked=option["label"] in recommended
        )
        for option in options
    ]
    if question.get("allow_other"):
        choices.append(questionary.Choice(OTHER, value=_OTHER))
    common: dict[str, Any] = {
        "instruction": _HINTS[kind],
        "output": _output(),
        "erase_when_done": True,
    }
    if kind == "single_select":
        picked = _run(
            questionary.select(
                message,
                choices,
                default=recommended[0] if recommended else None,
                use_shortcuts=False,
                **common,
            ),
            deadline,
        )
        if picked is _OTHER:
            return _reply(_run(_text("Your answer:", _HINTS["free_text"]), deadline), text=True)
        return _reply(picked)

    picked = _run(
        questionary.checkbox(
            message,
            choices,
            validate=lambda values: bool(values) or "choose at least one (space toggles)",
            **common,
        ),
        deadline,
    )
    if not isinstance(picked, list) or _OTHER not in picked:
        return _reply(picked)
    labels = [value for value in picked if value is not _OTHER]
    typed = _run(_text("Your other answer:", _HINTS["free_text"]), deadline)
    if not isinstance(typed, str):
        return _reply(typed)
    return UserReply(choices=(*labels, typed.strip())) if labels else UserReply(text=typed.strip())


def _reply(result: Any, *, text: bool = False) -> UserReply | None:
    if result is _CANCEL:
        return UserReply(action="cancel")
    if result is _TIMEOUT:
        return None
    if text:
        return UserReply(text=str(result).strip())
    if isinstance(result, list):
        return UserReply(choices=tuple(result))
    return UserReply(choices=(str(result),))


def _text(message: str, instruction: str) -> Question:
    import questionary

    return questionary.text(
        message,
        instruction=instruction,
        validate=lambda value: bool(value.strip()) or "type an answer (esc cancels)",
        output=_output(),
        erase_when_done=True,
    )


def _run(prompt: Question, deadline: float | None) -> Any:
    """Run one prompt: Esc and Ctrl+C give _CANCEL, a passed deadline gives _TIMEOUT."""
    from prompt_toolkit.key_binding import KeyBindings, merge_key_bindings

    app = prompt.application
    escape = KeyBindings()

    # Eager: a lone Esc cancels at once instead of waiting to see if Alt+key follows.
    @escape.add("escape", eager=True)
    def _cancel(event: Any) -> None:
        event.app.exit(result=_CANCEL)

    app.key_bindings = (
        merge_key_bindings([app.key_bindings, escape]) if app.key_bindings else escape
    )

    def expire() -> None:
        if app.future is not None and not app.future.done():
            app.exit(result=_TIMEOUT)

    def arm() -> None:
        if deadline is not None:
            asyncio.get_running_loop().call_later(max(0.0, deadline - time.time()), expire)

    try:
        return app.run(pre_run=arm)
    except KeyboardInterrupt:
        return _CANCEL


def _output() -> Any:
    from prompt_toolkit.output import create_output

    return create_output(stdout=sys.stderr)


def _title(option: Mapping[str, Any]) -> str:
    title = str(option["label"])
    if option.get("recommended"):
        title += " (recommended)"
    if option.get("description"):
        title += f" — {option['description']}"
    return title


def _header(question: Mapping[str, Any], deadline: float | None) -> Any:
    from rich.markup import escape
    from rich.text import Text

    urgency = question.get("urgency", "medium")
    who = escape(str(question.get("asked_by") or "an agent"))
    lines = [f"[bold]{who}[/bold] asks"]
    if urgency == "high":
        lines[0] += "  [bold reverse red] HIGH URGENCY [/]"
    elif urgency == "low":
        lines[0] += "  [dim](low urgency)[/dim]"
    for label, field in (("why", "reason"), ("context", "context")):
        if question.get(field):
            lines.append(f"  [dim]{label}:[/dim] {escape(str(question[field]))}")
    if question.get("default"):
        lines.append(f"  [dim]if unanswered:[/dim] {escape(str(question['default']))}")
    if deadline is not None:
        lines.append(f"  [dim]answer within:[/dim] {_duration(deadline - time.time())}")
    return Text.from_markup("\n".join(lines))


def _styled(summary: str) -> Any:
    from rich.text import Text

    colour = {"✔": "green", "✖": "red", "⌛": "yellow"}.get(summary[:1], "")
    text = Text(summary)
    text.stylize(f"bold {colour}".strip(), 0, 1)
    return text


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _parse_deadline(value: Any) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


# -- line by line, when there is no terminal ------------------------------------------------


def _ask_plain(question: Mapping[str, Any], deadline: float | None) -> UserReply | None:
    """Read the answer as one line from stdin: text, an option number or label (comma-separated
    for a multi_select). An empty line is asked again; end of input or the deadline gives None."""
    from orchestrator.cli.render import question_text

    kind = question.get("kind", "free_text")
    labels = [str(o["label"]) for o in question.get("options") or []]
    hint = {
        "free_text": "your answer",
        "single_select": "number or label",
        "multi_select": "numbers or labels, comma-separated",
    }[kind]
    _say(question_text(question))
    reply: UserReply | None = None
    closed = False
    try:
        while reply is None:
            _say(f"{hint}: ", end="")
            line = _read_line(deadline)
            if line is None:
                closed = time.time() < (deadline or float("inf"))
                _say("")
                break
            reply = _parse_plain(line.strip(), kind, labels, bool(question.get("allow_other")))
            if reply is None:
                _say(f"not an answer; expected {hint}" + (f" from 1-{len(labels)}" * bool(labels)))
    except KeyboardInterrupt:
        reply = UserReply(action="cancel")
    _say(summary_line(question, reply, closed=closed))
    return reply


def _parse_plain(raw: str, kind: str, labels: list[str], allow_other: bool) -> UserReply | None:
    if not raw:
        return None
    if kind == "free_text":
        return UserReply(text=raw)
    picks = [p.strip() for p in raw.split(",") if p.strip()] if kind == "multi_select" else [raw]
    chosen = []
    for pick in picks:
        folded = [label for label in labels if label.casefold() == pick.casefold()]
        if pick.isdigit() and 0 < int(pick) <= len(labels):
            chosen.append(labels[int(pick) - 1])
        elif folded:
            chosen.append(folded[0])
        elif allow_other:
            chosen.append(pick)
        else:
            return None
    if kind == "single_select" and chosen[0] not in labels:
        return UserReply(text=chosen[0])
    return UserReply(choices=tuple(chosen))


def _read_line(deadline: float | None) -> str | None:
    """One line from stdin's descriptor (unbuffered, so nothing past it is consumed)."""
    fd = sys.stdin.fileno()
    data = b""
    while not data.endswith(b"\n"):
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
            if not ready:
                return None
        byte = os.read(fd, 1)
        if not byte:
            return data.decode(errors="replace") if data else None
        data += byte
    return data.decode(errors="replace")


def _say(text: str, end: str = "\n") -> None:
    sys.stderr.write(text + end)
    sys.stderr.flush()
