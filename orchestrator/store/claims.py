"""Claims: who drives a session. Create, claim, heartbeat, hand off, release, abandon,
cancel, and the fence every driver's write passes.

A session is driven only by the process whose claim is on its row: owner id, identity
(pid, host, boot id, PID namespace, start time), lease, and a generation that grows on
every claim. Claims are compare-and-swap UPDATEs inside one write transaction, so of
several racing commands exactly one wins; a driver's every write starts with `fence`, so a
process that lost its claim cannot write after the loss.

The owner's identity (boot id, PID namespace, pid, start time) and the lease are
`store.owner`'s: standard library only, read by the command line's fast path and the
session views below this module.
"""

from __future__ import annotations

import uuid
from typing import Any

from orchestrator.documents import FINAL_STATUSES
from orchestrator.domain.clock import iso_epoch
from orchestrator.errors import (
    AgentCallError,
    CancelRequested,
    ClaimLost,
    SessionBusy,
    SessionNotFound,
    SessionNotWaiting,
)
from orchestrator.store.events import add_event, update_sql, utcnow
from orchestrator.store.owner import OWNER_COLUMNS, Claim, Owner, lease_left
from orchestrator.store.sql import Row, Tx
from orchestrator.store.turns import add_usage
from orchestrator.store.views import joined_row, owner_alive

__all__ = [
    "fence",
    "check_holds",
    "finish",
    "RELEASED",
    "create",
    "take",
    "heartbeat",
    "release",
    "abandon",
    "hand_off",
    "reopen",
    "record_failure",
    "check_call",
    "check_held",
    "drop_checkpoints",
    "drop_any_checkpoints",
    "cancel",
    "busy_message",
    "held_by_asker",
    "ASK_ONLY",
]


# -- the fence --------------------------------------------------------------------------


def holds(row: Any, claim: Claim) -> bool:
    return bool(
        row.status == "running"
        and row.owner == claim.owner.id
        and row.claim_generation == claim.generation
    )


_FENCE_SQL = (
    "SELECT id, status, owner, owner_pid, owner_host, claim_generation, round, usage"
    " FROM sessions WHERE id = :id"
)


def fence(
    tx: Tx,
    claim: Claim,
    *,
    joined: bool = False,
    extra: str = "",
    params: dict[str, Any] | None = None,
) -> Row:
    """Raise ClaimLost unless `claim` still holds its session; return the session row
    (`joined`: with its gate state's columns, and `extra` select items; otherwise only
    the claim's columns, the round and the usage: never the script or the task board, which
    grow with the session and would make every write of a long session cost more).

    Called first in every transaction a driver writes in (and when an agent call starts):
    the row is locked (FOR UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE already holds the
    write lock), so no takeover can slip between this check and the writes after it.
    """
    if joined or extra:
        row = joined_row(tx, claim.session_id, lock=True, extra=extra, params=params)
    else:
        found = tx.first(_FENCE_SQL + tx.lock_rows, {"id": claim.session_id})
        if found is None:
            raise SessionNotFound(claim.session_id)
        row = found
    check_holds(row, claim)
    return row


def check_holds(row: Any, claim: Claim) -> None:
    if not holds(row, claim):
        raise ClaimLost(claim.session_id, _holder(row))


def _holder(row: Any) -> str:
    if row.status != "running":
        return f"the session is now {row.status}"
    if row.owner_pid is None:
        return "another command took it over"
    return f"taken over by pid {row.owner_pid} on {row.owner_host}"


# A session nobody drives: its claim columns cleared (on finishing, or on a hand-off).
RELEASED = dict.fromkeys((*OWNER_COLUMNS, "cancel_requested_at", "last_error", "last_error_kind"))


def finish(
    tx: Tx,
    session_id: str,
    status: str,
    *,
    summary: str | None = None,
    error: str | None = None,
) -> None:
    """Set the session's status; a session that stops running drops its claim."""
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if status != "running":
        values.update(RELEASED)
    if summary is not None:
        values["summary"] = summary
    if error is not None:
        values["error"] = error
    tx.run(update_sql("sessions", list(values), "id = :sid"), values | {"sid": session_id})
    details = {k: v for k, v in (("summary", summary), ("error", error)) if v is not None}
    add_event(tx, session_id, "status", status=status, **details)


# -- the lifecycle ----------------------------------------------------------------------


def _insert_sql(table: str, columns: list[str]) -> str:
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
    )


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


