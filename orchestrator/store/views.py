"""Rows to the contract's JSON shapes (section 3). Plain dicts: no pydantic on this path."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["session_view", "event_view", "iso", "iso_epoch"]


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands back naive datetimes; we only ever write UTC
        value = value.replace(tzinfo=UTC)
    return value.isoformat().replace("+00:00", "Z")


def session_view(
    session: Any, state: Any, assumptions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    waiting = (
        state.clarification_used
        and not state.clarification_resolved
        and session.status in ("paused", "running")
    )
    pending = None
    if waiting and state.resolution != "cancelled" and state.question_object is not None:
        pending = {
            **state.question_object,
            "asked_by": state.asked_by,
            "deadline": iso_epoch(state.deadline),
            "timed_out": bool(state.timed_out),
        }
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
