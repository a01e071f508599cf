"""The fast read path (orchestrator.cli.fastread) prints exactly what the full path prints.

Every case runs the real entry point (`orchestrator.cli.main`, which tries the fast path
first) and the Typer app alone (`orchestrator.cli.entry.main`) in new processes on the
same database, and compares stdout, stderr and the exit code byte for byte. The entry
point also reports which heavy packages it imported, so each case also checks which path
answered it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.cli.fastread import Request, parse, serve
from orchestrator.store.lean_sql import sqlite_file
from tests.conftest import EXAMPLES, ROOT

HEAVY = ("sqlalchemy", "typer", "pydantic")
ENTRY = (
    "import os, sys\n"
    "sys.argv[0] = 'orchestrator'\n"
    "from orchestrator.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    with open(os.environ['HEAVY_OUT'], 'w') as out:\n"
    f"        out.write(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
)
FULL = (
    "import sys\n"
    "sys.argv[0] = 'orchestrator'\n"
    "from orchestrator.cli import app  # every command registered\n"
    "from orchestrator.cli.entry import main\n"
    "main()\n"
)

FAILING = """
task: "naïve \\e[31mred\\e[0m task ✓"
agents:
  pm: []
expect:
  status: completed
"""


def _run(code: str, args: list[str], tmp: Path) -> tuple[str, str, int, str]:
    heavy = tmp / "heavy.txt"
    heavy.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "HEAVY_OUT": str(heavy)},
        timeout=120,
    )
    imported = heavy.read_text() if heavy.exists() else ""
    return done.stdout, done.stderr, done.returncode, imported


def _batch(mode: str, cases: list[list[str]], tmp: Path) -> list[tuple[str, str, int, str]]:
    """Every command line of `cases` in one interpreter (tests/cli_batch.py)."""
    given, results = tmp / f"{mode}-cases.json", tmp / f"{mode}-results.json"
    given.write_text(json.dumps(cases))
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "cli_batch.py"), mode, str(given), str(results)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return [tuple(r) for r in json.loads(results.read_text())]  # type: ignore[misc]


def both_batched(
    cases: list[list[str]], tmp: Path
) -> list[tuple[list[str], tuple[str, str, int], str]]:
    """Each command line through the entry point and through Typer alone, the fast-path
    ones first (so that what a fast case imported is its own doing); they must agree."""
    ordered = sorted(cases, key=lambda args: parse(args) is None)
    fast = _batch("entry", ordered, tmp)
    full = _batch("full", ordered, tmp)
    out = []
    for args, (f_out, f_err, f_code, imported), (g_out, g_err, g_code, _) in zip(
        ordered, fast, full, strict=True
    ):
        assert (f_out, f_err, f_code) == (g_out, g_err, g_code), f"{args}: the two paths differ"
        out.append((args, (f_out, f_err, f_code), imported))
    return out


def both(args: list[str], tmp: Path) -> tuple[tuple[str, str, int], str]:
    """Run `args` through the entry point and through Typer alone; they must agree."""
    *fast, imported = _run(ENTRY, args, tmp)
    *full, _ = _run(FULL, args, tmp)
    assert tuple(fast) == tuple(full), f"{args}: the two paths differ"
    return (fast[0], fast[1], fast[2]), imported


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One database with a session in every state the read commands show differently."""
    from orchestrator import Reply, Sessions
    from orchestrator.store import Owner

    path = tmp_path_factory.mktemp("zoo") / "zoo.db"
    ids: dict[str, str] = {"db": str(path)}
    with Sessions(str(path)) as sessions:
        ids["completed"] = sessions.start_scenario(EXAMPLES / "answered-question.yaml")[
            "session_id"
        ]
        ids["fallback"] = sessions.start_scenario(EXAMPLES / "hard-cap.yaml")["session_id"]
        ids["paused"] = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
        ids["select"] = sessions.start_scenario(EXAMPLES / "choose-at-the-terminal.yaml")[
            "session_id"
        ]
        chosen = sessions.start_scenario(EXAMPLES / "choose-at-the-terminal.yaml")["session_id"]
        ids["assumptions"] = sessions.resume(
            chosen, Reply(choices=("Both",), note="ask \x1b[1msales\x1b[0m")
        )["session_id"]
        ids["failed"] = sessions.start_scenario(FAILING)["session_id"]
        cancelled = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
        ids["cancelled"] = sessions.cancel(cancelled)["session_id"]
        ids["stalled"] = sessions._opened.create(
            "its driver is gone", agents={}, settings={}, owner=Owner()
        )[0].session_id
    with sqlite3.connect(path) as conn:
        conn.execute(  # a running session whose process is gone
            "UPDATE sessions SET lease_expires_at = 0, owner_pid = 4194303, "
            "last_error = 'provider down' WHERE id = ?",
            (ids["stalled"],),
        )
        # `list` shows ages and deadlines relative to now: years and days away, they read
        # the same to both paths however far apart the two run
        for table, column in (
            ("sessions", "created_at"),
            ("sessions", "updated_at"),
            ("events", "created_at"),
        ):
            conn.execute(f"UPDATE {table} SET {column} = '2019' || substr({column}, 5)")
        conn.execute("UPDATE orchestrator_state SET deadline = deadline + 864000")
    conn.close()
    yield ids


