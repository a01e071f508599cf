"""`orchestrator resume ID --answer X --json` against a bare LangGraph process that resumes
an equivalent interrupted thread to the end, whole processes."""

from __future__ import annotations

import json
from pathlib import Path

import bare
from proc import PYTHON, ROOT, Proc, Row, Sample, orchestrator_cmd

__all__ = ["figure_resume"]

PAUSING = ROOT / "examples" / "pause-and-resume.yaml"  # no scripted answer: pauses (exit 3)
TARGET = 0.95  # ours / bare, wall and CPU, at most
ANSWER = "Weekly, on Monday mornings"
# The bare process imports benchmarks/bare.py as a module (bytecode-cached like installed
# code) and resumes the thread; bare.py imports only the standard library at module level.
BARE_RESUME = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import bare; "
    "sys.exit(bare.resume_main(sys.argv[1:]))"
)


def _paused_session(proc: Proc, db: Path) -> str:
    made = proc.run(
        [*orchestrator_cmd(), "run", "--script", str(PAUSING), "--ui", "none"]
        + ["--db", str(db), "--json"],
        expect=3,
    )
    return str(json.loads(made.out or "{}").get("session_id", "missing"))


def figure_resume(tmp: Path, proc: Proc, runs: int) -> Row:
    print("\n== resume a paused session with the answer, to the end, whole process")
    # Outside the timing: every run gets its own freshly paused session (ours) and its own
    # thread interrupted at the same point (bare), each in a file of its own.
    jobs: list[tuple[list[str], list[str]]] = []
    for i in range(runs + 1):  # +1: warm-up
        db, bare_db = tmp / f"resume-ours-{i}.db", tmp / f"resume-bare-{i}.db"
        sid = _paused_session(proc, db)
        thread = bare.interrupted_thread(bare_db)
        jobs.append(
            (
                [*orchestrator_cmd(), "resume", sid, "--answer", ANSWER, "--db", str(db), "--json"],
                [PYTHON, "-c", BARE_RESUME, str(Path(bare.__file__).parent), str(bare_db)]
                + [thread, ANSWER],
            )
        )
    warm_ours, warm_bare = jobs.pop()
    proc.run(warm_ours)
    proc.run(warm_bare)
    ours, theirs = Sample(), Sample()
    for ours_job, bare_job in jobs:  # interleaved
        run = proc.run(ours_job)
        ours.add(run)
        if json.loads(run.out or "{}").get("status") != "completed":
            proc.notes.append(f"our resume did not complete the session: {run.out[:200]!r}")
        run = proc.run(bare_job)
        theirs.add(run)
        if (json.loads(run.out or "{}").get("outcome") or {}).get("status") != "completed":
            proc.notes.append(f"the bare resume did not complete its thread: {run.out[:200]!r}")
    print(f"orchestrator resume ID --answer X --json  {ours.line()}")
    print(f"bare LangGraph resume process             {theirs.line()}")
    print(f"(medians of {runs} runs each, after one warm-up; each resumes its own session)")
    ratio = (ours.wall / theirs.wall, ours.cpu / theirs.cpu)
    return Row(
        "`resume --answer` process vs a bare LangGraph resume process",
        [
            f"{ratio[0]:.2f}x wall, {ratio[1]:.2f}x CPU (ours {ours.rss:.0f} MiB, "
            f"bare {theirs.rss:.0f} MiB)"
        ],
        f"<= {TARGET}x both",
        max(ratio) <= TARGET,
        "benchmarks/run.py --only resume",
    )
