"""The clarification gate's decision: a pure function of (persisted state, event).

No I/O here. The store loads a `GateState`, calls `decide`, and writes the decision's
`update` (a merge: only the named fields) and its event in one transaction. Cases follow
contract section 1:

    A  used=false                      -> Surface: save used, question; the session pauses
    B  used, not resolved              -> Wait: surface the stored question again, run nothing
    C  the user answers                -> (event Answer) save resolved, response;
                                          the asking agent's next ask-decision is Rerun
    D  used, resolved, an agent asks   -> Fallback (or Fail after max_fallbacks)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "FALLBACK_MESSAGE",
    "DEFAULT_MAX_FALLBACKS",
    "GateState",
    "Ask",
    "Answer",
    "Decline",
    "Cancel",
    "Surface",
    "Wait",
    "Rerun",
    "Fallback",
    "Fail",
    "Resolve",
    "Reject",
    "Decision",
    "decide",
    "ask_order",
]

FALLBACK_MESSAGE = (
    "Previous clarification was already provided. You MUST proceed with available information.\n"
    "Make reasonable assumptions and document them. Do not request further clarification."
)
DEFAULT_MAX_FALLBACKS = 2


@dataclass(frozen=True)
class GateState:
    """The persisted orchestrator state the gate decides on."""

    used: bool = False
    resolved: bool = False
    question: str | None = None
    response: str | None = None
    asked_by: str | None = None
    request_key: str | None = None
    resolution: Literal["answered", "declined"] | None = None
    fallback_counts: Mapping[str, int] = field(default_factory=dict)


# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """An agent replied NEEDS_CLARIFICATION; `key` identifies that one reply."""

    agent: str
    key: str
    question: str


@dataclass(frozen=True)
class Answer:
    """The user answered; `response` is the text stored as user_clarification_response."""

    response: str
    kind: Literal["answered", "selected"] = "answered"


@dataclass(frozen=True)
class Decline:
    """The user resolved the question without an answer."""


@dataclass(frozen=True)
class Cancel:
    """The user stopped the session."""


Event = Ask | Answer | Decline | Cancel

# -- decisions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """Case A: spend the session's one question on this ask."""

    question: str
    update: Mapping[str, Any]
    final: bool = False


@dataclass(frozen=True)
class Wait:
    """Case B (or another ask while the question is open): run nothing, keep waiting."""

    question: str
    update: Mapping[str, Any] = field(default_factory=dict)
    final: bool = False


@dataclass(frozen=True)
class Rerun:
    """Case C: run the asking agent again with the question and the user's answer."""

    agent: str
    question: str
    response: str
    update: Mapping[str, Any] = field(default_factory=dict)
    final: bool = True


@dataclass(frozen=True)
class Fallback:
    """Case D (and decline): run the agent again with FALLBACK_MESSAGE."""

    agent: str
    why: Literal["hard_cap", "declined"]
    update: Mapping[str, Any]
    message: str = FALLBACK_MESSAGE
    final: bool = True


@dataclass(frozen=True)
class Fail:
    """The agent kept asking after max_fallbacks fallbacks: the session fails."""

    agent: str
    reason: str
    update: Mapping[str, Any] = field(default_factory=dict)
    final: bool = True


@dataclass(frozen=True)
class Resolve:
    """A user event accepted: merge `update` into the state."""

    update: Mapping[str, Any]
    cancel: bool = False


@dataclass(frozen=True)
class Reject:
    """A user event refused (no question is waiting); nothing changes."""

    reason: str


Decision = Surface | Wait | Rerun | Fallback | Fail | Resolve | Reject


def decide(
    state: GateState, event: Event, *, max_fallbacks: int = DEFAULT_MAX_FALLBACKS
) -> Decision:
    """Decide what the gate does with `event` given the persisted `state`."""
    if isinstance(event, Ask):
        return _decide_ask(state, event, max_fallbacks)
    waiting = state.used and not state.resolved
    if not waiting:
        reason = (
            "the session's question was already answered"
            if state.resolved
            else "the session has not asked a question"
        )
        return Reject(reason)
    if isinstance(event, Answer):
        return Resolve({"resolved": True, "response": event.response, "resolution": event.kind})
    if isinstance(event, Decline):
        return Resolve({"resolved": True, "resolution": "declined"})
    return Resolve({}, cancel=True)


def _decide_ask(state: GateState, ask: Ask, max_fallbacks: int) -> Decision:
    if not state.used:
        return Surface(
            ask.question,
            {
                "used": True,
                "resolved": False,
                "question": ask.question,
                "asked_by": ask.agent,
                "request_key": ask.key,
            },
        )
    assert state.question is not None, "a used clarification always has its question"
    if not state.resolved:
        return Wait(state.question)
    given = state.fallback_counts.get(ask.agent, 0)
    bump = {"fallback_counts": {**state.fallback_counts, ask.agent: given + 1}}
    if ask.key == state.request_key:
        if state.resolution == "declined":
            # The user's decline answers this very ask: it always gets the fallback, even
            # with max_fallbacks=0; the cap is for agents that ask *again*.
            return Fallback(ask.agent, "declined", bump)
        assert state.response is not None, "an answered clarification has its response"
        return Rerun(ask.agent, state.question, state.response)
    if given >= max_fallbacks:
        return Fail(
            ask.agent,
            f"{ask.agent} asked for clarification again after receiving the auto-fallback "
            f"{given} time{'s' if given != 1 else ''} (max_fallbacks={max_fallbacks})",
        )
    return Fallback(ask.agent, "hard_cap", bump)


def ask_order(agent: str) -> tuple[int, int]:
    """Asks raised in one round are decided PM first, then developers by task number."""
    if agent == "pm":
        return (0, 0)
    _, _, number = agent.partition("-")
    return (1, int(number)) if number.isdigit() else (2, 0)
