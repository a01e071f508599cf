"""Benchmarks: every row of the performance table, each as a ratio measured in this run.

    make bench                                  (or: .venv/bin/python benchmarks/run.py)
    .venv/bin/python benchmarks/run.py --quick  fewer repetitions, a smoke test
    .venv/bin/python benchmarks/run.py --only reads,biglist   some figures only

Figures (see benchmarks/README.md): reads (status/list/log whole process), biglist
(`list --json` on 100,000 sessions), inprocess (sessions/s against bare LangGraph),
resume (`resume --answer` process against a bare one), bytes (per completed session),
statements (SQL per session), long (CPU per agent call as plans grow). No pass/fail: each
row prints its target and whether this run met it. Wall time is what a user waits; CPU
time is printed beside it because other load on the machine disturbs it much less.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import long  # noqa: E402
import reads  # noqa: E402
import resume  # noqa: E402
import sessions  # noqa: E402
from proc import Proc, Row, load, summary  # noqa: E402

FIGURES = ("reads", "biglist", "inprocess", "inprocess_pg", "resume", "bytes", "statements", "long")


def main(argv: Sequence[str]) -> int:
    quick = "--quick" in argv
    only = set(FIGURES)
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].split(","))
        unknown = only - set(FIGURES)
        if unknown:
            print(f"unknown figure(s) {sorted(unknown)}; choose from {', '.join(FIGURES)}")
            return 2
    print(f"python {sys.version.split()[0]} on {sys.platform}; {load()}")
    if os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print("note: the machine is busy: wall times are inflated (CPU times much less)")
    started = time.perf_counter()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-") as name:
        tmp = Path(name)
        proc = Proc(tmp)
        plan: dict[str, Callable[[], Row]] = {
            "reads": lambda: reads.figure_reads(tmp, proc, runs=3 if quick else 10),
            "biglist": lambda: reads.figure_big_list(
                tmp, proc, runs=2 if quick else 5, everything=not quick
            ),
            "inprocess": lambda: sessions.figure_inprocess(
                tmp,
                sessions=8 if quick else 60,
                warmup=1 if quick else 5,
                batches=2 if quick else 6,
            ),
            "inprocess_pg": lambda: sessions.figure_inprocess_pg(
                sessions=8 if quick else 40, warmup=1 if quick else 3, batches=2 if quick else 4
            ),
            "resume": lambda: resume.figure_resume(tmp, proc, runs=2 if quick else 7),
            "bytes": lambda: sessions.figure_bytes(tmp, n=10 if quick else 40),
            "statements": lambda: sessions.figure_statements(tmp, n=3 if quick else 10),
            "long": lambda: long.figure_long(tmp, runs=1 if quick else 3),
        }
        for figure in FIGURES:
            if figure in only:
                rows.append(plan[figure]())
        if proc.notes:
            print("\nnotes (unexpected exit codes or output; the figures above may be off):")
            for note in proc.notes:
                print(f"  - {note}")
    summary(rows)
    print(f"\n(benchmark took {time.perf_counter() - started:.0f} s; at the end: {load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
