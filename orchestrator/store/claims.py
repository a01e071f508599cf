"""Session lifecycle: creating a session, claiming it, accepting answers, releasing it.

A session is driven only by the process whose claim (owner, pid, host, lease) is on its
row. Claims are compare-and-swap UPDATEs inside one write transaction, so of several
racing commands exactly one wins.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from sqlalchemy import Connection, insert, select, update

from orchestrator import gate
from orchestrator.errors import SessionBusy, SessionNotWaiting
from orchestrator.store._base import FINAL_STATUSES, StoreBase, utcnow
from orchestrator.store.owner import Owner, is_dead
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T

__all__ = ["ClaimsMixin"]


class ClaimsMixin(StoreBase):
    def create_session(
        self, task: str, *, agents: dict[str, Any], settings: dict[str, Any], owner: Owner
    ) -> str:
        session_id = uuid.uuid4().hex[:12]
        now = utcnow()
        with self._write() as conn:
            conn.execute(
                insert(_S).values(
                    id=session_id,
                    task=task,
                    status="running",
                    created_at=now,
                    updated_at=now,
                    owner=owner.id,
                    owner_pid=owner.pid,
                    owner_host=owner.host,
                    lease_expires_at=owner.lease_until(),
                    agents=agents,
                    settings=settings,
                    tasks=[],
                    round=0,
                    answers_used=0,
                )
            )
            conn.execute(
                insert(_T).values(
                    session_id=session_id,
                    clarification_used=False,
                    clarification_resolved=False,
                    questions_surfaced=0,
                    fallbacks_injected=0,
                    fallback_counts={},
                )
            )
            self._event(conn, session_id, "session_started", task=task, settings=settings)
        return session_id

    def _take(self, conn: Connection, row: Any, owner: Owner) -> None:
        """Claim `row` for `owner` inside the caller's transaction, or raise."""
        if row.status == "running" and row.owner == owner.id:
            conn.execute(
                update(_S)
                .where(_S.c.id == row.id)
                .values(lease_expires_at=owner.lease_until(), updated_at=utcnow())
            )
            return
        if row.status in FINAL_STATUSES:
            raise SessionNotWaiting(f"session {row.id} is {row.status}; there is nothing to resume")
        if row.status == "running" and not is_dead(
            row.owner_pid, row.owner_host, row.lease_expires_at
        ):
            raise SessionBusy(
                f"session {row.id} is being resumed elsewhere (pid {row.owner_pid} on "
                f"{row.owner_host}); wait for that command to finish, then check "
                f"`orchestrator status {row.id}`"
            )
        # Compare-and-swap on what we read: exactly one of several racing commands wins.
        claimed = conn.execute(
            update(_S)
            .where(
                _S.c.id == row.id,
                _S.c.status == row.status,
                _S.c.owner.is_(None) if row.owner is None else _S.c.owner == row.owner,
            )
            .values(
                status="running",
                owner=owner.id,
                owner_pid=owner.pid,
                owner_host=owner.host,
                lease_expires_at=owner.lease_until(),
                updated_at=utcnow(),
            )
        )
        if claimed.rowcount != 1:
            raise SessionBusy(f"session {row.id} was just taken by another command")
        took_over = row.status == "running"
        self._event(
            conn,
            row.id,
            "status",
            status="running",
            previous=row.status,
            note="took over from a process that is gone" if took_over else "resumed",
        )

    def claim(self, session_id: str, owner: Owner) -> Any:
        """Take a paused session, or one whose owner died, for `owner`; return its row."""
        with self._write() as conn:
            row = self._session(conn, session_id, lock=True)
            self._take(conn, row, owner)
            return self._session(conn, session_id)

    def resolve(
        self,
        session_id: str,
        owner: Owner,
        event: gate.Answer | gate.Decline | gate.Cancel,
        *,
        source: str = "user",
        choices: list[str] | None = None,
    ) -> gate.Resolve:
        """Accept the user's answer, decline or cancel: claim and record in one transaction.

        A person's answer is fsynced (durable=True); a scripted one is not: the scenario
        file replays it if a power loss takes the commit."""
        with self._write(durable=source != "script") as conn:
            row = self._session(conn, session_id, lock=True)
            if row.status in FINAL_STATUSES:
                raise SessionNotWaiting(
                    f"session {session_id} is {row.status}; it is not waiting for an answer"
                )
            decision = gate.decide(self._gate_state(conn, session_id), event)
            if isinstance(decision, gate.Reject):
                raise SessionNotWaiting(
                    f"session {session_id} is not waiting for an answer: {decision.reason}"
                )
            assert isinstance(decision, gate.Resolve)
            self._take(conn, row, owner)
            self._merge_state(conn, session_id, {**decision.update, "resolved_at": utcnow()})
            if source == "script":
                conn.execute(
                    update(_S)
                    .where(_S.c.id == session_id)
                    .values(answers_used=_S.c.answers_used + 1)
                )
            if isinstance(event, gate.Answer):
                self._event(
                    conn,
                    session_id,
                    "answer",
                    key="answer",
                    response=event.response,
                    choices=choices,
                    source=source,
                )
            elif isinstance(event, gate.Decline):
                self._event(conn, session_id, "decline", key="answer", source=source)
            else:
                self._event(conn, session_id, "cancel", key="cancel", source=source)
                self._finish(conn, session_id, "cancelled", error=None, summary=None)
            return decision

    def expire(self, session_id: str, *, owner: Owner | None = None) -> gate.Resolve | None:
        """Apply the on-timeout policy if the open question's deadline has passed.

        Runs on `status` and `resume` (a deadline that passed while no process ran) and
        when a prompt times out. Not while another live process holds the session: that
        process applies its own deadline. Returns the decision, or None if nothing applied.
        """
        with self._read() as conn:  # the common case: nothing to do, and no write lock
            self._session(conn, session_id)
            deadline = conn.execute(
                select(_T.c.deadline).where(
                    _T.c.session_id == session_id, _T.c.timed_out.is_(False)
                )
            ).scalar()
        if deadline is None or deadline > time.time():
            return None
        with self._write(durable=True) as conn:
            row = self._session(conn, session_id, lock=True)
            state = conn.execute(select(_T).where(_T.c.session_id == session_id)).one()
            waiting = (
                state.clarification_used
                and not state.clarification_resolved
                and state.resolution != "cancelled"
            )
            if (
                not waiting
                or state.timed_out
                or state.deadline is None
                or state.deadline > time.time()
                or row.status in FINAL_STATUSES
            ):
                return None
            mine = owner is not None and row.owner == owner.id
            if (
                row.status == "running"
                and not mine
                and not is_dead(row.owner_pid, row.owner_host, row.lease_expires_at)
            ):
                return None
            policy = row.settings.get("on_timeout", "wait")
            decision = gate.decide(self._gate_state(conn, session_id), gate.Timeout(policy))
            assert isinstance(decision, gate.Resolve)
            self._merge_state(conn, session_id, decision.update)
            self._event(
                conn, session_id, "timeout", key="timeout", policy=policy, agent=state.asked_by
            )
            if decision.cancel:
                self._finish(conn, session_id, "cancelled", summary=None, error=None)
            return decision

    def heartbeat(self, session_id: str, owner: Owner) -> bool:
        with self._write() as conn:
            renewed = conn.execute(
                update(_S)
                .where(_S.c.id == session_id, _S.c.owner == owner.id, _S.c.status == "running")
                .values(lease_expires_at=owner.lease_until())
            )
            return renewed.rowcount == 1

    def release(
        self,
        session_id: str,
        owner: Owner,
        status: str,
        *,
        summary: str | None = None,
        error: str | None = None,
    ) -> None:
        """Leave the session in `status` and drop our claim (only if we still hold it)."""
        with self._write() as conn:
            row = self._session(conn, session_id, lock=True)
            if row.owner != owner.id or row.status != "running":
                return
            self._finish(conn, session_id, status, summary=summary, error=error)

    def abandon(self, session_id: str, owner: Owner) -> None:
        """Give up our claim without an outcome (Ctrl+C, a bug): the next resume takes over."""
        with self._write() as conn:
            conn.execute(
                update(_S)
                .where(_S.c.id == session_id, _S.c.owner == owner.id)
                .values(lease_expires_at=0.0, updated_at=utcnow())
            )

    def _finish(
        self,
        conn: Connection,
        session_id: str,
        status: str,
        *,
        summary: str | None,
        error: str | None,
    ) -> None:
        values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
        if status != "running":
            values.update(owner=None, owner_pid=None, owner_host=None, lease_expires_at=None)
        if summary is not None:
            values["summary"] = summary
        if error is not None:
            values["error"] = error
        conn.execute(update(_S).where(_S.c.id == session_id).values(**values))
        details = {k: v for k, v in (("summary", summary), ("error", error)) if v is not None}
        self._event(conn, session_id, "status", status=status, **details)

    # -- writes from graph nodes (all idempotent) -----------------------------------------
