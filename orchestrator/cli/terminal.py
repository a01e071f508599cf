"""Ask the session's one question at the terminal: arrow-key selects, checkboxes, free text.

Everything is drawn on stderr (stdout carries the `--json` document). Esc or Ctrl+C leave
the question open (None: the session stays paused and can be answered later); cancelling
the session is an explicit choice: the "Cancel the session" entry of a select, or Ctrl+X.
Esc inside "Other" goes back to the options. A line under the prompt counts down to the
deadline; when it passes, the prompt closes (None, and the caller applies its timeout
policy) unless `keep_open` (on-timeout `wait`): then it stays open and says so. Once
answered, the prompt and the header above it are erased and one summary line stays. When
stdin or stderr is not a terminal, the question is asked line by line instead.
"""

from __future__ import annotations

import asyncio
import os
import select
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.domain.question import UserReply
from orchestrator.present.printable import printable
from orchestrator.present.render import question_text, summary_line

if TYPE_CHECKING:
    from questionary import Question

__all__ = ["ask", "ask_by_line", "OTHER"]

OTHER = "Other (type an answer)"
DECLINE_ENTRY = "Decline: no answer (the agent proceeds on its default)"
CANCEL_ENTRY = "✖ Cancel the session"

# Prompt results that are not answers. Identity-compared, never shown.
_CANCEL = object()  # the user chose to cancel the session
_DECLINE = object()  # the user declined the question
_LEAVE = object()  # Esc or Ctrl+C: the question stays open
_TIMEOUT = object()
_OTHER = object()
_SEND = object()  # the review's "send the answers"

_HINTS = {
    "free_text": "(enter sends)",
    "single_select": "(↑/↓ move · enter chooses)",
    "multi_select": "(↑/↓ move · space toggles · enter confirms)",
    "other": "(enter sends)",
}
# The keys that do not answer, on a line under the prompt (with the time left).
_LATER = "esc: answer later"
_KEYS = {
    "free_text": f"{_LATER} · ctrl+n: decline · ctrl+x: cancel the session",
    "single_select": _LATER,
    "multi_select": f"{_LATER} · ctrl+n: decline · ctrl+x: cancel the session",
    "other": "esc: back to the options",
    "review": _LATER,
    "confirm": "y: yes, cancel it · n or esc: no, back to the question",
}


def ask(
    question: Mapping[str, Any],
    *,
    deadline: float | None = None,
    keep_open: bool = False,
    draft: Callable[[list[str]], str] | None = None,
) -> UserReply | None:
    """Ask `question`: the reply, UserReply(action="cancel") when the user cancels the
    session, None when the question stays open (Esc, Ctrl+C, input closed, or the
    deadline passed and not `keep_open`).

    `deadline` is a time.time() timestamp; without it, the question's own ISO `deadline`
    (if any) applies.
    """
    if deadline is None:
        deadline = _parse_deadline(question.get("deadline"))
    if len(question.get("parts") or []) > 1:
        return _ask_parts(question, deadline=deadline, keep_open=keep_open, draft=draft)
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return ask_by_line(question, None if keep_open else deadline)

    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    with console.capture() as captured:
        console.print(_header(question, None))  # the deadline counts down under the prompt
    header = captured.get()
    console.file.write(header)
    console.file.flush()
    closed = left = False
    try:
        while True:
            result = _ask_interactive(question, _Deadline(deadline, keep_open))
            cancel = isinstance(result, UserReply) and result.action == "cancel"
            if not cancel or _cancel_confirmed():
                break  # (not confirmed: the question is asked again)
    except EOFError:  # Ctrl+D on an empty line, or the terminal went away
        result, closed = None, True
    left = result is _LEAVE
    reply = None if left or result is None else result
    # The prompts erase themselves (erase_when_done); this erases the header above them.
    console.file.write(f"\x1b[{header.count(chr(10))}F\x1b[J")
    console.print(_styled(printable(summary_line(question, reply, closed=closed, left=left))))
    assert reply is None or isinstance(reply, UserReply)
    return reply


