"""What makes the store fast without trading anything: list pages off an index, and an fsync
only where a power loss could lose what nothing can replay (a person's answer)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Reply, Sessions
from orchestrator.errors import SessionNotFound
from orchestrator.store.views import page_sql
from tests.conftest import EXAMPLES


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Sessions, list[str]]]:
    """Sessions whose store connection (the checkpointer's too) records every statement."""
    statements: list[str] = []
    sessions = Sessions(str(tmp_path / "traced.db"))
    sessions._opened.db.conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    yield sessions, statements
    sessions.close()


def test_a_scripted_answer_is_not_fsynced(traced: tuple[Sessions, list[str]]) -> None:
    sessions, statements = traced
    doc = sessions.start_scenario(EXAMPLES / "answered-question.yaml")
    assert doc["status"] == "completed" and doc["orchestrator_state"]["clarification_resolved"]
    assert any("INSERT INTO events" in s for s in statements)  # the trace saw the run
    assert not [s for s in statements if "synchronous = FULL" in s]


def test_a_persons_answer_is_fsynced_before_the_call_returns(
    traced: tuple[Sessions, list[str]],
) -> None:
    sessions, statements = traced
    paused = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
    assert not [s for s in statements if "synchronous = FULL" in s]
    sessions.answer(paused, Reply(text="Weekly"))
    # the answer's transaction commits at synchronous=FULL, then the connection is NORMAL again
    (full,) = [i for i, s in enumerate(statements) if "synchronous = FULL" in s]
    back = next(i for i, s in enumerate(statements) if "synchronous = NORMAL" in s and i > full)
    assert "COMMIT" in [s.strip().upper() for s in statements[full:back]]
    assert any("INSERT INTO events" in s for s in statements[full:back])


def test_a_new_session_reads_no_checkpoint_and_no_late_answer_before_it_asks(
    traced: tuple[Sessions, list[str]],
) -> None:
    """A session its drive just created has no checkpoint until the drive writes one, and
    no late answer before its gate's first decision: neither is read before then. Both are
    read after: the run on from the question reads its checkpoint, and once a question was
    asked a late answer may come."""
    sessions, statements = traced
    doc = sessions.start_scenario(EXAMPLES / "answered-question.yaml")
    assert doc["status"] == "completed" and doc["questions_surfaced"] == 1

    def where(fragment: str, *, select: bool = False) -> list[int]:
        return [
            i
            for i, s in enumerate(statements)
            if fragment in s and (not select or s.lstrip().upper().startswith("SELECT"))
        ]

    first_checkpoint = where("INTO checkpoints")[0]
    asked = where("SET clarification_used = 1")[0]
    checkpoint_reads = where("FROM checkpoints", select=True)
    late_reads = where("SELECT question_object FROM orchestrator_state")
    assert checkpoint_reads and checkpoint_reads[0] > first_checkpoint
    assert late_reads and late_reads[0] > asked


@pytest.mark.backends()
def test_list_pages_through_the_api(db_url: str) -> None:
    """One SQL text for every backend (orchestrator.store.views.page_sql)."""
    with Sessions(db_url) as sessions:
        ids = [
            sessions.start_scenario(EXAMPLES / name)["session_id"]
            for name in ("pause-and-resume.yaml", "answered-question.yaml") * 3
        ]
        newest_first = ids[::-1]
        assert [s["session_id"] for s in sessions.list()] == newest_first
        first = sessions.list(limit=4)
        rest = sessions.list(limit=4, after=first[-1]["session_id"])
        assert [s["session_id"] for s in first + rest] == newest_first
        paused = sessions.list("paused", limit=2)
        assert [s["session_id"] for s in paused] == newest_first[1::2][:2]
        assert [
            s["session_id"] for s in sessions.list("paused", after=paused[-1]["session_id"])
        ] == (newest_first[1::2][2:])
        with pytest.raises(SessionNotFound):
            sessions.list(after="nope")


@pytest.mark.parametrize(
    "status, after", [(False, False), (True, False), (False, True), (True, True)]
)
def test_a_page_is_read_off_an_index_without_sorting(
    tmp_path: Path, status: bool, after: bool
) -> None:
    with Sessions(str(tmp_path / "plan.db")) as sessions:
        sessions._opened  # noqa: B018  (creates and migrates the file)
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN " + page_sql(status=status, after=after, limit=True),
            {"status": "paused", "after_created": "x", "after_id": "y", "limit": 51},
        ).fetchall()
    details = " | ".join(row[-1] for row in plan)
    assert "TEMP B-TREE" not in details, details
    assert "USING INDEX ix_sessions_" in details, details


# -- the SQLite store: one connection, shared with the checkpointer, fenced writes -------


