"""PostgreSQL specifics: connection handling, timeouts, the pool across a server restart, and
LangGraph's PostgreSQL checkpointer. (The session, process, migration and example tests run
on PostgreSQL too, through the `backends` marker: see tests/conftest.py.)"""

from __future__ import annotations

import json
import uuid

import pgcluster
import pytest
from conftest import EXAMPLES, cli
from dbcheck import query
from sqlalchemy import text

from orchestrator.errors import ConfigError, DatabaseUnavailable
from orchestrator.store import Store, open_engine
from orchestrator.store._pg import STATEMENT_TIMEOUT_MS

pytestmark = pytest.mark.backends("postgresql")


def refused(*args: str, db: str) -> dict[str, object]:
    """Run a command that must fail with exit 2 and one clear message, no traceback."""
    result = cli(*args, "--json", db=db)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    assert document["exit_code"] == 2
    return document


def test_a_server_that_is_down_gets_a_retry_hint(pg_cluster: pgcluster.Cluster) -> None:
    port = pgcluster.free_port()  # nothing listens there
    error = refused("list", db=f"postgresql+psycopg://postgres@127.0.0.1:{port}/x")["error"]
    assert f"127.0.0.1:{port}" in error
    assert "Is the server running" in error and "try again" in error


def test_a_unix_socket_with_no_server_behind_it_gets_the_retry_hint(tmp_path: object) -> None:
    error = refused("status", "abc", db=f"postgresql://postgres@/x?host={tmp_path}")["error"]
    assert "Is the server running" in error


def test_an_unknown_host_is_bad_input() -> None:
    error = refused("list", db="postgresql+psycopg://u@no-such-host.invalid/db")["error"]
    assert "unknown host 'no-such-host.invalid'" in error


@pytest.mark.parametrize(
    "url", ["postgresql+psycopg://u@h:notaport/db", "postgresql+nodriver://u@h/db"]
)
def test_a_malformed_url_is_bad_input(url: str) -> None:
    error = refused("list", db=url)["error"]
    assert "postgresql+psycopg://" in error  # says what was expected


def test_a_wrong_password_is_bad_input_and_not_echoed(pg_cluster: pgcluster.Cluster) -> None:
    role = f"r{uuid.uuid4().hex[:8]}"
    pg_cluster.admin(f"CREATE ROLE {role} LOGIN PASSWORD 'right-one'")
    try:
        url = f"postgresql+psycopg://{role}:wrong-one@127.0.0.1:{pg_cluster.port}/postgres"
        error = refused("list", db=url)["error"]
        assert "password authentication failed" in error
        assert "wrong-one" not in error
        assert "check the user, password" in error
    finally:
        pg_cluster.admin(f"DROP ROLE {role}")


def test_a_missing_database_is_bad_input(pg_cluster: pgcluster.Cluster) -> None:
    error = refused("list", db=pg_cluster.url("no_such_database"))["error"]
    assert 'database "no_such_database" does not exist' in error


def test_plain_postgresql_urls_use_the_driver_we_ship(db_url: str) -> None:
    for scheme in ("postgresql://", "postgres://"):
        plain = scheme + db_url.split("://", 1)[1]
        listed = cli("list", "--json", db=plain)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == []


def test_statements_time_out_and_the_url_may_say_otherwise(db_url: str) -> None:
    engine = open_engine(db_url)
    with engine.connect() as conn:
        shown = conn.execute(text("SHOW statement_timeout")).scalar()
    assert shown == f"{STATEMENT_TIMEOUT_MS // 1000 // 60}min"
    engine.dispose()
    own = open_engine(db_url + "?options=-c%20statement_timeout%3D1500")
    with own.connect() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar() == "1500ms"
    own.dispose()