def _ask_parts(
    question: Mapping[str, Any],
    *,
    deadline: float | None,
    keep_open: bool,
    draft: Callable[[list[str]], str] | None = None,
) -> UserReply | None:
    """A multi-part question, one part after another (each with its own prompt), then, at
    a terminal, a review: send the answers, or change one part and review again. The reply
    with one entry per part; None as soon as a part (or the review) is left open or the
    deadline passes (the whole question stays open: nothing is committed); the cancel of
    the session if one part cancels it. Line by line (a pipe) there is no review."""
    parts = list(question["parts"])
    replies: dict[int, UserReply] = {}  # by part index; a changed part is asked again
    todo = range(len(parts))
    while True:
        for index in todo:
            askers = ", ".join(parts[index].get("askers") or [parts[index].get("asked_by", "")])
            where = f"part {parts[index]['part']}/{len(parts)}: {askers or 'an agent'}"
            shown = {**parts[index], "parts": [], "asked_by": where}
            reply = ask(shown, deadline=deadline, keep_open=keep_open)
            if reply is None or reply.action == "cancel":
                if reply is None:
                    _keep_draft(parts, replies, draft)
                return reply
            replies[index] = reply
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            break
        answered = [replies[index] for index in range(len(parts))]
        change = _review(question, parts, answered, _Deadline(deadline, keep_open))
        if change is _SEND:
            break
        if not isinstance(change, int):  # left open, or the deadline passed
            _keep_draft(parts, replies, draft)
            return None
        todo = range(change, change + 1)
    return UserReply(parts=tuple(replies[index] for index in range(len(parts))))


def _keep_draft(
    parts: list[Mapping[str, Any]],
    replies: Mapping[int, UserReply],
    draft: Callable[[list[str]], str] | None,
) -> None:
    """Answers given to some parts of a question left open are not lost: the command that
    sends them later is printed (placeholders for the parts not answered yet)."""
    if not replies or draft is None:
        return
    args: list[str] = []
    for index, part in enumerate(parts):
        args += ["--part", str(part["part"])]
        reply = replies.get(index)
        if reply is None:
            free = part.get("kind", "free_text") == "free_text"
            args += ["--answer", "YOUR ANSWER"] if free else ["--choice", "OPTION"]
        elif reply.action == "decline":
            args.append("--decline")
        else:
            args += [arg for choice in reply.choices for arg in ("--choice", choice)]
            args += ["--answer", reply.text] if reply.text is not None else []
    sys.stderr.write(printable("  your answers are not sent; to send them: " + draft(args)) + "\n")


def _review(
    question: Mapping[str, Any],
    parts: list[Mapping[str, Any]],
    replies: list[UserReply],
    deadline: _Deadline,
) -> Any:
    """Send the answers (_SEND), change a part (its index), or neither (_LEAVE: Esc, Ctrl+C;
    None: the deadline passed), saying so on a summary line."""
    import questionary

    choices = [questionary.Choice(f"✔ Send the {len(parts)} answers", value=_SEND)]
    for index, (part, reply) in enumerate(zip(parts, replies, strict=True)):
        answer = ", ".join([*reply.choices, *([reply.text] if reply.text is not None else [])])
        title = f"Change part {part['part']}: {printable(str(part['question']))} → {answer}"
        choices.append(questionary.Choice(printable(title), value=index))
    prompt = questionary.select(
        "Review your answers",
        choices,
        instruction=_HINTS["single_select"],
        use_shortcuts=False,
        output=_output(),
        erase_when_done=True,
    )
    try:
        picked = _run(prompt, deadline, "review")
    except EOFError:  # Ctrl+D, or the terminal went away: left open, as at a part's prompt
        picked = _LEAVE
    if picked is _SEND or isinstance(picked, int):
        return picked
    left = picked is _LEAVE
    what = f"⏸ the {len(parts)}-part question: left open, to answer later (nothing was sent)"
    if not left:
        what = f"⌛ the {len(parts)}-part question: no answer before the deadline"
    sys.stderr.write(what + "\n")
    return _LEAVE if left else None


# -- the interactive prompt ---------------------------------------------------------------


class _Deadline:
    """When the question's deadline is, and whether the prompt outlives it."""

    def __init__(self, at: float | None, keep_open: bool) -> None:
        self.at = at
        self.keep_open = keep_open

    def line(self) -> str:
        if self.at is None:
            return ""
        left = self.at - time.time()
        if left > 0:
            after = "the question stays open" if self.keep_open else "the prompt closes"
            return f"⏳ answer within {_duration(left)} (then {after})"
        if self.keep_open:
            return f"⌛ the deadline passed {_duration(-left)} ago; the question is still open"
        return "⌛ the deadline passed"