@pytest.mark.backends()
def test_the_checkpointer_shares_the_store_connection_and_is_fenced_in_its_transaction(
    db_url: str,
) -> None:
    """A checkpoint write runs the fence first (SQLite: inside its BEGIN IMMEDIATE on the
    store's connection; PostgreSQL: a read on the store's pool, which LangGraph's
    PostgresSaver is handed as it is): a driver that lost its claim raises ClaimLost and
    leaves no checkpoint row behind."""
    from orchestrator.errors import ClaimLost
    from orchestrator.runtime.checkpoints import checkpointer
    from orchestrator.store import Owner

    with Sessions(db_url) as sessions:
        store = sessions._opened
        writes = "writes" if store.db.dialect == "sqlite" else "checkpoint_writes"
        paused = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
        first = store.claim(paused, Owner())

        def fence(tx: object) -> None:
            store.fence_in(tx, first)  # type: ignore[arg-type]

        def rows() -> tuple[int, int]:
            with store.db.read() as tx:
                row = tx.first(
                    "SELECT (SELECT COUNT(*) FROM checkpoints WHERE thread_id = :t) AS c,"
                    f" (SELECT COUNT(*) FROM {writes} WHERE thread_id = :t) AS w",
                    {"t": paused},
                )
            assert row is not None
            return row.c, row.w

        with checkpointer(store.url or "", store.db, fence) as saver:
            assert store.shares(saver)
            if store.db.dialect == "sqlite":
                assert saver.conn is store.db.conn  # type: ignore[attr-defined]
            config = {"configurable": {"thread_id": paused, "checkpoint_ns": ""}}
            from langgraph.checkpoint.base import empty_checkpoint

            before = rows()
            saver.put(config, empty_checkpoint(), {}, {})  # ours: written
            assert rows() == (before[0] + 1, before[1])
            store.abandon(first)
            store.claim(paused, Owner())  # taken over
            with pytest.raises(ClaimLost):
                saver.put(config, empty_checkpoint(), {}, {})
            with pytest.raises(ClaimLost):
                saver.put_writes(
                    {"configurable": {**config["configurable"], "checkpoint_id": "x"}},
                    [("a", 1)],
                    "task",
                )
            assert rows() == (before[0] + 1, before[1])  # nothing after the loss


@pytest.mark.backends("postgresql")
def test_sessions_on_postgresql_reuse_the_stores_connections(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store and LangGraph's checkpointer borrow from one pool (psycopg_pool's):
    running sessions opens no connection but the pool's, the pool opens one only when
    every one it has is in use (so never more than were ever asked for at once), and what
    it keeps open is no more than that.

    Counted is what was asked for, not what was lent: a second request (the lease's
    heartbeat, from its own thread) grows the pool while it waits, and may then be handed
    the first request's connection as it comes back, before the new one is ready."""
    import psycopg

    from orchestrator.store.pg_db import _Pool

    lock = threading.Lock()
    asked = {"now": 0, "most": 0}  # asked for and not yet given back
    made: list[bool] = []  # one per connection opened: was the pool opening it?
    getconn, putconn = _Pool.getconn, _Pool.putconn

    def counted(connect: Any) -> Any:
        def counted_connect(*args: Any, **kwargs: Any) -> Any:
            # The pool connects in its own worker threads (named after it).
            made.append(threading.current_thread().name.startswith("orchestrator"))
            return connect(*args, **kwargs)

        return counted_connect

    def counted_getconn(self: _Pool, timeout: float | None = None) -> Any:
        with lock:
            asked["now"] += 1
            asked["most"] = max(asked["most"], asked["now"])
        try:
            return getconn(self, timeout)
        except BaseException:
            with lock:
                asked["now"] -= 1
            raise

    def counted_putconn(self: _Pool, conn: Any) -> None:
        putconn(self, conn)  # idle again before it is counted back (never too low)
        with lock:
            asked["now"] -= 1

    with Sessions(db_url) as sessions:
        # Warm: LangGraph's tables are checked once per database per process, on a
        # connection of that check's own.
        sessions.start_scenario(EXAMPLES / "answered-question.yaml")
        pool = sessions._opened.db.pool
        kept = pool.get_stats()["pool_size"]  # what the pool holds for the next session
        # Both doors to a new connection (psycopg.connect is bound apart, at import).
        monkeypatch.setattr(psycopg.Connection, "connect", counted(psycopg.Connection.connect))
        monkeypatch.setattr(psycopg, "connect", counted(psycopg.connect))
        monkeypatch.setattr(_Pool, "getconn", counted_getconn)
        monkeypatch.setattr(_Pool, "putconn", counted_putconn)
        for _ in range(8):
            assert sessions.start_scenario(EXAMPLES / "answered-question.yaml")["status"] == (
                "completed"
            )
        # A connection of its own per drive (the bug this guards), or one the pool failed
        # to keep, opens more than the demand beyond what the pool already held.
        assert all(made), f"{made.count(False)} connections opened outside the pool"
        assert len(made) <= max(0, asked["most"] - kept), (
            f"{len(made)} opened; {kept} were kept and at most {asked['most']} asked for at once"
        )
        assert asked["now"] == 0  # every one given back
        with sessions._opened.db.read() as tx:
            count = tx.scalar(
                "SELECT COUNT(*) FROM pg_stat_activity"
                " WHERE application_name = 'orchestrator' AND datname = current_database()"
            )
        assert 1 <= count <= max(kept, asked["most"])


@pytest.mark.backends()
def test_a_turn_recorded_in_one_statement_is_replayed_not_written_twice(db_url: str) -> None:
    """A turn alone (no plan, no task, no usage) is the fence and the insert in one
    statement: stored once, returned as stored the second time, and refused with
    ClaimLost, nothing written, once another process has taken the session over."""
    from orchestrator.errors import ClaimLost
    from orchestrator.store import Owner

    with Sessions(db_url) as sessions:
        store = sessions._opened
        sid = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
        claim = store.claim(sid, Owner())
        turn = {"reply": {"status": "COMPLETE", "summary": "first"}}
        assert store.record_reply(claim, "pm#7", "pm", turn) == turn
        again = {"reply": {"status": "COMPLETE", "summary": "second"}}
        assert store.record_reply(claim, "pm#7", "pm", again) == turn  # as stored
        assert store.recorded_turns(sid)["pm#7"] == turn
        assert [e for e in store.events(sid) if e["kind"] == "agent_reply"][-1]["reply"] == (
            turn["reply"]
        )
        store.abandon(claim)
        store.claim(sid, Owner())  # taken over
        late = {"reply": {"status": "COMPLETE", "summary": "after the loss"}}
        with pytest.raises(ClaimLost):
            store.record_reply(claim, "pm#8", "pm", late)
        assert "pm#8" not in store.recorded_turns(sid)
