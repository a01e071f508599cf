"""One round's NEEDS_CLARIFICATION replies decided together (`gate_round.decide_round`),
in one transaction: asks of the same round merge into one multi-part question
(docs/multi-part-questions.md). Each decision is written as store.gate_tx writes one ask's.
"""

from __future__ import annotations

from typing import Any

from orchestrator.domain import gate, gate_round
from orchestrator.store._tx import json_value
from orchestrator.store.gate_tx import decision_from_payload, write_decision
from orchestrator.store.sql import Tx
from orchestrator.store.views import state_from_row

__all__ = ["ask_round"]


def ask_round(
    tx: Tx,
    row: Any,
    round_: list[tuple[gate.Ask, dict[str, Any], list[str] | None]],
    *,
    max_fallbacks: int,
    uncertainty_threshold: int,
    max_parts: int,
    timeout: float | None,
) -> list[gate.Decision]:
    """One round's asks (each with its question and the repairs made to it), decided by
    `gate_round.decide_round` and written in ask order. `row`: the session and its gate
    state, fenced by the caller. A final decision stored already for one of these replies
    (a round that LangGraph re-runs) is returned as stored; the others are decided."""
    session_id = row.id
    asks = [ask for ask, _, _ in round_]
    questions = {ask.key: question for ask, question, _ in round_}
    repaired = {ask.key: repairs for ask, _, repairs in round_}
    stored = _stored_decisions(tx, session_id, asks)
    state = state_from_row(row)
    fresh = [a for a in asks if f"gate:{a.key}" not in stored]
    decided = dict(
        zip(
            (a.key for a in fresh),
            gate_round.decide_round(
                state,
                fresh,
                max_fallbacks=max_fallbacks,
                uncertainty_threshold=uncertainty_threshold,
                max_parts=max_parts,
            ),  # fmt: skip
            strict=True,
        )
    )
    for event in sorted(fresh, key=lambda a: gate.ask_order(a.agent)):
        decision = decided[event.key]
        question = questions[event.key]
        if isinstance(decision, gate.Surface) and decision.parts:
            question = gate_round.question_object(decision.parts, questions)
        write_decision(
            tx, session_id, event, decision, state, question, timeout, repaired[event.key]
        )
        state = gate_round.advance(state, decision)
    return [
        decision_from_payload(json_value(stored[f"gate:{a.key}"]))
        if f"gate:{a.key}" in stored
        else decided[a.key]
        for a in asks
    ]


def _stored_decisions(tx: Tx, session_id: str, asks: list[gate.Ask]) -> dict[str, Any]:
    """The final decisions stored for these asks, by event key `gate:<reply key>`."""
    keys = {f"gate:{ask.key}" for ask in asks}
    return {
        found.key: found.payload
        for found in tx.rows(
            'SELECT e."key" AS key, e.payload FROM events AS e'
            " WHERE e.session_id = :sid AND e.\"key\" LIKE 'gate:%'",
            {"sid": session_id},
        )
        if found.key in keys
    }
