"""Our database: sessions, the gate's persisted state, the event log, and session claims.

Imports SQLAlchemy only (no LangGraph, no pydantic models): `status`, `list` and `log`
run on this alone.
"""

from orchestrator.store.db import open_engine, resolve_url
from orchestrator.store.owner import Claim, Owner
from orchestrator.store.sessions import Store

__all__ = ["Store", "Owner", "Claim", "open_engine", "resolve_url"]
