"""A corpus of bad input, one row per case: every row exits 2 with one clear message, no
traceback, exactly one JSON document on stdout under --json, and the database and the
files around it unchanged.

The CLI runs in-process (Typer's CliRunner isolation around `run_cli`, the real entry
point minus the process); the few cases where the process boundary matters (a closed
pipe, bytes that are not UTF-8) are in test_cli.py and at the end of this file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import forkserver
import pytest

from tests.conftest import EXAMPLES
from tests.conftest import invoke as run_in_process

PAUSE = str(EXAMPLES / "pause-and-resume.yaml")
CHOOSE = str(EXAMPLES / "choose-at-the-terminal.yaml")
DONE = str(EXAMPLES / "hard-cap.yaml")


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    def document(self) -> Any:
        return json.loads(self.stdout)  # fails unless stdout is exactly one JSON document


def invoke(*args: str, env: dict[str, str] | None = None) -> Outcome:
    """Run one command line in this process, as `orchestrator ARGS` would (stdin: no tty)."""
    result = run_in_process(*args, env=env)
    return Outcome(result.returncode, result.stdout, result.stderr)


def checkpointed(db: Path) -> None:
    """Fold the WAL into the file, so that its bytes are the whole database."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def rows(db: Path) -> dict[str, list[str]]:
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in tables}


def snapshot(folder: Path, live: Path) -> dict[str, Any]:
    """Every file under `folder` by content, and the live database by its rows (SQLite may
    fold its -wal file in on close: same rows, other bytes). A file over 1 MiB (the 50 MB
    scenario) by its inode, size and change times instead of hashing it twice a test: any
    write to it, or a new file in its place, changes them (ctime cannot be set back)."""
    files: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith(live.name):
            info = path.stat()
            files[str(path.relative_to(folder))] = (
                (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
                if info.st_size > 1 << 20
                else hashlib.sha256(path.read_bytes()).hexdigest()
            )
        elif path.is_dir():
            files[str(path.relative_to(folder))] = "folder"
    return {"files": files, "database": rows(live)}


@dataclass
class World:
    """A folder with a live database (one paused session, one completed) and bad files."""

    root: Path
    db: Path
    paused: str
    choose: str
    completed: str

    def fmt(self, arg: str) -> str:
        return arg.format(
            root=self.root,
            db=self.db,
            paused=self.paused,
            choose=self.choose,
            completed=self.completed,
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("corpus")
    db = root / "live.db"
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(root / "home"))
    mp.setenv("XDG_DATA_HOME", str(root / "home" / "data"))
    mp.delenv("ORCHESTRATOR_DB", raising=False)
    try:
        ids = []
        for scenario in (PAUSE, CHOOSE, DONE):
            result = invoke("run", "--script", scenario, "--ui", "none", "--json", "--db", str(db))
            assert result.code in (0, 3), result.stderr
            ids.append(result.document()["session_id"])
    finally:
        mp.undo()
    checkpointed(db)
    (root / "afile").write_text("not a folder\n")
    (root / "noise.db").write_bytes(bytes(range(256)) * 20)
    (root / "truncated.db").write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    newer = root / "newer.db"
    newer.write_bytes(db.read_bytes())
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    with sqlite3.connect(root / "other.db") as conn:
        conn.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO contacts (name) VALUES ('Ada')")
    scenarios = {
        "deep.yaml": "task: t\nagents:\n  pm: " + "[" * 5000 + "]" * 5000 + "\n",
        "deep.json": '{"task": "t", "agents": {"pm": ' + "[" * 5000 + "]" * 5000 + "}}",
        "blank-answer.yaml": Path(PAUSE).read_text() + 'answers: ["  "]\n',
        "empty-answer.yaml": Path(PAUSE).read_text() + 'answers: [""]\n',
        "fallbacks-yes.yaml": "task: t\nagents:\n  pm: [{status: COMPLETE, summary: s}]\n"
        "settings: {max_fallbacks: yes}\n",
        "fallbacks-huge.yaml": "task: t\nagents:\n  pm: [{status: COMPLETE, summary: s}]\n"
        "settings: {max_fallbacks: 100000000000000000000}\n",
        "timeout-inf.yaml": "task: t\nagents:\n  pm: [{status: COMPLETE, summary: s}]\n"
        "settings: {timeout: .inf}\n",
        "tasks-as-text.yaml": "task: t\nagents:\n  pm: [{status: PLANNED, tasks: [a, b]}]\n",
        "options-as-text.yaml": "task: t\nagents:\n  pm: [{status: NEEDS_CLARIFICATION, "
        "question: q, kind: single_select, options: [A, B]}]\n",
        "long-task.yaml": f"task: {'x' * 2001}\n"
        "agents:\n  pm: [{status: COMPLETE, summary: s}]\n",
        "long-answer.yaml": Path(PAUSE).read_text() + f"answers: [{'y' * 10_001}]\n",
        "duplicate-key.yaml": "task: first\ntask: second\n"
        "agents:\n  pm: [{status: COMPLETE, summary: s}]\n",
        "duplicate-key.json": '{"task": "first", "task": "second", '
        '"agents": {"pm": [{"status": "COMPLETE", "summary": "s"}]}}',
        "blank-task.yaml": "task: '   '\nagents:\n  pm: [{status: COMPLETE, summary: s}]\n",
        "negative-expect.yaml": "task: t\nagents:\n  pm: [{status: COMPLETE, summary: s}]\n"
        "expect: {questions_surfaced: -1}\n",
        "aliases.yaml": "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
            for p, c in zip("abcdef", "bcdefg", strict=True)
        )
        + "task: t\nagents: {pm: [*g]}\n",
    }
    for name, text in scenarios.items():
        (root / name).write_text(text)
    (root / "latin1.yaml").write_bytes("task: café\nagents: {pm: []}\n".encode("latin-1"))
    (root / "empty.yaml").write_text("  \n")
    with (root / "huge.yaml").open("w") as file:  # 50 MB: refused before it is read
        file.write("task: t\nagents:\n  pm: []\n")
        chunk = "# " + "x" * 1022 + "\n"
        for _ in range(50 * 1024):
            file.write(chunk)
    return World(root, db, *ids)


