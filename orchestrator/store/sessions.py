"""The store's operations. Each public method is one short transaction.

Ordering rules the engine relies on:
- an answer is accepted when `resolve` commits; the graph resumes only after that, so a
  crash afterwards never loses it (the store wins over LangGraph's checkpoint);
- every write made from inside a graph node is keyed (`events.key` is unique per session),
  so a node that LangGraph re-runs writes nothing twice;
- a session is driven only by the process whose claim (owner, lease) is on its row.
"""

from __future__ import annotations

from orchestrator.store._base import FINAL_STATUSES, STATUSES, Listener
from orchestrator.store.claims import ClaimsMixin
from orchestrator.store.steps import StepsMixin

__all__ = ["Store", "FINAL_STATUSES", "STATUSES", "Listener"]


class Store(ClaimsMixin, StepsMixin):
    """Sessions, the gate's persisted state, the event log and claims, over one engine."""
