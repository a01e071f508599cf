"""Running scenarios N at a time, each in its own process (contract section 7).

On Linux children are forked from this process once it has imported the orchestrator
(elsewhere from a fork server that preloads it), so a scenario costs a fork, not a
Python start-up. Results are reported as
they finish; the report lists them in collection order whatever N was.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from orchestrator.suite.results import Item, Malformed, Report, Result

__all__ = ["run_suite", "default_jobs"]

Listener = Callable[[Result], None]


def default_jobs() -> int:
    """The number of CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _context() -> Any:
    """fork where it is safe (Linux): children of a parent that imported the orchestrator
    once start warm. Elsewhere a fork server that preloads it (spawn as a last resort)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods:
        from orchestrator.suite.child import warm_up  # LangGraph and the store, once

        warm_up()
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["orchestrator.suite.child"])
        return ctx
    return multiprocessing.get_context("spawn")


def run_suite(
    items: Sequence[Item],
    *,
    jobs: int | None = None,
    malformed: Sequence[Malformed] = (),
    exitfirst: bool = False,
    on_start: Callable[[Item], None] | None = None,
    on_result: Listener | None = None,
) -> Report:
    """Run every item in its own process, `jobs` at a time (default: the CPUs).

    With `exitfirst`, no new scenario starts after the first one that did not pass; the
    ones not started are reported `skipped`."""
    from orchestrator.suite.child import child

    jobs = jobs or default_jobs()
    started_at = time.perf_counter()
    if not items:
        return Report(results=(), malformed=tuple(malformed), jobs=jobs)
    ctx = _context()
    waiting = deque(items)
    running: dict[Connection, tuple[Item, Any, float]] = {}
    done: dict[str, Result] = {}
    stop = False
    try:
        while waiting or running:
            while waiting and not stop and len(running) < jobs:
                item = waiting.popleft()
                reader, writer = ctx.Pipe(duplex=False)
                process = ctx.Process(
                    target=child, args=(item.path, item.name, writer), daemon=True
                )
                process.start()
                writer.close()  # ours; the child holds its own copy
                running[reader] = (item, process, time.perf_counter())
                if on_start is not None:
                    on_start(item)
            if not running:
                break
            for reader in wait(list(running)):
                assert isinstance(reader, Connection)
                item, process, began = running.pop(reader)
                result = _receive(reader, item, process, time.perf_counter() - began)
                done[item.path] = result
                if on_result is not None:
                    on_result(result)
                if exitfirst and result.outcome in ("failed", "error"):
                    stop = True
    finally:
        # Interrupted (Ctrl+C) or a bug here: no scenario process outlives the suite.
        for _, process, _ in running.values():
            process.terminate()
            process.join()
    results = [
        done.get(item.path)
        or Result(
            name=item.name,
            path=item.path,
            outcome="skipped",
            message="not run: -x stopped the suite at the first failure",
        )
        for item in items
    ]
    return Report(
        results=tuple(results),
        malformed=tuple(malformed),
        seconds=time.perf_counter() - started_at,
        jobs=jobs,
    )


def _receive(reader: Connection, item: Item, process: Any, seconds: float) -> Result:
    try:
        result: Result = reader.recv()
    except EOFError:
        process.join()
        return Result(
            name=item.name,
            path=item.path,
            outcome="error",
            seconds=seconds,
            message=f"the scenario's process ended without a result (exit code {process.exitcode})",
        )
    finally:
        reader.close()
    process.join()
    # The wall time the user waited, fork included.
    return Result(**{**result.__dict__, "seconds": max(seconds, result.seconds)})
