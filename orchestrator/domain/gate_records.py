"""What the clarification gate takes and gives, as plain records: the events it decides
on, its decisions, the updates they write (`GateUpdate`) and a multi-part question's parts
(docs/multi-part-questions.md). Pure data, no behaviour: the gate's state and its rules are
orchestrator.domain.gate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

__all__ = [
    "FALLBACK_MESSAGE",
    "FALLBACK_WHY",
    "DEFAULT_TAKEN",
    "Part",
    "Resolution",
    "GateUpdate",
    "Ask",
    "Answer",
    "Decline",
    "Cancel",
    "Timeout",
    "Event",
    "Surface",
    "Wait",
    "Rerun",
    "Fallback",
    "Proceed",
    "Fail",
    "Resolve",
    "Late",
    "Reject",
    "Decision",
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


Resolution = Literal["answered", "selected", "declined", "timeout", "cancelled"]


class GateUpdate(TypedDict, total=False):
    """What a decision writes: only the GateState fields it names. An update never erases
    a field it does not name: `GateState.apply` (and the store, which writes it column by
    column) merge, they never overwrite the whole state."""

    used: bool
    resolved: bool
    question: str | None
    response: str | None
    asked_by: str | None
    request_key: str | None
    resolution: Resolution | None
    fallback_counts: Mapping[str, int]
    timed_out: bool
    note: str | None
    parts: tuple[Part, ...]  # kept in question_object, not a column


FALLBACK_MESSAGE = (
    "Previous clarification was already provided. You MUST proceed with available information.\n"
    "Make reasonable assumptions and document them. Do not request further clarification."
)

# Why a fallback was sent, as the assumptions ledger records it.
FALLBACK_WHY = {
    "hard_cap": "the session's one question was already used",
    "declined": "the user declined the question",
    "timeout": "no answer before the question's deadline",
    "part_cap": "the question already had its max_question_parts parts",
}
# The question's ends after which its askers take their defaults: a resolution, a
# fallback's `why` and an assumption's ledger source, all spelled alike.
DEFAULT_TAKEN = frozenset({"declined", "timeout"})

# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """An agent replied NEEDS_CLARIFICATION; `key` identifies that one reply."""

    agent: str
    key: str
    question: str
    uncertainty: int | None = None
    default: str | None = None
    kind: str = "free_text"
    options: tuple[str, ...] = ()  # option labels: with kind and question, what makes a duplicate


@dataclass(frozen=True)
class Answer:
    """The user answered; `response` is the text stored as user_clarification_response.

    `parts`: a multi-part question's responses, one per part in order (None: that part
    declined); empty for a one-part question."""

    response: str
    kind: Literal["answered", "selected"] = "answered"
    note: str | None = None
    parts: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Decline:
    """The user resolved the question without an answer (`parts`: declined part by part,
    every one of a multi-part question's parts; 0 for a plain decline)."""

    note: str | None = None
    parts: int = 0


@dataclass(frozen=True)
class Cancel:
    """The user stopped the session."""

    note: str | None = None


@dataclass(frozen=True)
class Timeout:
    """The question's deadline passed; `policy` is the session's --on-timeout."""

    policy: Literal["wait", "proceed", "cancel"] = "wait"


Event = Ask | Answer | Decline | Cancel | Timeout

# -- decisions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """Case A: spend the session's one question on this ask."""

    question: str
    update: GateUpdate
    final: bool = False
    parts: tuple[Part, ...] = ()  # a multi-part question (orchestrator.domain.gate_round)


@dataclass(frozen=True)
class Wait:
    """Case B (or another ask while the question is open): run nothing, keep waiting."""

    question: str
    update: GateUpdate = field(default_factory=GateUpdate)
    final: bool = False


@dataclass(frozen=True)
class Rerun:
    """Case C: run the asking agent again with the question and the user's answer."""

    agent: str
    question: str
    response: str
    update: GateUpdate = field(default_factory=GateUpdate)
    final: bool = True


@dataclass(frozen=True)
class Fallback:
    """Case D (and decline, timeout): run the agent again with FALLBACK_MESSAGE."""

    agent: str
    why: Literal["hard_cap", "declined", "timeout", "part_cap"]
    update: GateUpdate
    message: str = FALLBACK_MESSAGE
    final: bool = True
    assumption: str = ""  # what the assumptions ledger records for the agent


@dataclass(frozen=True)
class Proceed:
    """An ask below the uncertainty threshold: not surfaced, no question spent; the agent
    goes on with its own default (counted against max_fallbacks, so it cannot loop)."""

    agent: str
    message: str
    default: str | None
    update: GateUpdate
    final: bool = True


@dataclass(frozen=True)
class Fail:
    """The agent kept asking after max_fallbacks fallbacks: the session fails."""

    agent: str
    reason: str
    update: GateUpdate = field(default_factory=GateUpdate)
    final: bool = True


@dataclass(frozen=True)
class Resolve:
    """A user event accepted: merge `update` into the state."""

    update: GateUpdate
    cancel: bool = False


@dataclass(frozen=True)
class Late:
    """The answer to a question already declined or timed out (the agents went on with
    defaults): recorded as late and reconciled with the assumptions; the gate's state
    stays resolved (no second question). `parts`: per part, as in Answer."""

    response: str
    parts: tuple[str | None, ...] = ()
    update: GateUpdate = field(default_factory=GateUpdate)
    cancel: bool = False


@dataclass(frozen=True)
class Reject:
    """A user event refused (no question is waiting); nothing changes."""

    reason: str


Decision = Surface | Wait | Rerun | Fallback | Proceed | Fail | Resolve | Late | Reject