def create(
    tx: Tx,
    task: str,
    *,
    agents: dict[str, Any],
    settings: dict[str, Any],
    owner: Owner,
    session_id: str | None = None,
) -> tuple[Claim, Row]:
    """A new session claimed by `owner` (with `session_id` when the caller chose it, e.g.
    to name folders after it first): its claim, and its row as written."""
    session_id = session_id or new_session_id()
    now = utcnow()
    row = Row(
        id=session_id,
        task=task,
        status="running",
        created_at=now,
        updated_at=now,
        claim_generation=1,
        **owner.columns(),
        agents=agents,
        settings=settings,
        tasks=[],
        round=0,
        answers_used=0,
    )
    tx.run(_insert_sql("sessions", list(row)), row)
    state = {
        "session_id": session_id,
        "clarification_used": False,
        "clarification_resolved": False,
        "questions_surfaced": 0,
        "fallbacks_injected": 0,
        "fallback_counts": {},
        "timed_out": False,
    }
    tx.run(_insert_sql("orchestrator_state", list(state)), state)
    add_event(tx, session_id, "session_started", task=task, settings=settings)
    return Claim(session_id, owner, 1), row


ASK_ONLY = "mcp"  # the agents kind of a question an MCP client asked (provide_choice, ask_user)


def held_by_asker(row: Any, owner: Owner) -> bool:
    """An MCP client's question held by the live server whose tool call waits for it:
    another door may answer it (the server sees the answer, returns it to the waiting
    call and ends the session), but not claim it."""
    return (
        (row.agents or {}).get("kind") == ASK_ONLY
        and row.status == "running"
        and row.owner not in (None, owner.id)
        and owner_alive(row)
    )


def busy_message(row: Any) -> str:
    """The "being resumed elsewhere" message: who holds it and when a takeover becomes possible."""
    left = lease_left(row.lease_expires_at)
    return (
        f"session {row.id} is being resumed elsewhere (pid {row.owner_pid} on "
        f"{row.owner_host}, lease until {iso_epoch(row.lease_expires_at)}; a takeover is "
        f"possible in {left:.0f} s if it stops renewing); wait for that command to finish, "
        f"then check `orchestrator status {row.id}`"
    )


def take(tx: Tx, row: Any, owner: Owner) -> Claim:
    """Claim `row` (read under lock in this transaction) for `owner`, or raise.

    Every claim moves the generation on, a re-claim by the same owner too: whatever drive
    held the session before (another process, or another thread of this one) is fenced out.
    """
    if row.status == "running" and row.owner == owner.id:
        generation = row.claim_generation + 1
        values = {
            "claim_generation": generation,
            "lease_expires_at": owner.lease_until(),
            "updated_at": utcnow(),
        }
        tx.run(update_sql("sessions", list(values), "id = :sid"), values | {"sid": row.id})
        return Claim(row.id, owner, generation)
    if row.status in FINAL_STATUSES:
        raise SessionNotWaiting(f"session {row.id} is {row.status}; there is nothing to resume")
    if row.status == "running" and owner_alive(row):
        raise SessionBusy(busy_message(row))
    generation = _run_again(tx, row, owner.columns())
    if row.status != "running":
        note = "resumed"
    elif row.owner is None:
        note = "picked up by a driver"  # it was handed off (see hand_off)
    else:
        note = "took over from a process that is gone"
    driver = f"pid {owner.pid} on {owner.host}"  # which process drives it from here on
    add_event(tx, row.id, "status", status="running", previous=row.status, note=note, driver=driver)
    return Claim(row.id, owner, generation)


def _run_again(tx: Tx, row: Any, holder: dict[str, Any], **also: Any) -> int:
    """Set the session `row` running for `holder` (an owner's columns, or RELEASED), as a
    compare-and-swap on what was read: exactly one of several racing commands wins, and
    the generation moves on, which fences out whoever held the claim before. Returns the
    new generation."""
    generation = int(row.claim_generation) + 1
    values = {
        "status": "running",
        "claim_generation": generation,
        **holder,
        "cancel_requested_at": None,
        "last_error": None,
        "last_error_kind": None,
        "updated_at": utcnow(),
        **also,
    }
    _swap(tx, row, values)
    return generation


def reopen(tx: Tx, row: Any, owner: Owner, *, nobody: bool) -> Claim:
    """Make the ended session `row` (read under lock) run again, for its late answer's
    reconciliation round: claimed by `owner`, or with `nobody` left for a driver."""
    generation = _run_again(tx, row, RELEASED if nobody else owner.columns(), error=None)
    note = "reopened to reconcile the late answer"
    add_event(tx, row.id, "status", status="running", previous=row.status, note=note)
    return Claim(row.id, owner, generation if not nobody else -1)