def _zoo_cases(zoo: dict[str, str]) -> list[list[str]]:
    db = zoo["db"]
    cases = []
    for name in (
        "completed",
        "fallback",
        "paused",
        "select",
        "assumptions",
        "failed",
        "cancelled",
        "stalled",
    ):
        for command in ("status", "log"):
            cases.append([command, zoo[name], "--db", db])
            cases.append([command, zoo[name], "--json", "--db", db])
    cases += [
        # an unknown id of 20,000 characters: the same short message on both paths
        ["status", "i" * 20_000, "--json", "--db", db],
        ["log", "postgresql://u:hunter2@h/" + "x" * 5_000, "--db", db],
        ["list", "--db", db],
        ["list", "--json", "--db", db],
        ["list", "--json", f"--db={db}"],
        ["--json", "--db", db],  # not a read command: full path (usage error)
        ["list", "--status", "paused", "--db", db],
        ["list", "--status", "paused", "--json", "--db", db],
        ["list", "--status", "failed", "--json", "--db", db],
        ["list", "--limit", "2", "--db", db],
        ["list", "--limit", "2", "--json", "--db", db],
        ["list", "--limit=3", "--status", "paused", "--json", "--db", db],
        ["list", "--all", "--json", "--db", db],  # --json --all is printed as it is read
        ["list", "--status", "waiting", "--limit", "1", "--db", db],
        ["list", "--all", "--db", db],
        ["list", "--all", "--status", "paused", "--json", "--db", db],
        # after the oldest session there is none: [] and "no sessions"
        ["list", "--all", "--after", zoo["completed"], "--json", "--db", db],
        ["list", "--all", "--after", zoo["completed"], "--db", db],
        ["list", "--after", zoo["paused"], "--json", "--db", db],
        ["list", "--after", zoo["paused"], "--limit", "1", "--db", db],
        ["list", "--after", "nope", "--db", db],
        ["list", "--after", "nope", "--json", "--db", db],
        ["status", "nope", "--db", db],
        ["status", "nope", "--json", "--db", db],
        ["log", "nope", "--json", "--db", db],
        ["--db", db, "status", zoo["completed"]],  # options first: full path
        ["status", "--json", "--db", db, zoo["completed"]],  # options before the id
    ]
    return cases


FALL_THROUGH = [
    # each goes to the full path: its messages are the only ones
    ["status", "--help"],
    ["list", "--help"],
    ["status"],
    ["status", "a", "b"],
    ["status", "X", "--json", "--json"],
    ["list", "--status", "bogus"],
    ["list", "--status", "Paused"],
    ["list", "--limit", "0"],
    ["list", "--limit", "x"],
    ["list", "--limit", "2", "--all"],
    ["list", "--jsn"],
    ["list", "--"],
    ["log", "X", "--db"],
]


