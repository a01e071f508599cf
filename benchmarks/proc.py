"""Running commands as a user would, one process each, and what each one cost.

Every process gets its own HOME/XDG_* in a temp dir, an explicit --db, stdin from
/dev/null (so `--ui none`), and bytecode caching on (PYTHONPYCACHEPREFIX in the temp dir,
PYTHONDONTWRITEBYTECODE dropped): a normal install, without writing into the repository.
Wall time, CPU time (user + sys, all threads) and peak RSS come from os.wait4 for that
one child (see LAUNCH).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "ROOT",
    "PYTHON",
    "Proc",
    "Run",
    "Row",
    "Sample",
    "orchestrator_cmd",
    "load",
    "ms",
    "summary",
]

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TIMEOUT_S = 180.0


class Run(NamedTuple):
    wall: float  # seconds
    cpu: float  # seconds, user + sys
    rss: float  # MiB, peak
    code: int
    out: str
    err: str


class Sample:
    """Repeated runs of one command."""

    def __init__(self) -> None:
        self.runs: list[Run] = []

    def add(self, run: Run) -> None:
        self.runs.append(run)

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu for r in self.runs)

    @property
    def rss(self) -> float:
        return max(r.rss for r in self.runs)

    def line(self) -> str:
        return (
            f"wall median {ms(self.wall)} (min {ms(min(r.wall for r in self.runs))})   "
            f"cpu median {ms(self.cpu)}   rss {self.rss:5.1f} MiB   n={len(self.runs)}"
        )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def orchestrator_cmd() -> list[str]:
    script = Path(PYTHON).parent / "orchestrator"
    return [str(script)] if script.exists() else [PYTHON, "-m", "orchestrator"]


# Forks and execs the command, and reports that one child's wall time, CPU time, peak RSS
# and exit code. A small launcher of its own (python -S: no site, ~8 MiB), because Linux
# carries the forking process's peak RSS into the child's ru_maxrss across exec: measured
# straight from the benchmark process, every command would seem as big as the benchmark.
LAUNCH = """
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - started
with open(report, "w") as out:
    cpu = usage.ru_utime + usage.ru_stime
    out.write(f"{wall} {cpu} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


class Proc:
    def __init__(self, tmp: Path) -> None:
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        env["HOME"] = str(home)
        env["XDG_DATA_HOME"] = str(home / ".local" / "share")
        env["XDG_CONFIG_HOME"] = str(home / ".config")
        for key in ("ORCHESTRATOR_DB", "ORCHESTRATOR_CRASH_AT"):
            env.pop(key, None)
        self.env = env
        self.tmp = tmp
        self.notes: list[str] = []

    def run(self, argv: Sequence[str], *, expect: int | None = 0) -> Run:
        """Run `argv` (its first item a path) to its end and measure that process alone."""
        report = self.tmp / "launch-report"
        report.unlink(missing_ok=True)
        done = subprocess.run(
            [PYTHON, "-S", "-c", LAUNCH, str(report), *argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=ROOT,
            env=self.env,
            timeout=TIMEOUT_S,
        )
        wall, cpu, rss, code = report.read_text().split()
        run = Run(
            wall=float(wall),
            cpu=float(cpu),
            rss=int(rss) / 1024,  # KiB on Linux
            code=int(code),
            out=done.stdout.decode("utf-8", "replace"),
            err=done.stderr.decode("utf-8", "replace"),
        )
        if expect is not None and run.code != expect:
            shown = " ".join(Path(a).name if "/" in a else a for a in argv)
            self.notes.append(
                f"`{shown[:120]}` exited {run.code} (expected {expect}): {run.err.strip()[-300:]}"
            )
        return run


class Row(NamedTuple):
    """One row of the issue's table: what was measured, the figures, the target, whether
    this run met it, and the command that measures it again."""

    measure: str
    figures: list[str]
    target: str
    met: bool | None
    reproduce: str


def summary(rows: list[Row]) -> None:
    """The rows measured in this run: figures, target, met or not, the command again."""
    print("\n== summary: the performance table, measured in this run")
    python = Path(sys.executable)
    shown = python.relative_to(Path.cwd()) if python.is_relative_to(Path.cwd()) else python
    for number, row in enumerate(rows, 1):
        verdict = {True: "met", False: "NOT met", None: "-"}[row.met]
        print(f"{number}. {row.measure}")
        for figure in row.figures:
            print(f"     {figure}")
        print(f"   target: {row.target}  [{verdict}]")
        print(f"   reproduce: {shown} {row.reproduce}")