HANDED_OFF = "answered, waiting for a driver"  # the log's word for it (cli.render's too)

_HOLDS = "id = :sid AND owner = :owner AND claim_generation = :generation"


def take_answered(tx: Tx, row: Any, owner: Owner, *, nobody: bool) -> Claim | None:
    """Who drives a session once `owner`'s answer commits: `owner` (its claim), or with
    `nobody` no one (a cancel ends the session in the same transaction; a hand-off leaves
    it to a driver), but never from under another live driver (SessionBusy). No "running:
    resumed" is written for nobody."""
    if not nobody:
        return take(tx, row, owner)
    if row.status == "running" and row.owner != owner.id and owner_alive(row):
        raise SessionBusy(busy_message(row))
    return None


def _claim_params(claim: Claim) -> dict[str, Any]:
    return {"sid": claim.session_id, "owner": claim.owner.id, "generation": claim.generation}


def heartbeat(tx: Tx, claim: Claim) -> bool:
    """Renew the lease; False once the claim is lost (the driver must stop)."""
    renewed = tx.run(
        "UPDATE sessions SET lease_expires_at = :lease_expires_at"
        f" WHERE {_HOLDS} AND status = 'running'",
        _claim_params(claim) | {"lease_expires_at": claim.owner.lease_until()},
    )
    return renewed == 1


def release(
    tx: Tx,
    claim: Claim,
    status: str,
    *,
    summary: str | None = None,
    error: str | None = None,
    usage: dict[str, dict[str, int]] | None = None,
) -> None:
    """Leave the session in `status` and drop the claim (raises ClaimLost if not ours).
    `usage`: tokens a failed turn spent, added to the session's."""
    row = fence(tx, claim)
    finish(tx, claim.session_id, status, summary=summary, error=error)
    _add_usage(tx, row, usage)


def _add_usage(tx: Tx, row: Any, usage: dict[str, dict[str, int]] | None) -> None:
    if not usage:
        return
    totals = getattr(row, "usage", None)
    for agent, counts in usage.items():
        totals = add_usage(totals, agent, counts)
    tx.run("UPDATE sessions SET usage = :usage WHERE id = :sid", {"usage": totals, "sid": row.id})


def abandon(tx: Tx, claim: Claim) -> None:
    """Give up the claim without an outcome (Ctrl+C, a bug): the next resume takes over.
    Does nothing if the claim was lost already."""
    tx.run(
        f"UPDATE sessions SET lease_expires_at = 0.0, updated_at = :updated_at WHERE {_HOLDS}",
        _claim_params(claim) | {"updated_at": utcnow()},
    )


def hand_off(tx: Tx, row: Any, owner: Owner) -> None:
    """Leave the answered session `row` (read under lock in this transaction) running with
    nobody's claim: it waits for a driver (a worker, `serve`, `resume`) and is not
    `stalled` (store.views.waiting_for_driver). Raises SessionBusy if another live process
    holds it. The generation moves on, so whoever held it before is fenced out."""
    if row.status in FINAL_STATUSES:
        raise SessionNotWaiting(f"session {row.id} is {row.status}; there is nothing to resume")
    if row.status == "running" and row.owner != owner.id and owner_alive(row):
        raise SessionBusy(busy_message(row))
    values = {
        "status": "running",
        "claim_generation": row.claim_generation + 1,
        **RELEASED,
        "updated_at": utcnow(),
    }
    _swap(tx, row, values)
    add_event(tx, row.id, "status", status="running", previous=row.status, note=HANDED_OFF)


def _swap(tx: Tx, row: Any, values: dict[str, Any]) -> None:
    """Write `values` to the session `row` was read as (same status, same generation), or
    raise SessionBusy: another command changed it in between."""
    swapped = tx.run(
        update_sql(
            "sessions",
            list(values),
            "id = :sid AND status = :was_status AND claim_generation = :was_generation",
        ),
        values | {"sid": row.id, "was_status": row.status, "was_generation": row.claim_generation},
    )
    if swapped != 1:
        raise SessionBusy(f"session {row.id} was just taken by another command")


