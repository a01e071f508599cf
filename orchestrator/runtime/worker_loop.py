"""Workers: run on every session that is ready, from any number of processes and machines.

`run_worker(db_url, concurrency, stop_event)` loops until `stop_event` is set: each of its
`concurrency` threads claims one ready session (orchestrator.store.queue: answered but not
run on, or stalled with its driver gone), drives it with the engine until it ends or
pauses, and claims the next. No session is driven twice: claims are the fenced
compare-and-swap `resume` uses, read with FOR UPDATE SKIP LOCKED on PostgreSQL.

Stopping (`stop_event`, set by the CLI on SIGTERM or Ctrl+C): no new claim is taken; the
sessions being driven are finished. Database outages: a claim that fails waits and tries
again (orchestrator.outages.Backoff, up to MAX_BACKOFF); a drive cut off by the outage
leaves its session claimed by this worker, which takes it up again once the database
answers. Nothing is
lost: every write of a drive is keyed, so the rerun repeats none of them.

Bugs: a drive that raises anything else is logged with its traceback and its session set
aside (this process claims it no more: a rerun would raise the same), and the thread
serves the others. A thread that dies all the same stops the worker, which raises
WorkerFailed with the reason (exit 1) instead of serving on with fewer threads.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import (
    AgentCallError,
    DatabaseUnavailable,
    RepositoryElsewhere,
    SessionBusy,
    SessionNotFound,
    SessionNotWaiting,
    StorageFailed,
    WorkerFailed,
)
from orchestrator.limits import MAX_MESSAGE_CHARS, clip
from orchestrator.outages import Backoff, OutageLog

__all__ = ["run_worker", "WorkerStats", "POLL_SECONDS", "RETRY_FAILED_AFTER"]

log = logging.getLogger("orchestrator.worker")

POLL_SECONDS = 1.0  # how often an idle thread looks for work
FIRST_BACKOFF = 0.5  # the wait after a first failed try while the database is unreachable
MAX_BACKOFF = 5.0  # ... doubled after each one, up to this long
# A session whose agent call failed (provider down) is retried after this long, not at once.
RETRY_FAILED_AFTER = 60.0


@dataclass
class WorkerStats:
    """What a worker did (returned when it stops)."""

    claimed: int = 0
    ended: dict[str, int] = field(default_factory=dict)  # final status -> count
    interrupted: int = 0  # drives cut off (database outage, claim lost, agent call failed)
    database_errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str, status: str | None = None) -> None:
        with self._lock:
            if status is None:
                setattr(self, name, getattr(self, name) + 1)
            else:
                self.ended[status] = self.ended.get(status, 0) + 1


def _database_trouble(exc: BaseException) -> bool:
    """A failure to reach the database (not a bug): the operation may succeed later.
    (SQLite's errors come straight from sqlite3; PostgreSQL's through SQLAlchemy.)"""
    if isinstance(exc, DatabaseUnavailable | StorageFailed | sqlite3.OperationalError):
        return True
    from orchestrator.store.connect import storage_failure

    if storage_failure(exc) is not None:  # a full disk, a read-only file, a lock held
        return True
    sa_errors = sys.modules.get("sqlalchemy.exc")
    if sa_errors is not None and isinstance(exc, sa_errors.DBAPIError):
        return True
    try:
        import psycopg
    except ModuleNotFoundError:
        return False
    return isinstance(exc, psycopg.OperationalError)


def run_worker(
    db_url: str | None,
    concurrency: int = 1,
    stop_event: threading.Event | None = None,
    *,
    poll: float = POLL_SECONDS,
    idle_exit: float | None = None,
    on_session: Callable[[str, dict[str, Any]], None] | None = None,
) -> WorkerStats:
    """Run ready sessions until `stop_event` is set (or, with `idle_exit`, until no work
    was found for that many seconds); return what was done.

    `on_session(session_id, session_object)` is told when a drive ends (ended or paused);
    when the database went away just after the drive's end was committed, the object holds
    only `session_id` and `status`.
    """
    from orchestrator.store.connect import resolve_url

    if concurrency < 1:
        from orchestrator.errors import ConfigError

        raise ConfigError(f"--concurrency {concurrency}: expected a whole number of at least 1")
    url = resolve_url(db_url)
    stop = stop_event or threading.Event()
    stats = WorkerStats()
    outage = OutageLog(log, "the worker")  # one for every thread: an outage said once
    store = _open_store(url, stop, stats, outage)
    if store is None:
        return stats
    from orchestrator.store import Owner

    worker = _Worker(url, store, Owner(), stop, stats, poll, idle_exit, on_session)
    worker.outage = outage
    from orchestrator.redact import mask_url

    log.info(
        "worker started: pid %d on %s, %d thread(s), database %s",
        worker.owner.pid, worker.owner.host, concurrency, mask_url(url),
    )  # fmt: skip
    threads = [
        threading.Thread(target=worker.guarded_loop, name=f"worker-{n}", daemon=True)
        for n in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    if worker.died is not None:
        raise WorkerFailed(f"the worker stopped: {worker.died}")
    return stats


def _open_store(url: str, stop: threading.Event, stats: WorkerStats, outage: OutageLog) -> Any:
    """The store, once the database answers (migrated); None if stopped before that."""
    from orchestrator.store import Store

    backoff = Backoff(FIRST_BACKOFF, MAX_BACKOFF)
    while not stop.is_set():
        try:
            store = Store.open(url)
        except DatabaseUnavailable as exc:
            stats.count("database_errors")
            outage.failed(exc.message)
            stop.wait(backoff.next())
            continue
        outage.answered()
        return store
    return None


class _Worker:
    def __init__(
        self,
        url: str,
        store: Any,
        owner: Any,
        stop: threading.Event,
        stats: WorkerStats,
        poll: float,
        idle_exit: float | None,
        on_session: Callable[[str, dict[str, Any]], None] | None,
    ) -> None:
        self.url, self.store, self.owner = url, store, owner
        self.stop, self.stats, self.poll = stop, stats, poll
        self.idle_exit, self.on_session = idle_exit, on_session
        self.busy: set[str] = set()  # sessions our threads drive now
        self.set_aside: set[str] = set()  # sessions whose drive raised a bug: not claimed again
        self.died: str | None = None  # why a thread died, if one did
        self.lock = threading.Lock()
        self.idle_since = time.monotonic()
        self.outage = OutageLog(log, "the worker")

    def guarded_loop(self) -> None:
        """`loop`, and if it dies, the whole worker stops with the reason (not exit 0)."""
        try:
            self.loop()
        except BaseException as exc:
            name = threading.current_thread().name
            log.critical("%s died; stopping the worker", name, exc_info=True)
            with self.lock:
                self.died = self.died or f"{name} died: {type(exc).__name__}: {_say(exc)}"
            self.stop.set()

    def loop(self) -> None:
        import orchestrator.runtime.graph  # noqa: F401  (LangGraph once, before any thread drives)

        backoff = Backoff(FIRST_BACKOFF, MAX_BACKOFF)
        while not self.stop.is_set():
            try:
                session_id = self._claim()
            except Exception as exc:
                if not _database_trouble(exc):
                    raise
                self.stats.count("database_errors")
                self.outage.failed(_say(exc))
                self.stop.wait(backoff.next())
                continue
            self.outage.answered()
            backoff.reset()
            if session_id is None:
                with self.lock:
                    idle = time.monotonic() - self.idle_since
                if self.idle_exit is not None and idle >= self.idle_exit and not self.busy:
                    self.stop.set()
                    return
                self.stop.wait(self.poll)
                continue
            try:
                self._drive(session_id)
            finally:
                with self.lock:
                    self.busy.discard(session_id)
                    self.idle_since = time.monotonic()

    def _claim(self) -> str | None:
        from orchestrator.store.queue import claim_ready

        with self.lock:  # one claim at a time per process: `busy` stays exact
            claim = claim_ready(
                self.store,
                self.owner,
                busy=self.busy | self.set_aside,
                failed_before=time.time() - RETRY_FAILED_AFTER,
            )
            if claim is None:
                return None
            self.busy.add(claim.session_id)
            self.idle_since = time.monotonic()
        self.stats.count("claimed")
        return claim.session_id

    def _drive(self, session_id: str) -> None:
        from orchestrator.runtime.engine import Engine

        engine = Engine(self.store, self.url, owner=self.owner)
        log.info("session %s: taken by this worker (pid %d)", session_id, self.owner.pid)
        try:
            view = engine.resume(session_id)
        except (SessionBusy, SessionNotWaiting, SessionNotFound) as exc:
            # Taken over, cancelled or deleted meanwhile (ClaimLost is a SessionBusy).
            self.stats.count("interrupted")
            log.info("session %s: %s", session_id, exc.message)
            return
        except RepositoryElsewhere as exc:
            self.stats.count("interrupted")
            log.warning("session %s left alone: %s", session_id, exc.message)
            return
        except AgentCallError as exc:
            self.stats.count("interrupted")
            log.warning(
                "session %s: an agent call failed; retried in %.0f s: %s",
                session_id,
                RETRY_FAILED_AFTER,
                exc.message.splitlines()[0],
            )
            return
        except Exception as exc:
            if not _database_trouble(exc):
                # A bug in this session's drive: its traceback is logged, the session set
                # aside (a rerun would raise the same), and this thread serves the others.
                self.stats.count("interrupted")
                with self.lock:
                    self.set_aside.add(session_id)
                log.error(
                    "session %s: its drive failed (a bug; set aside until this worker "
                    "restarts): %s: %s",
                    session_id,
                    type(exc).__name__,
                    _say(exc),
                    exc_info=True,
                )
                return
            if engine.ended is not None:
                # The drive's release committed (it ended or paused the session); only the
                # reads after it met the outage: an ended drive, not a cut-off one.
                self.stats.count("ended", engine.ended)
                log.info(
                    "session %s: %s (read back later: %s)", session_id, engine.ended, _say(exc)
                )
                if self.on_session is not None:
                    self.on_session(session_id, {"session_id": session_id, "status": engine.ended})
                return
            # The session stays claimed by this worker; `claim_ready` gives it back to us
            # once the database answers, and the rerun repeats no write.
            self.stats.count("interrupted")
            self.stats.count("database_errors")
            self.outage.failed(_say(exc))
            log.info("session %s interrupted by the database; run on once it answers", session_id)
            self.stop.wait(0.5)
            return
        status = view["status"]
        self.stats.count("ended", status)
        log.info("session %s: %s", session_id, status)
        if self.on_session is not None:
            self.on_session(session_id, view)


def _say(exc: BaseException) -> str:
    """The error's message on one line, whole up to MAX_MESSAGE_CHARS (a cut is marked:
    never a word cut off unmarked, as `…/orchestrato` was)."""
    message = getattr(exc, "message", None) or str(exc)
    return clip(" ".join(message.split()), MAX_MESSAGE_CHARS)
