"""One part of a multi-part question: the asks of one round merged into the session's one
question (docs/multi-part-questions.md). Pure data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Part", "parts_from_object"]


@dataclass(frozen=True)
class Part:
    """A part of the surfaced question: who asked it (several askers when the same
    question came twice), their reply keys, and once answered the part's response
    (`declined`: answered without a response; the askers take `default`)."""

    number: int
    question: str
    askers: tuple[str, ...]
    keys: tuple[str, ...]
    default: str | None = None
    response: str | None = None
    declined: bool = False


def parts_from_object(question_object: Mapping[str, Any] | None) -> tuple[Part, ...]:
    """The parts stored in a session's `question_object` (empty for a one-part question)."""
    return tuple(
        Part(
            number=int(entry["part"]),
            question=str(entry["question"]),
            askers=tuple(entry["askers"]),
            keys=tuple(entry["keys"]),
            default=entry.get("default"),
            response=entry.get("response"),
            declined=bool(entry.get("declined", False)),
        )
        for entry in (question_object or {}).get("parts") or ()
    )
