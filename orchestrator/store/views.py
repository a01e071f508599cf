"""Rows to the contract's JSON shapes (section 3). Plain dicts: no pydantic on this path."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain import gate
from orchestrator.records import OwnerRecord, PendingQuestion
from orchestrator.store.owner import is_dead, lease_left

__all__ = [
    "session_view",
    "event_view",
    "pending_question",
    "owner_record",
    "owner_alive",
    "waiting_for_driver",
    "state_from_row",
    "iso",
    "iso_epoch",
]


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands back naive datetimes; we only ever write UTC
        value = value.replace(tzinfo=UTC)
    return value.isoformat().replace("+00:00", "Z")


# "A question is open", in SQL over `orchestrator_state AS t`: GateState.waiting, term for
# term (surfaced, not resolved, not withdrawn by a cancel). Every query that asks for open
# questions uses it; tests/test_open_question.py holds it equal to the Python property.
OPEN_QUESTION_SQL = (
    "(t.clarification_used AND NOT t.clarification_resolved"
    " AND (t.resolution IS NULL OR t.resolution <> 'cancelled'))"
)
# ...of a session that has not ended (`sessions AS s`): what pending_question shows.
LIVE_SESSION_SQL = "s.status IN ('paused', 'running')"
# The partial index of open deadlines (revision 0006, schema.py), `{t}` a table prefix: a
# query says these terms to use it, then OPEN_QUESTION_SQL for the question itself.
OPEN_DEADLINE_SQL = "{t}deadline IS NOT NULL AND NOT {t}timed_out AND {t}resolution IS NULL"


def state_from_row(row: Any) -> gate.GateState:
    """The gate's state from an orchestrator_state row."""
    return gate.GateState(
        used=bool(row.clarification_used),
        resolved=bool(row.clarification_resolved),
        question=row.clarification_question,
        response=row.user_clarification_response,
        asked_by=row.asked_by,
        request_key=row.request_key,
        resolution=row.resolution,
        fallback_counts=dict(row.fallback_counts or {}),
        default=(row.question_object or {}).get("default"),
        timed_out=bool(row.timed_out),
        note=row.answer_note,
        parts=gate.parts_from_object(row.question_object),
        late=bool((row.question_object or {}).get("late")),
    )


def pending_question(session: Any, state: Any) -> PendingQuestion | None:
    """The open question of a session that has not ended, or None."""
    if session.status not in ("paused", "running") or state.question_object is None:
        return None
    if not state_from_row(state).waiting:
        return None
    pending: dict[str, Any] = {
        **state.question_object,
        "asked_by": state.asked_by,
        "deadline": iso_epoch(state.deadline),
        "timed_out": bool(state.timed_out),
    }
    return pending  # type: ignore[return-value]  # question_object is a Question dump


def late_question(session: Any, state: Any) -> PendingQuestion | None:
    """The question a late answer is still taken for: declined or timed out (its askers
    took their defaults), no late answer yet, the session not cancelled; None otherwise
    (docs/late-answers.md)."""
    stored = state.question_object
    if stored is None or session.status == "cancelled" or stored.get("late"):
        return None
    if not (state.clarification_resolved and state.resolution in ("declined", "timeout")):
        return None
    question = {k: v for k, v in stored.items() if k != "late"}
    found = question | {"asked_by": state.asked_by, "deadline": None, "timed_out": False}
    return found  # type: ignore[return-value]  # question_object is a Question dump


def deadline_due(row: Any, now: float) -> bool:
    """Whether `row` (a session with its gate state's columns) has a question still open
    whose deadline passed and was not applied. An answered, cancelled or ended one has
    nothing to apply, whatever its deadline says."""
    return (
        row.deadline is not None
        and not row.timed_out
        and row.deadline <= now
        and row.status in ("paused", "running")
        and state_from_row(row).waiting
    )


def needs_review(session: Any, late: Mapping[str, Any] | None) -> bool:
    """An ended session whose late answer contradicts (or leaves for the PM to judge) an
    assumption, not yet reconciled (`resume --reconcile`)."""
    return (
        late is not None
        and bool(late.get("needs_review"))
        and late.get("reconciled") is None
        and session.status in ("completed", "failed")
    )


