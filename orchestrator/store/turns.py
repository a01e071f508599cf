"""Recorded agent turns: written once per (agent, call) key, read back on every re-run.

LangGraph re-runs nodes; a re-run finds the turn its first run recorded instead of calling
the agent again. The session row's plan and task board are written in the same
transaction as the turn that produced them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from orchestrator.store._tx import add_assumption, add_event, session_row, utcnow
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import sessions as _S

__all__ = ["recorded_turns", "reply_counts", "record_reply"]


def recorded_turns(conn: Connection, session_id: str) -> dict[str, dict[str, Any]]:
    """Every agent turn recorded for the session, by key (`<agent>#<call>`)."""
    rows = conn.execute(
        select(_E.c.key, _E.c.payload).where(
            _E.c.session_id == session_id, _E.c.kind == "agent_reply"
        )
    )
    return {key: dict(payload) for key, payload in rows}


def reply_counts(conn: Connection, session_id: str) -> dict[str, int]:
    """How many replies each agent has recorded (scripted backends resume from this)."""
    rows = conn.execute(
        select(_E.c.agent).where(_E.c.session_id == session_id, _E.c.kind == "agent_reply")
    )
    counts: dict[str, int] = {}
    for (agent,) in rows:
        counts[agent] = counts.get(agent, 0) + 1
    return counts


def record_reply(
    conn: Connection,
    session_id: str,
    key: str,
    agent: str,
    turn: dict[str, Any],
    *,
    plan: tuple[int, list[dict[str, Any]]] | None = None,
    task: tuple[int, int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Store an agent's turn (`reply`, `messages`, `files`) under `key`, with what the
    session row shows of it (a new `plan`, or one `task`'s result). If a turn is stored
    under `key` already, return that one and change nothing."""
    if not add_event(conn, session_id, "agent_reply", agent=agent, key=key, **turn):
        stored = conn.execute(
            select(_E.c.payload).where(_E.c.session_id == session_id, _E.c.key == key)
        ).scalar_one()
        return dict(stored)
    for index, text in enumerate(turn["reply"].get("assumptions", [])):
        add_assumption(
            conn,
            session_id,
            f"{key}:{index}",
            agent=agent,
            assumption=text,
            why="reported by the agent",
            source="agent",
        )
    if plan is not None:
        conn.execute(
            update(_S)
            .where(_S.c.id == session_id)
            .values(round=plan[0], tasks=plan[1], updated_at=utcnow())
        )
    if task is not None:
        _update_task(conn, session_id, *task)
    return turn


def _update_task(
    conn: Connection, session_id: str, round_: int, number: int, fields: dict[str, Any]
) -> None:
    row = session_row(conn, session_id, lock=True)
    if row.round != round_:
        return
    tasks = [{**task, **fields} if task["number"] == number else task for task in row.tasks]
    conn.execute(update(_S).where(_S.c.id == session_id).values(tasks=tasks, updated_at=utcnow()))
