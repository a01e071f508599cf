"""Benchmarks: print figures for our engine and CLI next to bare LangGraph. No pass/fail.

    make bench            (or: .venv/bin/python benchmarks/run.py)

Figures (see benchmarks/README.md for what each one means and its target):
  1. sessions/s in-process: Engine + ScriptedBackend vs. the same graph shape in bare
     LangGraph + SqliteSaver (one answered question, two developers);
  2. whole-process wall time of `orchestrator status ID --json`, with the bare
     `python -c "import langgraph.graph"` time for reference;
  3. whole-process wall time of `orchestrator resume ID --answer X --json` vs. a bare
     LangGraph process that resumes an equivalent interrupted thread to the end.

Options: --quick (fewer repetitions, for a smoke test).

Wall time is what a user waits; CPU time (user + sys of the process and its threads) is
printed beside it because it is much less disturbed by other load on the machine. The load
average is printed at the start and the end: compare runs made on a quiet machine.

Subprocesses run with HOME/XDG_* in a temp dir, an explicit --db, stdin from /dev/null,
and bytecode caching on (PYTHONPYCACHEPREFIX in the temp dir, PYTHONDONTWRITEBYTECODE
dropped), as after a normal install, without writing __pycache__ into the repository.

This file is also the bare-LangGraph resume process of figure 3 (imported as a module and
`bare_resume_main` run; also `run.py --bare-resume DB THREAD ANSWER`), so its module level
imports only the standard library: LangGraph and the project are imported inside the
functions that need them.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
ANSWERED = EXAMPLES / "answered-question.yaml"  # one answered question, two developers
PAUSING = EXAMPLES / "pause-and-resume.yaml"  # no scripted answer: pauses (exit 3)
PYTHON = sys.executable
THIS = Path(__file__).resolve()

TARGET_INPROC_RATIO = 0.5  # ours / bare sessions per second, at least
TARGET_STATUS_S = 0.35  # `status --json` whole process, median, at most
TARGET_RESUME_RATIO = 1.15  # ours / bare resume process time, median, at most


# -- the bare LangGraph graph (same shape as orchestrator.graph) -------------------------
#
# pm -> gate (interrupt: one question) -> [resume] -> pm plans 2 tasks -> Send fan-out to
# two `developer` nodes -> join -> pm completes -> END. Plain JSON state, SqliteSaver on a
# SQLite file in WAL mode, with the same connection settings as orchestrator.checkpoints.


def _merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class BareState(TypedDict, total=False):
    calls: int
    question: str | None
    answer: str | None
    tasks: list[dict[str, Any]]
    results: Annotated[dict[str, dict[str, Any]], _merge]
    outcome: dict[str, Any] | None


class BareDeveloperInput(TypedDict):
    task: dict[str, Any]


def _bare_graph() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send, interrupt

    def pm(state: BareState) -> dict[str, Any]:
        calls = state.get("calls", 0) + 1
        if state.get("answer") is None:
            return {"calls": calls, "question": "How often should the digest be sent?"}
        if not state.get("tasks"):
            tasks = [
                {"number": 1, "title": "Digest job and schedule", "status": "pending"},
                {"number": 2, "title": "Email template", "status": "pending"},
            ]
            return {"calls": calls, "tasks": tasks}
        return {"calls": calls, "outcome": {"status": "completed", "summary": "shipped"}}

    def gate(state: BareState) -> dict[str, Any]:
        answer = interrupt({"question": state["question"], "asked_by": "pm"})
        return {"answer": answer}

    def developer(state: BareDeveloperInput) -> dict[str, Any]:
        number = state["task"]["number"]
        return {"results": {f"1:{number}": {"status": "done", "summary": f"task {number} done"}}}

    def join(state: BareState) -> dict[str, Any]:
        return {}

    def after_pm(state: BareState) -> Any:
        if state.get("outcome"):
            return END
        if state.get("answer") is None:
            return "gate"
        return [Send("developer", BareDeveloperInput(task=t)) for t in state["tasks"]]

    graph = StateGraph(BareState)
    graph.add_node("pm", pm)
    graph.add_node("gate", gate)
    graph.add_node("developer", developer, input_schema=BareDeveloperInput)
    graph.add_node("join", join)
    graph.add_edge(START, "pm")
    graph.add_conditional_edges("pm", after_pm, ["gate", "developer", END])
    graph.add_edge("gate", "pm")
    graph.add_edge("developer", "join")
    graph.add_edge("join", "pm")
    return graph


def _bare_saver(path: Path, synchronous: str | None = None) -> tuple[Any, Any]:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA busy_timeout = 30000")
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


def _bare_config(thread_id: str) -> dict[str, Any]:
    # Same as the engine gives a scripted run: developers one at a time.
    return {"configurable": {"thread_id": thread_id}, "max_concurrency": 1}


def _bare_initial() -> dict[str, Any]:
    return {"calls": 0, "tasks": [], "results": {}}


def bare_resume_main(argv: Sequence[str]) -> int:
    """Figure 3's bare process: resume one interrupted thread to the end, print its state."""
    from langgraph.types import Command

    db, thread_id, answer = argv
    saver, conn = _bare_saver(Path(db))
    try:
        graph = _bare_graph().compile(checkpointer=saver)
        values = graph.invoke(Command(resume=answer), _bare_config(thread_id))
    finally:
        conn.close()
    print(json.dumps(values, indent=2))
    return 0 if (values.get("outcome") or {}).get("status") == "completed" else 1