def record_failure(
    tx: Tx,
    claim: Claim,
    agent: str | None,
    message: str,
    usage: dict[str, dict[str, int]] | None = None,
    *,
    kind: str = "agent_failed",
    code: str = AgentCallError.code,
) -> None:
    """An agent call failed (or, `kind` "interrupted", the user stopped the process): log
    it, show it (`stalled`, `last_error`), and let go of the session so that `resume`
    retries the call and `cancel` ends it at once. `usage`: the tokens the failed turn
    spent (counted, and in the event). `code`: the error's kind (errors.py), stored as
    `last_error_kind` for the queue (store.queue)."""
    row = fence(tx, claim)
    spent: dict[str, Any] = (
        {"usage": next(iter(usage.values()))} if usage and len(usage) == 1 else {}
    )
    add_event(tx, claim.session_id, kind, agent=agent, error=message, **spent)
    _add_usage(tx, row, usage)
    tx.run(
        "UPDATE sessions SET last_error = :last_error, last_error_kind = :kind,"
        " lease_expires_at = 0.0, updated_at = :updated_at WHERE id = :sid",
        {"last_error": message, "kind": code, "updated_at": utcnow(), "sid": claim.session_id},
    )


_CALL_SQL = (
    "SELECT id, status, owner, owner_pid, owner_host, claim_generation, cancel_requested_at"
    " FROM sessions WHERE id = :id"
)


def check_held(tx: Tx, claim: Claim) -> Row:
    """Raise ClaimLost unless `claim` still holds its session; one SELECT, no lock (a
    check before acting: the writes that follow are fenced in their own transactions)."""
    row = tx.first(_CALL_SQL, {"id": claim.session_id})
    if row is None:
        raise SessionNotFound(claim.session_id)
    check_holds(row, claim)
    return row


def check_call(tx: Tx, claim: Claim) -> None:
    """Before an agent call: the claim still holds (else ClaimLost) and no cancel was asked
    (else CancelRequested). One read, at the same place for both."""
    row = check_held(tx, claim)
    if row.cancel_requested_at is not None:
        raise CancelRequested(f"session {claim.session_id}: cancel was requested")


def cancel(tx: Tx, row: Any, *, resolve: Any) -> str:
    """Stop a session that has not ended; returns "cancelled" or "cancel_requested".

    A waiting session (its open question is cancelled through the gate: `resolve`) and a
    running one whose process is gone end at once; one whose process lives gets a request
    that its driver honours before its next agent call.
    """
    if row.status in FINAL_STATUSES:
        raise SessionNotWaiting(f"session {row.id} is {row.status}; there is nothing to cancel")
    if row.status == "running" and owner_alive(row):
        if row.cancel_requested_at is None:
            now = utcnow()
            tx.run(
                "UPDATE sessions SET cancel_requested_at = :cancel_requested_at,"
                " updated_at = :updated_at WHERE id = :sid",
                {"cancel_requested_at": now, "updated_at": now, "sid": row.id},
            )
            add_event(tx, row.id, "cancel_requested", key="cancel_requested", source="user")
        return "cancel_requested"
    if resolve():  # the open question, cancelled through the gate (ends the session)
        return "cancelled"
    add_event(tx, row.id, "cancel", key="cancel", source="user")
    finish(tx, row.id, "cancelled")
    return "cancelled"


# LangGraph's SqliteSaver tables (what SqliteSaver.delete_thread deletes from).
_SQLITE_CHECKPOINT_TABLES = ("checkpoints", "writes")
# PostgresSaver's tables (what PostgresSaver.delete_thread deletes from).
_PG_CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def drop_checkpoints(tx: Tx, session_id: str) -> None:
    """Delete the session's LangGraph checkpoints in this transaction (they live in the
    same database, and the checkpointer set its tables up; nothing reads them once the
    session has ended)."""
    tables = _SQLITE_CHECKPOINT_TABLES if tx.dialect == "sqlite" else _PG_CHECKPOINT_TABLES
    for table in tables:
        tx.run(f"DELETE FROM {table} WHERE thread_id = :sid", {"sid": session_id})


def drop_any_checkpoints(tx: Tx, session_id: str) -> None:
    """Delete the session's LangGraph checkpoints in this transaction, on either database,
    from whichever of the checkpointer's tables exist (a session cancelled before it ever
    ran has none, and neither may the database)."""
    names: tuple[str, ...]
    if tx.dialect == "sqlite":
        names = _SQLITE_CHECKPOINT_TABLES
        present = {
            r.name
            for r in tx.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
            if r.name in names
        }
    else:
        names = _PG_CHECKPOINT_TABLES
        present = {name for name in names if tx.scalar(f"SELECT to_regclass('{name}') IS NOT NULL")}
    for table in names:
        if table in present:
            tx.run(f"DELETE FROM {table} WHERE thread_id = :sid", {"sid": session_id})
