"""One process-wide thread renews the leases of every session this process drives."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orchestrator.store.owner import LEASE_SECONDS

__all__ = ["held"]

_lock = threading.Lock()
_held: dict[int, tuple[Any, str, Any]] = {}  # token -> (store, session_id, owner)
_tokens = itertools.count()
_thread: threading.Thread | None = None


def _renew_forever() -> None:
    while True:
        threading.Event().wait(LEASE_SECONDS / 3)
        with _lock:
            claims = list(_held.values())
        for store, session_id, owner in claims:
            store.heartbeat(session_id, owner)


@contextmanager
def held(store: Any, session_id: str, owner: Any) -> Iterator[None]:
    """Keep renewing `owner`'s lease on `session_id` while the block runs."""
    global _thread
    token = next(_tokens)
    with _lock:
        _held[token] = (store, session_id, owner)
        if _thread is None:
            _thread = threading.Thread(target=_renew_forever, name="leases", daemon=True)
            _thread.start()
    try:
        yield
    finally:
        with _lock:
            _held.pop(token, None)