# (case id, argument list, a fragment the message must contain). "{db}" is the live
# database; every case also gets --json, and --db {db} unless it names its own.
CASES: list[tuple[str, list[str], str]] = [
    # --db: files and URLs
    ("db-parent-is-a-file", ["list", "--db", "{root}/afile/x.db"], "is a file, not a folder"),
    ("db-parent-is-a-file-run", ["run", "--script", DONE, "--db", "{root}/afile/x.db"], "afile"),
    ("db-cannot-be-created", ["run", "--script", DONE, "--db", "/proc/x.db"], "cannot open"),
    ("db-not-a-database", ["list", "--db", "{root}/noise.db"], "not a SQLite database"),
    ("db-not-a-database-run", ["run", "--script", DONE, "--db", "{root}/noise.db"], "noise.db"),
    ("db-truncated", ["status", "{paused}", "--db", "{root}/truncated.db"], "truncated"),
    ("db-truncated-run", ["run", "--script", DONE, "--db", "{root}/truncated.db"], "truncated"),
    ("db-newer", ["list", "--db", "{root}/newer.db"], "9999_from_the_future"),
    ("db-newer-run", ["run", "--script", DONE, "--db", "{root}/newer.db"], "newer version"),
    ("db-other-app", ["list", "--db", "{root}/other.db"], "another application"),
    ("db-other-app-run", ["run", "--script", DONE, "--db", "{root}/other.db"], "contacts"),
    (
        "db-malformed-url",
        ["list", "--db", "postgresql+psycopg://u:p@localhost:notaport/db"],
        "not a database URL",
    ),
    ("db-empty", ["list", "--db", ""], "--db is empty"),
    ("db-empty-run", ["run", "--script", DONE, "--db", ""], "--db is empty"),
    ("db-missing-slashes", ["list", "--db", "sqlite:/x.db"], "did you mean sqlite:///x.db"),
    ("db-missing-slashes-run", ["run", "--script", DONE, "--db", "sqlite:/x.db"], "needs '//'"),
    ("db-unknown-dialect", ["list", "--db", "nosuchdialect://x"], "nosuchdialect"),
    (
        "db-run-into-missing-folder",
        ["run", "--script", DONE, "--db", "{root}/no/such/folder/x.db"],
        "does not exist",
    ),
    ("db-is-a-folder", ["list", "--db", "{root}"], "is a folder"),
    ("db-mistyped-status", ["status", "{paused}", "--db", "{root}/mistyped.db"], "no session"),
    ("db-mistyped-resume", ["resume", "{paused}", "--db", "{root}/mistyped.db"], "no session"),
    ("db-mistyped-log", ["log", "{paused}", "--db", "{root}/mistyped.db"], "no session"),
    ("db-mistyped-cancel", ["cancel", "{paused}", "--db", "{root}/mistyped.db"], "no session"),
    # scenario files
    ("scenario-deep-yaml", ["run", "--script", "{root}/deep.yaml"], "nested more than"),
    ("scenario-deep-json", ["run", "--script", "{root}/deep.json"], "nested more than"),
    ("scenario-50-mb", ["run", "--script", "{root}/huge.yaml"], "larger than 1,000,000 bytes"),
    ("scenario-aliases", ["run", "--script", "{root}/aliases.yaml"], "values"),
    ("scenario-blank-answer", ["run", "--script", "{root}/blank-answer.yaml"], "answers[0]"),
    ("scenario-empty-answer", ["run", "--script", "{root}/empty-answer.yaml"], "answers[0]"),
    ("scenario-fallbacks-yes", ["run", "--script", "{root}/fallbacks-yes.yaml"], "max_fallbacks"),
    (
        "scenario-fallbacks-huge",
        ["run", "--script", "{root}/fallbacks-huge.yaml"],
        "less than or equal to 100",
    ),
    ("scenario-timeout-inf", ["run", "--script", "{root}/timeout-inf.yaml"], "finite"),
    ("scenario-tasks-text", ["run", "--script", "{root}/tasks-as-text.yaml"], "tasks[0]"),
    ("scenario-options-text", ["run", "--script", "{root}/options-as-text.yaml"], "options[0]"),
    ("scenario-long-task", ["run", "--script", "{root}/long-task.yaml"], "at most 2,000"),
    ("scenario-long-answer", ["run", "--script", "{root}/long-answer.yaml"], "at most 10,000"),
    ("scenario-missing", ["run", "--script", "{root}/nope.yaml"], "no such scenario file"),
    ("scenario-not-utf8", ["run", "--script", "{root}/latin1.yaml"], "not UTF-8"),
    ("scenario-empty", ["run", "--script", "{root}/empty.yaml"], "an empty file"),
    ("scenario-is-a-folder", ["run", "--script", "{root}"], "cannot read"),
    ("scenario-with-task", ["run", "other task", "--script", DONE], "not both"),
    (
        "scenario-duplicate-key",
        ["run", "--script", "{root}/duplicate-key.yaml"],
        "duplicate-key.yaml: line 2: duplicate key 'task' (first given on line 1)",
    ),
    (
        "scenario-duplicate-key-json",
        ["run", "--script", "{root}/duplicate-key.json"],
        "duplicate key 'task'",
    ),
    (
        "scenario-blank-task",
        ["run", "--script", "{root}/blank-task.yaml"],
        "blank-task.yaml: task: the task is blank; expected what the agents should do",
    ),
    (
        "scenario-negative-expect",
        ["run", "--script", "{root}/negative-expect.yaml"],
        "expect.questions_surfaced: expected a count (0 or more), got -1",
    ),
    # very large values
    ("answer-too-long", ["resume", "{paused}", "--answer", "z" * 10_001], "at most 10,000"),
    ("note-too-long", ["resume", "{paused}", "--decline", "--note", "z" * 10_001], "--note"),
    ("task-too-long", ["run", "t" * 2001, "--model", "openai:x"], "at most 2,000"),
    ("choice-too-long", ["resume", "{choose}", "--choice", "c" * 10_001], "at most 10,000"),
    ("id-very-long", ["status", "i" * 100_000], "no session"),
    ("option-value-very-long", ["run", "--script", DONE, "--max-rounds", "9" * 100_000], "rounds"),
    # options: usage errors are JSON too
    ("timeout-negative", ["run", "--script", DONE, "--timeout", "-1"], "--timeout"),
    ("timeout-inf", ["run", "--script", DONE, "--timeout", "inf"], "finite"),
    ("timeout-1e12", ["run", "--script", DONE, "--timeout", "1e12"], "30 days"),
    ("timeout-nan", ["run", "--script", DONE, "--timeout", "nan"], "finite"),
    ("timeout-text", ["run", "--script", DONE, "--timeout", "soon"], "'none'"),
    ("max-fallbacks-huge", ["run", "--script", DONE, "--max-fallbacks", str(10**20)], "100"),
    ("max-rounds-zero", ["run", "--script", DONE, "--max-rounds", "0"], "--max-rounds"),
    ("threshold-high", ["run", "--script", DONE, "--uncertainty-threshold", "101"], "100"),
    ("ui-bogus", ["run", "--script", DONE, "--ui", "bogus"], "--ui"),
    ("on-timeout-bogus", ["run", "--script", DONE, "--on-timeout", "later"], "--on-timeout"),
    ("list-status-bogus", ["list", "--status", "sleeping"], "--status"),
    ("unknown-option", ["list", "--frobnicate"], "--frobnicate"),
    ("unknown-command", ["frobnicate"], "frobnicate"),
    ("missing-id", ["status"], "ID"),
    ("max-rounds-text", ["run", "--script", DONE, "--max-rounds", "many"], "--max-rounds"),
    # answers
    ("choice-typo-other", ["resume", "{choose}", "--choice", "Per IP adress"], "Per IP address"),
    ("choice-number-too-big", ["resume", "{choose}", "--choice", "4"], "1. Per API key"),
    ("choice-number-zero", ["resume", "{choose}", "--choice", "0"], "not one of the options"),
    ("choice-on-free-text", ["resume", "{paused}", "--choice", "A"], "free-text answer"),
    ("answer-blank", ["resume", "{paused}", "--answer", "   "], "the answer is empty"),
    ("two-answers", ["resume", "{paused}", "--answer", "x", "--decline"], "at most one of"),
    ("answer-to-completed", ["resume", "{completed}", "--answer", "x"], "not waiting"),
    ("answer-unknown-session", ["resume", "nope", "--answer", "x"], "no session with id 'nope'"),
    ("status-unknown-session", ["status", "nope"], "no session with id 'nope'"),
    ("cancel-unknown-session", ["cancel", "nope"], "no session with id 'nope'"),
    ("cancel-ended-session", ["cancel", "{completed}"], "nothing to cancel"),
    # arguments that are not UTF-8 (as Python hands them over: surrogate escapes)
    ("answer-not-utf8", ["resume", "{paused}", "--answer", "caf\udce9"], "not valid UTF-8"),
    ("id-not-utf8", ["status", "\udcff\udcfe"], "not valid UTF-8"),
]


