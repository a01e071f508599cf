"""Running sessions on after an answer: a bounded pool of threads in the server process.

The answer is committed first (`Sessions.answer`, which leaves the session handed off,
waiting for a driver); only then is the session queued here. `run_on` goes through the same claim as
`orchestrator resume`, so a CLI racing the server yields one winner, and a server killed
between the commit and the run leaves a session that the next server (or a plain
`resume`) picks up: `recover()` at start queues every answered session whose driver is gone,
and every second (orchestrator.web.app) those handed off and those whose run on here a
database outage cut off.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from typing import Any

from orchestrator.errors import AgentCallError, ClaimLost, EnvironmentFailure, UserError
from orchestrator.faults import crash_point

__all__ = ["Runner"]

log = logging.getLogger("orchestrator.web")

IDLE_CHECK_SECONDS = 0.5


class Runner:
    """`workers` threads running sessions on, fed from a queue of session ids.

    A queued answer costs its id here and nothing more (answers may come faster than the
    sessions run: thousands posted at once stay a few hundred KiB). The threads start
    with the first answer; `shutdown` lets the runs in progress finish."""

    def __init__(self, sessions: Any, workers: int) -> None:
        self.sessions = sessions
        self.workers = max(1, workers)
        self._lock = threading.Condition()
        self._waiting: deque[str] = deque()
        self._queued: set[str] = set()  # waiting or running here
        self._threads: list[threading.Thread] = []
        self._names = itertools.count()
        self._stopping = False

    def _leaving(self) -> bool:
        """Stopping: `shutdown`, or the program's main thread has ended (a server forced
        to exit skips its lifespan's shutdown; these threads are not daemons)."""
        return self._stopping or not threading.main_thread().is_alive()

    def submit(self, session_id: str) -> bool:
        """Queue `session_id` to be run on (once: False when it is queued already, or the
        server is stopping)."""
        with self._lock:
            if session_id in self._queued or self._leaving():
                return False
            self._queued.add(session_id)
            self._waiting.append(session_id)
            if len(self._threads) < min(self.workers, len(self._queued)):
                name = f"run-on-{next(self._names)}"
                thread = threading.Thread(target=self._work, name=name)
                thread.start()
                self._threads.append(thread)
            self._lock.notify()
        return True

    def start(self) -> None:
        """Take answers again after a `shutdown` (an app whose lifespan is entered anew)."""
        with self._lock:
            self._stopping = False

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._waiting and not self._leaving():
                    self._lock.wait(IDLE_CHECK_SECONDS)
                # Once the main thread has ended, a thread finishes its run in progress and
                # takes no other: the queued answers are committed, the next start runs them.
                if not self._waiting or not threading.main_thread().is_alive():
                    # Counted out under the lock it decided under: a `submit` from now on
                    # starts a thread of its own rather than count on this one.
                    self._threads.remove(threading.current_thread())
                    return
                session_id = self._waiting.popleft()
            try:
                self._run(session_id)
            except BaseException:  # SystemExit from agent code: this thread serves on
                log.exception("session %s: the run on stopped", session_id)

    def _run(self, session_id: str) -> None:
        try:
            crash_point("web_run_on")  # tests: SIGKILL after the answer, before the run
            doc = self.sessions.run_on(session_id)
            log.info("session %s ran on: %s", session_id, doc["status"])
        except EnvironmentFailure as exc:  # its answer is committed: the next poll runs it on
            log.warning("session %s not run on: %s", session_id, exc.message)
        except (UserError, ClaimLost) as exc:  # e.g. a CLI `resume` took it: that one runs it
            log.info("session %s not run on here: %s", session_id, exc.message)
        except AgentCallError as exc:  # stalled; kept for `resume` or the next start
            log.warning("session %s stalled: %s", session_id, exc.message)
        except Exception:  # a bug in one run must not take the server down
            log.exception("session %s: the run on failed", session_id)  # keep the trace
        finally:
            with self._lock:
                self._queued.discard(session_id)

    def recover(self, *, handed_off_only: bool = False) -> list[str]:
        """Queue every answered session whose driving process is gone (`handed_off_only`:
        those answered and handed off, waiting for a driver: `resume --no-run`), and every
        one this server claimed whose run on a database outage cut off (its claim could not
        be dropped: it still names this server, which is alive); return the ids newly
        queued (not those queued already: a run in progress is never queued twice)."""
        found: list[str] = self.sessions.inbox.answered_not_run_on(
            handed_off_only=handed_off_only, owner=self.sessions.owner.id
        )
        return [session_id for session_id in found if self.submit(session_id)]

    def busy(self) -> bool:
        with self._lock:
            return bool(self._queued)

    def shutdown(self, wait: bool = True) -> None:
        """Take no more; with `wait`, run what is queued and wait for it, else drop what is
        queued (its answers are committed: the next start picks them up) and let the runs
        in progress finish (their threads are not daemons: the process waits for them)."""
        with self._lock:
            self._stopping = True
            if not wait:
                self._queued.difference_update(self._waiting)
                self._waiting.clear()
            self._lock.notify_all()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()
