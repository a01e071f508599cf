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

This file is also the bare-LangGraph resume process of figure 3
(`run.py --bare-resume DB THREAD ANSWER`), so its module level imports only the standard
library: LangGraph and the project are imported inside the functions that need them.
"""

from __future__ import annotations

import json
import os
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

    def developer(arg: dict[str, Any]) -> dict[str, Any]:
        number = arg["task"]["number"]
        return {"results": {f"1:{number}": {"status": "done", "summary": f"task {number} done"}}}

    def join(state: BareState) -> dict[str, Any]:
        return {}

    def after_pm(state: BareState) -> Any:
        if state.get("outcome"):
            return END
        if state.get("answer") is None:
            return "gate"
        return [Send("developer", {"task": t}) for t in state["tasks"]]

    graph = StateGraph(BareState)
    graph.add_node("pm", pm)
    graph.add_node("gate", gate)
    graph.add_node("developer", developer)
    graph.add_node("join", join)
    graph.add_edge(START, "pm")
    graph.add_conditional_edges("pm", after_pm, ["gate", "developer", END])
    graph.add_edge("gate", "pm")
    graph.add_edge("developer", "join")
    graph.add_edge("join", "pm")
    return graph


def _bare_saver(path: Path) -> tuple[Any, Any]:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA busy_timeout = 30000")
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


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
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

    def __init__(self, home: Path) -> None:
        self.env = _env(home)
        self.notes: list[str] = []

    def run(self, argv: Sequence[str], *, expect: int = 0) -> tuple[float, str]:
        started = time.perf_counter()
        done = subprocess.run(
            list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL,
            cwd=ROOT, env=self.env, timeout=120,
        )
        elapsed = time.perf_counter() - started
        if done.returncode != expect:
            self.notes.append(
                f"`{' '.join(Path(a).name if '/' in a else a for a in argv)}` exited "
                f"{done.returncode} (expected {expect}): {done.stderr.strip()[-300:]}"
            )
        return elapsed, done.stdout


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def _stats(samples: Sequence[float]) -> str:
    return (
        f"median {_fmt_s(statistics.median(samples))}   min {_fmt_s(min(samples))}   "
        f"max {_fmt_s(max(samples))}   (n={len(samples)})"
    )


def _header(title: str) -> None:
    print(f"\n== {title}")


# -- figure 1: sessions per second, in-process --------------------------------------------


def _our_session_factory(db: Path) -> tuple[Callable[[], str], Callable[[str], dict[str, Any]]]:
    from agents.scripted import ScriptedBackend
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


def _bare_session_factory(db: Path) -> tuple[Callable[[], dict[str, Any]], Any]:
    from langgraph.types import Command

    saver, conn = _bare_saver(db)
    graph = _bare_graph().compile(checkpointer=saver)
    counter = iter(range(10**9))

    def one() -> dict[str, Any]:
        config = _bare_config(f"bare-{next(counter)}")
        first = graph.invoke(_bare_initial(), config)
        assert "__interrupt__" in first, "the bare graph did not stop at the question"
        return graph.invoke(Command(resume="All visible columns"), config)

    return one, conn


def figure_inprocess(tmp: Path, sessions: int, warmup: int, batches: int) -> float:
    _header("1. Sessions per second, in-process (examples/answered-question.yaml shape)")
    ours, view = _our_session_factory(tmp / "ours-inproc.db")
    bare, bare_conn = _bare_session_factory(tmp / "bare-inproc.db")
    ours_ids: list[str] = []
    bare_out: list[dict[str, Any]] = []
    for _ in range(warmup):
        ours()
        bare()
    # Alternate batches of ours and bare so that drift (CPU frequency, other load, the
    # files growing) hits both alike.
    per_batch = max(1, sessions // batches)
    ours_time = bare_time = 0.0
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(per_batch):
            ours_ids.append(ours())
        ours_time += time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(per_batch):
            bare_out.append(bare())
        bare_time += time.perf_counter() - started
    bare_conn.close()

    ours_rate = len(ours_ids) / ours_time
    bare_rate = len(bare_out) / bare_time
    ratio = ours_rate / bare_rate
    print(f"ours (Engine + ScriptedBackend + Store)  {ours_rate:8.1f} sessions/s   "
          f"{_fmt_s(ours_time / len(ours_ids))} per session")
    print(f"bare LangGraph + SqliteSaver (WAL)       {bare_rate:8.1f} sessions/s   "
          f"{_fmt_s(bare_time / len(bare_out))} per session")
    print(f"ratio ours/bare                          {ratio:8.2f}x   "
          f"(target >= {TARGET_INPROC_RATIO}x; {len(ours_ids)} sessions each after "
          f"{warmup} warm-up, {batches} alternating batches)")
    wrong = [s for s in ours_ids if (v := view(s))["status"] != "completed"
             or v["questions_surfaced"] != 1]
    wrong_bare = [o for o in bare_out if (o.get("outcome") or {}).get("status") != "completed"]
    if wrong or wrong_bare:
        print(f"note: {len(wrong)} of our sessions and {len(wrong_bare)} bare ones did not end "
              "completed with one question; the rates above are not comparable")
    return ratio


# -- figure 2: `orchestrator status ID --json`, whole process -----------------------------


def figure_status(tmp: Path, proc: Proc, runs: int) -> float:
    _header("2. `orchestrator status ID --json`, whole process (subprocess wall time)")
    db = tmp / "status.db"
    _, out = proc.run(
        [*_orchestrator_cmd(), "run", "--script", str(ANSWERED), "--ui", "none",
         "--db", str(db), "--json"],
        expect=0,
    )
    session_id = json.loads(out)["session_id"]
    status_cmd = [*_orchestrator_cmd(), "status", session_id, "--db", str(db), "--json"]
    references = {
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import langgraph.graph"': [PYTHON, "-c", "import langgraph.graph"],
    }
    proc.run(status_cmd)  # warm-up: page cache, bytecode
    for argv in references.values():
        proc.run(argv)
    samples: dict[str, list[float]] = {"orchestrator status ID --json": []}
    samples.update({name: [] for name in references})
    for _ in range(runs):  # interleaved, so drift hits all alike
        samples["orchestrator status ID --json"].append(proc.run(status_cmd)[0])
        for name, argv in references.items():
            samples[name].append(proc.run(argv)[0])
    width = max(len(name) for name in samples)
    for name, values in samples.items():
        print(f"{name:<{width}}  {_stats(values)}")
    median = statistics.median(samples["orchestrator status ID --json"])
    print(f"target: `status` median under {TARGET_STATUS_S * 1000:.0f} ms")
    return median


# -- figure 3: `orchestrator resume ID --answer X --json` vs. a bare resume process -------


def _paused_session(proc: Proc, db: Path) -> str:
    _, out = proc.run(
        [*_orchestrator_cmd(), "run", "--script", str(PAUSING), "--ui", "none",
         "--db", str(db), "--json"],
        expect=3,
    )
    return str(json.loads(out)["session_id"])


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


def figure_resume(tmp: Path, proc: Proc, runs: int) -> float:
    _header("3. Resume a paused session to the end, whole process (subprocess wall time)")
    answer = "Weekly, on Monday mornings"
    # Preparation, outside the timing: every run gets its own fresh paused session (ours:
    # `run --script examples/pause-and-resume.yaml --ui none`, exit 3) and its own thread
    # interrupted at the same point (bare), each on a file of its own.
    ours_jobs, bare_jobs = [], []
    for i in range(runs + 1):  # +1: warm-up
        db = tmp / f"resume-ours-{i}.db"
        ours_jobs.append([*_orchestrator_cmd(), "resume", _paused_session(proc, db),
                          "--answer", answer, "--db", str(db), "--json"])
        bare_db = tmp / f"resume-bare-{i}.db"
        bare_jobs.append([PYTHON, str(THIS), "--bare-resume", str(bare_db),
                          _interrupted_thread(bare_db), answer])
    proc.run(ours_jobs.pop())  # warm-up
    proc.run(bare_jobs.pop())
    ours: list[float] = []
    bare: list[float] = []
    for ours_job, bare_job in zip(ours_jobs, bare_jobs, strict=True):  # interleaved
        elapsed, out = proc.run(ours_job)
        ours.append(elapsed)
        if json.loads(out or "{}").get("status") != "completed":
            proc.notes.append(f"our resume did not complete the session: {out[:200]}")
        bare.append(proc.run(bare_job)[0])
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"orchestrator resume ID --answer X --json  {_stats(ours)}")
    print(f"bare LangGraph resume process             {_stats(bare)}")
    print(f"ratio ours/bare (medians)                 {ratio:7.2f}x   "
          f"(target <= {TARGET_RESUME_RATIO}x)")
    return ratio


# -- main ---------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--bare-resume"]:
        return bare_resume_main(argv[1:])
    quick = "--quick" in argv
    sys.path.insert(0, str(ROOT))
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs; "
          f"hyperfine {'found (unused)' if shutil.which('hyperfine') else 'not installed'}; "
          "timing with time.perf_counter")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        proc = Proc(tmp / "home")
        if quick:
            figure_inprocess(tmp, sessions=8, warmup=1, batches=2)
            figure_status(tmp, proc, runs=3)
            figure_resume(tmp, proc, runs=2)
        else:
            figure_inprocess(tmp, sessions=40, warmup=3, batches=4)
            figure_status(tmp, proc, runs=10)
            figure_resume(tmp, proc, runs=7)
        if proc.notes:
            print("\nnotes (unexpected exit codes or output; figures above may be off):")
            for note in proc.notes:
                print(f"  - {note}")
    print(f"\n(benchmark took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
