"""Typed records for what crosses layers as JSON: the pending question, the claim's owner.

TypedDicts, not pydantic: they describe the plain dicts the store's views return, which
`status`/`list`/`log` build without importing pydantic (cold start).
"""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = ["OptionRecord", "PendingQuestion", "OwnerRecord"]


class OptionRecord(TypedDict, total=False):
    label: str  # always present
    description: str | None
    recommended: bool


class _PendingRequired(TypedDict):
    question: str
    kind: Literal["free_text", "single_select", "multi_select"]
    asked_by: str
    deadline: str | None  # ISO 8601, or None for no deadline
    timed_out: bool


class PendingQuestion(_PendingRequired, total=False):
    """The open question (contract section 2's object plus `asked_by`): what the terminal,
    the renderer, answer validation and the engine all take."""

    options: list[OptionRecord]
    allow_other: bool
    reason: str | None
    context: str | None
    default: str | None
    urgency: Literal["low", "medium", "high"]
    ambiguity: str | None


class OwnerRecord(TypedDict):
    """Who drives a running session, and when another process may take it over."""

    pid: int | None
    host: str | None
    lease_expires_at: str | None  # ISO 8601
    takeover_possible_in: float  # seconds; 0 when a takeover is possible now
    alive: bool
