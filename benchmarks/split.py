"""Where a session's CPU goes: the in-process session of `run.py --only inprocess` split by
the code it runs in, beside bare LangGraph's whole session, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/split.py [--sessions 300]

Each part is CPU time (time.process_time) spent in it and in nothing it calls that is
counted apart (exclusive), per session, over `--sessions` sessions after a warm-up:

    store        every public method of orchestrator.store.Store (its SQL and decoding)
    nodes        the graph's nodes (pm, developer, join, gate), less the store and agents
    agents       the scripted backend's replies
    api, engine  Sessions.start_scenario and the engine around the graph
    langgraph    the rest of Pregel.invoke: LangGraph's loop, the checkpointer's writes
                 and serialisation, the routing between nodes

The timers themselves cost some CPU (run to run it is within the noise of the total), so
read the parts as shares, and the
bare figure (measured without timers) against "without timers". A figure the issue asks
for is in run.py; this one says which part a change would have to shrink. On PostgreSQL
the client's CPU is counted, not the server's, nor the wait for a round trip.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bare  # noqa: E402
import sessions  # noqa: E402

# Store methods that only open a transaction or hand out a saver: their callers' parts.
_NOT_COUNTED = {"writing", "reading", "_statement", "open", "close", "shares", "fence_in"}


class Split:
    """Exclusive CPU per part: a part's time less that of the parts it calls."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._stack: list[float] = []

    def timed(self, part: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            self._stack.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                took = time.process_time() - started
                inner = self._stack.pop()
                self.spent[part] = self.spent.get(part, 0.0) + took - inner
                if self._stack:
                    self._stack[-1] += took

        return run


@contextmanager
def instrumented(split: Split) -> Iterator[None]:
    """The parts' functions timed for the block's length (the nodes before the graph is
    compiled: the engine compiles it once per process)."""
    from langgraph.pregel import Pregel
    from orchestrator.agents.scripted import ScriptedBackend

    from orchestrator.api.sessions import Sessions
    from orchestrator.runtime import graph
    from orchestrator.store.core import Store

    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, part: str) -> None:
        original = owner.__dict__[name]
        patched.append((owner, name, original))
        setattr(owner, name, split.timed(part, original))

    for name in ("pm", "developer", "join", "gate_node"):
        patch(graph, name, "nodes")
    for name, value in list(vars(Store).items()):
        if callable(value) and not name.startswith("__") and name not in _NOT_COUNTED:
            patch(Store, name, "store")
    patch(ScriptedBackend, "respond", "agents")
    patch(Pregel, "invoke", "langgraph")
    patch(Sessions, "start_scenario", "api, engine")
    graph._COMPILED = None
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)
        graph._COMPILED = None


def measure(name: str, ours_db: Path | str, bare_db: Path | str, count: int) -> None:
    one_bare, bare_conn = bare.session_factory(bare_db, "NORMAL", durability="exit")
    one_ours, api = sessions._ours(ours_db)
    try:
        for _ in range(20):
            one_bare()
            one_ours()
        started = time.process_time()
        for _ in range(count):
            one_bare()
        bare_cpu = (time.process_time() - started) / count
        started = time.process_time()
        for _ in range(count):
            one_ours()
        plain = (time.process_time() - started) / count
        split = Split()
        with instrumented(split):
            one_ours()  # compiled with the timed nodes
            split.spent.clear()
            started = time.process_time()
            for _ in range(count):
                one_ours()
            timed_total = (time.process_time() - started) / count
    finally:
        api.close()
        bare_conn.close()
    print(f"\n== {name}: CPU per session, {count} sessions (ms)")
    print(f"ours without timers {plain * 1000:6.2f}; with timers {timed_total * 1000:6.2f}")
    for part, spent in sorted(split.spent.items(), key=lambda kv: -kv[1]):
        share = spent / count / timed_total
        print(f"  {part:<12} {spent / count * 1000:6.2f}  {share:4.0%}")
    store = split.spent.get("store", 0.0) / count / timed_total
    print(
        f"bare, checkpoints at the question and the end: {bare_cpu * 1000:.2f} "
        f"({bare_cpu / plain:.2f}x ours); with a store that cost nothing, ours would be "
        f"{plain * (1 - store) * 1000:.2f}: {bare_cpu / (plain * (1 - store)):.2f}x"
    )


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="orch-bench-split-") as folder:
        tmp = Path(folder)
        measure("SQLite", tmp / "ours.db", tmp / "bare.db", args.sessions)
    import pgcluster

    bin_dir = pgcluster.find_bin()
    if bin_dir is None:
        print("\n== PostgreSQL: skipped (no server binaries)")
        return 0
    cluster = pgcluster.Cluster.start(bin_dir)
    try:
        measure(
            "PostgreSQL (client CPU)",
            cluster.database("empty"),
            cluster.database("empty"),
            args.sessions,
        )
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
