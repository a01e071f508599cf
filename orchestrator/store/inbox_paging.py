"""The web inbox's pages, read with a cursor (keyset paging), each straight off an index.

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
import json
import math
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain.clock import iso
from orchestrator.errors import UserError
from orchestrator.store.core import Store
from orchestrator.store.owner import OWNER_COLUMNS
from orchestrator.store.views import (
    LIVE_SESSION_SQL,
    OPEN_QUESTION_SQL,
    driver_fields,
    pending_question,
)

__all__ = [
    "InboxPage",
    "INBOX_COLUMNS",
    "inbox_row",
    "inbox_page",
    "waiting_count",
    "encode_cursor",
    "decode_cursor",
]

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