@pytest.mark.parametrize(("args", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_says_what_and_changes_nothing(
    world: World, args: list[str], fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(world.root / "home" / "data"))
    argv = [world.fmt(a) for a in args]
    if "--db" not in argv:
        argv += ["--db", str(world.db)]
    before = snapshot(world.root, world.db)
    result = invoke(*argv, "--json")
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    document = result.document()
    assert document["exit_code"] == 2
    assert fragment in document["error"], document["error"]
    assert fragment in result.stderr
    assert len(document["error"]) < 2_000  # never the whole of a long value
    assert len(result.stderr) < 3_000
    assert "instance of" not in document["error"]  # no internal class names
    assert "Value error" not in document["error"]  # nor pydantic's words (Typer checks with it)
    assert snapshot(world.root, world.db) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(["list"], "--status"), (["list", "--frobnicate"], "No such option")],
    ids=["human-bad-status", "human-unknown-option"],
)
def test_without_json_usage_errors_print_nothing_on_stdout(
    world: World, args: list[str], fragment: str
) -> None:
    result = invoke(*args, "--status" if args == ["list"] else "--x", "bogus")
    assert result.code == 2 and result.stdout == ""
    assert fragment in result.stderr  # the message names what was wrong
    assert "Traceback" not in result.stderr


def test_orchestrator_db_is_named_when_the_value_came_from_it(world: World) -> None:
    before = snapshot(world.root, world.db)
    result = invoke("list", "--json", env={"ORCHESTRATOR_DB": str(world.root / "noise.db")})
    assert result.code == 2
    assert "ORCHESTRATOR_DB" in result.document()["error"]
    result = invoke("list", "--json", env={"ORCHESTRATOR_DB": "sqlite:/x.db"})
    assert result.code == 2 and "ORCHESTRATOR_DB" in result.document()["error"]
    assert snapshot(world.root, world.db) == before


