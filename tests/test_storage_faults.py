"""Storage that stops cooperating (issue 21): a full disk, a read-only filesystem, a file
whose header says more than it holds while its WAL has the rest. Real faults on a small
tmpfs (mounting needs root: the test skips with that reason where it is not permitted).
Each asserts the message, exit 2 with one JSON document, whether the answer was kept, and
that the session finishes once the fault is gone."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import forkserver
import pytest

from tests import pgcluster
from tests.conftest import EXAMPLES, ROOT, argv, cli, invoke
from tests.dbcheck import sqlite_fault

SCENARIO = str(EXAMPLES / "pause-and-resume.yaml")


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@contextmanager
def _tmpfs(where: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of our own at `where`, unmounted afterwards."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the CI runs these tests as root)")
    mounted = _mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        _mount("-o", "remount,rw", str(where))
        subprocess.run(["umount", "-l", str(where)], check=True)  # -l: a cached handle


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of our own, unmounted afterwards."""
    with _tmpfs(tmp_path / "fs") as where:
        yield where


def _paused(db: str) -> str:
    # A process of its own: nothing of this one keeps the file open (a remount needs that).
    result = cli("run", "--script", SCENARIO, "--json", db=db)
    assert result.returncode == 3, result.stderr
    return str(json.loads(result.stdout)["session_id"])


def _status(db: str, session_id: str) -> dict[str, object]:
    # A process of its own, as a user's `status` is: SQLite shares a file's state among the
    # connections of one process, so a connection this process opened while the filesystem
    # was read-only (and left to the garbage collector) kept the test's own later commands
    # from writing once it was writable again.
    result = cli("status", session_id, "--json", db=db)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def _fill(where: Path) -> Path:
    """Fill the filesystem to the last byte; returns the filler to delete."""
    filler = where / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_disk_full_resume_answer_exit_2_and_finishes_once_space_returns(small_fs: Path) -> None:
    db = f"sqlite:///{small_fs / 'orchestrator.db'}"
    session_id = _paused(db)
    filler = _fill(small_fs)
    result = cli("resume", session_id, "--answer", "Weekly", "--json", db=db)
    assert result.returncode == 2, result.stderr
    document = json.loads(result.stdout)  # one JSON document, no traceback
    assert "Traceback" not in result.stderr
    assert document["exit_code"] == 2
    assert document["session_id"] == session_id
    assert "disk holding the database is full" in document["error"]
    assert "free some space" in document["error"]
    kept = document.get("answer_kept")
    assert kept in (True, False)
    # `status` still reads it, and says what the message said about the answer.
    view = _status(db, session_id)
    answered = view["status"] != "paused"
    assert answered == kept
    filler.unlink()
    # Space is back: no "truncated, restore from a backup"; the session finishes.
    if kept:
        done = invoke("resume", session_id, "--json", db=db)
    else:
        done = invoke("resume", session_id, "--answer", "Weekly", "--json", db=db)
    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout)
    assert final["status"] == "completed"
    assert final["orchestrator_state"]["user_clarification_response"] == "Weekly"


