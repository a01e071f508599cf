"""The gate's decision on one round's batch of asks: a pure function, like `gate.decide`.

Asks raised in the same round while the session's one question is still unspent are
merged into one multi-part question (docs/multi-part-questions.md):

- the asks are taken in `gate.ask_order` (PM first, then developers by task number);
- an ask below the uncertainty threshold is not a part: it proceeds on its default;
- asks with the same question (text ignoring case and spacing, kind, option labels) are
  one part, answered to each of its askers;
- at most `max_parts` parts; each further ask falls back to its own default (a Fallback
  `part_cap`, recorded as an assumption);
- the stored question object is the first part's own (what `clarification_question`, and
  a door or a scenario that predates parts, shows and answers) plus a `parts` list in
  which every part carries its own kind, options, default and urgency;
- the first part's ask is the one that spends the question (Surface, with the parts); the
  other parts' asks Wait for the answer.

With one askable ask, with `max_parts=1`, or once the question is spent, every ask is
decided by `gate.decide` in order on the state the previous decisions left: exactly the
behaviour of deciding them one by one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.domain import gate

__all__ = ["Plan", "plan_parts", "decide_round", "advance", "question_object", "combined_text"]


@dataclass(frozen=True)
class Plan:
    """How one round's askable asks become parts: `parts` kept, `overflow` over the cap."""

    parts: tuple[gate.Part, ...]
    overflow: tuple[gate.Ask, ...]


def _same(ask: gate.Ask) -> tuple[str, str, tuple[str, ...]]:
    text = " ".join(ask.question.split()).casefold()
    return text, ask.kind, tuple(label.casefold() for label in ask.options)


def plan_parts(asks: Sequence[gate.Ask], max_parts: int) -> Plan:
    """Merge `asks` (already in ask order) into parts; duplicates share a part."""
    grouped: dict[tuple[str, str, tuple[str, ...]], list[gate.Ask]] = {}
    for ask in asks:
        grouped.setdefault(_same(ask), []).append(ask)
    groups = list(grouped.values())
    parts = tuple(
        gate.Part(
            number=number,
            question=group[0].question,
            askers=tuple(dict.fromkeys(a.agent for a in group)),
            keys=tuple(a.key for a in group),
            default=next((a.default for a in group if a.default), None),
        )
        for number, group in enumerate(groups[:max_parts], start=1)
    )
    overflow = tuple(ask for group in groups[max_parts:] for ask in group)
    return Plan(parts, overflow)


def combined_text(parts: Sequence[gate.Part]) -> str:
    """The multi-part question as one text, for people (status, the log); one part (the
    same question from several askers) is its own text."""
    if len(parts) == 1:
        return parts[0].question
    lines = [f"This question has {len(parts)} parts; answer each one."]
    lines += [f"{p.number}. ({', '.join(p.askers)}) {p.question}" for p in parts]
    return "\n".join(lines)


def question_object(
    parts: Sequence[gate.Part], questions: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The stored question object of a multi-part question: the first part's own question
    object, plus a `parts` list whose entries are each part's question object (kind,
    options, default, urgency, ...) with `part`, `asked_by`, `askers` and `keys`."""
    entries = []
    for part in parts:
        entries.append(
            {
                **questions[part.keys[0]],
                "question": part.question,
                "part": part.number,
                "asked_by": part.askers[0],
                "askers": list(part.askers),
                "keys": list(part.keys),
                **({"default": part.default} if part.default else {}),
            }
        )
    return {**questions[parts[0].keys[0]], "parts": entries}


def _askable(ask: gate.Ask, uncertainty_threshold: int) -> bool:
    return ask.uncertainty is None or ask.uncertainty >= uncertainty_threshold


def advance(state: gate.GateState, decision: gate.Decision) -> gate.GateState:
    """The state after `decision` is written (what the next ask of the round sees)."""
    state = state.apply(getattr(decision, "update", gate.GateUpdate()))
    if isinstance(decision, gate.Surface) and decision.parts:
        state = dataclasses.replace(state, parts=decision.parts)
    return state


def decide_round(
    state: gate.GateState,
    asks: Sequence[gate.Ask],
    *,
    max_fallbacks: int,
    uncertainty_threshold: int,
    max_parts: int,
) -> list[gate.Decision]:
    """One decision per ask of `asks` (in the order given), decided in ask order."""
    ordered = sorted(asks, key=lambda a: gate.ask_order(a.agent))
    plan: Plan | None = None
    if not state.used and max_parts > 1:
        askable = [a for a in ordered if _askable(a, uncertainty_threshold)]
        if len(askable) > 1:
            plan = plan_parts(askable, max_parts)
    decided: dict[str, gate.Decision] = {}
    for ask in ordered:
        decision: gate.Decision
        if plan is not None and ask.key == plan.parts[0].keys[0]:
            surfaced = gate.decide(
                state, ask, max_fallbacks=max_fallbacks, uncertainty_threshold=uncertainty_threshold
            )
            assert isinstance(surfaced, gate.Surface), "an unspent question is surfaced"
            decision = dataclasses.replace(surfaced, parts=plan.parts)
        elif plan is not None and ask in plan.overflow:
            decision = _over_cap(state, ask, max_parts)
        else:
            decision = gate.decide(
                state, ask, max_fallbacks=max_fallbacks, uncertainty_threshold=uncertainty_threshold
            )
        state = advance(state, decision)
        decided[ask.key] = decision
    return [decided[ask.key] for ask in asks]


def _over_cap(state: gate.GateState, ask: gate.Ask, max_parts: int) -> gate.Fallback:
    """An ask beyond the question's `max_parts` parts: it takes its own default. Like a
    declined question it always gets the fallback; it is counted, not failed."""
    given = state.fallback_counts.get(ask.agent, 0)
    message = gate.FALLBACK_MESSAGE
    if ask.default:
        message += f"\nFor your question, take your safe default: {ask.default}"
    return gate.Fallback(
        ask.agent,
        "part_cap",
        gate.GateUpdate(fallback_counts={**state.fallback_counts, ask.agent: given + 1}),
        message,
        assumption=gate.without_answer(ask.question, ask.default),
    )
