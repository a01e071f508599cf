"""A database outage in a long-running process's log (`serve`, `worker`): one line when it
starts, one when it ends, and at most one reminder a minute in between; never a traceback.

The loops that poll the database (a worker's claims, the server's pick-up of answered
sessions, the notification watcher) each keep trying every second or so; without this,
each try would log its own line (or, before, its own traceback).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["OutageLog", "Backoff", "REMIND_SECONDS"]

REMIND_SECONDS = 60.0  # at most one "still unreachable" line this often


class OutageLog:
    """Tell `log` when the database stops answering and when it answers again.

    `failed(message)` after a try that met the outage, `answered()` after one that got
    through; both may be called from any thread, as often as the loops try. `clock` (a
    monotonic one in seconds) lets tests move time on without waiting."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        remind_every: float = REMIND_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log, self._what = log, what
        self._remind_every, self._clock = remind_every, clock
        self._lock = threading.Lock()
        self._since: float | None = None  # when the outage began (None: no outage)
        self._said_at = 0.0  # when a line about it was last logged
        self._tries = 0  # tries that met it

    @property
    def down(self) -> bool:
        with self._lock:
            return self._since is not None

    def failed(self, message: str) -> None:
        """A try met the outage (`message`: the database's own words, masked)."""
        with self._lock:
            now = self._clock()
            self._tries += 1
            if self._since is None:
                self._since = self._said_at = now
                self._log.warning(
                    "the database does not answer: %s; %s keeps trying (one reminder a "
                    "minute until it answers)",
                    message,
                    self._what,
                )
            elif now - self._said_at >= self._remind_every:
                self._said_at = now
                self._log.warning(
                    "the database still does not answer after %s (%d tries): %s",
                    _duration(now - self._since),
                    self._tries,
                    message,
                )

    def answered(self) -> None:
        """A try got through: the outage, if there was one, is over."""
        with self._lock:
            if self._since is None:
                return
            lasted = self._clock() - self._since
            self._since, self._tries = None, 0
        self._log.warning("the database answers again, after %s", _duration(lasted))


class Backoff:
    """The waits between tries of something that fails for a while (the database away, a
    lock held by another process): `first`, doubled after each failed try up to `most`;
    `reset()` once a try got through. The one retry schedule of the package: the worker's
    claims and its opening of the store, a kept turn's record, SQLite's switch to WAL and
    LangGraph's table set-up each take one, and wait on it as they wait (a stop event,
    time.sleep)."""

    __slots__ = ("first", "most", "_next")

    def __init__(self, first: float, most: float) -> None:
        if not 0 < first <= most:
            raise ValueError(f"Backoff({first}, {most}): expected 0 < first <= most")
        self.first, self.most = first, most
        self._next = first

    def next(self) -> float:
        """The wait before the next try (and the one after it is longer, up to `most`)."""
        wait = self._next
        self._next = min(wait * 2, self.most)
        return wait

    def reset(self) -> None:
        """A try got through: the next failure waits `first` again."""
        self._next = self.first


def _duration(seconds: float) -> str:
    """'45 s', '3 min 5 s', '2 h 4 min': a duration for people."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