def test_read_commands_create_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "mistyped.db"
    listed = invoke("list", "--json", "--db", str(missing))
    assert listed.code == 0 and listed.document() == []
    assert invoke("status", "abc", "--db", str(missing)).code == 2
    assert invoke("log", "abc", "--db", str(tmp_path / "m.db")).code == 2
    empty = tmp_path / "empty.db"
    empty.touch()
    assert invoke("list", "--json", "--db", str(empty)).document() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    assert empty.read_bytes() == b""


def test_run_creates_the_file_but_not_the_folders(tmp_path: Path) -> None:
    created = invoke("run", "--script", DONE, "--json", "--db", str(tmp_path / "new.db"))
    assert created.code == 0 and (tmp_path / "new.db").exists()
    refused = invoke("run", "--script", DONE, "--db", str(tmp_path / "a" / "b.db"))
    assert refused.code == 2 and not (tmp_path / "a").exists()


def test_a_bad_stored_deadline_does_not_break_reads(tmp_path: Path) -> None:
    """Older versions stored `--timeout inf` as an infinite deadline: status, list and
    resume still answer (the deadline reads as none)."""
    db = tmp_path / "old.db"
    first = invoke("run", "--script", PAUSE, "--json", "--db", str(db)).document()["session_id"]
    for bad in (float("inf"), 1e12, 1e300):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE orchestrator_state SET deadline = ?", (bad,))
        status = invoke("status", first, "--json", "--db", str(db))
        assert status.code == 0, status.stderr
        assert status.document()["pending_question"]["deadline"] is None
        assert invoke("list", "--db", str(db)).code == 0
        assert invoke("resume", first, "--ui", "none", "--db", str(db)).code == 3
    done = invoke("resume", first, "--answer", "Weekly", "--json", "--db", str(db))
    assert done.code == 0, done.stderr


