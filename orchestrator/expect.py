"""A scenario's `expect` against how its session ended (plain data: no pydantic here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.documents import ExpectDoc

__all__ = ["ENDED", "check_expect"]

# `expect` describes how a run ends; a pause is not an end, and a user's cancel is the
# user's call (exit 4), not the script's result.
ENDED = ("completed", "failed")


def check_expect(expect: Mapping[str, Any], doc: Mapping[str, Any]) -> ExpectDoc:
    """Each unmet expectation as one line: the field, what was expected, what happened."""
    unmet = []
    for field in ("status", "questions_surfaced", "fallbacks_injected", "summary"):
        wanted = expect.get(field)
        if wanted is not None and doc.get(field) != wanted:
            unmet.append(f"expect.{field}: expected {wanted!r}, got {doc.get(field)!r}")
    needle = expect.get("error_contains")
    if needle is not None and needle not in (doc.get("error") or ""):
        unmet.append(f"expect.error_contains: {needle!r} not in error {doc.get('error')!r}")
    return {"held": not unmet, "unmet": unmet}
