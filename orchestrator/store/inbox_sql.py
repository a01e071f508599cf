"""The inbox's reads (and its few writes): the store's side of the web inbox and
notifications. The web edge calls these; it runs no SQL.

The log after a given event id (live progress), answer links (table `answer_links`,
revision 0008: tokens hashed), the sessions a server must pick up at start, notification
events for the log, and the inbox's pages, read with a cursor (keyset paging), each
straight off an index.

The inbox's order is three runs, one after the other:

- "t": sessions waiting for an answer whose question has a deadline, soonest first (ties:
  the question asked first, then the smaller id), off revision 0010's partial index of
  open questions (deadline, asked_at, session_id);
- "u": sessions waiting for an answer without a deadline, the question asked first first
  (the same index, at `deadline IS NULL`): the longest waiting is answered first;
- "o": every other session, newest first, off revision 0004's (created_at DESC, id DESC).

Every key of the waiting runs' order is in their index, so no tie pattern (one deadline
shared by a third of 100,000 sessions, or none at all) makes a page sort what shares it.

A page reads on from its cursor: the run and the sort keys of the last row shown, so it
costs its own rows whatever the table's size (no OFFSET walking the skipped ones, no count
of all sessions). The cursor is opaque to its users: URL-safe base64 of a small JSON
list; a cursor that does not decode is a UserError (the web answers 400).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import secrets
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain.clock import iso
from orchestrator.errors import UserError
from orchestrator.store.core import Store
from orchestrator.store.events import add_event, utcnow
from orchestrator.store.owner import DRIVER_COLUMNS, OWNER_COLUMNS
from orchestrator.store.views import (
    JOINED_SQL,
    LIVE_SESSION_SQL,
    OPEN_QUESTION_SQL,
    driver_fields,
    event_view,
    owner_alive,
    pending_question,
    session_view,
    waiting_for_driver,
)

__all__ = [
    "events_after",
    "new_link",
    "session_of_link",
    "mark_link_used",
    "answered_not_run_on",
    "record_event",
    "has_event",
    "waiting_sessions",
    "InboxPage",
    "INBOX_COLUMNS",
    "inbox_row",
    "inbox_page",
    "page_number",
    "waiting_count",
    "encode_cursor",
    "decode_cursor",
]

# Sessions and their gate state, every session (store.views.JOINED_SQL without its WHERE).
_ALL = JOINED_SQL.removesuffix(" WHERE s.id = :id")
# Running sessions whose answer is committed, with the columns that say who drives them
# (owner_alive, waiting_for_driver) and no others: `serve` polls this every second, and a
# whole row carries the session's script and task board (with thousands of answers queued,
# reading those each second held the server's memory at the size of the queue's rows).
_ANSWERED_RUNNING = (
    f"SELECT {', '.join(f's.{c}' for c in DRIVER_COLUMNS)}"
    " FROM sessions AS s JOIN orchestrator_state AS t ON t.session_id = s.id"
    " WHERE s.status = 'running' AND t.clarification_used AND t.clarification_resolved"
    " AND (t.resolution IS NULL OR t.resolution <> 'cancelled') ORDER BY s.updated_at"
)
# Waiting for an answer: an open question of a session that has not ended.
_WAITING = f"({OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL})"


def events_after(store: Store, session_id: str, after: int) -> list[tuple[int, dict[str, Any]]]:
    """The session's events with an id above `after`, oldest first, with their ids."""
    with store.reading() as tx:
        rows = tx.rows(
            "SELECT * FROM events WHERE session_id = :sid AND id > :after ORDER BY id",
            {"sid": session_id, "after": after},
        )
    return [(row.id, event_view(row)) for row in rows]


