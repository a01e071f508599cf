"""The gate's transactions: read the persisted state, decide (orchestrator.domain.gate),
write the decision. The only callers of `gate.decide` and `gate_round.decide_round` are
here, each run by the Store inside one write transaction:

- the gate state's columns: `write_gate_update` writes only the fields a decision names;
- `ask`: an agent replied NEEDS_CLARIFICATION (cases A, B, D; C's rerun);
- `ask_round`: one round's asks decided together, merged into one multi-part question
  (docs/multi-part-questions.md), each decision written as `ask` writes one;
- `resolve_answer`: the user answered, declined or cancelled;
- `expire_deadline`: the open question's deadline passed (the on-timeout policy);
- late answers (docs/late-answers.md): record one, hand it to the PM, and reopen an ended
  session for one reconciliation round. The record lives with the question, in
  `question_object["late"]` (no new column): the late answer, where it came from, the
  judged assumptions (orchestrator.domain.reconcile) and, as the session moves on, when
  the PM was told and what it re-planned. A `late_answer` event, keyed, makes a second
  late answer impossible in the database as well as in the gate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.documents import FINAL_STATUSES
from orchestrator.domain import clock, gate, gate_round, reconcile
from orchestrator.domain.clock import iso
from orchestrator.domain.question import UserReply, to_gate_event
from orchestrator.errors import SessionNotFound, SessionNotWaiting
from orchestrator.store import claims
from orchestrator.store.claims import fence, finish
from orchestrator.store.events import add_assumption, add_event, json_value, update_sql, utcnow
from orchestrator.store.owner import Claim, Owner
from orchestrator.store.sql import Tx
from orchestrator.store.views import (
    LEDGER_SQL,
    deadline_due,
    joined_row,
    late_question,
    pending_question,
    state_from_row,
    waiting,
)

__all__ = [
    "GATE_COLUMNS",
    "write_gate_update",
    "ask",
    "ask_round",
    "write_decision",
    "decision_from_payload",
    "resolve_answer",
    "cancel_question",
    "deadline_passed",
    "expire_deadline",
    "STORED_DECISION",
    "ENDED",
    "record_late",
    "update_late",
    "question_of",
    "reopen_facts",
    "late_of",
    "rejudge",
    "for_pm",
    "delivered",
    "reopen_late",
    "failed_round",
]

# -- the gate state's columns ---------------------------------------------------------

# GateState field -> orchestrator_state column, for every field a GateUpdate can name.
GATE_COLUMNS = {
    "used": "clarification_used",
    "resolved": "clarification_resolved",
    "question": "clarification_question",
    "response": "user_clarification_response",
    "asked_by": "asked_by",
    "request_key": "request_key",
    "resolution": "resolution",
    "fallback_counts": "fallback_counts",
    "timed_out": "timed_out",
    "note": "answer_note",
    # The parts' answers are merged into the question_object JSON (write_gate_update), not
    # written as a column value.
    "parts": "question_object",
}


def gate_columns(update_: gate.GateUpdate) -> dict[str, Any]:
    """The columns an update names: the store's half of `GateState.apply`."""
    return {GATE_COLUMNS[name]: value for name, value in update_.items() if name != "parts"}


def write_gate_update(tx: Tx, session_id: str, update_: gate.GateUpdate, **extra: Any) -> None:
    """Write only the fields the gate named (plus `extra` columns): a merge, never an
    overwrite of the whole state."""
    values = gate_columns(update_) | extra
    parts = update_.get("parts")
    if parts:
        # A multi-part question's answers live with its parts, inside question_object.
        stored = tx.first(
            "SELECT question_object FROM orchestrator_state WHERE session_id = :sid",
            {"sid": session_id},
        )
        question = dict(json_value(stored.question_object) or {}) if stored else {}
        by_number = {part.number: part for part in parts}
        question["parts"] = [
            {**entry, "response": by_number[entry["part"]].response}
            | ({"declined": True} if by_number[entry["part"]].declined else {})
            for entry in question.get("parts", [])
        ]
        values["question_object"] = question
    if values:
        tx.run(
            update_sql("orchestrator_state", list(values), "session_id = :sid"),
            values | {"sid": session_id},
        )


# -- one ask ---------------------------------------------------------------------------

# A select item for the fence's read (store.claims.fence `extra`): the decision stored for
# the reply `:final_key`, if any, read in the same statement as the session and its state.
STORED_DECISION = (
    '(SELECT e.payload FROM events AS e WHERE e.session_id = s.id AND e."key" = :final_key)'
    " AS stored_decision"
)