def _ask_interactive(question: Mapping[str, Any], deadline: _Deadline) -> Any:
    """The reply, or _LEAVE, or None (deadline passed)."""
    kind = question.get("kind", "free_text")
    message = printable(str(question["question"]))
    if kind == "free_text":
        typed = _run(_text(message, _HINTS[kind]), deadline, kind)
        return _reply(typed, text=True)
    while True:  # Esc inside "Other" comes back here
        picked = _run(_select(question, kind), deadline, kind)
        labels = picked if isinstance(picked, list) else [picked]
        if _OTHER not in labels:
            return _reply(picked)
        ask_other = "Your answer:" if kind == "single_select" else "Your other answer:"
        typed = _run(_text(ask_other, _HINTS["other"]), deadline, "other")
        if typed is _LEAVE:
            continue
        if not isinstance(typed, str):
            return _reply(typed)
        chosen = [label for label in labels if label is not _OTHER]
        if chosen:
            # An answer of one's own is the answer text, never among the choices.
            return UserReply(choices=tuple(chosen), text=typed.strip())
        return UserReply(text=typed.strip())


def _cancel_confirmed() -> bool:
    """Cancelling ends the session for good: asked once more (No by default; Esc is No)."""
    import questionary

    prompt = questionary.confirm(
        "Cancel the session? It stops for good, with no answer",
        default=False,
        output=_output(),
        erase_when_done=True,
    )
    return bool(_run(prompt, _Deadline(None, keep_open=True), "confirm") is True)


def _select(question: Mapping[str, Any], kind: str) -> Question:
    import questionary

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
        choices.append(questionary.Choice(DECLINE_ENTRY, value=_DECLINE))
        choices.append(questionary.Choice(CANCEL_ENTRY, value=_CANCEL))
        return questionary.select(
            printable(str(question["question"])),
            choices,
            default=recommended[0] if recommended else None,
            use_shortcuts=False,
            **common,
        )
    return questionary.checkbox(
        printable(str(question["question"])),
        choices,
        validate=lambda values: bool(values) or "choose at least one (space toggles)",
        **common,
    )


def _reply(result: Any, *, text: bool = False) -> Any:
    if result is _CANCEL:
        return UserReply(action="cancel")
    if result is _DECLINE:
        return UserReply(action="decline")
    if result is _LEAVE:
        return _LEAVE
    if result is _TIMEOUT:
        return None
    if isinstance(result, str) and text:
        return UserReply(text=result.strip())
    if isinstance(result, list):
        return UserReply(choices=tuple(result))
    return UserReply(choices=(str(result),))


def _text(message: str, instruction: str) -> Question:
    import questionary

    return questionary.text(
        message,
        instruction=instruction,
        validate=lambda value: bool(value.strip()) or "type an answer",
        output=_output(),
        erase_when_done=True,
    )


def _run(prompt: Question, deadline: _Deadline, kind: str) -> Any:
    """Run one prompt: Esc and Ctrl+C give _LEAVE, Ctrl+X (where the keys line offers it)
    _CANCEL, a passed deadline _TIMEOUT (unless the prompt is kept open)."""
    from prompt_toolkit.key_binding import KeyBindings, merge_key_bindings

    app = prompt.application
    keys = KeyBindings()

    # Eager: a lone Esc acts at once instead of waiting to see if Alt+key follows.
    @keys.add("escape", eager=True)
    @keys.add("c-c", eager=True)
    def _leave(event: Any) -> None:
        event.app.exit(result=_LEAVE)

    if "ctrl+x" in _KEYS[kind]:

        @keys.add("c-x", eager=True)
        def _cancel(event: Any) -> None:
            event.app.exit(result=_CANCEL)

    if "ctrl+n" in _KEYS[kind]:

        @keys.add("c-n", eager=True)
        def _decline(event: Any) -> None:
            event.app.exit(result=_DECLINE)

    app.key_bindings = merge_key_bindings([app.key_bindings, keys]) if app.key_bindings else keys
    _keys_line(app, _KEYS[kind], deadline)

    def expire() -> None:
        if app.future is not None and not app.future.done():
            app.exit(result=_TIMEOUT)

    def arm() -> None:
        if deadline.at is not None and not deadline.keep_open:
            asyncio.get_running_loop().call_later(max(0.0, deadline.at - time.time()), expire)

    try:
        return app.run(pre_run=arm)
    except KeyboardInterrupt:
        return _LEAVE


