"""The store's reads, and rows to the contract's JSON shapes (section 3).

Each read runs inside the caller's transaction, so what a caller decides on is one
consistent snapshot (a plain `resume` racing an answer sees either the open question or
the answer, never half of each). Plain dicts: no pydantic on this path."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

from orchestrator.documents import OwnerRecord, PendingQuestion
from orchestrator.domain import clock, gate
from orchestrator.domain.clock import iso, iso_epoch
from orchestrator.errors import SessionNotFound
from orchestrator.store.listing import (
    CURSOR_SQL,
    LIVE_SESSION_SQL,
    OPEN_QUESTION_SQL,
    WAITING,
    page_sql,
)
from orchestrator.store.owner import is_dead, lease_left
from orchestrator.store.sql import Row, Tx

__all__ = [
    "Snapshot",
    "snapshot",
    "view",
    "status",
    "list_views",
    "events",
    "pending",
    "session_row",
    "joined_row",
    "gate_state",
    "state_row",
    "JOINED_SQL",
    "session_view",
    "event_view",
    "pending_question",
    "question_parts",
    "owner_record",
    "owner_alive",
    "waiting_for_driver",
    "state_from_row",
    "waiting",
    "driver_fields",
    "OPEN_QUESTION_SQL",
    "LIVE_SESSION_SQL",
]


SESSION_SQL = "SELECT * FROM sessions WHERE id = :id"
STATE_SQL = "SELECT * FROM orchestrator_state WHERE session_id = :id"
# The session row and its gate state in one statement: one snapshot, also on SQLite where
# reads run without a transaction around them.
JOINED_SQL = (
    "SELECT s.*, t.* FROM sessions AS s JOIN orchestrator_state AS t ON t.session_id = s.id"
    " WHERE s.id = :id"
)


def session_row(tx: Tx, session_id: str, *, lock: bool = False) -> Row:
    row = tx.first(SESSION_SQL + (tx.lock_rows if lock else ""), {"id": session_id})
    if row is None:
        raise SessionNotFound(session_id)
    return row


def joined_row(
    tx: Tx,
    session_id: str,
    *,
    lock: bool = False,
    extra: str = "",
    params: dict[str, Any] | None = None,
) -> Row:
    """The session row with its gate state's columns (and `extra` select items, whose
    parameters are `params`)."""
    sql = JOINED_SQL if not extra else JOINED_SQL.replace("t.* FROM", f"t.*, {extra} FROM", 1)
    row = tx.first(sql + (tx.lock_rows if lock else ""), {"id": session_id, **(params or {})})
    if row is None:
        raise SessionNotFound(session_id)
    return row


def gate_state(tx: Tx, session_id: str) -> gate.GateState:
    return state_from_row(state_row(tx, session_id))


def state_row(tx: Tx, session_id: str) -> Row:
    """The session's orchestrator_state row (SessionNotFound if there is none)."""
    row = tx.first(STATE_SQL, {"id": session_id})
    if row is None:
        raise SessionNotFound(session_id)
    return row


# -- views ------------------------------------------------------------------------------


# "A question is open" (OPEN_QUESTION_SQL) and "...of a session that has not ended"
# (LIVE_SESSION_SQL) are store.listing's, shared with the fast read path.
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


def waiting(row: Any) -> bool:
    """GateState.waiting of an orchestrator_state row, read off its columns."""
    return gate.question_open(row.clarification_used, row.clarification_resolved, row.resolution)


def pending_question(session: Any, state: Any) -> PendingQuestion | None:
    """The open question of a session that has not ended, or None."""
    if session.status not in ("paused", "running") or state.question_object is None:
        return None
    if not waiting(state):
        return None
    pending: dict[str, Any] = {
        **state.question_object,
        "asked_by": state.asked_by,
        "deadline": iso_epoch(state.deadline),
        "timed_out": bool(state.timed_out),
    }
    return pending  # type: ignore[return-value]  # question_object is a Question dump