def ask(
    tx: Tx,
    row: Any,
    event: gate.Ask,
    question: dict[str, Any],
    limits: gate.GateLimits,
    *,
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
    decision = gate.decide(state, event, limits)
    write_decision(tx, session_id, event, decision, state, question, limits.timeout, repaired)
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
    decision = gate.decide(state_from_row(row), event, gate.GateLimits.of(row.settings))
    if isinstance(decision, gate.Late):
        # After a decline or a deadline that proceeded: recorded and reconciled, never
        # reopening the gate (the session may have ended meanwhile).
        record_late(tx, row, decision, source=source, choices=choices)
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
    decision = gate.decide(state, gate.Timeout(policy), gate.GateLimits.of(row.settings))
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


# -- one round's asks ------------------------------------------------------------------


def ask_round(
    tx: Tx,
    row: Any,
    round_: list[tuple[gate.Ask, dict[str, Any], list[str] | None]],
    limits: gate.GateLimits,
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
            gate_round.decide_round(state, fresh, limits),
            strict=True,
        )
    )
    for event in sorted(fresh, key=lambda a: gate.ask_order(a.agent)):
        decision = decided[event.key]
        question = questions[event.key]
        if isinstance(decision, gate.Surface) and decision.parts:
            question = gate_round.question_object(decision.parts, questions)
        write_decision(
            tx, session_id, event, decision, state, question, limits.timeout, repaired[event.key]
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


# -- late answers ----------------------------------------------------------------------

ENDED = ("completed", "failed")  # the sessions a reconciliation round may reopen


def question_of(row: Any) -> dict[str, Any]:
    """The session's stored question object with its asker (without the late record)."""
    stored = dict(json_value(row.question_object) or {})
    stored.pop("late", None)
    return stored | {"asked_by": row.asked_by}


def record_late(
    tx: Tx, row: Any, decision: gate.Late, *, source: str, choices: list[str] | None
) -> None:
    """Record the late answer `decision` for the session `row` (locked by the caller),
    with each assumption that stood in for it judged against it."""
    if row.status == "cancelled":
        raise SessionNotWaiting(f"session {row.id} is cancelled; it takes no answer")
    responses = list(decision.parts or (decision.response,))
    checks = _judged(tx, row, responses)
    policy = str((row.settings or {}).get("on_late_answer", "reconcile"))
    late: dict[str, Any] = {
        "question": row.clarification_question,
        "response": decision.response,
        "source": source,
        "at": iso(utcnow()),
        "checks": checks,
        "needs_review": reconcile.needs_review(checks),
        "policy": policy,
        "reconciled": None,
    }
    if choices:
        late["choices"] = list(choices)
    if decision.parts:
        late["parts"] = list(decision.parts)
    _write_late(tx, row.id, question_of(row), late)
    tx.run("UPDATE sessions SET updated_at = :at WHERE id = :sid", {"at": utcnow(), "sid": row.id})
    add_event(
        tx, row.id, "late_answer", key="late_answer", response=decision.response,
        choices=choices, source=source, checks=checks, needs_review=late["needs_review"],
        policy=policy,
    )  # fmt: skip


def _judged(tx: Tx, row: Any, responses: list[str | None]) -> list[dict[str, Any]]:
    """The late answer `responses` (per part) held against the session's ledger now."""
    ledger = [
        {
            "key": entry.key,
            "agent": entry.agent,
            **dict(json_value(entry.payload) or {}),
            "after_question": _not_before(entry.created_at, row.asked_at),
        }
        for entry in tx.rows(LEDGER_SQL, {"id": row.id})
    ]
    plan = [int(task["number"]) for task in json_value(row.tasks) or []]
    return [c.as_dict() for c in reconcile.judge(question_of(row), responses, ledger, plan)]


def rejudge(store: Any, claim: Claim) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Hold a late answer not yet reconciled against the ledger again: assumptions the
    agents wrote after it came (an asker that took its default afterwards) are judged too.
    Run by the driver before each PM turn and as the session ends. Returns (the late
    record as it now stands, the question), or None when there is nothing to reconcile."""
    if late_of(store, claim.session_id) is None:
        return None  # the common case: one small read
    with store.writing() as tx:
        row = fence(tx, claim, joined=True)
        late = dict((json_value(row.question_object) or {}).get("late") or {})
        if not late or late.get("reconciled") is not None:
            return None
        checks = _judged(tx, row, list(late.get("parts") or [late["response"]]))
        if checks != late.get("checks"):
            late = update_late(tx, row, checks=checks, needs_review=reconcile.needs_review(checks))
        return late, question_of(row)


def _not_before(when: Any, asked_at: Any) -> bool:
    """Was a ledger entry written at or after the question was asked?"""
    if when is None or asked_at is None:
        return False
    if (when.tzinfo is None) != (asked_at.tzinfo is None):  # SQLite may drop the zone
        when, asked_at = when.replace(tzinfo=None), asked_at.replace(tzinfo=None)
    return bool(when >= asked_at)


def update_late(tx: Tx, row: Any, **fields: Any) -> dict[str, Any]:
    """Merge `fields` into the session's late record (read under lock by the caller)."""
    stored = dict(json_value(row.question_object) or {})
    late = dict(stored.get("late") or {}) | fields
    _write_late(tx, row.id, question_of(row), late)
    return late


def _write_late(
    tx: Tx, session_id: str, question: Mapping[str, Any], late: Mapping[str, Any]
) -> None:
    stored = {k: v for k, v in question.items() if k != "asked_by"} | {"late": dict(late)}
    tx.run(
        "UPDATE orchestrator_state SET question_object = :question_object WHERE session_id = :sid",
        {"question_object": stored, "sid": session_id},
    )


def reopen_facts(row: Any) -> dict[str, Any]:
    """Why the ended session `row` can (or cannot) be reopened for its reconciliation
    round: its late record, or SessionNotWaiting naming what is missing."""
    late = (json_value(row.question_object) or {}).get("late")
    if row.status not in ENDED:
        raise SessionNotWaiting(
            f"session {row.id} is {row.status}; only an ended (completed or failed) session "
            "is reconciled with `--reconcile` (a running one tells its PM on its next turn)"
        )
    if late is None:
        raise SessionNotWaiting(
            f"session {row.id} has no late answer to reconcile: a late answer is one given "
            "after the question was declined or timed out (`resume ID --answer ...`)"
        )
    if late.get("reconciled") is not None:
        raise SessionNotWaiting(f"session {row.id}: its late answer was already reconciled")
    return dict(late)


# -- over a Store's transactions (the engine's and the graph's calls) ---------------------


def late_of(store: Any, session_id: str) -> dict[str, Any] | None:
    """The session's late record, or None."""
    with store.reading() as tx:
        row = tx.first(
            "SELECT question_object FROM orchestrator_state WHERE session_id = :sid",
            {"sid": session_id},
        )
    late = (json_value(row.question_object) or {}).get("late") if row is not None else None
    return dict(late) if late else None


def for_pm(store: Any, claim: Claim) -> str | None:
    """What the PM is told on its next turn: the late answer and the assumptions it
    contradicts (or leaves to the PM), judged against the ledger as it now stands, when
    the policy acts on it (`on_late_answer: reconcile`, or the round `--reconcile`
    reopened) and it is not reconciled yet."""
    found = rejudge(store, claim)
    if found is None or not reconcile.due(found[0]):
        return None
    late, question = found
    return reconcile.instruction(question, str(late["response"]), late["checks"])


def delivered(store: Any, claim: Claim, key: str, reply: Mapping[str, Any]) -> None:
    """The PM's turn `key` had the late answer and replied `reply` (PLANNED: the tasks it
    re-planned; COMPLETE: nothing to change): the late answer is reconciled."""
    status = str(reply.get("status"))
    if status not in ("PLANNED", "COMPLETE"):
        return  # it asked again (the hard cap answers it): it hears the answer next turn
    with store.writing() as tx:
        row = fence(tx, claim, joined=True)
        outcome: dict[str, Any] = {
            "by": key,
            "outcome": "re-planned" if status == "PLANNED" else "nothing to change",
            "at": iso(utcnow()),
        }
        if status == "PLANNED":
            outcome |= {"round": row.round, "tasks": [t["title"] for t in reply["tasks"]]}
        update_late(tx, row, reconciled=outcome)
        add_event(tx, row.id, "reconciled", agent="pm", key="reconciled", **outcome)


def reopen_late(
    store: Any, session_id: str, owner: Owner, calls: Mapping[str, int], *, hand_off: bool
) -> Claim:
    """Reopen the ended session for its reconciliation round (`resume --reconcile`):
    running again, claimed by `owner` (with `hand_off`: by nobody, for a driver), the
    round's start kept in the late record so that a crash in it resumes the same round.
    Raises SessionNotWaiting (nothing to reconcile) or SessionBusy (raced)."""
    with store.writing() as tx:
        row = joined_row(tx, session_id, lock=True)
        reopen_facts(row)
        start = {
            "round": row.round,
            "calls": dict(calls),
            "tasks": list(json_value(row.tasks) or []),
            "at": iso(utcnow()),
            # What the session had ended on: a round that fails gives it back.
            "ended": {"status": row.status, "summary": row.summary, "error": row.error},
        }
        update_late(tx, row, reopened=start)
        return claims.reopen(tx, row, owner, nobody=hand_off)


def failed_round(tx: Tx, claim: Claim, error: str | None) -> tuple[str, Any, Any] | None:
    """A reconciliation round that fails, for the session `claim` holds: recorded in the
    late record (`reconciled`, outcome `failed`) and as a `reconcile_failed` event, and the
    (status, summary, error) the session had ended on before it was reopened returned, to
    end on again. None when the session is not in such a round (its failure stands)."""
    row = fence(tx, claim, joined=True)
    late = dict((json_value(row.question_object) or {}).get("late") or {})
    ended = (late.get("reopened") or {}).get("ended")
    if not ended or late.get("reconciled") is not None:
        return None
    outcome = {
        "by": "the reconciliation round",
        "outcome": "failed",
        "error": error or "the round failed",
        "at": iso(utcnow()),
        "kept": ended["status"],
    }
    update_late(tx, row, reconciled=outcome)
    add_event(tx, row.id, "reconcile_failed", key="reconciled", **outcome)
    return str(ended["status"]), ended.get("summary"), ended.get("error")
