"""The store's foundation: transactions, keyed events, and the read side."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, select, update

from orchestrator import gate
from orchestrator.errors import SessionNotFound
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T
from orchestrator.store.views import event_view, session_view

__all__ = ["StoreBase", "FINAL_STATUSES", "STATUSES", "Listener", "utcnow"]

STATUSES = ("running", "paused", "completed", "failed", "cancelled")
FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})

Listener = Callable[[str, dict[str, Any]], None]  # (session_id, event)


def utcnow() -> datetime:
    return datetime.now(UTC)


class StoreBase:
    def __init__(self, engine: Engine, listener: Listener | None = None) -> None:
        self.engine = engine
        self.listener = listener

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def _write(self, *, durable: bool = False) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite).

        `durable`: fsync this commit even on SQLite's synchronous=NORMAL, so that it
        survives a power loss and not only a killed process (used for the user's answer).
        """
        sqlite = self.engine.dialect.name == "sqlite"
        with self.engine.connect().execution_options(write=True) as conn:
            # On the DBAPI connection: SQLAlchemy would wrap the PRAGMA in a transaction,
            # and SQLite only changes the safety level outside one.
            raw = conn.connection.driver_connection if durable and sqlite else None
            if raw is not None:
                raw.execute("PRAGMA synchronous = FULL")
            conn.info["new_events"] = []
            try:
                with conn.begin():
                    yield conn
            finally:
                if raw is not None:
                    raw.execute("PRAGMA synchronous = NORMAL")
            new_events = conn.info.pop("new_events")
        if self.listener is not None:
            for session_id, event in new_events:
                self.listener(session_id, event)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def _assumption(
        self,
        conn: Connection,
        session_id: str,
        key: str,
        *,
        agent: str,
        assumption: str,
        why: str,
        source: str,
    ) -> None:
        """One entry of the assumptions ledger (keyed, so a re-run adds nothing)."""
        self._event(
            conn,
            session_id,
            "assumption",
            agent=agent,
            key=f"assumption:{key}",
            assumption=assumption,
            why=why,
            source=source,
        )

    def _event(
        self,
        conn: Connection,
        session_id: str,
        kind: str,
        *,
        agent: str | None = None,
        key: str | None = None,
        **payload: Any,
    ) -> bool:
        """Append an event; with a `key` already present, do nothing and return False."""
        values = {
            "session_id": session_id,
            "key": key or f"{kind}:{uuid.uuid4().hex}",
            "kind": kind,
            "agent": agent,
            "payload": payload,
            "created_at": utcnow(),
        }
        # INSERT ... ON CONFLICT (session_id, key) DO NOTHING: one statement, and any other
        # uniqueness violation (the one-question index) still raises. RETURNING tells
        # whether a row went in (psycopg reports rowcount -1 for this statement).
        added = conn.execute(
            self._insert_event()
            .values(**values)
            .on_conflict_do_nothing(index_elements=["session_id", "key"])
            .returning(_E.c.id)
        ).first()
        if added is None:
            return False
        conn.info["new_events"].append((session_id, event_view(values)))
        return True

    def _insert_event(self) -> Any:
        """An INSERT that supports ON CONFLICT DO NOTHING on this database."""
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(_E)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(_E)

    def _session(self, conn: Connection, session_id: str, *, lock: bool = False) -> Any:
        query = select(_S).where(_S.c.id == session_id)
        row = conn.execute(query.with_for_update() if lock else query).first()
        if row is None:
            raise SessionNotFound(session_id)
        return row

    @staticmethod
    def _gate_state(conn: Connection, session_id: str) -> gate.GateState:
        row = conn.execute(select(_T).where(_T.c.session_id == session_id)).one()
        return gate.GateState(
            used=row.clarification_used,
            resolved=row.clarification_resolved,
            question=row.clarification_question,
            response=row.user_clarification_response,
            asked_by=row.asked_by,
            request_key=row.request_key,
            resolution=row.resolution,
            fallback_counts=dict(row.fallback_counts or {}),
            default=(row.question_object or {}).get("default"),
            timed_out=bool(row.timed_out),
        )

    @staticmethod
    def _merge_state(conn: Connection, session_id: str, update_: Mapping[str, Any]) -> None:
        """Write only the fields the gate named: an update never erases another field."""
        columns = {
            "used": "clarification_used",
            "resolved": "clarification_resolved",
            "question": "clarification_question",
            "response": "user_clarification_response",
            "note": "answer_note",
        }
        values = {columns.get(name, name): value for name, value in update_.items()}
        if values:
            conn.execute(update(_T).where(_T.c.session_id == session_id).values(**values))

    # -- sessions -----------------------------------------------------------------------

    def session(self, session_id: str) -> Any:
        """The session's row (raises SessionNotFound)."""
        with self._read() as conn:
            return self._session(conn, session_id)

    def gate_state(self, session_id: str) -> gate.GateState:
        with self._read() as conn:
            self._session(conn, session_id)
            return self._gate_state(conn, session_id)

    # -- reads ---------------------------------------------------------------------

    def view(self, session_id: str) -> dict[str, Any]:
        """The contract's session object."""
        with self._read() as conn:
            row = self._session(conn, session_id)
            state = conn.execute(select(_T).where(_T.c.session_id == session_id)).one()
            ledger = conn.execute(
                select(_E)
                .where(_E.c.session_id == session_id, _E.c.kind == "assumption")
                .order_by(_E.c.id)
            )
            return session_view(row, state, [event_view(dict(r._mapping)) for r in ledger])

    def pending(self, session_id: str) -> tuple[Any, dict[str, Any] | None]:
        """The session's row and its open question (None if none waits), in one read."""
        with self._read() as conn:
            row = self._session(conn, session_id)
            state = conn.execute(select(_T).where(_T.c.session_id == session_id)).one()
            return row, session_view(row, state)["pending_question"]

    def list_views(
        self, status: str | None = None, *, limit: int | None = None, after: str | None = None
    ) -> list[dict[str, Any]]:
        """Sessions, newest first: at most `limit`, those listed after session `after`.

        The SQL is the fast read path's too (orchestrator.reads), typed here per column."""
        from sqlalchemy import text

        from orchestrator.reads import CURSOR_SQL, LISTED, page_sql

        columns = [{"s": _S, "t": _T}[table].c[column] for table, column, _ in LISTED]
        params: dict[str, Any] = {"status": status, "limit": limit}
        with self._read() as conn:
            if after is not None:
                cursor = conn.execute(text(CURSOR_SQL), {"after": after}).first()
                if cursor is None:
                    raise SessionNotFound(after)
                params.update(after_created=cursor[0], after_id=after)
            sql = page_sql(
                status=status is not None, after=after is not None, limit=limit is not None
            )
            rows = conn.execute(text(sql).columns(*columns), params)
            return [session_view(row, row) for row in rows]

    def reply_counts(self, session_id: str) -> dict[str, int]:
        """How many replies each agent has recorded (scripted backends resume from this)."""
        with self._read() as conn:
            rows = conn.execute(
                select(_E.c.agent).where(_E.c.session_id == session_id, _E.c.kind == "agent_reply")
            )
            counts: dict[str, int] = {}
            for (agent,) in rows:
                counts[agent] = counts.get(agent, 0) + 1
            return counts

    def events(self, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
        with self._read() as conn:
            self._session(conn, session_id)
            rows = conn.execute(
                select(_E)
                .where(and_(_E.c.session_id == session_id, _E.c.id > after))
                .order_by(_E.c.id)
            )
            return [event_view(dict(row._mapping)) for row in rows]
