"""`orchestrator worker`: run answered and stalled sessions on (and apply passed question
deadlines), until stopped."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Annotated, Any

import typer

from orchestrator.cli.options import DbOption, JsonOption
from orchestrator.cli.output import emit, user_errors
from orchestrator.cli.runs import collect_from_here_on

__all__ = ["worker"]


def worker(
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            help="Sessions this process drives at once (threads; worth more than 1 when "
            "agents wait on a model). Run more processes to use more CPUs.",
        ),
    ] = 1,
    exit_when_idle: Annotated[
        float | None,
        typer.Option(
            "--exit-when-idle",
            metavar="SECONDS",
            min=0,
            help="Stop once no session was ready for this long (batch jobs). Default: run "
            "until SIGTERM or Ctrl+C.",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run answered and stalled sessions on, and apply passed question deadlines, until
    stopped (SIGTERM or Ctrl+C finishes)."""
    # Any number of workers on any number of machines can share one database: each session
    # is driven by exactly one of them (orchestrator/runtime/worker_loop.py).
    from orchestrator.api.running import load_runtime, run_worker

    load_runtime()  # LangGraph, before unfreezing gc
    collect_from_here_on()  # a long-running process: the collector must run
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s worker: %(message)s", stream=sys.stderr
    )
    stop = threading.Event()

    def request_stop(signum: int, _frame: Any) -> None:
        logging.getLogger("orchestrator.worker").info(
            "%s: finishing the sessions being driven, taking no new ones",
            signal.Signals(signum).name,
        )
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    with user_errors(as_json):
        stats = run_worker(db, concurrency, stop, idle_exit=exit_when_idle)
    document = {
        "claimed": stats.claimed,
        "ended": stats.ended,
        "interrupted": stats.interrupted,
        "database_errors": stats.database_errors,
    }
    ended = ", ".join(f"{n} {status}" for status, n in sorted(stats.ended.items())) or "none"
    emit(as_json, document, f"worker stopped: {stats.claimed} claimed; ended: {ended}")