def test_the_pool_survives_a_server_restart(db_url: str, pg_cluster: pgcluster.Cluster) -> None:
    store = Store.open(db_url)
    with store.db.read() as a, store.db.read() as b:  # two connections, both kept idle
        assert a.scalar("SELECT pg_backend_pid()") != b.scalar("SELECT pg_backend_pid()")
    assert store.list_views() == []
    pg_cluster.restart()  # every pooled connection is now dead
    assert store.list_views() == []  # seen dead (the server's goodbye), replaced: no error
    with store.db.read() as a, store.db.read() as b:
        assert a.scalar("SELECT 1") == b.scalar("SELECT 1") == 1
    pg_cluster.stop_server()
    try:
        with pytest.raises(DatabaseUnavailable, match="Is the server running.*try again"):
            store.list_views()  # at once: not the busy pool's 30 s wait
    finally:
        pg_cluster.start_server()
    assert store.list_views() == []
    store.close()


def test_connection_errors_are_config_errors(pg_cluster: pgcluster.Cluster) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        open_engine(pg_cluster.url("nope"))


def test_checkpoints_are_in_postgresql(db_url: str) -> None:
    # A paused session's checkpoint is there; an ended session keeps none (nothing reads it).
    result = cli("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--json", db=db_url)
    assert result.returncode == 3, result.stderr
    session_id = json.loads(result.stdout)["session_id"]
    sql = "SELECT count(*) FROM checkpoints WHERE thread_id = ?"
    ((count,),) = query(db_url, sql, session_id)
    assert count > 0
    done = cli("resume", session_id, "--answer", "Weekly", "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert query(db_url, sql, session_id) == [(0,)]


def test_an_idle_connection_is_checked_on_any_descriptor_without_a_round_trip() -> None:
    """The pool's idle check reads the socket's state: quiet, spoken to, hung up; also on
    a descriptor above 1023, which select() refuses (a long-running server reaches them)."""
    import os
    import resource
    import socket

    from orchestrator.store.pg_db import _readable

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1100:
        if hard != resource.RLIM_INFINITY and hard < 1100:
            pytest.skip("this machine allows fewer than 1100 open files")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1100, hard))
    ours, server = socket.socketpair()
    high = os.dup2(ours.fileno(), 1050)
    try:
        assert not _readable(high)  # quiet: lent without a ping
        server.sendall(b"N")  # the server said something (a notice, its goodbye)
        assert _readable(high)
        ours.recv(1)
        assert not _readable(high)
        server.close()  # hung up
        assert _readable(high)
    finally:
        os.close(high)
        ours.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _holding_the_setup_lock(url: str) -> object:
    """A connection of another process's kind that holds LangGraph's set-up lock (as a
    process frozen inside the set-up would): a session-level advisory lock."""
    import psycopg

    from orchestrator.store.db import MIGRATION_LOCK_KEY

    conn = psycopg.connect(
        url.replace("postgresql+psycopg://", "postgresql://", 1),
        autocommit=True,
        application_name="frozen-setup",
    )
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY + 1,))
    return conn


def test_a_held_setup_lock_never_blocks_a_database_already_set_up(db_url: str) -> None:
    """Issue 50 (1): a process frozen inside the checkpoint set-up held its lock, and every
    other process's first drive on the database polled for it forever. A database whose
    tables are set up needs no lock: `run` goes on (a hang is the 60 s timeout here)."""
    holder = _holding_the_setup_lock(db_url)
    try:
        result = cli(
            "run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--json",
            db=db_url, timeout=60,
        )  # fmt: skip
    finally:
        holder.close()  # type: ignore[attr-defined]
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout)["status"] == "paused"


def test_a_held_setup_lock_on_a_new_database_times_out_naming_its_holder(
    empty_db_url: str,
) -> None:
    """A database's very first use waits for the holder at most $ORCHESTRATOR_SETUP_WAIT
    seconds, then exits 2 naming the holder's backend pid and how to end it, creating no
    session; with the lock let go the same command runs."""
    import os

    holder = _holding_the_setup_lock(empty_db_url)
    try:
        pid = holder.info.backend_pid  # type: ignore[attr-defined]
        scenario = str(EXAMPLES / "pause-and-resume.yaml")
        env = {**os.environ, "ORCHESTRATOR_SETUP_WAIT": "1"}
        result = cli("run", "--script", scenario, "--json", db=empty_db_url, env=env, timeout=60)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        document = json.loads(result.stdout)
        assert f"backend pid {pid} (frozen-setup)" in document["error"]
        assert f"pg_terminate_backend({pid})" in document["error"]
        assert "ORCHESTRATOR_SETUP_WAIT" in document["error"]
        assert "session_id" not in document
        assert query(empty_db_url, "SELECT count(*) FROM sessions") == [(0,)]
    finally:
        holder.close()  # type: ignore[attr-defined]
    again = cli("run", "--script", scenario, "--json", db=empty_db_url, timeout=60)
    assert again.returncode == 3, again.stderr