def _hashed(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_link(store: Store, session_id: str) -> str:
    """A new answer-link token for the session's question. Only its hash is stored: the
    token is in the returned value and nowhere else."""
    token = secrets.token_urlsafe(32)  # 256 bits: unguessable
    with store.writing() as tx:
        tx.run(
            "INSERT INTO answer_links (token_hash, session_id, created_at, used_at)"
            " VALUES (:token_hash, :sid, :created_at, NULL)",
            {"token_hash": _hashed(token), "sid": session_id, "created_at": utcnow()},
        )
    return token


def session_of_link(store: Store, token: str) -> tuple[str, bool] | None:
    """(session id, already used) for an answer-link token, or None if unknown."""
    with store.reading() as tx:
        row = tx.first(
            "SELECT session_id, used_at FROM answer_links WHERE token_hash = :token_hash",
            {"token_hash": _hashed(token)},
        )
    return None if row is None else (row.session_id, row.used_at is not None)


def mark_link_used(store: Store, token: str) -> None:
    with store.writing() as tx:
        tx.run(
            "UPDATE answer_links SET used_at = :used_at WHERE token_hash = :token_hash",
            {"used_at": utcnow(), "token_hash": _hashed(token)},
        )


def answered_not_run_on(
    store: Store, *, handed_off_only: bool = False, owner: str | None = None
) -> list[str]:
    """Sessions whose answer is committed but whose driver is gone: a server picks them up.

    (status running, clarification resolved and not cancelled, the owning process dead or
    its lease expired; `handed_off_only`: only those nobody claims, waiting for a driver.)
    `owner`: also those whose claim names this owner and whose last call did not fail: a
    drive of its own that a database outage cut off (its claim could not be dropped),
    which only its caller knows none of its threads is driving any more."""
    with store.reading() as tx:
        rows = tx.rows(_ANSWERED_RUNNING)

    def cut_off(row: Any) -> bool:
        return owner is not None and row.owner == owner and row.last_error is None

    if handed_off_only:
        return [row.id for row in rows if waiting_for_driver(row) or cut_off(row)]
    return [row.id for row in rows if not owner_alive(row) or cut_off(row)]


def waiting_sessions(store: Store, *, asked_since: float | None = None) -> list[dict[str, Any]]:
    """Session objects of every session waiting for an answer (for reminders)."""
    sql, params = f"{_ALL} WHERE {_WAITING}", {}
    if asked_since is not None:
        sql += " AND t.asked_at >= :asked_at"
        params["asked_at"] = datetime.fromtimestamp(asked_since, UTC)
    with store.reading() as tx:
        return [session_view(row, row) for row in tx.rows(sql, params)]


def has_event(store: Store, session_id: str, key: str) -> bool:
    with store.reading() as tx:
        found = tx.first(
            'SELECT id FROM events WHERE session_id = :sid AND "key" = :key',
            {"sid": session_id, "key": key},
        )
    return found is not None


def record_event(
    store: Store, session_id: str, kind: str, *, key: str | None = None, **payload: Any
) -> bool:
    """Append an event to the session's log (once per `key`); False if the key was there."""
    with store.writing() as tx:
        return add_event(tx, session_id, kind, key=key, **payload)


# -- the inbox's pages ------------------------------------------------------------------

InboxPage = tuple[list[dict[str, Any]], str | None]
RUNS = ("t", "u", "o")
MAX_CURSOR = 512  # characters

# What a row of the inbox shows and what says who drives it (never the task board, the
# usage or the script: a listed session's large columns), and the cursor's keys.
INBOX_COLUMNS: tuple[tuple[str, str], ...] = (
    *(("s", name) for name in ("id", "status", "task", "created_at", "last_error")),
    *(("s", name) for name in OWNER_COLUMNS),
    *(("t", name) for name in ("clarification_used", "clarification_resolved", "resolution")),
    *(("t", name) for name in ("question_object", "asked_by", "asked_at", "deadline")),
    ("t", "timed_out"),
)
_COLUMNS = ", ".join(f"{table}.{column}" for table, column in INBOX_COLUMNS)
# The open question first (CROSS JOIN: SQLite keeps this join order, so it starts from the
# partial index on orchestrator_state; PostgreSQL reads it as the inner join it is).
_WAITING_FROM = (
    f"SELECT {_COLUMNS} FROM orchestrator_state AS t CROSS JOIN sessions AS s"
    f" WHERE s.id = t.session_id AND {OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL}"
)
# After the cursor's (created_at, id), newest first: a range on created_at, then the ties.
_OLDER = "s.created_at <= :c AND (s.created_at < :c OR s.id < :id)"
# The waiting runs' order: the index's columns in the index's order, all ascending, so a
# cursor is one row-value comparison that both databases read as a range of the index
# (`t.deadline` leads the untimed run too, all NULL there: PostgreSQL then reads the
# index's order as it is).
_WAITING_ORDER = " ORDER BY t.deadline, t.asked_at, t.session_id LIMIT :limit"
_SQL = {
    "t": (
        f"{_WAITING_FROM} AND t.deadline IS NOT NULL{{after}}{_WAITING_ORDER}",
        " AND (t.deadline, t.asked_at, t.session_id) > (:d, :c, :id)",
    ),
    "u": (
        f"{_WAITING_FROM} AND t.deadline IS NULL{{after}}{_WAITING_ORDER}",
        " AND (t.asked_at, t.session_id) > (:c, :id)",
    ),
    "o": (
        f"SELECT {_COLUMNS} FROM sessions AS s JOIN orchestrator_state AS t"
        f" ON t.session_id = s.id WHERE NOT ({OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL}){{after}}"
        " ORDER BY s.created_at DESC, s.id DESC LIMIT :limit",
        f" AND {_OLDER}",
    ),
}
# How many sessions wait for an answer, counted up to a cap (off the same partial index).
_WAITING_CAPPED = (
    "SELECT COUNT(*) AS n FROM (SELECT 1 FROM orchestrator_state AS t CROSS JOIN sessions AS s"
    f" WHERE s.id = t.session_id AND {OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL}"
    " LIMIT :cap) AS w"
)


def page_sql(run: str, *, after: bool) -> str:
    """The SQL of one run's rows (after a cursor or from the run's start)."""
    sql, after_sql = _SQL[run]
    return sql.replace("{after}", after_sql if after else "")


def _moment(value: datetime | str) -> datetime:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite: UTC


def encode_cursor(run: str, row: Any, number: int) -> str:
    """The cursor of the page after `row` (the last shown, from run `run`), page `number`."""
    # The waiting runs break ties on the question's time, the others on the session's.
    when = row.created_at if run == "o" else row.asked_at
    keys: list[Any] = [run, number, _moment(when).isoformat(), row.id]
    if run == "t":
        keys.append(row.deadline)
    raw = json.dumps(keys, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, int, dict[str, Any]]:
    """(run, page number, the SQL parameters of its keys); UserError when it is not one."""
    bad = UserError(
        f"not an inbox cursor: {cursor[:40]!r}{'…' if len(cursor) > 40 else ''};"
        " open the inbox's first page and follow its links"
    )
    if len(cursor) > MAX_CURSOR:  # ours are ~100 characters; deep JSON would recurse
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        keys = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise bad from None
    if not isinstance(keys, list) or len(keys) not in (4, 5) or keys[0] not in RUNS:
        raise bad
    run, number, created, sid, *deadline = keys
    if (
        type(number) is not int
        or not 1 < number < 2**62
        or not isinstance(created, str)
        or not isinstance(sid, str)
        or len(sid) > 64
        or len(deadline) != (run == "t")
    ):
        raise bad
    try:
        params: dict[str, Any] = {"c": _moment(datetime.fromisoformat(created)), "id": sid}
    except ValueError:
        raise bad from None
    if run == "t":
        (value,) = deadline
        if type(value) not in (int, float) or not math.isfinite(value):
            raise bad
        params["d"] = float(value)
    return run, number, params


def inbox_page(store: Store, *, limit: int, after: str | None = None) -> InboxPage:
    """One page of session objects after the cursor `after` (None: the first page), and
    the cursor of the next page (None when this one is the last)."""
    run, number, params = ("t", 1, {}) if after is None else decode_cursor(after)
    found: list[tuple[str, Any]] = []
    with store.reading() as tx:
        for each in RUNS[RUNS.index(run) :]:
            want = limit + 1 - len(found)  # one more than the page: is there a next?
            keys = params if each == run else {}
            rows = tx.rows(page_sql(each, after=bool(keys)), {**keys, "limit": want})
            found += [(each, row) for row in rows]
            if len(found) > limit:
                break
    shown = found[:limit]
    cursor = None
    if len(found) > limit:
        last_run, last = shown[-1]
        cursor = encode_cursor(last_run, last, number + 1)
    return [inbox_row(row) for _, row in shown], cursor


def inbox_row(row: Any) -> dict[str, Any]:
    """What the inbox shows of a session (a row of INBOX_COLUMNS): the session object's
    fields of the same names, without the task board, usage and ledger it does not show."""
    pending = pending_question(row, row)
    return {
        "session_id": row.id,
        "status": row.status,
        "task": row.task,
        "pending_question": pending,
        "created_at": iso(row.created_at),
        **driver_fields(row, pending),
    }


def page_number(after: str | None) -> int:
    """The page number a cursor carries (1 for none); UserError for a bad cursor."""
    return 1 if after is None else decode_cursor(after)[1]


def waiting_count(store: Store, *, cap: int) -> int:
    """How many sessions wait for an answer, counted up to `cap` (so it stays cheap)."""
    with store.reading() as tx:
        return int(tx.scalar(_WAITING_CAPPED, {"cap": cap}))
