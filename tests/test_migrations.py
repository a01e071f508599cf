"""Migrations: applied from empty, at the head the code expects, and matching the models."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from dbcheck import query

from orchestrator.store.connect import MIGRATIONS
from orchestrator.store.db import open_engine
from orchestrator.store.schema import HEAD_REVISION, OUR_TABLES, metadata


def test_head_revision_constant_matches_the_migrations() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION


@pytest.mark.backends()
def test_empty_database_is_migrated_to_head_and_matches_the_models(empty_db_url: str) -> None:
    url = empty_db_url
    engine = open_engine(url)
    with engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        assert version == HEAD_REVISION
        context = MigrationContext.configure(
            conn,
            opts={
                "include_object": lambda obj, name, type_, *_: (
                    type_ != "table" or name in OUR_TABLES
                )
            },
        )
        assert compare_metadata(context, metadata) == []


def test_langgraph_tables_share_the_file_but_not_the_migrations(tmp_path: Path) -> None:
    from orchestrator.runtime.checkpoints import checkpointer

    url = f"sqlite:///{tmp_path / 'both.db'}"
    open_engine(url)
    with checkpointer(url):
        pass
    with sqlite3.connect(tmp_path / "both.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert {"sessions", "orchestrator_state", "events", "checkpoints"} <= tables
    assert mode == "wal"
    # opening again takes the fast path: no migration runs, nothing is dropped
    from unittest import mock

    with mock.patch("orchestrator.store.db.upgrade") as upgrade:
        open_engine(url)
    upgrade.assert_not_called()
    with sqlite3.connect(tmp_path / "both.db") as conn:
        again = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert again == tables


@pytest.mark.backends()
def test_concurrent_first_use_of_a_fresh_file(empty_db_url: str, tmp_path: Path) -> None:
    """Three processes creating the same database at once all end up at head."""
    import subprocess
    import sys

    import forkserver

    url = empty_db_url
    script = tmp_path / "first_use.py"
    script.write_text(
        "import sys\nfrom orchestrator.store.db import open_engine\n"
        "from orchestrator.runtime.checkpoints import checkpointer\n"
        "open_engine(sys.argv[1])\nwith checkpointer(sys.argv[1]):\n    pass\n"
    )  # our migrations and LangGraph's, as every first command on a new database runs them
    procs = [
        forkserver.Popen([sys.executable, str(script), url], stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert query(url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


def _switch_to_wal(paths: list[str], barrier: Any, errors: Any) -> None:
    from orchestrator.store.sql import configure_sqlite

    for path in paths:  # all the processes on each file, released together
        barrier.wait()
        try:
            conn = sqlite3.connect(path)
            configure_sqlite(conn)
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            conn.close()
            errors.put(None if mode == "wal" else f"journal mode {mode}")
        except sqlite3.Error as exc:
            errors.put(repr(exc))


def test_connections_switching_a_fresh_file_to_wal_at_once_all_succeed(tmp_path: Path) -> None:
    """SQLite refuses a switch to WAL at once ("database is locked", no busy handler) while
    another connection is switching the same new file: seen in CI as a failed first
    command. 8 processes released together on each of 25 fresh files (before the retry:
    27 of 800 such connections failed)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    paths = [str(tmp_path / f"fresh{trial}.db") for trial in range(25)]
    barrier, queue = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_switch_to_wal, args=(paths, barrier, queue)) for _ in range(8)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=60) for _ in range(8 * len(paths))]
    for proc in procs:
        proc.join(timeout=60)
    assert [r for r in results if r] == []
    assert len(results) == 200


@pytest.mark.backends()
def test_the_database_itself_refuses_a_second_question(db_url: str) -> None:
    from orchestrator.agents.scripted import ScriptedBackend
    from sqlalchemy.exc import IntegrityError

    from orchestrator.runtime.engine import Engine
    from orchestrator.store import Store
    from orchestrator.store.schema import events

    url = db_url
    engine = open_engine(url)
    store = Store(engine)
    backend = ScriptedBackend(
        {"pm": [{"status": "NEEDS_CLARIFICATION", "question": "q?"}]}, replies_so_far={}
    )
    session_id = Engine(store, url).start("t", backend, {})
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            events.insert().values(
                session_id=session_id,
                key="surface:forged",
                kind="question_surfaced",
                payload={},
                created_at=datetime.now(UTC),
            )
        )