def test_a_failure_on_a_live_connection_is_told_by_its_sqlstate() -> None:
    """Once connected, psycopg's error class says what failed, whatever its words: the
    server going away is a retry hint, a refusal is bad input, a statement's own failure
    (a timeout) is neither; a message that only reads like one decides nothing."""
    from psycopg import OperationalError, errors

    from orchestrator.store._pg import connection_error, is_connection_failure

    url = "postgresql+psycopg://app:secret@db.internal:5432/orchestrator"
    for gone in (errors.AdminShutdown, errors.CrashShutdown, errors.CannotConnectNow):
        error = connection_error(gone("bye"), url)
        assert isinstance(error, DatabaseUnavailable) and "Is the server running" in str(error)
        assert is_connection_failure(gone("bye"))
    assert is_connection_failure(errors.ConnectionTimeout("took too long"))
    for refusal in (errors.InvalidPassword, errors.InvalidCatalogName, errors.TooManyConnections):
        error = connection_error(refusal("no"), url)
        assert type(error) is ConfigError and "refused the connection" in str(error)
        assert "secret" not in str(error)
    timed_out = errors.QueryCanceled("canceling statement: connection refused")
    assert not is_connection_failure(timed_out)  # its words do not make it one
    assert not is_connection_failure(errors.UndefinedTable("server closed the connection"))
    # A connection attempt carries no SQLSTATE (libpq keeps the server's code): only
    # then libpq's words say which it was.
    assert is_connection_failure(OperationalError("connection failed: Connection refused"))
    assert not is_connection_failure(OperationalError("something else"))


def test_a_connection_cut_under_a_statement_is_a_retry_hint(db_url: str) -> None:
    """The server ends this connection (57P01, as a shutdown does): the statement's error
    is the user's retry hint, and the next read gets a fresh connection."""
    store = Store.open(db_url)
    with store.db.read() as tx:
        pid = tx.scalar("SELECT pg_backend_pid()")
        with store.db.read() as other:
            other.scalar("SELECT pg_terminate_backend(:pid)", {"pid": pid})
        with pytest.raises(DatabaseUnavailable, match="try again"):
            tx.scalar("SELECT 1")
    assert store.list_views() == []
    store.close()


def test_a_connection_the_pool_does_not_give_in_time_is_made_here(
    db_url: str, pg_cluster: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg_pool lets a client wait its whole timeout while it reconnects in the
    background; ours connects itself when the pool gave nothing in time and is not full:
    that connection is lent, then closed (not kept), and its failure is the user's
    message. A pool that is full says it is busy."""
    import psycopg_pool

    from orchestrator.store.pg_db import MAX_OPEN, _Pool

    store = Store.open(db_url)
    pool = store.db.pool

    def nothing_in_time(self: object, timeout: float | None = None) -> object:
        raise psycopg_pool.PoolTimeout("nothing in time")

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "getconn", nothing_in_time)
    with store.db.read() as tx:
        assert tx.scalar("SELECT 1") == 1
        lent = tx.cursor.connection
    assert lent.closed  # made for this block only
    pg_cluster.stop_server()
    try:
        with pytest.raises(DatabaseUnavailable, match="Is the server running"):
            store.list_views()
    finally:
        pg_cluster.start_server()
    full = {**pool.get_stats(), "pool_size": MAX_OPEN}
    monkeypatch.setattr(_Pool, "get_stats", lambda self: full)
    with pytest.raises(DatabaseUnavailable, match=f"all {MAX_OPEN} .* stayed busy"):
        pool.getconn(timeout=0.01)
    monkeypatch.undo()
    assert store.list_views() == []
    store.close()
