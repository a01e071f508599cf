"""Preparing a process that runs sessions: loading the runtime up front, the worker loop,
a template database for forked children, and the graph's diagram."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.runtime.worker_loop import WorkerStats

__all__ = ["load_runtime", "freeze_at_first_drive", "run_worker", "make_template", "graph_diagram"]


def load_runtime() -> None:
    """Import the runtime (LangGraph) now: before `gc.freeze()` ends, or before forking, so
    that its import-time objects are frozen or shared rather than collected or copied."""
    import orchestrator.runtime.checkpoints  # noqa: F401
    import orchestrator.runtime.graph  # noqa: F401


def freeze_at_first_drive() -> None:
    """Freeze the process's heap (`gc.freeze()`) once more when its first drive starts,
    the agents' provider loaded by then (orchestrator.runtime.heap says why)."""
    from orchestrator.runtime.heap import freeze_at_first_drive as asked

    asked()


def run_worker(
    db: str | None,
    concurrency: int = 1,
    stop: threading.Event | None = None,
    *,
    idle_exit: float | None = None,
    on_session: Callable[[str, dict[str, Any]], None] | None = None,
) -> WorkerStats:
    """Run answered, stalled and timed-out sessions on until `stop` is set (or, with
    `idle_exit`, until nothing was ready for that many seconds). Any number of workers may
    share one database: each session is driven by exactly one of them."""
    from orchestrator.runtime.worker_loop import run_worker as loop

    return loop(db, concurrency, stop, idle_exit=idle_exit, on_session=on_session)


def make_template(url: str) -> None:
    """Make an empty database at `url`, migrated and with LangGraph's tables, and compile
    the graph: what every forked child would otherwise do first. Leaves no thread running,
    so forking after it stays safe."""
    from orchestrator.runtime.checkpoints import checkpointer
    from orchestrator.runtime.graph import compiled
    from orchestrator.store import open_engine

    open_engine(url).dispose()
    with checkpointer(url):
        pass
    compiled(None)


def graph_diagram() -> str:
    """The agents' graph (pm, developers, the gate) as Mermaid text, drawn by LangGraph."""
    from orchestrator.runtime.graph import build_graph

    return str(build_graph().compile().get_graph().draw_mermaid())