# -- helpers ------------------------------------------------------------------------------


def _env(home: Path, pycache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["HOME"] = str(home)
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    for key in ("ORCHESTRATOR_DB", "ORCHESTRATOR_CRASH_AT"):
        env.pop(key, None)
    return env


def _orchestrator_cmd() -> list[str]:
    script = Path(PYTHON).parent / "orchestrator"
    return [str(script)] if script.exists() else [PYTHON, "-m", "orchestrator"]


class Proc:
    """Runs commands in a new process, as a user would, and times the whole process."""

    def __init__(self, home: Path, pycache: Path) -> None:
        self.env = _env(home, pycache)
        self.notes: list[str] = []

    def run(self, argv: Sequence[str], *, expect: int = 0) -> tuple[float, float, str]:
        """Run `argv` to its end; return (wall seconds, CPU seconds, stdout)."""
        cpu_before = _children_cpu()
        started = time.perf_counter()
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=self.env,
            timeout=120,
        )
        elapsed = time.perf_counter() - started
        cpu = _children_cpu() - cpu_before
        if done.returncode != expect:
            self.notes.append(
                f"`{' '.join(Path(a).name if '/' in a else a for a in argv)}` exited "
                f"{done.returncode} (expected {expect}): {done.stderr.strip()[-300:]}"
            )
        return elapsed, cpu, done.stdout


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def _stats(wall: Sequence[float], cpu: Sequence[float]) -> str:
    return (
        f"median {_fmt_s(statistics.median(wall))}   min {_fmt_s(min(wall))}   "
        f"max {_fmt_s(max(wall))}   cpu median {_fmt_s(statistics.median(cpu))}"
    )


def _header(title: str) -> None:
    print(f"\n== {title}")


# -- figure 1: sessions per second, in-process --------------------------------------------


def _our_session_factory(db: Path) -> tuple[Callable[[], str], Callable[[str], dict[str, Any]]]:
    from orchestrator.agents.scripted import ScriptedBackend

    from orchestrator.engine import Engine
    from orchestrator.scenario import load_scenario
    from orchestrator.store import Store, open_engine

    scenario = load_scenario(ANSWERED)
    # The settings `orchestrator run --script` stores (scripted answers first).
    if hasattr(scenario, "session_settings"):
        settings: dict[str, Any] = scenario.session_settings(source=str(ANSWERED))
    else:
        settings = scenario.settings.model_dump()
        settings["answers"] = [
            a if isinstance(a, str) else a.model_dump() for a in scenario.answers
        ]
        if scenario.expect is not None:
            settings["expect"] = scenario.expect.model_dump(exclude_none=True)
        settings["scenario"] = str(ANSWERED)
    url = f"sqlite:///{db}"
    store = Store(open_engine(url))  # migrations run here, outside the timing
    engine = Engine(store, url, ask_user=None)

    def one() -> str:
        backend = ScriptedBackend(scenario.agents, replies_so_far={})
        return engine.start(scenario.task, backend, settings)

    return one, store.view


def _bare_session_factory(
    db: Path, synchronous: str | None = None
) -> tuple[Callable[[], dict[str, Any]], Any]:
    from langgraph.types import Command

    saver, conn = _bare_saver(db, synchronous)
    graph = _bare_graph().compile(checkpointer=saver)
    counter = iter(range(10**9))

    def one() -> dict[str, Any]:
        config = _bare_config(f"bare-{next(counter)}")
        first = graph.invoke(_bare_initial(), config)
        assert "__interrupt__" in first, "the bare graph did not stop at the question"
        return graph.invoke(Command(resume="All visible columns"), config)

    return one, conn


