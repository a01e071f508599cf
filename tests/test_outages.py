"""A database outage in a long-running process's log (issue 44, item 1): `serve` and
`worker` say one line when it starts, one when it ends and at most one reminder a minute
in between, never a traceback; and a worker's message is never cut mid-word (item 8)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from orchestrator.errors import DatabaseUnavailable, StorageFailed
from orchestrator.outages import OutageLog

DOWN = "PostgreSQL at postgresql+psycopg://app:***@db.internal:5432/orchestrator does not answer"


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def said(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_outage_is_one_line_at_its_start_one_at_its_end_and_one_reminder_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    outage = OutageLog(logging.getLogger("test.outage"), "the server", clock=clock)
    outage.answered()  # no outage: nothing to say
    for _ in range(300):  # five minutes of polls, one a second
        outage.failed(DOWN)
        clock.now += 1.0
    outage.answered()
    outage.answered()
    lines = [record.getMessage() for record in said(caplog)]
    assert len(lines) == 1 + 4 + 1, lines  # start, reminders at 1, 2, 3 and 4 min, end
    assert lines[0].startswith("the database does not answer: " + DOWN)
    assert "the server keeps trying" in lines[0]
    assert lines[1] == f"the database still does not answer after 1 min (61 tries): {DOWN}"
    assert lines[-1] == "the database answers again, after 5 min"
    assert not any(record.exc_info for record in caplog.records)
    outage.failed(DOWN)  # a second outage is said again
    assert said(caplog)[-1].getMessage().startswith("the database does not answer: ")


def test_serves_poll_says_an_outage_once_however_often_it_polls(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pick-up poll (every second in `serve`) met the outage 40 times, in both forms
    the session API raises it: two lines, no traceback (before: a line or a traceback
    per poll, 903 lines in 25 s)."""
    from orchestrator.web import app

    monkeypatch.setattr(app, "PICK_UP_SECONDS", 0.0)
    stop = threading.Event()
    polls: list[int] = []

    class Runner:
        def recover(self, *, handed_off_only: bool) -> list[str]:
            polls.append(1)
            if len(polls) <= 40:
                kind = StorageFailed if len(polls) % 2 else DatabaseUnavailable
                raise kind(DOWN)
            stop.set()
            return []

    class Web:
        runner = Runner()
        outage = OutageLog(logging.getLogger("orchestrator.web"), "the server")

    app._pick_up_handed_off(Web(), stop)  # type: ignore[arg-type]
    lines = [record.getMessage() for record in said(caplog)]
    assert len(polls) == 41
    assert len(lines) == 2, lines
    assert lines[0].startswith("the database does not answer: " + DOWN)
    assert lines[1].startswith("the database answers again, after ")
    assert not any(record.exc_info for record in caplog.records)


def test_a_worker_waiting_for_its_database_says_so_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker started while the database is away: one line, then one when it answers,
    whatever the number of tries (before: one line a try)."""
    from orchestrator.runtime import worker_loop
    from orchestrator.store import Store

    tries: list[int] = []

    def opened(url: str) -> Any:
        tries.append(1)
        if len(tries) <= 25:
            raise DatabaseUnavailable(DOWN)
        return "store"

    class Stop:  # waits take no time: the tries are counted, not timed
        def is_set(self) -> bool:
            return False

        def wait(self, seconds: float) -> bool:
            return False

    monkeypatch.setattr(Store, "open", staticmethod(opened))
    stats = worker_loop.WorkerStats()
    outage = OutageLog(logging.getLogger("orchestrator.worker"), "the worker")
    store = worker_loop._open_store("postgresql://x", Stop(), stats, outage)  # type: ignore[arg-type]
    assert store == "store" and stats.database_errors == 25
    lines = [record.getMessage() for record in said(caplog)]
    assert len(lines) == 2, lines
    assert "the worker keeps trying" in lines[0] and "answers again" in lines[1]


def test_a_workers_message_is_never_cut_mid_word() -> None:
    """`…/orchestrato (retrying in 5.0 s)`: the message was cut at 300 characters."""
    from orchestrator.runtime.worker_loop import _say

    long = "could not connect: " + "x" * 290 + " postgresql://app:***@db.internal/orchestrator"
    assert _say(StorageFailed(long)).endswith("/orchestrator")
    huge = "y " * 2_000
    assert _say(StorageFailed(huge)).endswith("more characters)")  # a cut is marked


def test_retries_wait_longer_each_time_up_to_a_most_and_start_over_after_a_success() -> None:
    from orchestrator.outages import Backoff

    backoff = Backoff(0.5, 5.0)
    assert [backoff.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 0.5
    with pytest.raises(ValueError, match="expected 0 < first <= most"):
        Backoff(0.0, 1.0)


def test_a_worker_opening_its_database_waits_on_the_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's tries while its database is away wait 0.5 s, then twice as long each
    time, up to MAX_BACKOFF (on its stop event: a stop ends the wait at once)."""
    from orchestrator.runtime import worker_loop
    from orchestrator.store import Store

    tries: list[int] = []
    waits: list[float] = []

    def opened(url: str) -> Any:
        tries.append(1)
        if len(tries) <= 6:
            raise DatabaseUnavailable(DOWN)
        return "store"

    class Stop:
        def is_set(self) -> bool:
            return False

        def wait(self, seconds: float) -> bool:
            waits.append(seconds)
            return False

    monkeypatch.setattr(Store, "open", staticmethod(opened))
    outage = OutageLog(logging.getLogger("orchestrator.worker"), "the worker")
    stats = worker_loop.WorkerStats()
    assert worker_loop._open_store("postgresql://x", Stop(), stats, outage) == "store"  # type: ignore[arg-type]
    assert waits == [0.5, 1.0, 2.0, 4.0, worker_loop.MAX_BACKOFF, worker_loop.MAX_BACKOFF]