def test_timeout_none_means_no_deadline(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    result = invoke("run", "--script", PAUSE, "--timeout", "none", "--json", "--db", db)
    assert result.code == 3, result.stderr
    assert result.document()["pending_question"]["deadline"] is None


def test_files_nobody_asked_for_are_not_left_behind(tmp_path: Path) -> None:
    """A refused command leaves the folder as it was: no database, no -wal or -shm."""
    for args in (
        ["run", "--script", str(tmp_path / "missing.yaml")],
        ["run", "--script", DONE, "--timeout", "inf"],
        ["status", "abc"],
    ):
        refused = invoke(*args, "--db", str(tmp_path / "x.db"))
        assert refused.code == 2, (args, refused.stderr)  # refused, not run
    assert list(tmp_path.iterdir()) == []


def test_messages_clip_long_values(tmp_path: Path) -> None:
    label = "L" * 5000
    text = (
        "task: t\nagents:\n  pm:\n    - status: NEEDS_CLARIFICATION\n      question: q\n"
        f"      kind: single_select\n      options: [{{label: {label}}}, {{label: B}}]\n"
    )
    (tmp_path / "s.yaml").write_text(text)
    db = str(tmp_path / "x.db")
    paused = invoke("run", "--script", str(tmp_path / "s.yaml"), "--json", "--db", db)
    session = paused.document()["session_id"]
    shown = invoke("status", session, "--db", db)
    assert shown.code == 0 and label not in shown.stdout and "more characters" in shown.stdout
    assert os.path.getsize(tmp_path / "x.db") > 0


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["list", "--db", "sqlite:/x.db"], {}, "did you mean sqlite:///x.db"),
        (["status", "abc", "--db", "sqlite:/x.db"], {}, "did you mean sqlite:///x.db"),
        (["list"], {"ORCHESTRATOR_DB": "garbage"}, "ORCHESTRATOR_DB 'garbage' is neither"),
        (["log", "abc"], {"ORCHESTRATOR_DB": "garbage"}, "an absolute file path"),
        (["list"], {"ORCHESTRATOR_DB": "sqlite:/x.db"}, "ORCHESTRATOR_DB 'sqlite:/x.db'"),
    ],
    ids=["list-db-slashes", "status-db-slashes", "env-garbage", "env-garbage-log", "env-slashes"],
)
def test_the_fast_read_path_refuses_what_the_full_path_refuses(
    tmp_path: Path, args: list[str], env: dict[str, str], fragment: str
) -> None:
    """The real process (the fast read path answers status/list/log first): the same exit
    2 and the same error document as the Typer path, and no file made."""
    import subprocess

    from tests.conftest import argv

    full = invoke(*args, "--json", env=env)
    assert full.code == 2 and fragment in full.document()["error"]
    process = forkserver.run(
        argv(*args, "--json"),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env={**os.environ, **env},
    )
    assert process.returncode == 2, process.stdout
    assert json.loads(process.stdout) == full.document()
    assert fragment in process.stderr and "Traceback" not in process.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("postgresql://u:s3cret@127.0.0.1:1/db", "cannot reach the PostgreSQL server"),
        ("postgresql+psycopg://u:s3cret@127.0.0.1:notaport/db", "is not a database URL"),
        ("postgresql:u:s3cret@127.0.0.1/db", "needs '//'"),
    ],
    ids=["server-down", "bad-port", "missing-slashes"],
)
def test_database_errors_name_where_the_url_came_from_and_hide_its_password(
    url: str, fragment: str
) -> None:
    from_env = invoke("list", "--json", env={"ORCHESTRATOR_DB": url})
    assert from_env.code == 2
    message = from_env.document()["error"]
    assert fragment in message and "ORCHESTRATOR_DB" in message and "--db" not in message
    from_option = invoke("list", "--json", "--db", url, env={"ORCHESTRATOR_DB": ""})
    assert from_option.code == 2
    assert "--db" in from_option.document()["error"]
    for shown in (from_env.stdout, from_env.stderr, from_option.stdout, from_option.stderr):
        assert "s3cret" not in shown


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("postgresql://u:s3cret@127.0.0.1:1/db", "cannot reach the PostgreSQL server"),
        ("foo://u:s3cret@bar", "unknown database kind"),
    ],
    ids=["server-down", "unknown-kind"],
)
def test_serve_refuses_a_database_it_cannot_use_before_serving(url: str, fragment: str) -> None:
    """A server checks its database at the start: exit 2 with what to check, no traceback,
    and no inbox address printed for a server that never serves (it was a 156-line
    traceback and exit 3, "session paused", from a failed start-up)."""
    served = invoke("serve", "--db", url, "--port", "0", "--token", "t0ken-0123456789abc")
    assert served.code == 2, served.stderr
    assert fragment in served.stderr and "Traceback" not in served.stderr
    assert "t0ken-" not in served.stderr and "s3cret" not in served.stderr
    assert "orchestrator inbox:" not in served.stderr


