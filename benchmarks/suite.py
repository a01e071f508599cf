"""Benchmark: `orchestrator test` throughput, in scenarios per second, for a folder of
100 scenarios (the shipped examples, repeated under new names) at -j 1 and -j 2.

The examples that work in a repository (`repo:`) are left out: their time is their checks'
(`python -m pytest` in a sandbox, several times a scenario: 6-9 s each here), which would
measure pytest, not the runner; benchmarks/developers.py measures what running code costs.

    .venv/bin/python benchmarks/suite.py [--count 100] [--jobs 1 2]

Prints figures and exits 0; no pass/fail. Each figure is one whole `orchestrator test`
process (Python start-up, collection and the JUnit report included), run with its own
HOME and TMPDIR in a temp dir. Wall time is what a CI job waits; CPU time (user + sys of
the process and its scenario children) per scenario is printed beside it, as it is much
less disturbed by other load; the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def make_suite(folder: Path, count: int) -> None:
    examples = [path for path in sorted(EXAMPLES.glob("*.yaml")) if not _in_a_repository(path)]
    for n in range(count):
        source = examples[n % len(examples)]
        text = re.sub(r"(?m)^(task: .*)$", rf"\1 (copy {n})", source.read_text(), count=1)
        (folder / f"{n:03d}-{source.name}").write_text(text)


def _in_a_repository(example: Path) -> bool:
    from orchestrator.scenario import load_scenario

    return load_scenario(example).repo is not None


def run(folder: Path, jobs: int, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    report = folder.parent / f"report-j{jobs}.xml"
    command = [sys.executable, "-m", "orchestrator", "test", str(folder), "-j", str(jobs)]
    cpu_before = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--json", "--junit-xml", str(report)],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=folder.parent,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"orchestrator test exited {done.returncode}:\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    report["cpu"] = _children_cpu() - cpu_before
    return seconds, report


def _children_cpu() -> float:
    """User + sys CPU seconds of every finished child process (and their children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(f"suite benchmark: {args.count} scenarios; load average {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-suite-") as tmp:
        base = Path(tmp)
        folder = base / "scenarios"
        folder.mkdir()
        make_suite(folder, args.count)
        env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_DB"}
        env.update(HOME=str(base / "home"), TMPDIR=str(base), XDG_DATA_HOME=str(base / "data"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
        for jobs in args.jobs:
            seconds, report = run(folder, jobs, env)
            inside = report["seconds"]
            print(
                f"  -j {jobs}: {args.count / seconds:6.1f} scenarios/s "
                f"({seconds:.2f} s for the whole process, {inside:.2f} s running scenarios; "
                f"CPU {report['cpu'] / args.count * 1000:.0f} ms per scenario; "
                f"{report['passed']}/{report['total']} passed)"
            )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
