"""Sessions ready to run on, and claiming one of them for a worker.

A session is ready when it is `running` and nobody drives it: its answer was committed and
the answering process handed it off or is gone, or its driver died or stopped renewing its
lease. A worker's own sessions count too when none of its threads drives them any more (a
database failure interrupted the drive: the row still names this worker). So is a paused
session whose question's deadline has passed: the worker applies its on-timeout policy
(`wait` marks it timed out and leaves it waiting, `cancel` ends it, `proceed` answers it
with the asker's default), and takes it when that leaves it to run on.

Claiming reads a batch of candidates and takes the first ready one in one write
transaction. On PostgreSQL the chosen row is locked `FOR UPDATE SKIP LOCKED`: a row another
worker is claiming is skipped, not waited for, so workers never queue behind each other.
On SQLite the transaction holds the database's write lock (BEGIN IMMEDIATE). Either way the
claim itself is the same compare-and-swap `resume` uses (claims.take): it bumps the
claim generation, so whoever held the session before is fenced out.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Container
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain import clock
from orchestrator.errors import BudgetExceeded
from orchestrator.store import claims, gate_tx
from orchestrator.store.core import Store
from orchestrator.store.owner import DRIVER_COLUMNS, Claim, Owner
from orchestrator.store.views import OPEN_DEADLINE_SQL, OPEN_QUESTION_SQL, owner_alive

__all__ = ["claim_ready", "hand_off", "BATCH"]

BATCH = 32  # candidates read per claim
# Waiting questions whose deadline has passed unapplied, earliest first, off the partial
# index of open deadlines (revision 0006): a poll costs what is due. (Only paused sessions
# are the worker's to apply; a running one's driver applies its own deadline.)
_OVERDUE = (
    "SELECT s.*, t.* FROM orchestrator_state AS t JOIN sessions AS s ON s.id = t.session_id"
    f" WHERE {OPEN_DEADLINE_SQL.format(t='t.')} AND {OPEN_QUESTION_SQL}"
    " AND t.deadline <= :now ORDER BY t.deadline LIMIT :batch"
)
# Running sessions, oldest change first. A cheap prefilter: an expired lease, or a process
# the OS can be asked about (same host), or ours; `ready` has the final word. Only the
# columns `ready` reads: a whole row carries the session's script and task board, and a
# claim reads a batch of candidates (the one taken is read whole, under its lock).
_CANDIDATES = (
    f"SELECT {', '.join(DRIVER_COLUMNS)}, last_error_kind, updated_at FROM sessions"
    " WHERE status = 'running' AND (lease_expires_at IS NULL"
    " OR lease_expires_at < :now OR owner_host = :host OR owner = :owner)"
    # stalled by a budget: left for `resume` (and out of the batch, not filling it)
    f" AND (last_error_kind IS NULL OR last_error_kind <> '{BudgetExceeded.code}')"
    " ORDER BY updated_at LIMIT :batch"
)


def claim_ready(
    store: Store,
    owner: Owner,
    *,
    busy: Container[str] = (),
    failed_before: float = 0.0,
) -> Claim | None:
    """Claim one ready session for `owner`, or return None if there is none.

    `busy`: sessions this worker's threads drive now (never ours to take again).
    `failed_before`: a session whose last agent call failed is retried only if that
    failure is older than this time (seconds since the epoch), so a provider that is down
    is not called in a loop. One stalled by a budget (errors.BudgetExceeded) is never
    taken: it waits for an explicit `resume`.
    """
    now = time.time()
    params = {"now": now, "host": socket.gethostname(), "owner": owner.id}

    def ready(row: Any) -> bool:
        if row.id in busy or row.status != "running":
            return False
        if row.owner != owner.id and owner_alive(row):
            return False
        if row.last_error_kind == BudgetExceeded.code:
            return False  # the same turn would spend the same again: `resume` retries it
        return row.last_error is None or _epoch(row.updated_at) <= failed_before

    with store.writing() as tx:
        for row in tx.rows(_CANDIDATES, params | {"batch": BATCH}):
            if not ready(row):
                continue
            # Lock only the one we want; a row another worker holds is skipped, not waited
            # for (PostgreSQL). Read again under the lock: it may have changed meanwhile.
            skip = " FOR UPDATE SKIP LOCKED" if tx.dialect == "postgresql" else ""
            locked = tx.first(f"SELECT * FROM sessions WHERE id = :id{skip}", {"id": row.id})
            if locked is not None and ready(locked):
                return claims.take(tx, locked, owner)
        return _overdue(tx, owner, clock.now(), busy)  # deadlines: the (virtual) clock


def _overdue(tx: Any, owner: Owner, now: float, busy: Container[str]) -> Claim | None:
    """Apply the on-timeout policy of paused sessions whose deadline has passed; claim the
    first one that it leaves to run on (`proceed`)."""
    skip = " FOR UPDATE OF s SKIP LOCKED" if tx.dialect == "postgresql" else ""
    for row in tx.rows(_OVERDUE + skip, {"now": now, "batch": BATCH}):
        if row.id in busy or row.status != "paused":
            continue
        decision = gate_tx.expire_deadline(tx, row, may_act=True)
        if decision is not None and decision.update.get("resolved"):
            return claims.take(tx, row, owner)  # still paused: the claim's CAS holds
    return None


def _epoch(moment: datetime) -> float:
    # SQLite hands back naive datetimes; the store writes UTC.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def hand_off(store: Store, session_id: str, owner: Owner) -> bool:
    """Let go of `owner`'s claim on a running session so that a worker runs it on at once
    (e.g. a web server that committed an answer and leaves the agents to the workers): it
    shows as answered, waiting for a driver. Returns False if `owner` did not hold it.
    (`Sessions.answer` hands off by itself; this is for a claim taken otherwise.)"""
    return store.hand_off(session_id, owner)