def test_read_only_filesystem_resume_answer_exit_2_answer_not_kept(small_fs: Path) -> None:
    db = f"sqlite:///{small_fs / 'orchestrator.db'}"
    session_id = _paused(db)
    remounted = _mount("-o", "remount,ro", str(small_fs))
    assert remounted.returncode == 0, remounted.stderr
    result = cli("resume", session_id, "--answer", "Weekly", "--json", db=db)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    assert document["session_id"] == session_id
    assert document["answer_kept"] is False
    assert "cannot be written" in document["error"] or "cannot be opened" in document["error"]
    assert "Your answer was not recorded" in document["error"]
    assert _status(db, session_id)["status"] == "paused"  # reads still work
    assert _mount("-o", "remount,rw", str(small_fs)).returncode == 0
    done = invoke("resume", session_id, "--answer", "Weekly", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


def test_a_database_closed_cleanly_is_read_on_a_read_only_filesystem(small_fs: Path) -> None:
    """A WAL file whose last connection closed has no -wal and -shm beside it; SQLite
    cannot open it on a read-only filesystem without them. `status`, `list` and `log`
    still answer there (the file read as immutable: nothing can change it), on the fast
    path and the full one; a write says why it cannot be made."""
    db = f"sqlite:///{small_fs / 'orchestrator.db'}"
    session_id = _paused(db)
    last = sqlite3.connect(small_fs / "orchestrator.db")
    last.execute("SELECT count(*) FROM sessions").fetchall()
    last.close()  # the last connection: the -wal is checkpointed, it and the -shm go
    assert sorted(p.name for p in small_fs.iterdir()) == ["orchestrator.db"]
    assert _mount("-o", "remount,ro", str(small_fs)).returncode == 0
    assert _status(db, session_id)["status"] == "paused"  # the fast path (a process)
    shown = invoke("status", session_id, "--json", db=db)  # the full path
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "paused"
    listed = cli("list", "--json", db=db)
    assert listed.returncode == 0, listed.stderr
    assert [s["session_id"] for s in json.loads(listed.stdout)] == [session_id]
    assert cli("log", session_id, db=db).returncode == 0
    refused = cli("resume", session_id, "--answer", "Weekly", "--json", db=db)
    assert refused.returncode == 2, refused.stderr
    assert "cannot be written" in json.loads(refused.stdout)["error"]


def test_read_only_filesystem_reconcile_exit_2_and_reconciles_once_writable(
    small_fs: Path,
) -> None:
    """`resume --reconcile` meets a storage fault as `resume` does: exit 2, a message,
    no traceback, nothing reopened; once writable, the round runs."""
    import yaml

    db = f"sqlite:///{small_fs / 'orchestrator.db'}"
    data = yaml.safe_load((EXAMPLES / "late-answer.yaml").read_text())
    del data["late_answer"]  # declined, then ended: the late answer is given below
    script = small_fs.parent / "declined.yaml"
    script.write_text(yaml.safe_dump(data))
    ran = cli("run", "--script", str(script), "--json", db=db)
    assert ran.returncode == 0, ran.stderr
    session_id = str(json.loads(ran.stdout)["session_id"])
    late = cli("resume", session_id, "--choice", "Redis", "--json", db=db)
    assert late.returncode == 0 and json.loads(late.stdout)["needs_review"], late.stderr
    assert _mount("-o", "remount,ro", str(small_fs)).returncode == 0
    result = cli("resume", session_id, "--reconcile", "--json", db=db)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    assert document["session_id"] == session_id
    assert "cannot be written" in document["error"] or "cannot be opened" in document["error"]
    # the command that goes on names the --db this one was given (not the default's)
    go_on = f"then `orchestrator resume {session_id} --db {db} --reconcile` goes on"
    assert go_on in document["error"]
    assert "run the command again" not in document["error"]  # that would re-answer
    assert _status(db, session_id)["needs_review"] is True  # nothing reopened
    assert _mount("-o", "remount,rw", str(small_fs)).returncode == 0
    done = invoke("resume", session_id, "--reconcile", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["late_answer"]["reconciled"] is not None


def test_a_fault_after_the_reconciliation_reopened_names_a_plain_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reopening committed, then the disk filled during the round: the session runs
    again, so the hint is `resume ID` (a second `--reconcile` would be refused)."""
    import yaml

    from orchestrator import Reply, Sessions
    from orchestrator.errors import StorageFailed
    from orchestrator.runtime.engine import Engine

    data = yaml.safe_load((EXAMPLES / "late-answer.yaml").read_text())
    del data["late_answer"]
    script = tmp_path / "declined.yaml"
    script.write_text(yaml.safe_dump(data))
    db = f"sqlite:///{tmp_path / 'o.db'}"
    with Sessions(db) as sessions:
        session_id = str(sessions.start_scenario(str(script))["session_id"])
        assert sessions.resume(session_id, Reply(choices=("Redis",)))["needs_review"]

        def full(*_args: object, **_kwargs: object) -> None:
            raise sqlite_fault(sqlite3.SQLITE_FULL)

        monkeypatch.setattr(Engine, "_drive", full)
        with pytest.raises(StorageFailed) as failed:
            sessions.reconcile(session_id)
        assert sessions.status(session_id)["status"] == "running"  # reopened
    message = failed.value.message
    assert f"then `orchestrator resume {session_id} --db {db}` goes on" in message, message


def _fault_under(
    tmp_path: Path,
    where: tuple[object, str],
    error: Exception,
    act: Callable[[Any, str], object],
) -> tuple[Any, str, str, dict[str, Any]]:
    """Start the pausing example in a database of its own, make `where` (an object and an
    attribute) raise `error`, and run `act(sessions, session_id)`, which must raise
    StorageFailed. Returns that error, the database URL, the session id and the session
    as read once the fault is gone."""
    from orchestrator import Sessions
    from orchestrator.errors import StorageFailed

    db = f"sqlite:///{tmp_path / 'o.db'}"
    with Sessions(db) as sessions:
        session_id = str(sessions.start_scenario(SCENARIO)["session_id"])

        def failing(*_args: object, **_kwargs: object) -> None:
            raise error

        with pytest.MonkeyPatch.context() as patch, pytest.raises(StorageFailed) as failed:
            patch.setattr(*where, failing)  # (its own patcher: the isolated HOME stays)
            act(sessions, session_id)
        return failed.value, db, session_id, dict(sessions.status(session_id))


def test_a_fault_with_a_malformed_orchestrator_db_still_says_whether_the_answer_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage fault's message compares this database with the default one: a
    malformed ORCHESTRATOR_DB (not in use: the URL was given) must not replace it with an
    error about that variable."""
    from orchestrator import Reply
    from orchestrator.store import gate_tx

    def answer(sessions: Any, session_id: str) -> None:
        monkeypatch.setenv("ORCHESTRATOR_DB", "relative.db")
        sessions.answer(session_id, Reply(text="Weekly"))

    full = sqlite_fault(sqlite3.SQLITE_FULL)
    failed, db, session_id, after = _fault_under(tmp_path, (gate_tx, "add_event"), full, answer)
    assert after["pending_question"] is not None  # not kept
    message = failed.message
    assert "Your answer was not recorded" in message, message
    assert f"`orchestrator status {session_id} --db {db}`" in message, message
    assert failed.answer_kept is False


def test_a_fault_under_any_door_is_the_same_storage_failed_at_every_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every door goes through `Sessions`, which raises each storage fault as StorageFailed:
    the Python API, the web (503) and MCP (`internal`) say the same words for the same
    fault, name the cause and what to do, and log no traceback; a read of the inbox
    through `Sessions.inbox` alike. (Before, MCP said "failed unexpectedly
    (OperationalError); see the server log" with a traceback.)"""
    import logging

    import anyio
    from fastapi.testclient import TestClient

    from orchestrator import Sessions
    from orchestrator.errors import DatabaseUnavailable, StorageFailed
    from orchestrator.mcp_server import build_server
    from orchestrator.mcp_server.envelope import from_exception
    from orchestrator.store import inbox_paging, views
    from orchestrator.web import WebConfig, create_app
    from tests.mcp_client import call, in_memory
    from tests.web_support import AUTH, BASE, TOKEN

    db = f"sqlite:///{tmp_path / 'o.db'}"
    with Sessions(db) as sessions:
        session_id = str(sessions.start_scenario(SCENARIO)["session_id"])
    said = "the disk holding the database failed a read or write (SQLite: disk I/O error)"
    server = build_server(db.removeprefix("sqlite:///"), page=None)  # (it reads at start)

    def failing(*_args: object, **_kwargs: object) -> None:
        raise sqlite_fault(sqlite3.SQLITE_IOERR)

    for name in ("status", "events", "list_views"):
        monkeypatch.setattr(views, name, failing)
    monkeypatch.setattr(inbox_paging, "inbox_page", failing)
    caplog.set_level(logging.WARNING)

    with Sessions(db) as sessions:
        for read in (sessions.status, sessions.log):
            with pytest.raises(StorageFailed) as failed:
                read(session_id)
            assert failed.value.message.startswith(said) and failed.value.session_id == session_id
        with pytest.raises(StorageFailed, match="disk I/O error"):
            sessions.list()
        with pytest.raises(StorageFailed, match="disk I/O error"):
            sessions.inbox.page(limit=10)

    web = TestClient(
        create_app(WebConfig(db=db, token=TOKEN, run_on=False)), base_url=BASE, headers=AUTH
    )
    for path in (
        f"/api/sessions/{session_id}",
        f"/api/sessions/{session_id}/events",
        "/api/sessions",
    ):
        got = web.get(path)
        assert got.status_code == 503, got.text
        assert got.json()["error"].startswith(said)
    inbox = web.get("/", headers={"Accept": "text/html"})  # the inbox page, as a browser asks
    assert inbox.status_code == 503 and said in inbox.text, inbox.text

    async def ask_mcp() -> list[dict[str, object]]:
        async with in_memory(server, None, ("form",)) as session:
            return [
                await call(session, tool, {"session_id": session_id})
                for tool in ("session_status", "session_log")
            ]

    for doc in anyio.run(ask_mcp):
        assert doc["ok"] is False
        assert doc["error"]["code"] == "internal"  # type: ignore[index]
        assert doc["error"]["message"].startswith(said)  # type: ignore[index]
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    # A server that cannot be reached is not the caller's input either (it was invalid_input).
    away = from_exception("session_status", DatabaseUnavailable("the server went away"))
    assert json.loads(away.content[0].text)["error"]["code"] == "internal"  # type: ignore[union-attr]


def test_a_damaged_file_after_the_answer_committed_says_the_answer_was_kept(tmp_path: Path) -> None:
    """`resume` with an answer: the answer commits, then the file reads as damaged. The
    error says so, and that the answer is kept (it was `answer_kept=None` and silent)."""
    from orchestrator import Reply
    from orchestrator.runtime.engine import Engine

    failed, _db, _sid, after = _fault_under(
        tmp_path,
        (Engine, "_drive"),
        sqlite_fault(sqlite3.SQLITE_NOTADB),
        lambda sessions, session_id: sessions.resume(session_id, Reply(text="Weekly")),
    )
    assert after["orchestrator_state"]["clarification_resolved"]
    assert failed.answer_kept is True
    assert failed.message.startswith("the database file is damaged"), failed.message
    assert "Your answer was kept" in failed.message


def test_a_fault_reading_back_a_committed_cancel_says_it_was_recorded(tmp_path: Path) -> None:
    """`cancel` commits, then reading the session back fails: the error says the cancel
    was recorded (a "try again" would be answered "not waiting")."""
    from orchestrator.store import views

    failed, db, sid, after = _fault_under(
        tmp_path,
        (views, "status"),
        sqlite_fault(sqlite3.SQLITE_IOERR),
        lambda sessions, session_id: sessions.cancel(session_id),
    )
    assert after["status"] == "cancelled"
    message = failed.message
    assert message.startswith("the disk holding the database failed a read or write"), message
    assert "The cancel was recorded" in message and "try again" not in message, message
    # The command it names reads this database, not the default one.
    assert f"`orchestrator status {sid} --db {db}`" in message, message


def test_a_fault_after_run_created_its_session_names_it_and_resume(tmp_path: Path) -> None:
    """The session exists once a fault meets its run: the error names it and `resume`
    (which finishes it), not "try again", which would start a second session and pay for
    its agent calls again."""
    from orchestrator import Sessions
    from orchestrator.errors import StorageFailed
    from orchestrator.store import Store

    db = f"sqlite:///{tmp_path / 'o.db'}"
    with Sessions(db) as sessions:

        def failing(*_args: object, **_kwargs: object) -> None:
            raise sqlite_fault(sqlite3.SQLITE_IOERR)

        with pytest.MonkeyPatch.context() as patch, pytest.raises(StorageFailed) as failed:
            patch.setattr(Store, "release", failing)
            sessions.start_scenario(EXAMPLES / "answered-question.yaml")
        (created,) = sessions.list()
        sid = created["session_id"]
        assert failed.value.session_id == sid
        message = failed.value.message
        assert f"`orchestrator resume {sid} --db {db}` goes on" in message, message
        assert "try again" not in message, message
        assert sessions.resume(sid)["status"] == "completed"


def test_a_damaged_file_is_a_503_at_the_inbox_its_links_and_the_json_api(tmp_path: Path) -> None:
    """A real damaged file (its header overwritten), met where the web first opens the
    store through `Sessions.inbox` (the inbox page, an answer link) as much as through a
    method: 503 with the cause, never a 500 with a traceback."""
    from fastapi.testclient import TestClient

    from orchestrator import Sessions
    from orchestrator.web import WebConfig, create_app
    from tests.web_support import AUTH, BASE, TOKEN

    path = tmp_path / "o.db"
    db = f"sqlite:///{path}"
    with Sessions(db) as sessions:
        session_id = str(sessions.start_scenario(SCENARIO)["session_id"])
    header = bytearray(path.read_bytes())
    header[:16] = b"not a database!!"
    path.write_bytes(bytes(header))
    for path_ in ("/", "/q/SOME-LINK-TOKEN", f"/api/sessions/{session_id}"):
        # A server of its own each time: the first request opens the store.
        app = create_app(WebConfig(db=db, token=TOKEN, run_on=False))
        web = TestClient(app, base_url=BASE, headers=AUTH, raise_server_exceptions=False)
        got = web.get(path_, headers={"Accept": "text/html"})
        assert got.status_code == 503, (path_, got.status_code, got.text[:300])
        assert "damaged or not a SQLite database" in got.text


def test_a_fault_while_an_mcp_question_waits_ends_the_call_with_the_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiting `ask_user` call renews its claim in a task of its own: a storage fault
    there ends the call with the fault's message (`internal`), not "failed unexpectedly
    (ExceptionGroup)"."""
    import anyio

    from orchestrator.mcp_server import build_server
    from orchestrator.store.core import Store
    from tests.mcp_client import Person, call, in_memory

    server = build_server(str(tmp_path / "o.db"), page=None)

    def failing(*_args: object, **_kwargs: object) -> None:
        raise sqlite_fault(sqlite3.SQLITE_IOERR)

    monkeypatch.setattr(Store, "heartbeat", failing)  # the first renewal, half a second in

    async def ask() -> dict[str, object]:
        async with in_memory(server, Person([("silent",)]), ("form",)) as session:
            return await call(session, "ask_user", {"question": "Which?", "timeout_seconds": 20})

    doc = anyio.run(ask)
    assert doc["ok"] is False, doc
    assert doc["error"] == {  # type: ignore[comparison-overlap]
        "code": "internal",
        "message": "the disk holding the database failed a read or write (SQLite: disk I/O "
        "error); check the disk and its free space, then try again",
    }


def test_a_short_file_whose_wal_holds_the_rest_is_not_called_truncated(tmp_path: Path) -> None:
    """The header's page count is ahead of the file (the pages are in the -wal): SQLite
    opens it, so the check must not advise restoring it from a backup."""
    import shutil

    from orchestrator.api.database import locate

    first = tmp_path / "first.db"
    session_id = _paused(f"sqlite:///{first}")
    writer = sqlite3.connect(first)  # open: its writes stay in the -wal file
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    page = writer.execute("PRAGMA page_size").fetchone()[0]
    # pages beyond the end of the file, in the -wal only (as after a checkpoint cut short)
    writer.execute("CREATE TABLE filler (b BLOB)")
    writer.execute("INSERT INTO filler VALUES (zeroblob(?))", (page * 4,))
    writer.commit()
    path = tmp_path / "orchestrator.db"  # the state a checkpoint cut short leaves
    for suffix in ("", "-wal", "-shm"):
        shutil.copyfile(f"{first}{suffix}", f"{path}{suffix}")
    writer.close()
    size = path.stat().st_size
    header = bytearray(path.read_bytes()[:100])
    page_size = int.from_bytes(header[16:18], "big")
    header[28:32] = (size // page_size + 3).to_bytes(4, "big")  # says more than it holds
    with path.open("r+b") as file:
        file.write(header)
    db = f"sqlite:///{path}"
    locate(db)  # raised "truncated ... restore it from a backup" before issue 21
    view = _status(db, session_id)
    assert view["status"] == "paused"


def test_a_truly_truncated_file_is_still_called_truncated(tmp_path: Path) -> None:
    from orchestrator.api.database import locate
    from orchestrator.errors import ConfigError

    path = tmp_path / "orchestrator.db"
    _paused(f"sqlite:///{path}")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match="truncated .* restore it from a backup"):
        locate(f"sqlite:///{path}")


def test_cancelling_a_paused_session_removes_its_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "orchestrator.db"
    db = f"sqlite:///{path}"
    session_id = _paused(db)

    def checkpoints() -> int:
        with sqlite3.connect(path) as conn:
            return int(
                conn.execute(
                    "SELECT count(*) FROM checkpoints WHERE thread_id = ?", (session_id,)
                ).fetchone()[0]
            )

    assert checkpoints() > 0
    result = invoke("cancel", session_id, "--json", db=db)
    assert result.returncode in (0, 4), result.stderr
    assert _status(db, session_id)["status"] == "cancelled"
    assert checkpoints() == 0


def _stopped(process: subprocess.Popen[str]) -> bool:
    """The process stopped itself (SIGSTOP at its stop point), or ended. Every thread: the
    main one shows the stop first, while the others (a lease's heartbeat) may still run."""
    try:
        tasks = Path(f"/proc/{process.pid}/task")
        states = [
            (task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks.iterdir()
        ]
    except FileNotFoundError:
        return True
    return all(state in ("T", "t") for state in states) or process.poll() is not None


def test_postgresql_stopped_after_the_answer_says_it_was_kept(
    pg_cluster: pgcluster.Cluster, tmp_path: Path
) -> None:
    """Issue 21 (5): the server stops after `resume --answer` committed the answer; the
    message said "nothing was changed". Now: exit 2, one JSON document, answer kept, and a
    plain `resume` finishes the session once the server is back."""
    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        process = _stop_at(
            "answer_committed", "resume", session_id, "--answer", "Weekly", "--json", db=db
        )
        out, err = _outage(pg_cluster, process)
        assert process.returncode == 2, err
        assert "Traceback" not in err
        document = json.loads(out)
        assert document["exit_code"] == 2
        assert document["session_id"] == session_id
        assert document["answer_kept"] is True
        assert "PostgreSQL" in document["error"]
        assert "Your answer was kept" in document["error"]
        assert "nothing was changed" not in document["error"]
        assert ".." not in document["error"]
        view = _status(db, session_id)
        assert view["status"] == "running"  # the answer is stored; no question open
        done = cli("resume", session_id, "--json", db=db)
        assert done.returncode == 0, done.stderr
        final = json.loads(done.stdout)
        assert final["status"] == "completed"
        assert final["orchestrator_state"]["user_clarification_response"] == "Weekly"


def _stop_at(point: str, *args: str, db: str, **env: str) -> subprocess.Popen[str]:
    process = forkserver.Popen(
        argv(*args, db=db),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "ORCHESTRATOR_STOP_AT": point, **env},
        cwd=ROOT,
    )
    while not _stopped(process):
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()
    return process


def _outage(
    pg_cluster: pgcluster.Cluster, process: subprocess.Popen[str], *, down_for: float | None = None
) -> tuple[str, str]:
    """Stop the server, let the stopped `process` go on, and start the server again:
    after the process has ended (`down_for` None: it meets only the outage), or after
    `down_for` seconds (it meets the server coming back). Returns its stdout and stderr;
    a process still alive at the end is killed."""
    try:
        pg_cluster.stop_server()
        try:
            os.kill(process.pid, signal.SIGCONT)
            if down_for is None:
                return process.communicate(timeout=120)
            time.sleep(down_for)
        finally:
            pg_cluster.start_server()
        return process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_turn_finished_while_postgresql_is_away_is_never_made_again(
    pg_cluster: pgcluster.Cluster,
) -> None:
    """Issue 21 (4): the server stops between the end of pm's call and its record. The
    driver keeps the turn (patience 0: it gives up at once, exit 2, saying so); the next
    `resume` records the kept turn instead of calling pm again: a repeated call would
    reach the crash point `reply_received:pm#2` and be killed."""
    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        process = _stop_at(
            "reply_received:pm#2",
            "resume",
            session_id,
            "--answer",
            "Weekly",
            "--json",
            db=db,
            ORCHESTRATOR_RECORD_PATIENCE="0",
        )
        out, err = _outage(pg_cluster, process)
        assert process.returncode == 2, err
        assert "Traceback" not in err
        document = json.loads(out)
        assert document["session_id"] == session_id
        assert document["answer_kept"] is True
        assert "pm (pm#2)" in document["error"] and "kept in" in document["error"]
        done = cli(
            "resume",
            session_id,
            "--json",
            db=db,
            env={**os.environ, "ORCHESTRATOR_CRASH_AT": "reply_received:pm#2"},
        )
        assert done.returncode == 0, done.stderr  # -9 had pm been called again
        final = json.loads(done.stdout)
        assert final["status"] == "completed"
        log = json.loads(cli("log", session_id, "--json", db=db).stdout)
        pm_turns = [e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]
        assert len(pm_turns) == 3  # asked, planned (the kept one, once), complete


def test_a_turn_finished_on_a_full_disk_is_never_made_again(small_fs: Path) -> None:
    """The SQLite side of the same fault: the disk fills between the end of pm's call and
    its record; the next `resume` records the kept turn instead of calling pm again."""
    db = f"sqlite:///{small_fs / 'orchestrator.db'}"
    session_id = _paused(db)
    process = _stop_at(
        "reply_received:pm#2",
        "resume",
        session_id,
        "--answer",
        "Weekly",
        "--json",
        db=db,
        ORCHESTRATOR_RECORD_PATIENCE="0",
    )
    try:
        filler = _fill(small_fs)
        os.kill(process.pid, signal.SIGCONT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 2, err
    assert "Traceback" not in err
    document = json.loads(out)
    assert document["session_id"] == session_id
    assert document["answer_kept"] is True
    assert "disk holding the database is full" in document["error"]
    assert "pm (pm#2)" in document["error"] and "kept in" in document["error"]
    filler.unlink()
    done = cli(
        "resume",
        session_id,
        "--json",
        db=db,
        env={**os.environ, "ORCHESTRATOR_CRASH_AT": "reply_received:pm#2"},
    )
    assert done.returncode == 0, done.stderr  # -9 had pm been called again
    assert json.loads(done.stdout)["status"] == "completed"
    log = json.loads(cli("log", session_id, "--json", db=db).stdout)
    assert len([e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]) == 3


def test_a_disk_full_under_the_kept_turns_too_never_pays_an_agent_twice(
    small_fs: Path, tmp_path: Path
) -> None:
    """Issue 47 (1): the disks under both the database and the user's data folder fill
    while an agent's call ends. `keep()` raised a raw `OSError: [Errno 28]` (a traceback,
    exit 1), nothing kept the turn, and the next `resume` called the agent again. The
    kept-turns folder's reserve is given back for the turn: exit 2 saying where it is kept,
    and the next `resume` records it instead of calling pm again. (Two filesystems: on one
    the reserve given back would also let the database write, as it should.)"""
    from orchestrator.runtime.kept_turns import RESERVE_BYTES

    with _tmpfs(tmp_path / "data") as data:
        db = f"sqlite:///{small_fs / 'orchestrator.db'}"
        session_id = _paused(db)
        env = {"XDG_DATA_HOME": str(data), "ORCHESTRATOR_RECORD_PATIENCE": "0"}
        process = _stop_at(
            "reply_received:pm#2", "resume", session_id, "--answer", "Weekly", "--json",
            db=db, **env,
        )  # fmt: skip
        reserve = data / "orchestrator" / "kept-turns" / "reserve"
        try:
            assert reserve.stat().st_size == RESERVE_BYTES  # made before the agent ran
            fillers = [_fill(small_fs), _fill(data)]
            os.kill(process.pid, signal.SIGCONT)
            out, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 2, err
        assert "Traceback" not in err
        document = json.loads(out)
        assert document["session_id"] == session_id
        assert document["answer_kept"] is True
        assert "disk holding the database is full" in document["error"]
        assert "pm (pm#2)" in document["error"] and f"kept in {data}" in document["error"]
        assert not reserve.exists()  # given back for the kept turn
        for filler in fillers:
            filler.unlink()
        done = cli(
            "resume",
            session_id,
            "--json",
            db=db,
            env={**os.environ, **env, "ORCHESTRATOR_CRASH_AT": "reply_received:pm#2"},
        )
        assert done.returncode == 0, done.stderr  # -9 had pm been called again
        assert json.loads(done.stdout)["status"] == "completed"
        log = json.loads(cli("log", session_id, "--json", db=db).stdout)
        assert len([e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]) == 3
        assert reserve.stat().st_size == RESERVE_BYTES  # made again once there was room


def test_a_turn_that_can_be_neither_recorded_nor_kept_is_held_until_one_works(
    small_fs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With no reserve left and the disk full, the turn cannot be kept either: the driver
    says so plainly and holds it, past its patience, instead of raising (which would leave
    a resume to call the agent again); once the database takes it, it is recorded."""
    import logging

    from orchestrator.runtime import kept_turns

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(small_fs / "data"))
        patch.setenv(kept_turns.PATIENCE_ENV, "0")
        kept = kept_turns.KeptTurns("sqlite:///x.db", "s1")
        kept_turns.reserve_path().unlink()  # spent by an earlier kept turn
        filler = _fill(small_fs)
        attempts: list[int] = []

        def write() -> dict[str, object]:
            attempts.append(1)
            if len(attempts) < 4:
                raise sqlite_fault(sqlite3.SQLITE_FULL)
            return {"reply": {"status": "DONE"}}

        def classify(exc: BaseException) -> str | None:
            return "the disk is full" if isinstance(exc, sqlite3.OperationalError) else None

        with caplog.at_level(logging.WARNING, logger="orchestrator.runtime"):
            stored = kept.record("developer-2#1", "developer-2", {"reply": {}}, write, classify)
        filler.unlink()
    assert stored == {"reply": {"status": "DONE"}}
    assert len(attempts) == 4  # tried on after its patience (0 s) ended, not raised
    said = caplog.text
    assert "neither recorded nor kept" in said and "holds it" in said
    assert kept.get("developer-2#1") is None and not list(kept.folder.glob("*.tmp"))


def test_the_driver_records_its_kept_turn_when_postgresql_returns(
    pg_cluster: pgcluster.Cluster,
) -> None:
    """With its patience (the default), the driver waits for the server instead of giving
    up: it records the kept turn once the server is back and the session completes in the
    same command."""
    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        process = _stop_at(
            "reply_received:pm#2", "resume", session_id, "--answer", "Weekly", "--json", db=db
        )
        out, err = _outage(pg_cluster, process, down_for=0.0)
        assert process.returncode == 0, err
        assert json.loads(out)["status"] == "completed"
        log = json.loads(cli("log", session_id, "--json", db=db).stdout)
        assert len([e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]) == 3


def test_an_outage_that_outlasts_the_lease_says_the_answer_was_kept_and_names_resume(
    pg_cluster: pgcluster.Cluster,
) -> None:
    """Issue 50 (2): the server stays away longer than the lease (1 s here), so the driver's
    heartbeat fails and it stops at its next agent call. It said "no longer driven by this
    process ... See `orchestrator status`", with no `answer_kept`; now it says the answer
    was kept and names `resume`, which goes on and calls pm#2 once."""
    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        process = _stop_at(
            "reply_received:pm#2",
            "resume",
            session_id,
            "--answer",
            "Weekly",
            "--json",
            db=db,
            ORCHESTRATOR_LEASE_SECONDS="1",
        )
        out, err = _outage(pg_cluster, process, down_for=2.5)
        assert process.returncode == 2, err
        assert "Traceback" not in err
        document = json.loads(out)
        assert document["session_id"] == session_id
        assert document["answer_kept"] is True
        assert "no longer driven by this process" in document["error"]
        assert "Your answer was kept" in document["error"]
        assert f"`orchestrator resume {session_id} --db " in document["error"]
        assert "See `orchestrator status" not in document["error"]
        done = cli(
            "resume",
            session_id,
            "--json",
            db=db,
            env={**os.environ, "ORCHESTRATOR_CRASH_AT": "reply_received:pm#2"},
        )
        assert done.returncode == 0, done.stderr  # -9 had pm been called again
        assert json.loads(done.stdout)["status"] == "completed"
        log = json.loads(cli("log", session_id, "--json", db=db).stdout)
        assert len([e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]) == 3


def test_a_worker_records_its_kept_turn_when_postgresql_restarts(
    pg_cluster: pgcluster.Cluster,
) -> None:
    """The same fault under `orchestrator worker`: the answer is committed and handed off
    (`resume --no-run`), the worker's pm call ends, the server stops before the record
    and comes back; the worker records the turn it kept and finishes the session, and pm
    was called once for that turn: a second call would reach the stop point again and
    leave the worker stopped (the communicate below times out)."""
    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        handed = cli("resume", session_id, "--answer", "Weekly", "--no-run", "--json", db=db)
        assert handed.returncode == 0, handed.stderr
        process = _stop_at("reply_received:pm#2", "worker", "--exit-when-idle", "3", db=db)
        _, err = _outage(pg_cluster, process, down_for=2.0)  # it meets the outage, turn in hand
        assert process.returncode == 0, err
        assert "Traceback" not in err
        view = _status(db, session_id)
        assert view["status"] == "completed", view
        log = json.loads(cli("log", session_id, "--json", db=db).stdout)
        assert len([e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]) == 3


def test_serve_runs_on_a_session_whose_run_an_outage_cut_off(
    pg_cluster: pgcluster.Cluster,
) -> None:
    """Issue 47 (2): `serve` was running a session on when PostgreSQL stopped; its claim
    could not be dropped, so the row still named the server, which is alive: the server's
    poll took only handed-off sessions, nobody else may take a live owner's, and the session
    stayed `running, stalled` for good. Now the server's next poll after the outage runs it
    on (pm#2's turn was kept, so pm is not called for it again)."""
    from tests.test_web_processes import server

    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        env = {"ORCHESTRATOR_STOP_AT": "reply_received:pm#2", "ORCHESTRATOR_RECORD_PATIENCE": "0"}
        with server(db, env=env) as (_, proc):
            handed = cli("resume", session_id, "--answer", "Weekly", "--no-run", "--json", db=db)
            assert handed.returncode == 0, handed.stderr
            while not _stopped(proc):  # the server's poll took it and ran pm#2
                time.sleep(0.05)
            pg_cluster.stop_server()
            try:
                os.kill(proc.pid, signal.SIGCONT)
                lines: list[str] = []
                met = _logged(proc, lines, session_id, ("not run on",))  # met the outage
            finally:
                pg_cluster.start_server()
            assert met, "".join(lines)
            deadline = time.monotonic() + 60
            while _status(db, session_id)["status"] != "completed":
                assert time.monotonic() < deadline, (_status(db, session_id), "".join(lines))
                time.sleep(0.2)
        log = json.loads(cli("log", session_id, "--json", db=db).stdout)
        assert len([e for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"]) == 3


def test_a_worker_counts_a_drive_that_ended_just_before_an_outage(
    pg_cluster: pgcluster.Cluster,
) -> None:
    """The cause of a `make test` failure of test_worker.py's restart test ({'completed': 1}
    != {'completed': 2} after "interrupted by the database"): the drive's end committed,
    then the server went away before the session was read back. The worker logged it as
    cut off and never counted it (nor could it take it up again: it had ended). Now it
    counts the end its drive committed. (This test was played up to three times because
    under load the read back sometimes met the server before the outage: the stop point's
    SIGSTOP went to the process, the main thread took it, and the worker's thread read the
    session back before the stop reached it. The stop point now stops its own thread:
    tests/test_stop_points.py.)"""
    with pg_cluster.fresh("migrated") as db:
        session_id = _paused(db)
        handed = cli("resume", session_id, "--answer", "Weekly", "--no-run", "--json", db=db)
        assert handed.returncode == 0, handed.stderr
        process = _stop_at("after_finish", "worker", "--json", db=db)
        lines: list[str] = []
        try:
            pg_cluster.stop_server()
            try:
                os.kill(process.pid, signal.SIGCONT)
                # The read after the end meets the outage (the worker logs it), or not in a
                # minute: the server comes back either way.
                met = _logged(
                    process, lines, session_id, ("read back", "interrupted", ": completed")
                )
            finally:
                pg_cluster.start_server()
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
            assert process.stdout is not None
            out = process.stdout.read()  # one small document: the pipe held it
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        err = "".join(lines)
        assert met, err
        assert f"session {session_id}: completed (read back later: " in err, err
        assert process.returncode == 0, err
        assert json.loads(out)["ended"] == {"completed": 1}, err
        assert _status(db, session_id)["status"] == "completed"


def _logged(
    process: subprocess.Popen[str], lines: list[str], session_id: str, words: tuple[str, ...]
) -> bool:
    """Wait (a minute at most) for a line of the process's stderr about `session_id` with
    one of `words`; every line read goes to `lines`, and a thread goes on reading the rest
    (wait for the process, never `communicate`: its stderr is this thread's)."""
    import threading

    seen = threading.Event()
    assert process.stderr is not None
    stream = process.stderr

    def read() -> None:
        for line in stream:
            lines.append(line)
            if session_id in line and any(word in line for word in words):
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    return seen.wait(60)


def test_a_lock_held_too_long_is_a_clear_message_and_the_answer_is_not_lost(
    tmp_path: Path,
) -> None:
    """Another process holds SQLite's write lock past the wait (here 1 s, through
    $ORCHESTRATOR_SQLITE_BUSY_TIMEOUT): `resume --answer` exits 2 with one JSON document
    that names the cause and says the answer was not kept; once the lock is let go, the
    same command finishes the session."""
    from tests.dbcheck import WriteLock

    db = f"sqlite:///{tmp_path / 'orchestrator.db'}"
    session_id = _paused(db)
    lock = WriteLock(db)
    lock.acquire()
    try:
        result = cli(
            "resume",
            session_id,
            "--answer",
            "Weekly",
            "--json",
            db=db,
            env={**os.environ, "ORCHESTRATOR_SQLITE_BUSY_TIMEOUT": "1"},
        )
    finally:
        lock.close()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    assert "stayed locked by another process" in document["error"]
    assert document["session_id"] == session_id
    assert document.get("answer_kept") is not True
    assert _status(db, session_id)["status"] == "paused"  # nothing half-written
    done = cli("resume", session_id, "--answer", "Weekly", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC])
def test_a_new_database_file_on_a_full_or_read_only_disk_is_a_storage_fault(
    tmp_path: Path, code: int
) -> None:
    """Creating the file meets the storage, not a wrong path: StorageFailed (the web's 503,
    MCP's internal) as when opening an existing one, not a ConfigError."""
    from orchestrator import Sessions
    from orchestrator.errors import StorageFailed
    from orchestrator.store import connect

    def refused(*_args: object, **_kwargs: object) -> int:
        raise OSError(code, os.strerror(code))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connect.os, "open", refused)
        with pytest.raises(StorageFailed, match="cannot open the database .*then try again"):
            Sessions(str(tmp_path / "new.db")).list()
    assert not (tmp_path / "new.db").exists()


# -- storage faults told apart by SQLite's result codes, not by its words ----------------


def _real_sqlite_faults(tmp_path: Path) -> dict[int, sqlite3.Error]:
    """Each fault as SQLite itself raises it (no message written by a test)."""
    found: dict[int, sqlite3.Error] = {}
    full = sqlite3.connect(":memory:")
    full.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.OperationalError) as caught:
        full.execute("CREATE TABLE t (x)")
        for _ in range(10):
            full.execute("INSERT INTO t VALUES (randomblob(5000))")
    found[sqlite3.SQLITE_FULL] = caught.value
    path = tmp_path / "a.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    with pytest.raises(sqlite3.OperationalError) as caught:
        sqlite3.connect(path, timeout=0).execute("SELECT * FROM t")
    found[sqlite3.SQLITE_BUSY] = caught.value
    holder.execute("ROLLBACK")
    read_only = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as caught:
        read_only.execute("INSERT INTO t VALUES (1)")
    found[sqlite3.SQLITE_READONLY] = caught.value
    with pytest.raises(sqlite3.OperationalError) as caught:
        sqlite3.connect(tmp_path / "no" / "such" / "folder.db")
    found[sqlite3.SQLITE_CANTOPEN] = caught.value
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError) as caught:
        sqlite3.connect(garbage).execute("SELECT * FROM sqlite_master")
    found[sqlite3.SQLITE_NOTADB] = caught.value
    return found


def test_storage_faults_are_told_apart_by_sqlites_result_code(tmp_path: Path) -> None:
    from orchestrator.store.connect import damaged_database, storage_failure

    faults = _real_sqlite_faults(tmp_path)
    said = {code: storage_failure(exc) for code, exc in faults.items()}
    assert "disk holding the database is full" in (said[sqlite3.SQLITE_FULL] or "")
    assert "stayed locked by another process" in (said[sqlite3.SQLITE_BUSY] or "")
    assert "cannot be written" in (said[sqlite3.SQLITE_READONLY] or "")
    assert "cannot be opened" in (said[sqlite3.SQLITE_CANTOPEN] or "")
    assert said[sqlite3.SQLITE_NOTADB] is None  # damaged, not a storage fault:
    assert "damaged" in (damaged_database(faults[sqlite3.SQLITE_NOTADB]) or "")
    # An extended code (SQLITE_IOERR_WRITE) is its family's fault.
    assert "failed a read or write" in (storage_failure(sqlite_fault(sqlite3.SQLITE_IOERR)) or "")
    io_write = sqlite3.OperationalError("disk I/O error")
    io_write.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE
    assert storage_failure(io_write) == storage_failure(sqlite_fault(sqlite3.SQLITE_IOERR))


def test_an_error_that_only_reads_like_a_fault_is_a_bug_not_a_fault() -> None:
    """The words alone decide nothing: an error SQLite did not raise (no result code), or
    raised for another reason, keeps its traceback."""
    from orchestrator.store.connect import damaged_database, storage_failure

    assert storage_failure(sqlite3.OperationalError("database or disk is full")) is None
    assert damaged_database(sqlite3.DatabaseError("file is not a database")) is None
    syntax = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError) as caught:
        syntax.execute("SELECT * FROM [database is locked]")  # its message names the words
    assert "database is locked" in str(caught.value)
    assert storage_failure(caught.value) is None
