"""Waiting in tests: for something to happen, never for a fixed time.

Where the code under test gives an event (a line a process prints, a `threading.Event`, a
stopped process), wait on that. Where it gives nothing to wait on (a row another process
writes, a server that starts accepting), `until` polls for it. Its bound only ends a test
that hangs: a pass never depends on it, so it is generous. Time that must pass because the
code reads a clock passes on the project's clock (`orchestrator.domain.clock.virtual`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["until"]

T = TypeVar("T")


def until(
    condition: Callable[[], T],
    what: str | Callable[[], str],
    *,
    timeout: float = 60,
    every: float = 0.02,
) -> T:
    """Call `condition` until it returns something true, and return that. Fails naming
    `what` (a callable: what it says at that moment) after `timeout` seconds; `condition`
    may itself fail sooner (e.g. when the process it waits on has ended)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {said}")
        time.sleep(every)  # the poll's interval: nothing waits on a margin