def test_the_fast_path_prints_what_the_full_path_prints(
    zoo: dict[str, str], tmp_path: Path
) -> None:
    served = 0
    for args, (out, _err, code), imported in both_batched(_zoo_cases(zoo), tmp_path):
        fast = parse(args) is not None
        assert (imported == "") is fast, f"{args}: imported {imported!r}"
        served += fast
        if args[:1] == ["list"] and "--json" in args and code == 0:
            assert out.startswith("[")  # a JSON list: the next page's command is on stderr
        assert len(out) + len(_err) < 4_000 or code == 0, args[:2]  # no huge echoes
        assert "hunter2" not in out + _err
    assert served >= 30
    stalled = json.loads(
        _run(ENTRY, ["status", zoo["stalled"], "--json", "--db", zoo["db"]], tmp_path)[0]
    )
    assert stalled["stalled"] and stalled["last_error"] == "provider down"


def test_unusual_command_lines_fall_through_to_the_full_path(
    zoo: dict[str, str], tmp_path: Path
) -> None:
    cases = [[*args, "--db", zoo["db"]] for args in FALL_THROUGH]
    for args in cases:
        assert parse(args) is None, args
    for args, _, imported in both_batched(cases, tmp_path):
        assert "typer" in imported, args


def test_text_output_shows_terminal_codes_as_text(zoo: dict[str, str], tmp_path: Path) -> None:
    """Both paths show an agent's escape codes as visible text, never raw."""
    (out, _, code), _ = both(["status", zoo["failed"], "--db", zoo["db"]], tmp_path)
    assert code == 0 and "naïve \\x1b[31mred\\x1b[0m task ✓" in out and "\x1b" not in out
    (out, _, _), _ = both(["status", zoo["failed"], "--json", "--db", zoo["db"]], tmp_path)
    assert "\\u001b[31m" in out  # JSON escapes it; nothing to strip


def test_a_database_that_does_not_exist_is_empty_and_not_created(tmp_path: Path) -> None:
    fast_db = tmp_path / "missing" / "fast.db"
    fast_cases: list[list[str]] = []
    full_cases: list[list[str]] = []
    for args in (
        ["list", "--json"],
        ["list"],
        ["list", "--status", "paused"],
        ["status", "abc"],
        ["status", "abc", "--json"],
        ["log", "abc"],
        ["list", "--after", "abc", "--json"],
    ):
        fast_cases.append([*args, "--db", str(fast_db)])
        full_cases.append([*args, "--db", str(tmp_path / "full.db")])
    fast = _batch("entry", fast_cases, tmp_path)  # one interpreter per path
    full = _batch("full", full_cases, tmp_path)
    for args, (*fast_said, imported), (*full_said, _) in zip(fast_cases, fast, full, strict=True):
        assert fast_said == full_said, args
        assert imported == "", args
    assert not fast_db.parent.exists()
    assert fast[0][0] == "[]\n"


