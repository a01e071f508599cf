"""Ask the question line by line, when stdin or stderr is not a terminal: the question as
text on stderr, the answer as one line from stdin."""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Mapping
from typing import Any

from orchestrator.domain.question import UserReply
from orchestrator.present.printable import printable
from orchestrator.present.render import question_text, summary_line

__all__ = ["ask_by_line"]


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
