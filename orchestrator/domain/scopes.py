"""File scopes of planned tasks: which tasks may run at once (contract section 9).

A PLANNED task may list the files it expects to change (paths or globs). Tasks whose
lists overlap run one after another, in task order; the others (and every task without a
list) run in parallel. Pure: the graph's routing calls `next_wave`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["scopes_overlap", "next_wave"]


def _covers(pattern: str, path: str) -> bool:
    """`pattern` (a path, a folder or a glob) names `path` or a file under it."""
    pattern, path = pattern.strip("/"), path.strip("/")
    if pattern in ("", "."):
        return True
    return (
        pattern == path
        or path.startswith(pattern + "/")
        or fnmatchcase(path, pattern)
        or fnmatchcase(path, pattern + "/*")
    )


def _pair(a: str, b: str) -> bool:
    if _covers(a, b) or _covers(b, a):
        return True
    # Two globs: they overlap if one's fixed prefix (before its first wildcard) reaches
    # into the other's. A cautious answer: "maybe" runs them one after another.
    head_a, head_b = _fixed(a), _fixed(b)
    return head_a.startswith(head_b) or head_b.startswith(head_a) if "*" in a + b else False


def _fixed(pattern: str) -> str:
    for index, char in enumerate(pattern):
        if char in "*?[":
            return pattern[:index].strip("/")
    return pattern.strip("/")


def scopes_overlap(a: Sequence[str] | None, b: Sequence[str] | None) -> bool:
    """Whether two tasks' file lists may name a common file (no list: no overlap)."""
    if not a or not b:
        return False
    return any(_pair(x, y) for x in a for y in b)


def next_wave(tasks: Sequence[Mapping[str, Any]], finished: set[int]) -> list[int]:
    """The task numbers to run next: every task not `finished` whose scope overlaps no
    earlier unfinished task (so overlapping tasks run one after another, in order)."""
    wave: list[int] = []
    waiting: list[Mapping[str, Any]] = []
    for task in sorted(tasks, key=lambda t: int(t["number"])):
        number = int(task["number"])
        if number in finished:
            continue
        if not any(scopes_overlap(task.get("files"), other.get("files")) for other in waiting):
            wave.append(number)
        waiting.append(task)
    return wave