def waiting_for_driver(session: Any) -> bool:
    """Answered and handed off (`resume --no-run`, `Sessions.answer`): running, nobody's
    claim on it, no failed call. Not `stalled`: a worker, `serve` or `resume` runs it on."""
    return (
        session.status == "running"
        and session.owner is None
        and getattr(session, "last_error", None) is None
    )


def owner_alive(session: Any) -> bool:
    """Does a live process hold this running session's claim?"""
    return session.status == "running" and not is_dead(
        session.owner_pid,
        session.owner_host,
        session.lease_expires_at,
        owner_boot=getattr(session, "owner_boot", None),
        owner_pidns=getattr(session, "owner_pidns", None),
        owner_started=getattr(session, "owner_started", None),
    )


def owner_record(session: Any) -> OwnerRecord | None:
    """Who drives a running session, its lease, and how long until a takeover is possible."""
    if session.status != "running" or session.owner is None:
        return None
    alive = owner_alive(session)
    return {
        "pid": session.owner_pid,
        "host": session.owner_host,
        "lease_expires_at": iso_epoch(session.lease_expires_at),
        "takeover_possible_in": round(lease_left(session.lease_expires_at), 1) if alive else 0.0,
        "alive": alive,
    }


def session_view(
    session: Any, state: Any, assumptions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    owner = owner_record(session)
    last_error = getattr(session, "last_error", None)
    running = session.status == "running"
    pending = pending_question(session, state)
    return {
        "session_id": session.id,
        "status": session.status,
        "task": session.task,
        "orchestrator_state": {
            "clarification_used": bool(state.clarification_used),
            "clarification_resolved": bool(state.clarification_resolved),
            "clarification_question": state.clarification_question,
            "user_clarification_response": state.user_clarification_response,
            "answer_status": state.resolution,
            "answer_note": state.answer_note,
        },
        "pending_question": pending,
        "questions_surfaced": state.questions_surfaced,
        "fallbacks_injected": state.fallbacks_injected,
        "tasks": list(session.tasks or []),
        "summary": session.summary,
        "error": session.error,
        "round": session.round,
        "created_at": iso(session.created_at),
        "updated_at": iso(session.updated_at),
        # A running session nobody drives: its agent call failed, or its process is gone.
        # Not one handed off on purpose once answered (owner cleared: store.lifecycle.hand_off):
        # that one is `waiting_for_driver`, a worker's, `serve`'s or `resume`'s to run on.
        "stalled": running
        and (last_error is not None or (owner is not None and not owner["alive"])),
        "waiting_for_driver": pending is None and waiting_for_driver(session),
        "last_error": last_error if running else None,
        "owner": owner,
        "cancel_requested": running and getattr(session, "cancel_requested_at", None) is not None,
        "usage": usage_view(getattr(session, "usage", None)),
        "late_question": late_question(session, state),
        "late_answer": (late := (state.question_object or {}).get("late")),
        "needs_review": needs_review(session, late),
    } | (
        {}  # `list` leaves the ledger out; `status` has it
        if assumptions is None
        else {
            "assumptions": [
                {k: a[k] for k in ("agent", "assumption", "why", "source", "time")}
                for a in assumptions
            ]
        }
    )


USAGE_COUNTS = ("input_tokens", "output_tokens", "total_tokens", "model_calls")


def usage_view(per_agent: dict[str, dict[str, int]] | None) -> dict[str, Any] | None:
    """The session's token usage: totals, and per agent (None: no model was called)."""
    if not per_agent:
        return None
    agents = {
        agent: {name: int(counts.get(name, 0)) for name in USAGE_COUNTS}
        for agent, counts in sorted(per_agent.items())
    }
    totals = {name: sum(a[name] for a in agents.values()) for name in USAGE_COUNTS}
    return {**totals, "agents": agents}


def iso_epoch(value: float | None) -> str | None:
    if value is None:
        return None
    try:
        return iso(datetime.fromtimestamp(value, UTC))
    except (OverflowError, ValueError, OSError):
        # A deadline no calendar holds (inf, 1e12: stored by older versions): no deadline.
        return None


def event_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "time": iso(row["created_at"]),
        "kind": row["kind"],
        "agent": row["agent"],
        **dict(row["payload"] or {}),
    }