def _keys_line(app: Any, keys: str, deadline: _Deadline) -> None:
    """Lines under the prompt: the keys that do not answer, and the time left (redrawn
    every second)."""
    from prompt_toolkit.layout import HSplit, Layout, Window
    from prompt_toolkit.layout.controls import FormattedTextControl

    def text() -> Any:
        left = deadline.line()
        return [("class:instruction", f"  {keys}" + (f"\n  {left}" if left else ""))]

    lines = Window(FormattedTextControl(text), dont_extend_height=True)
    old = app.layout
    app.layout = Layout(HSplit([old.container, lines]), focused_element=old.current_window)
    if deadline.at is not None:
        app.refresh_interval = 1.0


def _output() -> Any:
    from prompt_toolkit.output import create_output

    return create_output(stdout=sys.stderr)


def _title(option: Mapping[str, Any]) -> str:
    """The option as listed: its label and description, printable (the value chosen is
    the label as the agent wrote it)."""
    title = printable(str(option["label"]))
    if option.get("recommended"):
        title += " (recommended)"
    if option.get("description"):
        title += f" — {printable(str(option['description']))}"
    return title


def _header(question: Mapping[str, Any], deadline: float | None) -> Any:
    from rich.markup import escape
    from rich.text import Text

    urgency = question.get("urgency", "medium")
    who = escape(printable(str(question.get("asked_by") or "an agent")))
    lines = [f"[bold]{who}[/bold] asks"]
    if urgency == "high":
        lines[0] += "  [bold reverse red] HIGH URGENCY [/]"
    elif urgency == "low":
        lines[0] += "  [dim](low urgency)[/dim]"
    for label, field in (("why", "reason"), ("context", "context")):
        if question.get(field):
            lines.append(f"  [dim]{label}:[/dim] {escape(printable(str(question[field])))}")
    if question.get("default"):
        lines.append(f"  [dim]if unanswered:[/dim] {escape(printable(str(question['default'])))}")
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


# -- line by line, when stdin or stderr is not a terminal: the question as text on stderr,
# the answer as one line from stdin ---------------------------------------------------------


def ask_by_line(question: Mapping[str, Any], deadline: float | None) -> UserReply | None:
    """Read the answer as one line from stdin: text, an option number or label (comma-separated
    for a multi_select). An empty line is asked again; end of input or the deadline gives None."""
    kind = question.get("kind", "free_text")
    labels = [str(o["label"]) for o in question.get("options") or []]
    hint = {
        "free_text": "your answer",
        "single_select": "number or label",
        "multi_select": "numbers or labels, comma-separated",
    }[kind]
    _say(question_text(question))
    reply: UserReply | None = None
    confirmed: str | None = None  # an own answer like an option's label, typed twice
    closed = left = False
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
            elif reply.text and kind != "free_text" and reply.text != confirmed:
                like = _looks_like(reply.text, labels)
                if like is not None:
                    # A typo of an option ("Bth") is not taken as one's own answer unasked.
                    number = labels.index(like) + 1
                    _say(
                        f"did you mean {like!r} ({number})? Type {number} to choose it, or "
                        f"type {reply.text!r} again to give it as your own answer"
                    )
                    confirmed, reply = reply.text, None
    except KeyboardInterrupt:  # the question stays open, as at the interactive prompt
        reply, left = None, True
        _say("")
    _say(summary_line(question, reply, closed=closed, left=left))
    return reply


def _parse_plain(raw: str, kind: str, labels: list[str], allow_other: bool) -> UserReply | None:
    if not raw:
        return None
    if kind == "free_text":
        return UserReply(text=raw)
    picks = [p.strip() for p in raw.split(",") if p.strip()] if kind == "multi_select" else [raw]
    chosen: list[str] = []
    own: list[str] = []
    for pick in picks:
        folded = [label for label in labels if label.casefold() == pick.casefold()]
        if pick.isdigit() and 0 < int(pick) <= len(labels):
            chosen.append(labels[int(pick) - 1])
        elif folded:
            chosen.append(folded[0])
        elif allow_other and not own:
            own.append(pick)  # an answer of one's own: the answer text, not a choice
        else:
            return None
    return UserReply(choices=tuple(chosen), text=own[0] if own else None)


def _looks_like(text: str, labels: list[str]) -> str | None:
    """The option label `text` is likely a typo of (not equal to any), else None."""
    import difflib

    folded = {label.casefold(): label for label in labels}
    close = difflib.get_close_matches(text.casefold(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None


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
    sys.stderr.write(printable(text) + end)
    sys.stderr.flush()
