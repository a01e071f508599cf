"""The store's operations. Each public method is one short transaction.

Ordering rules the engine relies on:
- an answer is accepted when `resolve` commits; the graph resumes only after that, so a
  crash afterwards never loses it (the store wins over LangGraph's checkpoint);
- every write made from inside a graph node is keyed (`events.key` is unique per session),
  so a node that LangGraph re-runs writes nothing twice;
- a session is driven only by the process whose claim (owner, lease) is on its row.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, insert, select, update

from orchestrator import gate
from orchestrator.errors import SessionBusy, SessionNotFound, SessionNotWaiting
from orchestrator.store.owner import Owner, is_dead
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T
from orchestrator.store.views import event_view, session_view

__all__ = ["Store", "FINAL_STATUSES", "STATUSES"]

STATUSES = ("running", "paused", "completed", "failed", "cancelled")
FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})

Listener = Callable[[str, dict[str, Any]], None]  # (session_id, event)


def _now() -> datetime:
    return datetime.now(UTC)


class Store:
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
            "created_at": _now(),
        }
        # INSERT ... ON CONFLICT (session_id, key) DO NOTHING: one statement, and any other
        # uniqueness violation (the one-question index) still raises.
        added = conn.execute(
            self._insert_event()
            .values(**values)
            .on_conflict_do_nothing(index_elements=["session_id", "key"])
        )
        if added.rowcount != 1:
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
        )

    @staticmethod
    def _merge_state(conn: Connection, session_id: str, update_: Mapping[str, Any]) -> None:
        """Write only the fields the gate named: an update never erases another field."""
        columns = {
            "used": "clarification_used",
            "resolved": "clarification_resolved",
            "question": "clarification_question",
            "response": "user_clarification_response",
        }
        values = {columns.get(name, name): value for name, value in update_.items()}
        if values:
            conn.execute(update(_T).where(_T.c.session_id == session_id).values(**values))

    # -- sessions -----------------------------------------------------------------------

    def create_session(
        self, task: str, *, agents: dict[str, Any], settings: dict[str, Any], owner: Owner
    ) -> str:
        session_id = uuid.uuid4().hex[:12]
        now = _now()
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

    def session(self, session_id: str) -> Any:
        """The session's row (raises SessionNotFound)."""
        with self._read() as conn:
            return self._session(conn, session_id)

    def gate_state(self, session_id: str) -> gate.GateState:
        with self._read() as conn:
            self._session(conn, session_id)
            return self._gate_state(conn, session_id)

    def _take(self, conn: Connection, row: Any, owner: Owner) -> None:
        """Claim `row` for `owner` inside the caller's transaction, or raise."""
        if row.status == "running" and row.owner == owner.id:
            conn.execute(
                update(_S)
                .where(_S.c.id == row.id)
                .values(lease_expires_at=owner.lease_until(), updated_at=_now())
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
                updated_at=_now(),
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
        """Accept the user's answer, decline or cancel: claim and record in one transaction."""
        with self._write(durable=True) as conn:
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
            self._merge_state(conn, session_id, {**decision.update, "resolved_at": _now()})
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
                .values(lease_expires_at=0.0, updated_at=_now())
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
        values: dict[str, Any] = {"status": status, "updated_at": _now()}
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

    def recorded_reply(
        self, session_id: str, key: str
    ) -> tuple[dict[str, Any] | None, gate.GateState]:
        """The reply stored under `key` (None if the call was never made), and the state."""
        with self._read() as conn:
            payload = conn.execute(
                select(_E.c.payload).where(_E.c.session_id == session_id, _E.c.key == key)
            ).scalar()
            state = self._gate_state(conn, session_id)
            return (None if payload is None else dict(payload["reply"])), state

    def record_reply(
        self, session_id: str, key: str, agent: str, reply: dict[str, Any]
    ) -> dict[str, Any]:
        """Store an agent's reply under `key`; if one is stored already, return that one."""
        with self._write() as conn:
            if self._event(conn, session_id, "agent_reply", agent=agent, key=key, reply=reply):
                return reply
            stored = conn.execute(
                select(_E.c.payload).where(_E.c.session_id == session_id, _E.c.key == key)
            ).scalar_one()
            return dict(stored["reply"])

    def gate_ask(
        self,
        session_id: str,
        ask: gate.Ask,
        question: dict[str, Any],
        *,
        max_fallbacks: int,
    ) -> gate.Decision:
        """Case A, B or D for one NEEDS_CLARIFICATION reply: read, decide, write, one txn.

        A final decision (rerun, fallback, fail) is stored under `gate:<reply key>` and
        returned as stored when the node is re-run, so counters move once per reply.
        """
        final_key = f"gate:{ask.key}"
        with self._write() as conn:
            stored = conn.execute(
                select(_E.c.payload).where(_E.c.session_id == session_id, _E.c.key == final_key)
            ).scalar()
            if stored is not None:
                return _decision_from_payload(stored)
            state = self._gate_state(conn, session_id)
            decision = gate.decide(state, ask, max_fallbacks=max_fallbacks)
            if isinstance(decision, gate.Surface):
                self._surface(conn, session_id, ask, question, decision)
            elif isinstance(decision, gate.Wait):
                if ask.key != state.request_key:
                    self._event(
                        conn,
                        session_id,
                        "question_held",
                        agent=ask.agent,
                        key=f"held:{ask.key}",
                        question=ask.question,
                        note="the session's one question is already open; this one waits",
                    )
            else:
                self._apply_final(conn, session_id, final_key, decision)
            return decision

    def _surface(
        self,
        conn: Connection,
        session_id: str,
        ask: gate.Ask,
        question: dict[str, Any],
        decision: gate.Surface,
    ) -> None:
        """Case A. Compare-and-set on `clarification_used`, and a unique index on the
        `question_surfaced` event: the database refuses a second question on its own."""
        spent = conn.execute(
            update(_T)
            .where(_T.c.session_id == session_id, _T.c.clarification_used.is_(False))
            .values(
                clarification_used=True,
                clarification_resolved=False,
                clarification_question=decision.update["question"],
                asked_by=decision.update["asked_by"],
                request_key=decision.update["request_key"],
                question_object=question,
                asked_at=_now(),
                questions_surfaced=_T.c.questions_surfaced + 1,
            )
        )
        if spent.rowcount != 1:
            raise RuntimeError(f"session {session_id}: the question was already spent")
        if not self._event(
            conn,
            session_id,
            "question_surfaced",
            agent=ask.agent,
            key=f"surface:{ask.key}",
            question=question,
        ):
            raise RuntimeError(f"session {session_id}: a question was already surfaced")

    def _apply_final(
        self, conn: Connection, session_id: str, key: str, decision: gate.Decision
    ) -> None:
        if isinstance(decision, gate.Fallback):
            self._merge_state(conn, session_id, decision.update)
            conn.execute(
                update(_T)
                .where(_T.c.session_id == session_id)
                .values(fallbacks_injected=_T.c.fallbacks_injected + 1)
            )
            self._event(
                conn,
                session_id,
                "fallback",
                agent=decision.agent,
                key=key,
                decision="fallback",
                asker=decision.agent,
                why=decision.why,
                message=decision.message,
            )
        elif isinstance(decision, gate.Rerun):
            self._event(
                conn,
                session_id,
                "answer_delivered",
                agent=decision.agent,
                key=key,
                decision="rerun",
                asker=decision.agent,
                question=decision.question,
                response=decision.response,
            )
        elif isinstance(decision, gate.Fail):
            self._event(
                conn,
                session_id,
                "gate_failed",
                agent=decision.agent,
                key=key,
                decision="fail",
                asker=decision.agent,
                reason=decision.reason,
            )

    def set_tasks(self, session_id: str, round_: int, tasks: list[dict[str, Any]]) -> None:
        with self._write() as conn:
            conn.execute(
                update(_S)
                .where(_S.c.id == session_id)
                .values(tasks=tasks, round=round_, updated_at=_now())
            )

    def update_task(self, session_id: str, round_: int, number: int, **fields: Any) -> None:
        with self._write() as conn:
            row = self._session(conn, session_id, lock=True)
            if row.round != round_:
                return
            tasks = [{**task, **fields} if task["number"] == number else task for task in row.tasks]
            conn.execute(
                update(_S).where(_S.c.id == session_id).values(tasks=tasks, updated_at=_now())
            )

    # -- reads --------------------------------------------------------------------------

    def view(self, session_id: str) -> dict[str, Any]:
        """The contract's session object."""
        with self._read() as conn:
            row = self._session(conn, session_id)
            state = conn.execute(select(_T).where(_T.c.session_id == session_id)).one()
            return session_view(row, state)

    def list_views(self, status: str | None = None) -> list[dict[str, Any]]:
        query = select(_S, _T).join(_T, _T.c.session_id == _S.c.id)
        if status is not None:
            query = query.where(_S.c.status == status)
        query = query.order_by(_S.c.created_at.desc(), _S.c.id.desc())
        with self._read() as conn:
            return [session_view(row, row) for row in conn.execute(query)]

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


def _decision_from_payload(payload: Mapping[str, Any]) -> gate.Decision:
    kind = payload["decision"]
    if kind == "rerun":
        return gate.Rerun(payload["asker"], payload["question"], payload["response"])
    if kind == "fallback":
        return gate.Fallback(payload["asker"], payload["why"], {}, payload["message"])
    return gate.Fail(payload["asker"], payload["reason"])
