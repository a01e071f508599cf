"""Recorded agent turns: written once per (agent, call) key, read back on every re-run.

LangGraph re-runs nodes; a re-run finds the turn its first run recorded instead of calling
the agent again. The session row's plan and task board are written in the same
transaction as the turn that produced them.
"""

from __future__ import annotations

from typing import Any

from orchestrator.store.events import add_assumption, add_event, update_sql, utcnow
from orchestrator.store.sql import Row, Tx

__all__ = [
    "recorded_turns",
    "reply_counts",
    "record_reply",
    "add_usage",
    "recorded_merges",
    "record_merge",
]


def recorded_turns(tx: Tx, session_id: str) -> dict[str, dict[str, Any]]:
    """Every agent turn recorded for the session, by key (`<agent>#<call>`)."""
    rows = tx.rows(
        "SELECT \"key\", payload FROM events WHERE session_id = :sid AND kind = 'agent_reply'",
        {"sid": session_id},
    )
    return {row.key: dict(row.payload) for row in rows}


def reply_counts(tx: Tx, session_id: str) -> dict[str, int]:
    """How many replies each agent has recorded (scripted backends resume from this)."""
    rows = tx.rows(
        "SELECT agent, COUNT(*) AS n FROM events"
        " WHERE session_id = :sid AND kind = 'agent_reply' GROUP BY agent",
        {"sid": session_id},
    )
    return {row.agent: int(row.n) for row in rows}


def stored_turn(tx: Tx, session_id: str, key: str) -> dict[str, Any]:
    payload = tx.scalar(
        'SELECT payload FROM events WHERE session_id = :sid AND "key" = :key',
        {"sid": session_id, "key": key},
    )
    return dict(payload)


def record_reply(
    tx: Tx,
    row: Row,
    key: str,
    agent: str,
    turn: dict[str, Any],
    *,
    plan: tuple[int, list[dict[str, Any]]] | None = None,
    task: tuple[int, int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Store an agent's turn (`reply`, `messages`, `files`) under `key`, with what the
    session row (`row`, read under the write lock by the caller) shows of it: a new
    `plan`, or one `task`'s result. If a turn is stored under `key` already, return that
    one and change nothing."""
    session_id = row.id
    # What the turn ran, each an event of its own in the session's log (contract section
    # 9), in the order it happened: its commands, its reply, the checks run on it. They
    # are written with the turn (a key stored already inserts nothing).
    for index, command in enumerate(turn.get("commands", [])):
        add_event(tx, session_id, "command", agent=agent, key=f"{key}:command:{index}", **command)
    if not add_event(tx, session_id, "agent_reply", agent=agent, key=key, **turn):
        return stored_turn(tx, session_id, key)
    for index, check in enumerate(turn.get("checks", [])):
        add_event(tx, session_id, "check", agent=agent, key=f"{key}:check:{index}", **check)
    for index, item in enumerate(turn["reply"].get("assumptions", [])):
        given = item if isinstance(item, dict) else {"text": item}
        add_assumption(
            tx,
            session_id,
            f"{key}:{index}",
            agent=agent,
            assumption=given["text"],
            why="reported by the agent",
            source="agent",
            about=given.get("key"),
            value=given.get("value"),
        )
    values: dict[str, Any] | None = None
    if turn.get("usage"):
        values = {"usage": add_usage(getattr(row, "usage", None), agent, turn["usage"])}
    if plan is not None:
        values = (values or {}) | {"round": plan[0], "tasks": plan[1]}
    elif task is not None:
        round_, number, fields = task
        if row.round == round_:
            merged = _merge_task(tx, session_id, number, fields, values or {})
            # None: merged with the row's other values and `updated_at`, all written
            values = None if merged is None else (values or {}) | {"tasks": merged}
    if values is not None:
        values["updated_at"] = utcnow()
        tx.run(update_sql("sessions", list(values), "id = :sid"), values | {"sid": session_id})
    return turn


def recorded_merges(tx: Tx, session_id: str) -> dict[str, dict[str, Any]]:
    """Every merge of a task branch into the session branch recorded for the session, by
    key (`merge:<round>:<task>:<call>`), in the order they were recorded."""
    rows = tx.rows(
        "SELECT \"key\", payload FROM events WHERE session_id = :sid AND kind = 'merge'"
        " ORDER BY id",
        {"sid": session_id},
    )
    return {row.key: dict(row.payload) for row in rows}


def record_merge(
    tx: Tx,
    row: Row,
    key: str,
    agent: str,
    merge: dict[str, Any],
    task: tuple[int, int, dict[str, Any]],
) -> dict[str, Any]:
    """Store one merge's outcome under `key` (the durable state of the merge queue: the
    session branch's head is the last clean merge's commit), with the task's new result
    on the session row. A merge stored under `key` already is returned unchanged."""
    session_id = row.id
    if not add_event(tx, session_id, "merge", agent=agent, key=key, **merge):
        return stored_turn(tx, session_id, key)
    round_, number, fields = task
    if row.round == round_:
        merged = _merge_task(tx, session_id, number, fields, {})
        if merged is not None:
            tx.run(
                update_sql("sessions", ["tasks", "updated_at"], "id = :sid"),
                {"tasks": merged, "updated_at": utcnow(), "sid": session_id},
            )
    return merge


# Task `number` is at index number - 1 of the board (the plan numbers its tasks from 1);
# `{also}`: the row's other new values, set in the same statement.
_MERGE_TASK_SQLITE = (
    "UPDATE sessions SET tasks ="
    " json_set(tasks, :path, json_patch(json_extract(tasks, :path), :fields)),"
    " updated_at = :updated_at{also}"
    " WHERE id = :sid AND json_extract(tasks, :path || '.number') = :number"
)


def _merge_task(
    tx: Tx, session_id: str, number: int, fields: dict[str, Any], also: dict[str, Any]
) -> list[dict[str, Any]] | None:
    """Merge a developer's result into its task on the session's board. On SQLite the
    database merges it in place, writing `also` (the usage) and `updated_at` in the same
    statement (None): the board is neither read nor rewritten whole by Python, so the
    cost of a call does not grow with the number of tasks; elsewhere the board is read and
    merged, and returned for the caller to write back (with `also` and `updated_at`)."""
    if tx.dialect == "sqlite":
        sql = _MERGE_TASK_SQLITE.format(also="".join(f", {name} = :{name}" for name in also))
        params = {"path": f"$[{number - 1}]", "fields": fields, "sid": session_id}
        if tx.run(sql, params | also | {"number": number, "updated_at": utcnow()}) == 1:
            return None
    tasks = tx.scalar("SELECT tasks FROM sessions WHERE id = :sid", {"sid": session_id})
    return [{**t, **fields} if t["number"] == number else t for t in tasks]


def add_usage(
    totals: dict[str, dict[str, int]] | None, agent: str, turn: dict[str, int]
) -> dict[str, dict[str, int]]:
    """The session's usage per agent with one more turn's added."""
    merged = {name: dict(counts) for name, counts in (totals or {}).items()}
    mine = merged.setdefault(agent, {})
    for name, value in turn.items():
        mine[name] = mine.get(name, 0) + int(value)
    return merged
