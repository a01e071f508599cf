"""The collector and a process's long-lived objects: frozen once a drive's code is loaded.

A process that runs sessions loads most of its objects once: LangGraph, the store, and, when
the first session is started, its agents' provider (langchain-openai, the openai client and
their types; more is imported by the first model call). The edges freeze what their imports
made (`gc.freeze()`, orchestrator.cli.runs.collect_from_here_on) before any session exists,
so the provider came after and stayed in the collector's sight: the first full collection
then traversed all of it, and a hundred developers starting at once allocate enough to set
one off right then. Measured on `run` with 100 developers (issue 48): one collection of
0.32-0.36 s of CPU inside the 0.5-0.8 s between the PM's plan and the last developer's
request, holding the GIL the whole time.

So an edge that wants it (`freeze_at_first_drive`) gets one more `gc.freeze()` when the
first drive of its process starts, its backend built. Once per process: what sessions
allocate later is collected as usual (a server's answered sessions leave cyclic garbage).
"""

from __future__ import annotations

import gc
import threading

__all__ = ["freeze_at_first_drive", "drive_starts"]

_lock = threading.Lock()
_asked = False  # an edge asked for the freeze and no drive has started since


def freeze_at_first_drive() -> None:
    """Freeze the heap once, when the next drive of this process starts."""
    global _asked
    with _lock:
        _asked = True


def drive_starts() -> None:
    """A drive starts, its agents' backend built: the freeze asked for, if any, now."""
    global _asked
    with _lock:
        if _asked:
            _asked = False
            gc.freeze()