def figure_inprocess(tmp: Path, sessions: int, warmup: int, batches: int) -> None:
    _header("1. Sessions per second, in-process (examples/answered-question.yaml shape)")
    ours, view = _our_session_factory(tmp / "ours-inproc.db")
    bare, bare_conn = _bare_session_factory(tmp / "bare-inproc.db")
    # Our store and checkpointer run SQLite at synchronous=NORMAL (the user's answer alone
    # is committed with FULL); bare LangGraph's default is FULL, an fsync per checkpoint.
    # The NORMAL run shows our overhead apart from the disk.
    bare_n, bare_n_conn = _bare_session_factory(tmp / "bare-normal.db", "NORMAL")
    ours_ids: list[str] = []
    bare_out: list[dict[str, Any]] = []
    bare_n_out: list[dict[str, Any]] = []
    for _ in range(warmup):
        ours()
        bare()
        bare_n()
    # Alternate batches of ours and bare so that drift (CPU frequency, other load, the
    # files growing) hits both alike.
    per_batch = max(1, sessions // batches)
    wall = {"ours": 0.0, "bare": 0.0, "bare_n": 0.0}
    cpu = {"ours": 0.0, "bare": 0.0, "bare_n": 0.0}
    for _ in range(batches):
        for name, one, sink in (
            ("ours", ours, ours_ids),
            ("bare", bare, bare_out),
            ("bare_n", bare_n, bare_n_out),
        ):
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(per_batch):
                sink.append(one())  # type: ignore[arg-type]
            wall[name] += time.perf_counter() - started
            cpu[name] += time.process_time() - cpu_started
    bare_conn.close()
    bare_n_conn.close()

    n = len(ours_ids)
    rate = {name: n / wall[name] for name in wall}
    print(
        f"ours (Engine + ScriptedBackend + Store)  {rate['ours']:7.1f} sessions/s   "
        f"{_fmt_s(wall['ours'] / n)} per session   cpu {_fmt_s(cpu['ours'] / n)}"
    )
    print(
        f"bare LangGraph + SqliteSaver (WAL)       {rate['bare']:7.1f} sessions/s   "
        f"{_fmt_s(wall['bare'] / n)} per session   cpu {_fmt_s(cpu['bare'] / n)}"
    )
    print(
        f"bare, synchronous=NORMAL like ours       {rate['bare_n']:7.1f} sessions/s   "
        f"{_fmt_s(wall['bare_n'] / n)} per session   cpu {_fmt_s(cpu['bare_n'] / n)}"
    )
    print(
        f"ratio ours/bare                          {rate['ours'] / rate['bare']:7.2f}x   "
        f"(by CPU time {cpu['bare'] / cpu['ours']:.2f}x; target >= {TARGET_INPROC_RATIO}x)"
    )
    print(
        f"ratio ours/bare at equal durability      {rate['ours'] / rate['bare_n']:7.2f}x   "
        f"(by CPU time {cpu['bare_n'] / cpu['ours']:.2f}x)"
    )
    print(f"({n} sessions each after {warmup} warm-up, in {batches} alternating batches)")
    wrong = [
        s
        for s in ours_ids
        if (v := view(s))["status"] != "completed" or v["questions_surfaced"] != 1
    ]
    wrong_bare = [o for o in bare_out if (o.get("outcome") or {}).get("status") != "completed"]
    if wrong or wrong_bare:
        print(
            f"note: {len(wrong)} of our sessions and {len(wrong_bare)} bare ones did not end "
            "completed with one question; the rates above are not comparable"
        )


# -- figure 2: `orchestrator status ID --json`, whole process -----------------------------


def figure_status(tmp: Path, proc: Proc, runs: int) -> None:
    _header("2. `orchestrator status ID --json`, whole process (subprocess wall time)")
    db = tmp / "status.db"
    _, _, out = proc.run(
        [
            *_orchestrator_cmd(),
            "run",
            "--script",
            str(ANSWERED),
            "--ui",
            "none",
            "--db",
            str(db),
            "--json",
        ],
        expect=0,
    )
    session_id = json.loads(out or "{}").get("session_id", "missing")
    commands = {
        "orchestrator status ID --json": [
            *_orchestrator_cmd(),
            "status",
            session_id,
            "--db",
            str(db),
            "--json",
        ],
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import langgraph.graph"': [PYTHON, "-c", "import langgraph.graph"],
    }
    for argv in commands.values():  # warm-up: page cache, bytecode cache
        proc.run(argv)
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved, so drift hits all alike
        for name, argv in commands.items():
            elapsed, used, _ = proc.run(argv)
            wall[name].append(elapsed)
            cpu[name].append(used)
    width = max(len(name) for name in commands)
    for name in commands:
        print(f"{name:<{width}}  {_stats(wall[name], cpu[name])}")
    print(
        f"(n={runs} each, after one warm-up; target: `status` median under "
        f"{TARGET_STATUS_S * 1000:.0f} ms)"
    )


# -- figure 3: `orchestrator resume ID --answer X --json` vs. a bare resume process -------


def _paused_session(proc: Proc, db: Path) -> str:
    _, _, out = proc.run(
        [
            *_orchestrator_cmd(),
            "run",
            "--script",
            str(PAUSING),
            "--ui",
            "none",
            "--db",
            str(db),
            "--json",
        ],
        expect=3,
    )
    return str(json.loads(out or "{}").get("session_id", "missing"))


def _interrupted_thread(db: Path) -> str:
    saver, conn = _bare_saver(db)
    try:
        graph = _bare_graph().compile(checkpointer=saver)
        thread_id = db.stem
        out = graph.invoke(_bare_initial(), _bare_config(thread_id))
        assert "__interrupt__" in out, "the bare graph did not stop at the question"
    finally:
        conn.close()
    return thread_id


# The bare process imports this file as a module (bytecode-cached like any installed code)
# and runs bare_resume_main; only the standard library is imported at module level.
BARE_RESUME = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import run; "
    "sys.exit(run.bare_resume_main(sys.argv[1:]))"
)