@pytest.mark.backends()
def test_a_database_at_0001_with_a_paused_session_upgrades_and_resumes(empty_db_url: str) -> None:
    """An older database is migrated on first use and its sessions go on working."""
    from sqlalchemy import create_engine, inspect, text

    from orchestrator.domain.question import UserReply
    from orchestrator.runtime.engine import Engine
    from orchestrator.store import Store
    from orchestrator.store.db import upgrade

    url = empty_db_url
    old = create_engine(url)
    upgrade(old, "0001")
    with old.begin() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).one() == ("0001",)
        columns = {c["name"] for c in inspect(conn).get_columns("orchestrator_state")}
        assert "deadline" not in columns
        conn.execute(
            text(
                "INSERT INTO sessions VALUES ('old1', 'legacy task', 'paused', '2026-01-01', "
                "'2026-01-01', NULL, NULL, NULL, NULL, :agents, '{}', '[]', 0, 0, NULL, NULL)"
            ),
            {"agents": '{"kind": "script", "agents": {"pm": [{"status": "COMPLETE", '
             '"summary": "ok"}]}}'},
        )  # fmt: skip
        conn.execute(
            text(
                "INSERT INTO orchestrator_state (session_id, clarification_used, "
                "clarification_resolved, clarification_question, question_object, asked_by, "
                "request_key, questions_surfaced, fallbacks_injected, fallback_counts) VALUES "
                "('old1', true, false, 'Old question?', '{\"question\": \"Old question?\"}', "
                "'pm', 'pm#1', 1, 0, '{}')"
            )
        )
    old.dispose()
    store = Store.open(url)  # migrates to head
    view = store.view("old1")
    assert view["pending_question"]["question"] == "Old question?"
    assert (
        view["pending_question"]["deadline"] is None and not view["pending_question"]["timed_out"]
    )
    assert store.expire("old1") is None  # no deadline: nothing to expire
    Engine(store, url).resume("old1", UserReply(text="yes"))
    assert store.view("old1")["orchestrator_state"]["user_clarification_response"] == "yes"


def test_upgrading_to_0003_keeps_every_sessions_state_and_events(tmp_path: Path) -> None:
    """0003 adds columns to `sessions` in place: recreating the table would cascade-delete
    each session's state and events through their foreign keys."""
    from sqlalchemy import create_engine

    from orchestrator.store import Store
    from orchestrator.store.db import upgrade

    url = f"sqlite:///{tmp_path / 'at0002.db'}"
    upgrade(create_engine(url), "0002")
    with sqlite3.connect(tmp_path / "at0002.db") as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(
            "INSERT INTO sessions VALUES ('s2', 'task', 'paused', '2026-01-01', '2026-01-01', "
            "NULL, NULL, NULL, NULL, '{}', '{}', '[]', 0, 0, NULL, NULL)"
        )
        conn.execute(
            "INSERT INTO orchestrator_state (session_id, clarification_used, "
            "clarification_resolved, questions_surfaced, fallbacks_injected, fallback_counts) "
            "VALUES ('s2', 0, 0, 0, 0, '{}')"
        )
        conn.execute(
            "INSERT INTO events (session_id, key, kind, payload, created_at) VALUES "
            "('s2', 'k', 'session_started', '{}', '2026-01-01')"
        )
    store = Store.open(url)
    assert [e["kind"] for e in store.events("s2")] == ["session_started"]
    view = store.view("s2")
    assert view["status"] == "paused" and view["stalled"] is False and view["owner"] is None
    assert store.session("s2").claim_generation == 0


@pytest.mark.backends()
def test_answer_links_made_before_0008_keep_working_and_are_hashed(empty_db_url: str) -> None:
    """0008 moves answer links to answer_links, stored hashed: a link sent before the
    upgrade still opens its question, and its token is nowhere in the database."""
    import hashlib

    from alembic import command
    from sqlalchemy import create_engine, text

    from orchestrator.api import Sessions
    from tests.web_support import paused

    url = empty_db_url
    with Sessions(url) as sessions:
        sid = paused(sessions)
    old = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with old.begin() as conn:  # back to 0007, where links were kept in clear
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
    token = "sent-yesterday-" + "x" * 30
    with old.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO question_links (token, session_id, created_at, used_at)"
                " VALUES (:token, :sid, '2026-11-22 10:00:00', NULL)"
            ),
            {"token": token, "sid": sid},
        )
    old.dispose()
    with Sessions(url) as sessions:  # migrates to head
        assert sessions.inbox.session_of_link(token) == (sid, False)
    assert query(url, "SELECT token_hash FROM answer_links") == [
        (hashlib.sha256(token.encode()).hexdigest(),)
    ]
    assert token not in repr(query(url, "SELECT * FROM answer_links"))


@pytest.mark.backends()
def test_stalled_sessions_before_0011_get_the_kind_their_message_shows(empty_db_url: str) -> None:
    """0011 stores a stalled session's error kind (the queue reads it instead of the
    message's words); rows written before it get the kind their message shows."""
    from alembic import command
    from sqlalchemy import create_engine, text

    from orchestrator.api import Sessions
    from tests.web_support import paused

    url = empty_db_url
    messages = {
        "budget exceeded: pm made 12 model calls in one turn": "budget_exceeded",
        "interrupted (Ctrl+C) while the agents worked; every finished agent call is kept": (
            "interrupted"
        ),
        "session x is not run here: /repo is on host-b; run it on from the machine that has it": (
            "repository_elsewhere"
        ),
        "the model call for pm failed: APIConnectionError": "agent_call_failed",
    }
    with Sessions(url) as sessions:
        ids = [paused(sessions) for _ in range(len(messages) + 1)]  # the last: no error
    old = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with old.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0010")
    with old.begin() as conn:
        for session_id, message in zip(ids, messages, strict=False):
            conn.execute(
                text("UPDATE sessions SET last_error = :message WHERE id = :id"),
                {"message": message, "id": session_id},
            )
    old.dispose()
    with Sessions(url) as sessions:  # migrates to head, at the first read
        assert sessions.status(ids[0])["status"] == "paused"
    kinds = dict(query(url, "SELECT id, last_error_kind FROM sessions"))
    assert kinds == {**dict(zip(ids, messages.values(), strict=False)), ids[-1]: None}
