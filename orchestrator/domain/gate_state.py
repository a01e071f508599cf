"""What the clarification gate persists: its state, the updates a decision writes, and a
multi-part question's parts (docs/multi-part-questions.md). Pure data, no I/O; the decision
itself is orchestrator.domain.gate."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "GateState",
    "GateUpdate",
    "NO_UPDATE",
    "UNSET",
    "Part",
    "Resolution",
    "parts_from_object",
]


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


Resolution = Literal["answered", "selected", "declined", "timeout", "cancelled"]


@dataclass(frozen=True)
class GateState:
    """The persisted orchestrator state the gate decides on."""

    used: bool = False
    resolved: bool = False
    question: str | None = None
    response: str | None = None
    asked_by: str | None = None
    request_key: str | None = None
    resolution: Resolution | None = None
    fallback_counts: Mapping[str, int] = field(default_factory=dict)
    default: str | None = None  # the surfaced question's safe default
    timed_out: bool = False
    note: str | None = None  # the user's remark kept with the answer
    parts: tuple[Part, ...] = ()  # a multi-part question's parts (empty: one part)
    late: bool = False  # an answer came after the question was declined or timed out

    @property
    def waiting(self) -> bool:
        """A question is open: surfaced, not yet answered, declined or cancelled."""
        return self.used and not self.resolved and self.resolution != "cancelled"

    def part_of(self, key: str) -> Part | None:
        """The part that the reply `key` asked, if the question has parts."""
        return next((part for part in self.parts if key in part.keys), None)


class _Unset(enum.Enum):
    UNSET = "UNSET"


UNSET = _Unset.UNSET


@dataclass(frozen=True)
class GateUpdate:
    """What a decision writes: only the fields it names (the others stay UNSET).

    An update never erases a field it does not name: `apply` (and the store, which writes
    `named()` column by column) merge, they never overwrite the whole state.
    """

    used: bool | _Unset = UNSET
    resolved: bool | _Unset = UNSET
    question: str | None | _Unset = UNSET
    response: str | None | _Unset = UNSET
    asked_by: str | None | _Unset = UNSET
    request_key: str | None | _Unset = UNSET
    resolution: Resolution | None | _Unset = UNSET
    fallback_counts: Mapping[str, int] | _Unset = UNSET
    timed_out: bool | _Unset = UNSET
    note: str | None | _Unset = UNSET
    parts: tuple[Part, ...] | _Unset = UNSET  # kept in question_object, not a column

    def named(self) -> dict[str, Any]:
        """The fields this update sets, by GateState name."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not UNSET
        }

    def apply(self, state: GateState) -> GateState:
        """`state` with the named fields replaced (what the store persists)."""
        return dataclasses.replace(state, **self.named())

    def __bool__(self) -> bool:
        return bool(self.named())


NO_UPDATE = GateUpdate()
