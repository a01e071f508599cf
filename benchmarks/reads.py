"""Whole-process figures for the read commands: `status`, `list` and `log` against Python's
own start and LangGraph's import, and `list --json` on 100,000 sessions against one."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from proc import PYTHON, ROOT, Proc, Row, Sample, orchestrator_cmd

__all__ = ["figure_reads", "figure_big_list", "big_database"]

ANSWERED = ROOT / "examples" / "answered-question.yaml"
TARGET_VS_IMPORT = 0.12  # x `python -c "import langgraph.graph"`, at most
TARGET_VS_PASS_CPU = 4.0  # x `python -c pass` CPU, at most
TARGET_RSS = 25.0  # MiB
TARGET_BIG_RATIO = 1.5  # x the same on a 1-session database, at most
TARGET_BIG_RSS = 30.0  # MiB
BIG = 100_000
# `status` of a session whose question was answered and whose deadline has since passed:
# nothing to apply, so the fast path answers it (issue 22: it used to fall off it).
AGED = "orchestrator status ID --json (answered, deadline passed)"


def one_session_db(proc: Proc, db: Path) -> str:
    """A database holding one completed session (made by the real CLI); its id."""
    made = proc.run(
        [*orchestrator_cmd(), "run", "--script", str(ANSWERED), "--ui", "none"]
        + ["--db", str(db), "--json"]
    )
    return str(json.loads(made.out or "{}").get("session_id", "missing"))


def _sample(proc: Proc, commands: dict[str, list[str]], runs: int) -> dict[str, Sample]:
    for argv in commands.values():  # warm-up: page cache, bytecode cache
        proc.run(argv)
    samples = {name: Sample() for name in commands}
    for _ in range(runs):  # interleaved, so drift hits all alike
        for name, argv in commands.items():
            samples[name].add(proc.run(argv))
    return samples


def figure_reads(tmp: Path, proc: Proc, runs: int) -> Row:
    print("\n== `status`, `list`, `log` (--json), whole process, on a 1-session database")
    db = tmp / "reads.db"
    sid = one_session_db(proc, db)
    aged = tmp / "reads-aged.db"
    _copy(db, aged)
    with sqlite3.connect(aged) as conn:  # its answered question's deadline passed a day ago
        conn.execute("UPDATE orchestrator_state SET deadline = deadline - 86400")
    conn.close()
    orch = orchestrator_cmd()
    commands = {
        "orchestrator status ID --json": [*orch, "status", sid, "--db", str(db), "--json"],
        AGED: [*orch, "status", sid, "--db", str(aged), "--json"],
        "orchestrator list --json": [*orch, "list", "--db", str(db), "--json"],
        "orchestrator log ID --json": [*orch, "log", sid, "--db", str(db), "--json"],
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import langgraph.graph"': [PYTHON, "-c", "import langgraph.graph"],
    }
    samples = _sample(proc, commands, runs)
    width = max(map(len, commands))
    for name, sample in samples.items():
        print(f"{name:<{width}}  {sample.line()}")
    base, heavy = samples["python -c pass"], samples['python -c "import langgraph.graph"']
    figures, met = [], True
    for name in list(commands)[:4]:
        s = samples[name]
        vs_import = (s.wall / heavy.wall, s.cpu / heavy.cpu)
        vs_pass = (s.wall / base.wall, s.cpu / base.cpu)
        short = "status, answered, past its deadline" if name == AGED else name.split()[1]
        figures.append(
            f"{short}: {vs_import[0]:.2f}x the import by wall ({vs_import[1]:.2f}x CPU), "
            f"{vs_pass[1]:.1f}x `python -c pass` CPU ({vs_pass[0]:.1f}x wall), "
            f"{s.rss:.1f} MiB"
        )
        met = met and max(vs_import) <= TARGET_VS_IMPORT
        met = met and vs_pass[1] <= TARGET_VS_PASS_CPU and s.rss <= TARGET_RSS
    print(f"(medians of {runs} runs each, after one warm-up, interleaved)")
    return Row(
        "`status` / `list` / `log` whole process (and `status` past an answered deadline)",
        figures,
        f"<= {TARGET_VS_IMPORT}x `python -c 'import langgraph.graph'` and <= "
        f"{TARGET_VS_PASS_CPU:g}x `python -c pass` CPU; <= {TARGET_RSS:g} MiB",
        met,
        "benchmarks/run.py --only reads",
    )


def big_database(proc: Proc, tmp: Path, count: int = BIG) -> tuple[Path, Path]:
    """(a database of `count` sessions, one of 1 session), built with SQL from one real
    session and cached across runs in the temp dir (keyed by the schema revision)."""
    from orchestrator.store.schema import HEAD_REVISION

    # Keyed by the migrations' contents too: branches re-chain revisions, so one id can
    # name two schemas.
    migrations = sorted((ROOT / "migrations" / "versions").glob("*.py"))
    schema = hashlib.sha1(b"".join(p.read_bytes() for p in migrations)).hexdigest()[:10]
    cache = Path(tempfile.gettempdir()) / "orchestrator-bench-cache"
    cache.mkdir(exist_ok=True)
    big = cache / f"sessions-{count}-rev{HEAD_REVISION}-{schema}.db"
    one = cache / f"sessions-1-rev{HEAD_REVISION}-{schema}.db"
    if big.exists() and one.exists():
        return big, one
    started = time.perf_counter()
    template = tmp / "template.db"
    sid = one_session_db(proc, template)
    building = tmp / "building.db"
    _copy(template, building)
    conn = sqlite3.connect(building, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        for table, key in (("sessions", "id"), ("orchestrator_state", "session_id")):
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            values = {
                key: "printf('b%011x', n.i)",
                "status": "CASE n.i % 5 WHEN 0 THEN 'running' WHEN 1 THEN 'paused' "
                "WHEN 2 THEN 'completed' WHEN 3 THEN 'failed' ELSE 'cancelled' END",
                # distinct times in SQLAlchemy's format, all older than the template
                "created_at": "printf('%s.%06d', datetime(1700000000 + n.i, 'unixepoch'), n.i)",
                "updated_at": "printf('%s.%06d', datetime(1700000000 + n.i, 'unixepoch'), n.i)",
                "owner": "NULL",
                "owner_pid": "NULL",
                "owner_host": "NULL",
                "lease_expires_at": "NULL",
            }
            select = ", ".join(values.get(c, f"t.{c}") for c in columns)
            conn.execute(
                f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                f"WHERE i < {count - 1}) INSERT INTO {table} ({', '.join(columns)}) "
                f"SELECT {select} FROM n, {table} AS t WHERE t.{key} = ?",
                (sid,),
            )
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    building.replace(big)
    _copy(template, one)
    print(f"(built {big} in {time.perf_counter() - started:.1f} s; reused by later runs)")
    return big, one


def _copy(source: Path, target: Path) -> None:
    """A consistent copy of a live SQLite database, its WAL included (the backup API)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def figure_big_list(tmp: Path, proc: Proc, runs: int, *, everything: bool) -> Row:
    print(f"\n== `list --json` on {BIG:,} sessions vs on 1, whole process")
    big, one = big_database(proc, tmp)
    orch = orchestrator_cmd()
    commands = {
        f"list --json ({BIG:,} sessions)": [*orch, "list", "--db", str(big), "--json"],
        "list --json (1 session)": [*orch, "list", "--db", str(one), "--json"],
    }
    samples = _sample(proc, commands, runs)
    width = max(map(len, commands))
    for name, sample in samples.items():
        print(f"{name:<{width}}  {sample.line()}")
    page = json.loads(samples[next(iter(commands))].runs[-1].out or "[]")
    print(f"(a page of {len(page)} sessions; the next page's command is on stderr)")
    if everything:
        run = proc.run([*orch, "list", "--all", "--db", str(big), "--json"])
        print(
            f"list --all --json ({BIG:,} sessions): wall {run.wall:.2f} s, cpu {run.cpu:.2f} s, "
            f"rss {run.rss:.0f} MiB, {len(run.out) / 1e6:.0f} MB of JSON (one run)"
        )
    big_s, one_s = samples.values()
    ratio = (big_s.wall / one_s.wall, big_s.cpu / one_s.cpu)
    return Row(
        f"`list --json` on {BIG:,} sessions",
        [
            f"{ratio[0]:.2f}x the 1-session database by wall ({ratio[1]:.2f}x CPU), "
            f"{big_s.rss:.1f} MiB, {len(page)} sessions per page"
        ],
        f"<= {TARGET_BIG_RATIO}x the same on a 1-session database, <= {TARGET_BIG_RSS:g} MiB",
        max(ratio) <= TARGET_BIG_RATIO and big_s.rss <= TARGET_BIG_RSS,
        "benchmarks/run.py --only biglist",
    )
