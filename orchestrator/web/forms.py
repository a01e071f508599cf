"""The answer form (session page, answer link, one-question page) as a Reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.api import Reply
from orchestrator.errors import InvalidAnswer

__all__ = ["OTHER", "reply_from_form"]

OTHER = "__other__"  # the "an answer of my own" option's value


def reply_from_form(question: Mapping[str, Any], form: Any) -> Any:
    """Read `action` (answer | decline), `text`, `choice` (repeated), `other`, `note`; for a
    multi-part question each part's fields carry its prefix `pN-` (`p2-text`, `p2-choice`,
    `p2-other`) and `pN-decline` declines that part."""
    note = (form.get("note") or "").strip() or None
    action = form.get("action") or "answer"
    parts = question.get("parts") or []
    if action == "decline":  # the whole question: every part of it (domain.question)
        return Reply(action="decline", note=note)
    if action != "answer":
        raise InvalidAnswer(f"unknown action {action!r}; expected answer or decline")
    if not parts:
        return _answer(question, form, "", note)
    replies = []
    for part in parts:
        prefix = f"p{part['part']}-"
        if form.get(f"{prefix}decline"):
            replies.append(Reply(action="decline"))
            continue
        try:
            replies.append(_answer(part, form, prefix, None))
        except InvalidAnswer as exc:
            raise InvalidAnswer(f"part {part['part']}: {exc.message}") from None
    return Reply(parts=tuple(replies), note=note)


def _answer(question: Mapping[str, Any], form: Any, prefix: str, note: str | None) -> Any:
    kind = question.get("kind", "free_text")
    if kind == "free_text":
        return Reply(text=form.get(f"{prefix}text") or "", note=note)
    picks = [c for c in form.getlist(f"{prefix}choice") if c]
    other = (form.get(f"{prefix}other") or "").strip()
    own: str | None = None  # an answer of one's own is the answer text, never a choice
    if OTHER in picks:
        picks.remove(OTHER)
        if not other:
            raise InvalidAnswer("you chose an answer of your own: write it in the text field")
        own = other
    elif other and question.get("allow_other"):
        if kind == "single_select" and picks:
            raise InvalidAnswer(
                f"you chose {picks[0]!r} and also wrote an answer of your own: choose "
                "'Something else' to send your own, or clear the text"
            )
        own = other
    return Reply(choices=tuple(picks), text=own, note=note)
