"""The server's run-on queue (orchestrator.web.driver.Runner), on a stand-in session API:
each queued session runs once, at most `workers` at a time, in the order answered; a
shutdown lets the runs in progress finish."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from orchestrator.errors import UserError
from orchestrator.web.driver import Runner


class Sessions:
    """run_on blocks until released; records what ran and how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.ran: list[str] = []
        self.began: list[str] = []
        self.now = 0
        self.most = 0
        self.started = threading.Semaphore(0)

    def run_on(self, session_id: str) -> dict[str, Any]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.began.append(session_id)
        self.started.release()
        self.release.wait(10)
        with self.lock:
            self.now -= 1
            self.ran.append(session_id)
        if session_id == "taken":
            raise UserError("being resumed elsewhere")  # logged, the queue goes on
        if session_id == "exits":
            raise SystemExit(3)  # agent code calling sys.exit: the thread serves on
        return {"status": "completed"}


def test_each_session_runs_once_in_order_with_at_most_workers_at_a_time() -> None:
    sessions = Sessions()
    runner = Runner(sessions, workers=2)
    ids = ["taken", *(f"s{n}" for n in range(8))]
    assert [runner.submit(sid) for sid in ids] == [True] * len(ids)
    assert not runner.submit("s3")  # queued already: once
    assert sessions.started.acquire(timeout=10) and sessions.started.acquire(timeout=10)
    assert runner.busy() and sessions.now == 2  # two run, the rest wait their turn
    sessions.release.set()
    runner.shutdown(wait=True)  # runs what is queued, then returns
    assert sorted(sessions.ran) == sorted(ids) and sessions.most == 2
    assert set(sessions.began[:2]) == {"taken", "s0"}  # first answered, first run
    assert not runner.busy() and not runner.submit("s9")  # stopped: takes no more


@pytest.mark.parametrize("workers", [1, 3])
def test_a_shutdown_without_waiting_lets_the_running_finish_and_drops_the_queued(
    workers: int,
) -> None:
    sessions = Sessions()
    runner = Runner(sessions, workers=workers)
    for n in range(workers + 4):
        runner.submit(f"s{n}")
    for _ in range(workers):
        assert sessions.started.acquire(timeout=10)
    runner.shutdown(wait=False)  # the queued stay answered in the database for the next start
    threads = list(runner._threads)
    assert len(threads) == workers
    sessions.release.set()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive() and not thread.daemon  # the process waits for a run
    assert sorted(sessions.ran) == sorted(f"s{n}" for n in range(workers))
    assert not runner.busy()


def test_a_run_that_exits_leaves_the_worker_serving_and_a_stopped_runner_restarts() -> None:
    sessions = Sessions()
    sessions.release.set()
    runner = Runner(sessions, workers=1)
    assert runner.submit("exits") and runner.submit("after")
    runner.shutdown(wait=True)
    assert sessions.ran == ["exits", "after"] and not runner.busy()
    runner.start()  # the app's lifespan entered again
    assert runner.submit("again")
    runner.shutdown(wait=True)
    assert sessions.ran[-1] == "again"


def test_a_program_that_never_shuts_the_runner_down_still_exits() -> None:
    """A server ended without its lifespan's shutdown (uvicorn's forced exit): the idle
    worker threads leave with the main thread instead of holding the interpreter."""
    # The run ends and its thread goes idle before the main thread does: the idle wait
    # is what has to notice the main thread has gone.
    program = (
        "import threading\n"
        "from orchestrator.web.driver import Runner\n"
        "ran = threading.Event()\n"
        "class S:\n"
        "    def run_on(self, sid):\n"
        "        print('ran', sid, flush=True); ran.set(); return {'status': 'completed'}\n"
        "runner = Runner(S(), 2)\n"
        "runner.submit('x')\n"
        "ran.wait(30)\n"
        "while runner.busy(): pass\n"
    )
    done = _exits(program)
    assert done.stdout.splitlines() == ["ran x"] and not done.stderr


def test_after_the_main_thread_a_runner_takes_no_new_run() -> None:
    """A forced exit with answers still queued, and the pick-up poll (a daemon) still
    submitting: the run in progress finishes, nothing else starts, and the process exits."""
    program = (
        "import threading, time\n"
        "from orchestrator.web.driver import Runner\n"
        "started = threading.Event()\n"
        "class S:\n"
        "    def run_on(self, sid):\n"
        "        print('ran', sid, flush=True); started.set()\n"
        "        threading.main_thread().join()  # this run outlasts the main thread\n"
        "        return {'status': 'completed'}\n"
        "runner = Runner(S(), 1)\n"
        "for n in range(5): runner.submit(f'queued-{n}')\n"
        "def poll():\n"  # a server's pick-up poll, submitting on while the main thread ends
        "    for n in range(100): runner.submit(f'polled-{n}'); time.sleep(0.05)\n"
        "threading.Thread(target=poll, daemon=True).start()\n"
        "started.wait(30)\n"
    )
    assert _exits(program).stdout.splitlines() == ["ran queued-0"]


def _exits(program: str) -> subprocess.CompletedProcess[str]:
    """`program` run in a fresh interpreter, which must exit on its own, with status 0 (a
    thread holding it would run into the timeout)."""
    done = subprocess.run(
        [sys.executable, "-c", program], timeout=60, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done