@pytest.mark.parametrize("source", ["--db", "ORCHESTRATOR_DB"])
@pytest.mark.parametrize(
    "command", [["list"], ["status", "abc"], ["run", "--script", "examples/hard-cap.yaml"]]
)
def test_a_postgresql_password_with_a_space_is_bad_input_shown_masked(
    source: str, command: list[str]
) -> None:
    """libpq refused it with a 90-line traceback ending in `unexpected spaces found in
    "…password…"`. Now: exit 2 saying how to write it, the password masked."""
    url = "postgresql+psycopg://alice:pa ss word@127.0.0.1:1/db"
    if source == "--db":
        done = invoke(*command, "--json", "--db", url)
    else:
        done = invoke(*command, "--json", env={"ORCHESTRATOR_DB": url})
    assert done.code == 2, done.stderr
    assert "pa ss" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert "percent-encode" in json.loads(done.stdout)["error"]


@pytest.mark.parametrize(
    ("how", "url"),
    [
        ("env", "http://alice:pw-secret@127.0.0.1:1/v1"),
        ("option", "http://alice:pw-secret@127.0.0.1:1/v1"),
        ("option", "http://127.0.0.1:1/v1?api_key=pw-secret"),
        ("env", "http://127.0.0.1:1/v1?key=pw-secret"),
    ],
)
def test_a_base_url_with_a_secret_is_refused_and_never_shown(how: str, url: str) -> None:
    """`eval` with ORCHESTRATOR_BASE_URL='http://alice:pw@…' crashed printing pydantic's
    `input_value='http://alice:pw@…'`; a query string in --base-url was stored and logged
    in full. Both are bad input now, shown masked."""
    cases = str(EXAMPLES / "eval" / "benign.yaml")
    if how == "env":
        done = invoke("eval", cases, "--model", "openai:x", env={"ORCHESTRATOR_BASE_URL": url})
    else:
        done = invoke("run", "a task", "--model", "openai:x", "--base-url", url, "--json")
    assert done.code == 2, (done.code, done.stderr)
    shown = done.stdout + done.stderr
    assert "pw-secret" not in shown and "Traceback" not in shown and "input_value" not in shown
    assert ("$ORCHESTRATOR_BASE_URL" if how == "env" else "--base-url") in shown
