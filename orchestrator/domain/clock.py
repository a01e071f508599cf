"""The time that question deadlines are measured in (real time, or a virtual clock), and
how the contract writes a time (`iso`, `iso_epoch`).

Deadline code calls `now()` instead of `time.time()`. A scenario suite (or a test) runs
under `virtual()`: the clock stands still until `advance()` moves it, so a 300 s deadline
is tested at once and gives the same result on every run. Leases and heartbeats keep
real time (they tell live processes from dead ones) and never read this clock.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

__all__ = ["now", "virtual", "advance", "is_virtual", "parse_duration", "iso", "iso_epoch"]

_lock = threading.Lock()
_virtual_now: float | None = None  # None: real time


def now() -> float:
    """Seconds since the epoch: `time.time()`, unless a virtual clock is active."""
    current = _virtual_now
    return time.time() if current is None else current


def is_virtual() -> bool:
    return _virtual_now is not None


@contextmanager
def virtual(start: float | None = None) -> Iterator[None]:
    """Run the block on a virtual clock that starts at `start` (default: the real time
    now) and moves only when `advance()` is called. Not re-entrant."""
    global _virtual_now
    with _lock:
        if _virtual_now is not None:
            raise RuntimeError("a virtual clock is already active")
        _virtual_now = time.time() if start is None else float(start)
    try:
        yield
    finally:
        with _lock:
            _virtual_now = None


def advance(seconds: float) -> float:
    """Move the virtual clock forward by `seconds`; returns the new time."""
    global _virtual_now
    if seconds < 0:
        raise ValueError(f"the clock only moves forward; got {seconds} seconds")
    with _lock:
        if _virtual_now is None:
            raise RuntimeError("advance() needs an active virtual clock (clock.virtual())")
        _virtual_now += seconds
        return _virtual_now


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str | float | int) -> float:
    """`400`, `400s`, `1.5m`, `2h`, `1d` -> seconds. Raises ValueError naming the format."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 400s, 5m, 2h or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(
                f"expected a duration such as 400s, 5m, 2h or a number of seconds, got {value!r}"
            )
        seconds = float(match.group(1)) * _UNIT[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {value!r}")
    return seconds


def iso(value: datetime | None) -> str | None:
    """A stored time as the contract writes it: ISO 8601 in UTC with a `Z`."""
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands back naive datetimes; we only ever write UTC
        return f"{value.isoformat()}Z"
    # PostgreSQL hands them back in the connection's time zone, whatever the server's is.
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_epoch(value: float | None) -> str | None:
    """Seconds since the epoch (a deadline, a lease) as the contract writes a time."""
    if value is None:
        return None
    try:
        return iso(datetime.fromtimestamp(value, UTC))
    except (OverflowError, ValueError, OSError):
        # A deadline no calendar holds (inf, 1e12: stored by older versions): no deadline.
        return None
