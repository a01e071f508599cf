"""The fault tests' stop points (`ORCHESTRATOR_STOP_AT`, orchestrator/faults.py) stop the
process before the thread that reached the point runs one more line: the tests make their
fault while it is stopped and rely on nothing having happened after the point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.waiting import until

# A worker's drive in a thread of its own while the main thread waits on it, as in
# `orchestrator worker` and `serve`. Everything on one CPU, the main thread at the lowest
# priority: a stop that the main thread must take first lets the drive run on meanwhile.
CHILD = """
import os, sys, threading
os.sched_setaffinity(0, {0})
from orchestrator.faults import crash_point

def drive():
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    crash_point("here")
    with open(sys.argv[1], "a") as out:
        out.write("ran on\\n")

thread = threading.Thread(target=drive)
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
thread.start()
thread.join()
"""


def _all_stopped(pid: int) -> bool:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return all((t / "stat").read_text().rsplit(")", 1)[1].split()[0] in "Tt" for t in tasks)
    except FileNotFoundError:
        return True


@pytest.mark.skipif(
    not hasattr(os, "SCHED_IDLE") or not Path("/proc/self/task").exists(),
    reason="needs Linux scheduling policies and /proc",
)
def test_a_stop_point_in_a_thread_stops_that_thread_at_the_point(tmp_path: Path) -> None:
    """Issue 47: a worker's read back ran after `after_finish` while the test, seeing the
    process stopped, stopped PostgreSQL (2 runs in 14 under load). The SIGSTOP was sent to
    the process; the kernel gave it to the main thread, and the thread at the point ran on
    until the group stop reached it. Five runs: not one line after the point may run."""
    for run in range(5):
        marker = tmp_path / f"after-{run}"
        process = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(marker)],
            env={**os.environ, "ORCHESTRATOR_STOP_AT": "here"},
            cwd=ROOT,
        )
        try:
            until(lambda p=process: _all_stopped(p.pid) or p.poll() is not None, "the stop point")
            assert process.poll() is None, "the process ended without stopping"
            assert not marker.exists(), f"run {run}: the thread ran on past its stop point"
            os.kill(process.pid, signal.SIGCONT)
            assert process.wait(timeout=60) == 0
            assert marker.read_text() == "ran on\n"  # and it goes on once continued
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
