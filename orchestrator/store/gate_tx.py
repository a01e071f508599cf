"""The gate's transactions: read the persisted state, `gate.decide`, write the decision.

The only callers of `gate.decide` are here, one function per kind of event, each run by
the Store inside one write transaction:

- `ask`: an agent replied NEEDS_CLARIFICATION (cases A, B, D; C's rerun); one round's
  asks decided together are store.round_tx's;
- `resolve_answer`: the user answered, declined or cancelled;
- `expire_deadline`: the open question's deadline passed (the on-timeout policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.documents import FINAL_STATUSES
from orchestrator.domain import clock, gate
from orchestrator.domain.question import UserReply, to_gate_event
from orchestrator.errors import SessionNotFound, SessionNotWaiting
from orchestrator.store import late_tx
from orchestrator.store._tx import (
    add_assumption,
    add_event,
    finish,
    gate_columns,
    json_value,
    update_sql,
    utcnow,
    write_gate_update,
)
from orchestrator.store.sql import Tx
from orchestrator.store.views import (
    deadline_due,
    late_question,
    pending_question,
    state_from_row,
    waiting,
)

__all__ = [
    "ask",
    "write_decision",
    "decision_from_payload",
    "resolve_answer",
    "cancel_question",
    "deadline_passed",
    "expire_deadline",
    "limits",
    "STORED_DECISION",
]

# A select item for the fence's read (store._tx.fence `extra`): the decision stored for
# the reply `:final_key`, if any, read in the same statement as the session and its state.
STORED_DECISION = (
    '(SELECT e.payload FROM events AS e WHERE e.session_id = s.id AND e."key" = :final_key)'
    " AS stored_decision"
)


def limits(settings: Mapping[str, Any]) -> dict[str, int]:
    """The gate's limits from a session's stored settings (every session stores them)."""
    names = ("max_fallbacks", "uncertainty_threshold")
    if all(name in settings for name in names):
        return {name: int(settings[name]) for name in names}
    # A session stored by an older version: the defaults (pydantic only on this rare path).
    from orchestrator.settings import default_of

    return {name: int(settings.get(name, default_of(name))) for name in names}


def ask(
    tx: Tx,
    row: Any,
    event: gate.Ask,
    question: dict[str, Any],
    *,
    max_fallbacks: int,
    uncertainty_threshold: int,
    timeout: float | None,
    repaired: list[str] | None,
) -> gate.Decision:
    """Case A, B or D for one NEEDS_CLARIFICATION reply.

    `row`: the session with its gate state and `stored_decision` (STORED_DECISION), read
    under the write lock by the caller. A final decision (rerun, fallback, fail) is stored
    under `gate:<reply key>` and returned as stored when the node is re-run, so counters
    move once per reply.
    """
    session_id = row.id
    stored = json_value(row.stored_decision)
    if stored is not None:
        return decision_from_payload(stored)
    state = state_from_row(row)
    decision = gate.decide(
        state, event, max_fallbacks=max_fallbacks, uncertainty_threshold=uncertainty_threshold
    )
    write_decision(tx, session_id, event, decision, state, question, timeout, repaired)
    return decision


def write_decision(
    tx: Tx,
    session_id: str,
    event: gate.Ask,
    decision: gate.Decision,
    state: gate.GateState,
    question: dict[str, Any],
    timeout: float | None,
    repaired: list[str] | None,
) -> None:
    """Write what the gate decided for one ask: the question surfaced, the ask held, or a
    final decision stored (with its event and, for a fallback, the ledger's assumption)."""
    if isinstance(decision, gate.Surface):
        deadline = None if timeout is None else clock.now() + timeout
        _surface(tx, session_id, event, question, decision, deadline, repaired)
    elif isinstance(decision, gate.Wait):
        _held(tx, session_id, event, state)
    else:
        _apply_final(tx, session_id, f"gate:{event.key}", decision, state)


def _held(tx: Tx, session_id: str, event: gate.Ask, state: gate.GateState) -> None:
    """An ask that waits: recorded unless it is the question's own ask or one of its parts."""
    if event.key == state.request_key or state.part_of(event.key) is not None:
        return
    add_event(
        tx,
        session_id,
        "question_held",
        agent=event.agent,
        key=f"held:{event.key}",
        question=event.question,
        note="the session's one question is already open; this one waits",
    )


def _surface(
    tx: Tx,
    session_id: str,
    event: gate.Ask,
    question: dict[str, Any],
    decision: gate.Surface,
    deadline: float | None,
    repaired: list[str] | None,
) -> None:
    """Case A. Compare-and-set on `clarification_used`, and a unique index on the
    `question_surfaced` event: the database refuses a second question on its own."""
    values = gate_columns(decision.update) | {
        "question_object": question,
        "asked_at": utcnow(),
        "deadline": deadline,
    }
    spent = tx.run(
        update_sql(
            "orchestrator_state",
            list(values),
            "session_id = :sid AND NOT clarification_used",
            also="questions_surfaced = questions_surfaced + 1",
        ),
        values | {"sid": session_id},
    )
    if spent != 1:
        raise RuntimeError(f"session {session_id}: the question was already spent")
    if not add_event(
        tx,
        session_id,
        "question_surfaced",
        agent=event.agent,
        key=f"surface:{event.key}",
        question=question,
        **({"repaired": repaired} if repaired else {}),
    ):
        raise RuntimeError(f"session {session_id}: a question was already surfaced")


def _apply_final(
    tx: Tx,
    session_id: str,
    key: str,
    decision: gate.Decision,
    before: gate.GateState,
) -> None:
    details: dict[str, Any]
    ledger: tuple[str, str, str] | None = None  # assumption, why, source
    facts: dict[str, Any] = {}  # the default taken, for a late answer to be held against
    if isinstance(decision, gate.Fallback | gate.Proceed):
        write_gate_update(tx, session_id, decision.update)
    if isinstance(decision, gate.Fallback):
        tx.run(
            "UPDATE orchestrator_state SET fallbacks_injected = fallbacks_injected + 1"
            " WHERE session_id = :sid",
            {"sid": session_id},
        )
        kind = "fallback"
        details = {"decision": "fallback", "why": decision.why, "message": decision.message}
        ledger = (decision.assumption, gate.FALLBACK_WHY[decision.why], decision.why)
        if decision.why in gate.DEFAULT_TAKEN:
            part = before.part_of(key)
            facts = {"value": part.default if part else before.default}
            facts |= {"part": part.number} if part else {}
    elif isinstance(decision, gate.Proceed):
        kind = "proceed"
        details = {"decision": "proceed", "message": decision.message, "default": decision.default}
        ledger = (
            f"goes on with its own default: {decision.default or '(none given)'}",
            "its uncertainty was below the threshold, so the user was not asked",
            "uncertainty",
        )
    elif isinstance(decision, gate.Rerun):
        kind = "answer_delivered"
        details = {
            "decision": "rerun",
            "question": decision.question,
            "response": decision.response,
        }
    else:
        assert isinstance(decision, gate.Fail)
        kind, details = "gate_failed", {"decision": "fail", "reason": decision.reason}
    if ledger is not None:
        assumption, why, source = ledger
        add_assumption(
            tx, session_id, key, agent=decision.agent, assumption=assumption, why=why,
            source=source, **facts,
        )  # fmt: skip
    # `asker` lets a re-run rebuild this decision (decision_from_payload).
    add_event(tx, session_id, kind, agent=decision.agent, key=key, asker=decision.agent, **details)


def reply_event(
    row: Any, reply: UserReply, *, scripted: bool = False
) -> tuple[gate.Answer | gate.Decline | gate.Cancel, Any]:
    """(the gate's event, the choices) for a person's `reply`, validated against the open
    question of the session `row` as this transaction reads it (the answer rule,
    orchestrator.domain.question). Raises SessionNotWaiting, or InvalidAnswer."""
    question = pending_question(row, row) or late_question(row, row)  # a late answer's
    if question is None:
        state = state_from_row(row)
        why = (
            "a late answer was already recorded"
            if state.late
            else "its question was already answered"
            if state.resolved
            else "it has no open question"
        )
        raise SessionNotWaiting(
            f"session {row.id} is {row.status}, not waiting for an answer: {why}"
        )
    return to_gate_event(question, reply, scripted=scripted)


def resolve_answer(
    tx: Tx,
    row: Any,
    event: gate.Answer | gate.Decline | gate.Cancel,
    *,
    source: str,
    choices: list[str] | None,
    take: Callable[[], object],
) -> gate.Resolve | gate.Late:
    """Accept the user's answer, decline or cancel for the session `row` (with its gate
    state's columns, locked by the caller); raise SessionNotWaiting if no question waits.
    `take` claims the session in this transaction once the gate has accepted the event
    (it raises if a live process holds the session)."""
    session_id = row.id
    decision = gate.decide(state_from_row(row), event, **limits(row.settings))
    if isinstance(decision, gate.Late):
        # After a decline or a deadline that proceeded: recorded and reconciled, never
        # reopening the gate (the session may have ended meanwhile).
        late_tx.record(tx, row, decision, source=source, choices=choices)
        return decision
    if row.status in FINAL_STATUSES:
        raise SessionNotWaiting(
            f"session {session_id} is {row.status}; it is not waiting for an answer"
        )
    if isinstance(decision, gate.Reject):
        raise SessionNotWaiting(
            f"session {session_id} is not waiting for an answer: {decision.reason}"
        )
    assert isinstance(decision, gate.Resolve)
    take()
    write_gate_update(tx, session_id, decision.update, resolved_at=utcnow())
    if source == "script":
        tx.run(
            "UPDATE sessions SET answers_used = answers_used + 1 WHERE id = :sid",
            {"sid": session_id},
        )
    if isinstance(event, gate.Answer):
        add_event(
            tx, session_id, "answer", key="answer", response=event.response, choices=choices,
            source=source,
        )  # fmt: skip
    elif isinstance(event, gate.Decline):
        add_event(tx, session_id, "decline", key="answer", source=source)
    else:
        add_event(tx, session_id, "cancel", key="cancel", source=source)
        finish(tx, session_id, "cancelled")
    return decision


def cancel_question(tx: Tx, row: Any) -> bool:
    """Cancel the session through its open question (as the user's cancel); False when no
    question is open."""
    if not waiting(row):
        return False
    resolve_answer(tx, row, gate.Cancel(), source="user", choices=None, take=lambda: None)
    return True


_DEADLINE_SQL = (
    "SELECT s.id, s.status, t.* FROM sessions AS s"
    " JOIN orchestrator_state AS t ON t.session_id = s.id WHERE s.id = :id"
)


def deadline_passed(tx: Tx, session_id: str) -> bool:
    """Whether the session's open question has a deadline that passed, not yet applied."""
    due = tx.first(_DEADLINE_SQL, {"id": session_id})
    if due is None:
        raise SessionNotFound(session_id)
    return deadline_due(due, clock.now())


def expire_deadline(tx: Tx, row: Any, *, may_act: bool) -> gate.Resolve | None:
    """Apply the on-timeout policy if the open question's deadline has passed.

    `row`: the session with its gate state's columns, locked by the caller. `may_act`:
    the caller holds the session or nobody live does (a live driver applies its own
    deadline). Returns the decision, or None if nothing applied.
    """
    session_id = row.id
    state = state_from_row(row)
    if (
        row.status in FINAL_STATUSES
        or not may_act
        or row.timed_out
        or row.deadline is None
        or row.deadline > clock.now()
        or not state.waiting
    ):
        return None
    policy = row.settings.get("on_timeout", "wait")
    decision = gate.decide(state, gate.Timeout(policy), **limits(row.settings))
    assert isinstance(decision, gate.Resolve)
    write_gate_update(tx, session_id, decision.update)
    add_event(tx, session_id, "timeout", key="timeout", policy=policy, agent=row.asked_by)
    if decision.cancel:
        finish(tx, session_id, "cancelled")
    return decision


def decision_from_payload(payload: Mapping[str, Any]) -> gate.Decision:
    kind = payload["decision"]
    if kind == "proceed":
        return gate.Proceed(
            payload["asker"], payload["message"], payload["default"], gate.GateUpdate()
        )
    if kind == "rerun":
        return gate.Rerun(payload["asker"], payload["question"], payload["response"])
    if kind == "fallback":
        return gate.Fallback(
            payload["asker"], payload["why"], gate.GateUpdate(), payload["message"]
        )
    return gate.Fail(payload["asker"], payload["reason"])