def figure_resume(tmp: Path, proc: Proc, runs: int) -> None:
    _header("3. Resume a paused session to the end, whole process (subprocess wall time)")
    answer = "Weekly, on Monday mornings"
    # Preparation, outside the timing: every run gets its own fresh paused session (ours:
    # `run --script examples/pause-and-resume.yaml --ui none`, exit 3) and its own thread
    # interrupted at the same point (bare), each in a file of its own.
    ours_jobs, bare_jobs = [], []
    for i in range(runs + 1):  # +1: warm-up
        db = tmp / f"resume-ours-{i}.db"
        ours_jobs.append(
            [
                *_orchestrator_cmd(),
                "resume",
                _paused_session(proc, db),
                "--answer",
                answer,
                "--db",
                str(db),
                "--json",
            ]
        )
        bare_db = tmp / f"resume-bare-{i}.db"
        bare_jobs.append(
            [
                PYTHON,
                "-c",
                BARE_RESUME,
                str(THIS.parent),
                str(bare_db),
                _interrupted_thread(bare_db),
                answer,
            ]
        )
    proc.run(ours_jobs.pop())  # warm-up
    proc.run(bare_jobs.pop())
    wall: dict[str, list[float]] = {"ours": [], "bare": []}
    cpu: dict[str, list[float]] = {"ours": [], "bare": []}
    for ours_job, bare_job in zip(ours_jobs, bare_jobs, strict=True):  # interleaved
        elapsed, used, out = proc.run(ours_job)
        wall["ours"].append(elapsed)
        cpu["ours"].append(used)
        if json.loads(out or "{}").get("status") != "completed":
            proc.notes.append(f"our resume did not complete the session: {out[:200]!r}")
        elapsed, used, out = proc.run(bare_job)
        wall["bare"].append(elapsed)
        cpu["bare"].append(used)
        if (json.loads(out or "{}").get("outcome") or {}).get("status") != "completed":
            proc.notes.append(f"the bare resume did not complete its thread: {out[:200]!r}")
    ratio = statistics.median(wall["ours"]) / statistics.median(wall["bare"])
    cpu_ratio = statistics.median(cpu["ours"]) / statistics.median(cpu["bare"])
    print(f"orchestrator resume ID --answer X --json  {_stats(wall['ours'], cpu['ours'])}")
    print(f"bare LangGraph resume process             {_stats(wall['bare'], cpu['bare'])}")
    print(
        f"ratio ours/bare (medians)                 {ratio:7.2f}x   "
        f"(by CPU time {cpu_ratio:.2f}x; target <= {TARGET_RESUME_RATIO}x)"
    )
    print(f"(n={runs} each, after one warm-up; every run resumes its own paused session)")


# -- main ---------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--bare-resume"]:
        return bare_resume_main(argv[1:])
    quick = "--quick" in argv
    sys.path.insert(0, str(ROOT))
    print(
        f"python {sys.version.split()[0]} on {sys.platform}; "
        f"hyperfine {'found (unused)' if shutil.which('hyperfine') else 'not installed'}; "
        f"timing with time.perf_counter; {_load()}"
    )
    if os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print("note: the machine is busy: wall times are inflated (CPU times much less)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        proc = Proc(tmp / "home", tmp / "pycache")
        if quick:
            figure_inprocess(tmp, sessions=8, warmup=1, batches=2)
            figure_status(tmp, proc, runs=3)
            figure_resume(tmp, proc, runs=2)
        else:
            figure_inprocess(tmp, sessions=60, warmup=5, batches=6)
            figure_status(tmp, proc, runs=10)
            figure_resume(tmp, proc, runs=7)
        if proc.notes:
            print("\nnotes (unexpected exit codes or output; the figures above may be off):")
            for note in proc.notes:
                print(f"  - {note}")
    print(f"\n(benchmark took {time.perf_counter() - started:.0f} s; at the end: {_load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
