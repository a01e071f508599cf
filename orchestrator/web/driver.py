"""Running sessions on after an answer: a bounded pool of threads in the server process.

The answer is committed first (`Sessions.answer`, which takes the session's claim for this
server); only then is the session queued here. `run_on` goes through the same claim as
`orchestrator resume`, so a CLI racing the server yields one winner, and a server killed
between the commit and the run leaves a session that the next server (or a plain
`resume`) picks up: `recover()` at start queues every answered session whose driver is gone.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from orchestrator.errors import AgentCallError, UserError
from orchestrator.faults import crash_point

__all__ = ["Runner"]

log = logging.getLogger("orchestrator.web")


class Runner:
    def __init__(self, sessions: Any, workers: int) -> None:
        self.sessions = sessions
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="run-on")
        self._lock = threading.Lock()
        self._queued: set[str] = set()

    def submit(self, session_id: str) -> Future[None] | None:
        """Queue `session_id` to be run on (once: a session already queued is not added)."""
        with self._lock:
            if session_id in self._queued:
                return None
            self._queued.add(session_id)
        return self.pool.submit(self._run, session_id)

    def _run(self, session_id: str) -> None:
        try:
            crash_point("web_run_on")  # tests: SIGKILL after the answer, before the run
            doc = self.sessions.run_on(session_id)
            log.info("session %s ran on: %s", session_id, doc["status"])
        except UserError as exc:  # e.g. a CLI `resume` took it first: that one runs it
            log.info("session %s not run on here: %s", session_id, exc.message)
        except AgentCallError as exc:  # stalled; kept for `resume` or the next start
            log.warning("session %s stalled: %s", session_id, exc.message)
        except Exception:  # a bug in one run must not take the server down; keep the trace
            log.exception("session %s: the run on failed", session_id)
        finally:
            with self._lock:
                self._queued.discard(session_id)

    def recover(self, *, handed_off_only: bool = False) -> list[str]:
        """Queue every answered session whose driving process is gone (`handed_off_only`:
        those answered and handed off, waiting for a driver: `resume --no-run`); return
        their ids."""
        found: list[str] = self.sessions.inbox.answered_not_run_on(handed_off_only=handed_off_only)
        for session_id in found:
            self.submit(session_id)
        return found

    def busy(self) -> bool:
        with self._lock:
            return bool(self._queued)

    def shutdown(self, wait: bool = True) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=not wait)