def question_parts(question: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """A multi-part question's parts, each with its own answer: its number, question,
    askers, `response` (None while unanswered or declined) and `declined`; None for a
    question without parts (docs/multi-part-questions.md)."""
    parts = (question or {}).get("parts")
    if not parts:
        return None
    return [
        {
            "part": part["part"],
            "question": part["question"],
            "askers": list(part.get("askers") or [part.get("asked_by")]),
            "response": part.get("response"),
            "declined": bool(part.get("declined")),
        }
        for part in parts
    ]


def late_question(session: Any, state: Any) -> PendingQuestion | None:
    """The question a late answer is still taken for: declined or timed out (its askers
    took their defaults), no late answer yet, the session not cancelled; None otherwise
    (docs/late-answers.md)."""
    stored = state.question_object
    if stored is None or session.status == "cancelled" or stored.get("late"):
        return None
    if not gate.defaults_taken(state.clarification_resolved, state.resolution):
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
        and waiting(row)
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
    return session.status == "running" and session.owner is None and session.last_error is None


def owner_alive(session: Any) -> bool:
    """Does a live process hold this running session's claim?"""
    return session.status == "running" and not is_dead(
        session.owner_pid,
        session.owner_host,
        session.lease_expires_at,
        owner_boot=session.owner_boot,
        owner_pidns=session.owner_pidns,
        owner_started=session.owner_started,
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


def driver_fields(session: Any, pending: PendingQuestion | None) -> dict[str, Any]:
    """The session object's `stalled`, `waiting_for_driver`, `last_error` and `owner`.
    Stalled: running, nobody drives it (its agent call failed, or its process is gone). Not
    one handed off on purpose once answered (owner cleared: store.lifecycle.hand_off): that
    one is `waiting_for_driver`, a worker's, `serve`'s or `resume`'s to run on."""
    owner = owner_record(session)
    last_error = getattr(session, "last_error", None)
    running = session.status == "running"
    dead = owner is not None and not owner["alive"]
    return {
        "stalled": running and (last_error is not None or dead),
        "waiting_for_driver": pending is None and waiting_for_driver(session),
        "last_error": last_error if running else None,
        "owner": owner,
    }


def session_view(
    session: Any, state: Any, assumptions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
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
            "parts": question_parts(state.question_object),
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
        **driver_fields(session, pending),
        "cancel_requested": session.status == "running"
        and getattr(session, "cancel_requested_at", None) is not None,
        "usage": usage_view(getattr(session, "usage", None)),
        "late_question": late_question(session, state),
        "late_answer": (late := (state.question_object or {}).get("late")),
        "needs_review": needs_review(session, late),
        "workbench": workbench_view(session),
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


def workbench_view(session: Any) -> dict[str, Any] | None:
    """Where the developers work (contract section 9): the repository, the base, the
    sandbox, and each task's branch and worktree. None: a session without a repository."""
    settings = getattr(session, "settings", None) or {}
    bench = settings.get("workbench")
    if not bench:
        return None
    root = str(bench["worktrees"]).rstrip("/")
    numbers = sorted({int(t["number"]) for t in getattr(session, "tasks", None) or []})
    branch = f"orchestrator/{session.id}"
    where = shlex.quote(str(bench["repository"]))
    return {
        "repository": bench["repository"],
        "base": bench["base"],
        "branch": branch,
        # How to look at the result and take it (contract section 9, "The result").
        "see": f"git -C {where} diff {str(bench['base'])[:12]}..{branch} --stat",
        "take": f"git -C {where} merge {branch}",
        "host": bench.get("host"),
        "sandbox": settings.get("sandbox", "auto"),
        "allow_network": bool(settings.get("allow_network")),
        "checks": list(settings.get("checks") or []),
        "worktrees": root,
        "tasks": [
            {
                "number": n,
                "branch": f"orchestrator/{session.id}/task-{n}",
                "worktree": f"{root}/task-{n}",
            }
            for n in numbers
        ],
    }


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


def event_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "time": iso(row["created_at"]),
        "kind": row["kind"],
        "agent": row["agent"],
        **dict(row["payload"] or {}),
    }


# -- reads ------------------------------------------------------------------------------


class Snapshot(NamedTuple):
    """A session as one statement saw it: what a plain `resume` decides on."""

    row: Any
    state: gate.GateState
    question: PendingQuestion | None
    view: dict[str, Any]


def snapshot(tx: Tx, session_id: str) -> Snapshot:
    row = joined_row(tx, session_id)
    return Snapshot(row, state_from_row(row), pending_question(row, row), _view(tx, row))


def pending(tx: Tx, session_id: str) -> tuple[Row, PendingQuestion | None]:
    """The session's row (with its gate state) and its open question, in one read."""
    row = joined_row(tx, session_id)
    return row, pending_question(row, row)


def view(tx: Tx, session_id: str) -> dict[str, Any]:
    """The contract's session object, with the assumptions ledger."""
    return status(tx, session_id)[0]


def status(tx: Tx, session_id: str) -> tuple[dict[str, Any], Any, bool]:
    """(the session object with its ledger, the session row, whether an open question's
    deadline has passed unapplied): what `status` needs, in one read of the session."""
    row = joined_row(tx, session_id)
    doc = _view(tx, row)
    due = deadline_due(row, clock.now())  # an open question's, not yet applied
    return doc, row, due


LEDGER_SQL = (  # the session's assumptions ledger, oldest first
    'SELECT "key", created_at, kind, agent, payload FROM events'
    " WHERE session_id = :id AND kind = 'assumption' ORDER BY id"
)


def _view(tx: Tx, row: Row) -> dict[str, Any]:
    # The ledger is append-only: read after the row, it can only hold as much or more.
    ledger = tx.rows(LEDGER_SQL, {"id": row.id})
    return session_view(row, row, [event_view(entry) for entry in ledger])


def list_views(
    tx: Tx,
    status: str | None = None,
    *,
    limit: int | None = None,
    after: str | None = None,
) -> list[dict[str, Any]]:
    """Sessions, newest first: at most `limit`, those listed after session `after`.

    The SQL is the fast read path's too (orchestrator.store.listing.page_sql); it reads only the
    columns a listed session shows. `status` "waiting": the sessions with an open question."""
    waiting = status == WAITING
    params: dict[str, Any] = {"limit": limit, **({} if waiting else {"status": status})}
    if after is not None:
        # As stored (aliased, so SQLite's text is not made a datetime and back): the page
        # compares it with the column itself.
        cursor = tx.first(CURSOR_SQL.replace("created_at", "created_at AS at", 1), {"after": after})
        if cursor is None:
            raise SessionNotFound(after)
        params.update(after_created=cursor.at, after_id=after)
    sql = page_sql(
        status=status is not None, after=after is not None, limit=limit is not None, waiting=waiting
    )
    return [session_view(row, row) for row in tx.rows(sql, params)]


_EVENTS = (
    "SELECT e.id, e.created_at, e.kind, e.agent, e.payload, s.id AS session FROM sessions AS s"
    " LEFT JOIN events AS e ON e.session_id = s.id AND e.id > :after"
    " WHERE s.id = :sid ORDER BY e.id"
)


def events(tx: Tx, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
    rows = tx.rows(_EVENTS, {"sid": session_id, "after": after})
    if not rows:
        raise SessionNotFound(session_id)
    return [event_view(row) for row in rows if row.id is not None]
