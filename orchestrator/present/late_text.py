"""A late answer for people: the status block and the log's tally (docs/late-answers.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.limits import clip
from orchestrator.present.words import turn_name

__all__ = ["late_tally", "late_lines"]


def late_tally(checks: list[Mapping[str, Any]]) -> str:
    """'1 contradicted, 2 confirmed': a late answer's judged assumptions, counted."""
    counts: dict[str, int] = {}
    for check in checks:
        counts[check["verdict"]] = counts.get(check["verdict"], 0) + 1
    words = {
        "contradicted": "contradicted",
        "for_pm": "for the PM to judge",
        "confirmed": "confirmed",
    }
    return ", ".join(f"{counts[v]} {w}" for v, w in words.items() if counts.get(v))


def late_lines(view: Mapping[str, Any], reconcile: str) -> list[str]:
    """A late answer: what it said, each assumption it was held against, what became of
    it; `reconcile`: the command that reconciles it, for one that needs review."""
    late = view["late_answer"]
    lines = [f"  late answer ({late.get('source', 'user')}): {clip(late['response'])}"]
    for check in late.get("checks") or []:
        tasks = f" [tasks {', '.join(map(str, check['tasks']))}]" if check.get("tasks") else ""
        lines.append(
            f"    - {check['verdict']}: {check['agent']}: {clip(check['assumption'])}{tasks}"
        )
    done = late.get("reconciled")
    if done:
        tasks = "; ".join(clip(t, 200) for t in done.get("tasks") or [])
        lines.append(
            f"  reconciled by {turn_name(done['by'])}: {done['outcome']}"
            + (f" ({tasks})" if tasks else "")
        )
    elif view.get("needs_review"):
        lines.append(f"  NEEDS REVIEW: reconcile with: {reconcile}")
    elif late.get("needs_review") and view["status"] == "running":
        lines.append(
            "  the PM is told on its next turn"
            if late.get("policy") == "reconcile" or late.get("reopened")
            else "  recorded only (on_late_answer: record)"
        )
    return lines