def test_the_default_database_and_the_environment_variable(
    zoo: dict[str, str], tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _, code, imported = _run(ENTRY, ["list", "--json"], tmp_path)
    assert (out, code, imported) == ("[]\n", 0, "")
    assert not list(isolated_home.rglob("orchestrator.db"))
    assert _run(FULL, ["list", "--json"], tmp_path)[:3] == (out, "", 0)
    monkeypatch.setenv("ORCHESTRATOR_DB", f"sqlite:///{zoo['db']}")
    (out, _, code), imported = both(["status", zoo["paused"], "--json"], tmp_path)
    assert code == 0 and imported == "" and zoo["paused"] in out


def test_databases_the_fast_path_leaves_to_the_full_path(tmp_path: Path) -> None:
    from orchestrator.store.db import open_engine, upgrade

    old = tmp_path / "old.db"  # at revision 0002: the full path migrates it first
    upgrade(open_engine(f"sqlite:///{old}", migrate=False), "0002")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    foreign = tmp_path / "foreign.db"  # someone else's SQLite file
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    for db in (old, garbage, foreign):
        assert serve(["list", "--json", "--db", str(db)]) is None, db
    shutil.copy(old, tmp_path / "old-copy.db")
    *fast, imported = _run(ENTRY, ["list", "--json", "--db", str(old)], tmp_path)
    *full, _ = _run(FULL, ["list", "--json", "--db", str(tmp_path / "old-copy.db")], tmp_path)
    assert fast == full and fast[2] == 0 and "sqlalchemy" in imported
    for url in ("sqlite://", "sqlite:///x.db?mode=ro", "postgresql+psycopg://localhost/x"):
        assert sqlite_file(url) is None
        assert serve(["list", "--db", url]) is None


def test_a_status_whose_deadline_passed_is_applied_by_the_full_path(tmp_path: Path) -> None:
    from orchestrator import Sessions

    db = tmp_path / "deadline.db"
    with Sessions(str(db)) as sessions:
        doc = sessions.start_scenario(
            EXAMPLES / "pause-and-resume.yaml", settings={"timeout": 1, "on_timeout": "wait"}
        )
    assert doc["status"] == "paused"
    time.sleep(1.2)
    assert serve(["status", doc["session_id"], "--db", str(db)]) is None
    shutil.copy(db, tmp_path / "copy.db")
    args = ["status", doc["session_id"], "--json", "--db"]
    *fast, imported = _run(ENTRY, [*args, str(db)], tmp_path)
    *full, _ = _run(FULL, [*args, str(tmp_path / "copy.db")], tmp_path)
    # the full path (Typer) applied it, on SQLite without SQLAlchemy: the store's own SQL
    assert fast == full and "typer" in imported and "sqlalchemy" not in imported
    assert '"timed_out": true' in fast[0]
    # applied once: from now on the fast path answers, with the same document
    (out, _, _), imported = both(["status", doc["session_id"], "--json", "--db", str(db)], tmp_path)
    assert imported == "" and out == fast[0]


def test_pages_walk_every_session_once_in_order_ties_included(tmp_path: Path) -> None:
    """Sessions created in the same microsecond are ordered by id, and no page skips one."""
    from orchestrator import Sessions
    from orchestrator.store import Owner

    db = tmp_path / "pages.db"
    with Sessions(str(db)) as sessions:
        for i in range(7):
            sessions._opened.create(f"task {i}", agents={}, settings={}, owner=Owner())
        every = [s["session_id"] for s in sessions.list()]
    with sqlite3.connect(db) as conn:  # ended (no live owner), and three share one created_at
        conn.execute("UPDATE sessions SET status = 'completed', owner = NULL, owner_pid = NULL")
        conn.execute(
            "UPDATE sessions SET created_at = (SELECT created_at FROM sessions WHERE id = ?) "
            "WHERE id IN (?, ?)",
            (every[3], every[2], every[4]),
        )
    expected = [s["session_id"] for s in Sessions(str(db)).list()]
    assert sorted(expected) == sorted(every)
    # Every page of every walk, the first after none and each next after the last session
    # of the one before: run together (two interpreters), each page must hold the next
    # sessions in order and its hint must name exactly the next page's command.
    walks = {limit: [expected[i : i + limit] for i in range(0, 7, limit)] for limit in (1, 2, 3)}
    cases, pages = [], []
    for limit, walk in walks.items():
        for number, page in enumerate(walk):
            after = ["--after", walk[number - 1][-1]] if number else []
            cases.append(["list", "--limit", str(limit), *after, "--json", "--db", str(db)])
            pages.append((page, number == len(walk) - 1))
    results = {
        tuple(args): (got, imported) for args, got, imported in both_batched(cases, tmp_path)
    }
    for args, (page, last) in zip(cases, pages, strict=True):
        (out, err, code), imported = results[tuple(args)]
        assert code == 0 and imported == "", args
        assert [s["session_id"] for s in json.loads(out)] == page, args
        if last:
            assert err == "", args
        else:  # the next page's command line, as the walk above runs it
            more = ["--after", page[-1], "--limit", args[2], "--db", shlex.quote(str(db))]
            assert err == f"more sessions: orchestrator list {' '.join(more)}\n", args


def test_parse_reads_the_simple_forms_only() -> None:
    assert parse(["status", "abc"]) == Request("status", "abc")
    assert parse(["log", "--json", "abc", "--db=x.db"]) == Request(
        "log", "abc", db="x.db", as_json=True
    )
    assert parse(["list", "--all", "--status", "paused"]) == Request(
        "list", status="paused", limit=None
    )
    assert parse(["list", "--limit", "07", "--after", "abc"]) == Request(
        "list", limit=7, after="abc"
    )
    for argv in (
        [],
        ["run", "x"],
        ["status", "--db", "--json", "x"],
        ["status", "x", "--db="],
        ["log", "x", "--status", "paused"],  # --status is list's
        ["list", "--all", "--all"],
        ["list", "--limit", "+3"],
        ["list", "--limit", "３"],
        ["list", "x"],
        ["status", "-x"],
    ):
        assert parse(argv) is None, argv


def test_sqlite_file_agrees_with_the_full_path(tmp_path: Path) -> None:
    from orchestrator.store.connect import resolve_url, sqlite_path

    for db in (
        "x.db",
        str(tmp_path / "a b.db"),
        "~/data/o.db",
        f"sqlite:///{tmp_path}/u.db",
        "sqlite:///relative/r.db",
        "sqlite:///a:b@c.db",
    ):
        assert sqlite_file(db) == sqlite_path(resolve_url(db)), db


def test_resume_with_an_answer_on_sqlite_loads_no_sqlalchemy(tmp_path: Path) -> None:
    """Not the fast path, but as lean: the whole resume (claim, answer, graph, checkpoints)
    runs on the store's sqlite3 connection, so the process pays for LangGraph only."""
    from orchestrator import Sessions

    db = tmp_path / "resume.db"
    with Sessions(str(db)) as sessions:
        paused = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
    args = ["resume", paused, "--answer", "Weekly", "--db", str(db), "--json"]
    out, err, code, imported = _run(ENTRY, args, tmp_path)
    assert code == 0, err
    assert json.loads(out)["status"] == "completed"
    assert "typer" in imported and "sqlalchemy" not in imported


def test_resume_no_run_loads_neither_langgraph_nor_sqlalchemy(tmp_path: Path) -> None:
    """`resume --no-run` commits the answer and runs no graph: no LangGraph to load."""
    from orchestrator import Sessions

    db = tmp_path / "no-run.db"
    with Sessions(str(db)) as sessions:
        paused = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
    args = ["resume", paused, "--answer", "Weekly", "--no-run", "--db", str(db), "--json"]
    entry = ENTRY.replace(repr(HEAVY), repr((*HEAVY, "langgraph")))
    assert entry != ENTRY
    out, err, code, imported = _run(entry, args, tmp_path)
    assert code == 0, err
    assert json.loads(out)["waiting_for_driver"] is True
    assert "typer" in imported and "langgraph" not in imported
    assert "sqlalchemy" not in imported


def test_the_fast_path_and_typer_declare_the_same_options() -> None:
    """One table of options (cli/fastread.py's READ_COMMANDS) for both paths: Typer's registered
    options for status, list and log are exactly the fast path's (plus --help), and the
    --status values the same."""
    import typer.main

    from orchestrator.cli.commands import app
    from orchestrator.cli.fastread import READ_COMMANDS
    from orchestrator.documents import STATUS_FILTERS

    click_app = typer.main.get_command(app)
    for name, options in READ_COMMANDS.items():
        command = click_app.commands[name]  # type: ignore[attr-defined]
        declared = {
            opt
            for param in command.params
            if param.param_type_name == "option"
            for opt in param.opts
        } - {"--help", "-h"}
        assert declared == set(options.valued | options.flags), name
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        assert len(arguments) == options.positional, name
        if name == "list":
            status = next(p for p in command.params if "--status" in p.opts)
            choices = status.type_descriptor.annotation  # the enum Typer offers
            assert tuple(member.value for member in choices) == STATUS_FILTERS


def test_an_answered_session_past_its_old_deadline_stays_on_the_fast_path(tmp_path: Path) -> None:
    """The deadline only matters while the question is open: an answered session whose
    question's deadline has since passed is read by the fast path (nothing to apply)."""
    from orchestrator import Reply, Sessions

    db = tmp_path / "answered.db"
    with Sessions(str(db)) as sessions:
        doc = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml", settings={"timeout": 1})
        sessions.answer(doc["session_id"], Reply(text="Weekly"))  # handed off, not run
    time.sleep(1.2)
    args = ["status", doc["session_id"], "--json", "--db", str(db)]
    assert parse(args) is not None
    (out, _, code), imported = both(args, tmp_path)
    assert code == 0 and imported == ""  # no Typer, no SQLAlchemy: the fast path answered
    assert json.loads(out)["orchestrator_state"]["user_clarification_response"] == "Weekly"
