"""Our database: sessions, the gate's persisted state, the event log, and session claims.

No LangGraph and no pydantic models. The names below load on first use: the standard
library modules of this package (`sql`, `connect`, `views`, `owner` and the store itself
on SQLite) import without SQLAlchemy, which loads for PostgreSQL and for migrations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Store", "Owner", "Claim", "open_engine", "resolve_url"]

if TYPE_CHECKING:
    from orchestrator.store.connect import resolve_url
    from orchestrator.store.core import Store
    from orchestrator.store.db import open_engine
    from orchestrator.store.owner import Claim, Owner

_LAZY = {
    "Store": "orchestrator.store.core",
    "Owner": "orchestrator.store.owner",
    "Claim": "orchestrator.store.owner",
    "open_engine": "orchestrator.store.db",
    "resolve_url": "orchestrator.store.connect",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator.store' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
