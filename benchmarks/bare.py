"""The bare LangGraph baseline: the same graph shape as orchestrator.runtime.graph, nothing else.

pm -> gate (interrupt: one question) -> [resume] -> pm plans 2 tasks -> Send fan-out to
two `developer` nodes -> join -> pm completes -> END. Plain JSON state, SqliteSaver on a
SQLite file in WAL mode, with the same connection settings as orchestrator.runtime.checkpoints.

This module is also the bare resume process (`python benchmarks/bare.py DB THREAD ANSWER`),
so its module level imports only the standard library.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

__all__ = ["graph", "saver", "config", "initial", "resume_main", "session_factory"]

QUESTION = "How often should the digest be sent?"


def _merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class BareState(TypedDict, total=False):
    calls: int
    question: str | None
    answer: str | None
    tasks: list[dict[str, Any]]
    results: Annotated[dict[str, dict[str, Any]], _merge]
    outcome: dict[str, Any] | None


class BareDeveloperInput(TypedDict):
    task: dict[str, Any]


def graph() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send, interrupt

    def pm(state: BareState) -> dict[str, Any]:
        calls = state.get("calls", 0) + 1
        if state.get("answer") is None:
            return {"calls": calls, "question": QUESTION}
        if not state.get("tasks"):
            tasks = [
                {"number": 1, "title": "Digest job and schedule", "status": "pending"},
                {"number": 2, "title": "Email template", "status": "pending"},
            ]
            return {"calls": calls, "tasks": tasks}
        return {"calls": calls, "outcome": {"status": "completed", "summary": "shipped"}}

    def gate(state: BareState) -> dict[str, Any]:
        answer = interrupt({"question": state["question"], "asked_by": "pm"})
        return {"answer": answer}

    def developer(state: BareDeveloperInput) -> dict[str, Any]:
        number = state["task"]["number"]
        return {"results": {f"1:{number}": {"status": "done", "summary": f"task {number} done"}}}

    def join(state: BareState) -> dict[str, Any]:
        return {}

    def after_pm(state: BareState) -> Any:
        if state.get("outcome"):
            return END
        if state.get("answer") is None:
            return "gate"
        return [Send("developer", BareDeveloperInput(task=t)) for t in state["tasks"]]

    built = StateGraph(BareState)
    built.add_node("pm", pm)
    built.add_node("gate", gate)
    built.add_node("developer", developer, input_schema=BareDeveloperInput)
    built.add_node("join", join)
    built.add_edge(START, "pm")
    built.add_conditional_edges("pm", after_pm, ["gate", "developer", END])
    built.add_edge("gate", "pm")
    built.add_edge("developer", "join")
    built.add_edge("join", "pm")
    return built


def saver(path: Path, synchronous: str | None = None) -> tuple[Any, Any]:
    """SqliteSaver on `path` in WAL mode; `synchronous` NORMAL is what our store uses."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA busy_timeout = 30000")
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    made = SqliteSaver(conn)
    made.setup()
    return made, conn


def config(thread_id: str) -> dict[str, Any]:
    # Same as the engine gives a scripted run: developers one at a time.
    return {"configurable": {"thread_id": thread_id}, "max_concurrency": 1}


def initial() -> dict[str, Any]:
    return {"calls": 0, "tasks": [], "results": {}}


def pg_saver(url: str) -> tuple[Any, Any]:
    """PostgresSaver on `url` (a SQLAlchemy-style URL), set up as its documentation says:
    an autocommit connection with dict rows."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conn = psycopg.connect(
        url.replace("+psycopg", "", 1), autocommit=True, prepare_threshold=0, row_factory=dict_row
    )
    made = PostgresSaver(conn)
    made.setup()
    return made, conn


def session_factory(
    db: Path | str, synchronous: str | None = None, *, durability: str | None = None
) -> tuple[Callable[[], dict[str, Any]], Any]:
    """One whole bare session per call (ask, resume with the answer, run to the end), on
    SqliteSaver (a file) or PostgresSaver (a postgresql URL). `durability="exit"` is the
    issue's "our checkpoint policy" baseline (a checkpoint at the question and at the end,
    none per step; ours now writes none at the end), beside LangGraph's default (one per
    step)."""
    from langgraph.types import Command

    if isinstance(db, str):
        made, conn = pg_saver(db)
    else:
        made, conn = saver(db, synchronous)
    compiled = graph().compile(checkpointer=made)
    counter = iter(range(10**9))

    def one() -> dict[str, Any]:
        thread = config(f"bare-{next(counter)}")
        first = compiled.invoke(initial(), thread, durability=durability)
        assert "__interrupt__" in first, "the bare graph did not stop at the question"
        resumed = compiled.invoke(
            Command(resume="All visible columns"), thread, durability=durability
        )
        return dict(resumed)

    return one, conn


def interrupted_thread(db: Path, synchronous: str | None = None) -> str:
    """A thread stopped at the question in `db`, as a paused session is; return its id."""
    made, conn = saver(db, synchronous)
    try:
        thread_id = db.stem
        out = graph().compile(checkpointer=made).invoke(initial(), config(thread_id))
        assert "__interrupt__" in out, "the bare graph did not stop at the question"
    finally:
        conn.close()
    return thread_id


def resume_main(argv: Sequence[str]) -> int:
    """The bare resume process: resume one interrupted thread to the end, print its state.

    argv: DB THREAD ANSWER [SYNCHRONOUS]."""
    from langgraph.types import Command

    db, thread_id, answer, *synchronous = argv
    made, conn = saver(Path(db), synchronous[0] if synchronous else None)
    try:
        compiled = graph().compile(checkpointer=made)
        values = compiled.invoke(Command(resume=answer), config(thread_id))
    finally:
        conn.close()
    print(json.dumps(values, indent=2))
    return 0 if (values.get("outcome") or {}).get("status") == "completed" else 1


if __name__ == "__main__":
    sys.exit(resume_main(sys.argv[1:]))
