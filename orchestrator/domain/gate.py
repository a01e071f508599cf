"""The clarification gate's decision: a pure function of (persisted state, event).

No I/O here. The store loads a `GateState`, calls `decide`, and writes the decision's
`update` (a `GateUpdate`: only the fields it names, merged) and its event in one
transaction (orchestrator/store/gate_tx.py, the only caller). Cases follow contract
section 1:

    A  used=false                      -> Surface: save used, question; the session pauses
    B  used, not resolved              -> Wait: surface the stored question again, run nothing
    C  the user answers                -> (event Answer) save resolved, response;
                                          the asking agent's next ask-decision is Rerun
    D  used, resolved, an agent asks   -> Fallback (or Fail after max_fallbacks)

After a decline or a deadline that proceeded, the person's answer may still come: it is
Late (recorded once, held against the assumptions; it never reopens the gate, so no
second question), and a further one is Rejected (docs/late-answers.md).

Beside them: an ask whose `uncertainty` is below the threshold is not surfaced and spends
nothing (Proceed: the agent goes on with its own default); a question whose deadline
passes is handled by the session's on-timeout policy (Timeout: wait, proceed, cancel).

The module holds the gate whole: first what it takes and gives, as plain frozen records
(a multi-part question's `Part`, the `GateUpdate` a decision writes, the events, the
decisions), then the persisted `GateState` and `decide`. A round's batch of asks, merged
into one multi-part question, is orchestrator.domain.gate_round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = [
    "FALLBACK_MESSAGE",
    "GateState",
    "GateUpdate",
    "FALLBACK_WHY",
    "DEFAULT_TAKEN",
    "Event",
    "Resolution",
    "parts_from_object",
    "question_open",
    "defaults_taken",
    "Part",
    "Ask",
    "Answer",
    "Decline",
    "Cancel",
    "Timeout",
    "Proceed",
    "Surface",
    "Wait",
    "Rerun",
    "Fallback",
    "Fail",
    "Resolve",
    "Late",
    "Reject",
    "Decision",
    "decide",
    "ask_order",
    "without_answer",
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

# -- the gate's state and its decision ------------------------------------------------


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
        return question_open(self.used, self.resolved, self.resolution)

    def apply(self, update: GateUpdate) -> GateState:
        """This state with the fields `update` names replaced (what the store persists)."""
        return dataclasses.replace(self, **update)

    def part_of(self, key: str) -> Part | None:
        """The part that the reply `key` asked, if the question has parts."""
        return next((part for part in self.parts if key in part.keys), None)


def question_open(used: Any, resolved: Any, resolution: str | None) -> bool:
    """The one definition of an open question (GateState.waiting; in SQL,
    store.views.OPEN_QUESTION_SQL), on the three values it reads: a row's columns need no
    GateState built."""
    return bool(used) and not resolved and resolution != "cancelled"


def defaults_taken(resolved: Any, resolution: str | None) -> bool:
    """The one definition of a question whose askers took their defaults (declined, or
    timed out to proceed): what a late answer is then taken for (docs/late-answers.md)."""
    return bool(resolved) and resolution in DEFAULT_TAKEN


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


def decide(
    state: GateState,
    event: Event,
    *,
    max_fallbacks: int,
    uncertainty_threshold: int,
) -> Decision:
    """Decide what the gate does with `event` given the persisted `state`.

    The limits come from the session's settings (their defaults live in one place, the
    settings model); they matter only for asks, but are always given so no call site can
    fall back to a second copy of a default.
    """
    if isinstance(event, Ask):
        return _decide_ask(state, event, max_fallbacks, uncertainty_threshold)
    if (
        not state.waiting
        and isinstance(event, Answer)
        and defaults_taken(state.resolved, state.resolution)
    ):
        if state.late:
            return Reject("the session's question was already answered late")
        if event.parts and len(event.parts) != len(state.parts):
            return Reject(
                f"the question has {len(state.parts) or 1} part(s); the answer has "
                f"{len(event.parts)}"
            )
        return Late(event.response, event.parts)
    if not state.waiting:
        reason = (
            f"the session's question was already {_PAST[state.resolution or 'answered']}"
            if state.resolved
            else "the session has not asked a question"
        )
        return Reject(reason)
    # A note is named only when given: an update never erases what it does not name.
    given_note = None if isinstance(event, Timeout) else event.note
    named = GateUpdate(note=given_note) if given_note is not None else GateUpdate()
    if isinstance(event, Answer | Decline):
        # A reply part by part settles each part; a reply without parts settles only the
        # surfaced ask, as before questions had parts (the others are held: hard cap).
        given = event.parts if isinstance(event, Answer) else (None,) * event.parts
        if given and len(given) != len(state.parts):
            return Reject(
                f"the question has {len(state.parts) or 1} part(s); the answer has {len(given)}"
            )
        if given:
            named["parts"] = tuple(
                dataclasses.replace(part, response=response, declined=response is None)
                for part, response in zip(state.parts, given, strict=True)
            )
    if isinstance(event, Answer):
        return Resolve(
            GateUpdate(resolved=True, response=event.response, resolution=event.kind) | named
        )
    if isinstance(event, Decline):
        return Resolve(GateUpdate(resolved=True, resolution="declined") | named)
    if isinstance(event, Cancel):
        return Resolve(GateUpdate(resolution="cancelled") | named, cancel=True)
    if event.policy == "proceed":
        # As a plain decline: every part of a multi-part question is settled, each of its
        # askers takes its part's default.
        proceed = GateUpdate(resolved=True, resolution="timeout", timed_out=True)
        if state.parts:
            proceed["parts"] = tuple(
                dataclasses.replace(part, response=None, declined=True) for part in state.parts
            )
        return Resolve(proceed)
    if event.policy == "cancel":
        return Resolve(GateUpdate(resolution="cancelled", timed_out=True), cancel=True)
    return Resolve(GateUpdate(timed_out=True))


_PAST = {
    "answered": "answered",
    "selected": "answered",
    "declined": "declined",
    "timeout": "resolved by its timeout",
    "cancelled": "cancelled",
}


def _decide_ask(
    state: GateState, ask: Ask, max_fallbacks: int, uncertainty_threshold: int
) -> Decision:
    given = state.fallback_counts.get(ask.agent, 0)
    bump = GateUpdate(fallback_counts={**state.fallback_counts, ask.agent: given + 1})
    part = state.part_of(ask.key) if state.used else None
    if part is not None and not (part.declined or part.response is not None):
        part = None  # not settled part by part: the surfaced ask is answered as always
    same_ask = state.used and (ask.key == state.request_key or part is not None)
    if ask.uncertainty is not None and ask.uncertainty < uncertainty_threshold and not same_ask:
        if given >= max_fallbacks:
            return _fail(ask.agent, given, max_fallbacks)
        default = f" ({ask.default})" if ask.default else ""
        return Proceed(
            ask.agent,
            f"Your uncertainty ({ask.uncertainty}) is below the threshold "
            f"({uncertainty_threshold}), so the user is not asked. Proceed with your stated "
            f"default{default}, and list it among your assumptions.",
            ask.default,
            bump,
        )
    if not state.used:
        return Surface(
            ask.question,
            GateUpdate(
                used=True,
                resolved=False,
                question=ask.question,
                asked_by=ask.agent,
                request_key=ask.key,
            ),
        )
    assert state.question is not None, "a used clarification always has its question"
    if not state.resolved:
        return Wait(state.question)
    if same_ask:
        question = part.question if part else state.question
        safe = part.default if part else state.default
        if (part is None and defaults_taken(state.resolved, state.resolution)) or (
            part is not None and part.declined
        ):
            # The user's decline (or the deadline) answers this very ask: it always gets
            # the fallback, even with max_fallbacks=0; the cap is for agents that ask *again*.
            why: Literal["declined", "timeout"] = (
                "timeout" if state.resolution == "timeout" else "declined"
            )
            message = FALLBACK_MESSAGE
            if safe:
                message += f"\nFor the open question, take the safe default: {safe}"
            return Fallback(
                ask.agent, why, bump, message, assumption=without_answer(question, safe)
            )
        response = part.response if part is not None else state.response
        assert response is not None, "an answered clarification has its response"
        return Rerun(ask.agent, question, response)
    if given >= max_fallbacks:
        return _fail(ask.agent, given, max_fallbacks)
    return Fallback(
        ask.agent,
        "hard_cap",
        bump,
        assumption="proceeds on its own assumptions; its further question was not asked",
    )


def without_answer(question: str, default: str | None) -> str:
    """The assumption of an agent that goes on without an answer to `question`."""
    shown = f" (safe default: {default})" if default else ""
    return f"proceeds without an answer to: {question}{shown}"


def _fail(agent: str, given: int, max_fallbacks: int) -> Fail:
    return Fail(
        agent,
        f"{agent} asked for clarification again after receiving the auto-fallback "
        f"{given} time{'s' if given != 1 else ''} (max_fallbacks={max_fallbacks})",
    )


def ask_order(agent: str) -> tuple[int, int]:
    """Asks raised in one round are decided PM first, then developers by task number."""
    if agent == "pm":
        return (0, 0)
    _, _, number = agent.partition("-")
    return (1, int(number)) if number.isdigit() else (2, 0)
