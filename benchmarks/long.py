"""A long session's cost per agent call: plans of 1 to 200 tasks over 1 and 3 rounds, CPU
per call of the whole session in one process. Flat is the goal: a call in a session of 50
tasks should cost what it costs in a session of one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from proc import Row

__all__ = ["figure_long"]

SIZES = (1, 5, 20, 50, 200)
TARGET_FLAT = 1.25  # CPU per call at 50 tasks over CPU per call at 1 task (3 rounds)


def _scenario(tasks: int, rounds: int) -> dict[str, Any]:
    pm: list[dict[str, Any]] = []
    developer: list[dict[str, Any]] = []
    for r in range(rounds):
        plan = [{"title": f"task {r}-{i}", "description": "do it"} for i in range(tasks)]
        pm.append({"status": "PLANNED", "tasks": plan})
        developer += [{"status": "DONE", "summary": f"done {r}-{i}"} for i in range(tasks)]
    pm.append({"status": "COMPLETE", "summary": "all done"})
    return {
        "task": "a long session",
        "agents": {"pm": pm, "developer": developer},
        "settings": {"max_rounds": rounds + 1},
    }


def _per_call(tmp: Path, tasks: int, rounds: int, runs: int) -> float:
    """CPU seconds per agent call, the least of `runs` sessions (after one warm-up)."""
    from orchestrator import Sessions

    path = tmp / f"long-{tasks}x{rounds}.yaml"
    path.write_text(yaml.safe_dump(_scenario(tasks, rounds)), encoding="utf-8")
    calls = rounds * (tasks + 1) + 1
    best = float("inf")
    with Sessions(str(tmp / f"long-{tasks}x{rounds}.db")) as sessions:
        sessions.start_scenario(str(path))
        for _ in range(runs):
            started = time.process_time()
            doc = sessions.start_scenario(str(path))
            best = min(best, time.process_time() - started)
            assert doc["status"] == "completed", doc
    return best / calls


def figure_long(tmp: Path, runs: int) -> Row:
    print("\n== a long session: CPU per agent call by plan size (least of the runs)")
    per: dict[tuple[int, int], float] = {}
    for rounds in (1, 3):
        for tasks in SIZES:
            per[tasks, rounds] = _per_call(tmp, tasks, rounds, runs)
            print(f"  {tasks:4d} tasks x {rounds} rounds: {per[tasks, rounds] * 1000:.2f} ms")
    flat = per[50, 3] / per[1, 3]
    return Row(
        "CPU per agent call, 50 tasks x 3 rounds vs 1 task x 3 rounds",
        [
            f"{flat:.2f}x (200 tasks: {per[200, 3] / per[1, 3]:.2f}x; "
            f"{per[1, 3] * 1000:.2f} ms per call at 1 task)"
        ],
        f"<= {TARGET_FLAT}x (flat)",
        flat <= TARGET_FLAT,
        "benchmarks/run.py --only long",
    )
