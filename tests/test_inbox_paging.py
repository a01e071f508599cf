"""The web inbox's pages, read with a cursor (orchestrator.store.inbox_sql): one order
across pages of any size, cursors that do not decode refused, each run off an index."""

from __future__ import annotations

import base64
import json
import random
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert

from orchestrator.api import Sessions
from orchestrator.errors import UserError
from orchestrator.store.owner import boot_id, pid_namespace

pytestmark = pytest.mark.backends()

LIVE = ("paused", "running")
NEVER = datetime.min.replace(tzinfo=UTC)


@pytest.fixture
def sessions(db_url: str) -> Iterator[Sessions]:
    with Sessions(db_url) as s:
        yield s


def fill(db_url: str, count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` sessions of every kind the inbox tells apart, written straight to the tables:
    open questions with and without a deadline on live and on ended sessions, answered and
    cancelled ones, none asked; many share their creation time or their deadline (the
    ties the order breaks by the question's time or the creation time, then id)."""
    from orchestrator.store import open_engine
    from orchestrator.store.schema import sessions, state

    rng = random.Random(seed)
    start = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    made, rows, states = [], [], []
    for n in range(count):
        sid = f"{rng.getrandbits(48):012x}"
        created = start + timedelta(seconds=rng.choice([0, 1, 1, 2, 3, 5, 8, n]))
        status = rng.choice(["paused", "paused", "running", "completed", "failed", "cancelled"])
        used = rng.random() < 0.7
        resolved = used and rng.random() < 0.3
        resolution = rng.choice([None, None, "cancelled", "declined"]) if used else None
        resolution = "answered" if resolved and resolution is None else resolution
        deadline = rng.choice([None, 1000.0, 1000.0, 1000.0, 2000.5, 3000.25 + n]) if used else None
        asked = start + timedelta(seconds=200 + rng.choice([0, 0, 1, 2, n])) if used else None
        # Who drives it: nobody (handed off), a process whose lease ran out, or a claim
        # whose agent call failed; the inbox tells these apart.
        driver = rng.choice(["none", "gone", "failed", "gone here"])
        here = driver == "gone here"  # within its lease, a pid this kernel no longer has
        rows.append(
            {
                "id": sid,
                "task": f"task {n}",
                "status": status,
                "created_at": created,
                "updated_at": created,
                "agents": {"kind": "script", "agents": {}},
                "settings": {},
                "tasks": [{"id": "t1", "title": "a task", "status": "done"}],
                "round": 1,
                "answers_used": 0,
                "owner": None if driver == "none" else f"owner-{n}",
                "owner_pid": None if driver == "none" else 4_000_000 + n,
                "owner_host": None if driver == "none" else "elsewhere",
                "lease_expires_at": None if driver == "none" else 4e9 if here else 1000.0,
                "owner_boot": boot_id() if here else None,
                "owner_pidns": pid_namespace() if here else None,
                "last_error": "the model timed out" if driver == "failed" else None,
                "usage": {"pm": {"input_tokens": 3, "output_tokens": 4, "model_calls": 1}},
            }
        )
        states.append(
            {
                "session_id": sid,
                "clarification_used": used,
                "clarification_resolved": resolved,
                "clarification_question": "Which one?" if used else None,
                "question_object": {"question": "Which one?", "kind": "free_text"}
                if used
                else None,
                "asked_by": "pm" if used else None,
                "resolution": resolution,
                "asked_at": asked,
                "deadline": deadline,
                "questions_surfaced": int(used),
                "fallbacks_injected": 0,
                "fallback_counts": {},
            }
        )
        waiting = used and not resolved and resolution != "cancelled" and status in LIVE
        made.append(
            {
                "id": sid,
                "created": created,
                "asked": asked,
                "deadline": deadline,
                "waiting": waiting,
            }
        )
    engine = open_engine(db_url)
    with engine.begin() as conn:
        conn.execute(insert(sessions), rows)
        conn.execute(insert(state), states)
    engine.dispose()
    return made


def expected_order(made: list[dict[str, Any]]) -> list[str]:
    """The inbox's order, computed here: waiting with a deadline (soonest first), waiting
    without one, then the others; the waiting's ties by their question's time, the
    question asked first first, then the smaller id; the others' newest first, then the
    larger id."""

    def run(s: dict[str, Any]) -> int:
        return 2 if not s["waiting"] else 0 if s["deadline"] is not None else 1

    # stable sorts: the last key first
    order = sorted(made, key=lambda s: s["id"], reverse=True)
    order.sort(key=lambda s: s["created"], reverse=True)
    order.sort(key=lambda s: (s["asked"], s["id"]) if s["waiting"] else (NEVER, ""))
    order.sort(key=lambda s: s["deadline"] if run(s) == 0 else 0.0)
    order.sort(key=run)
    return [s["id"] for s in order]


def walk(sessions: Sessions, size: int) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        rows, cursor = sessions.inbox.page(limit=size, after=cursor)
        pages.append([row["session_id"] for row in rows])
        if cursor is None:
            return pages
        assert len(pages) <= 200, "the cursors do not end"


def test_pages_walked_by_cursor_keep_the_inbox_order(db_url: str, sessions: Sessions) -> None:
    made = fill(db_url, 120)
    expected = expected_order(made)
    runs = {(s["waiting"], s["deadline"] is None) for s in made}
    assert len(runs) == 4  # waiting timed and untimed, others with and without a deadline
    assert len({s["created"] for s in made}) < 80  # ties in creation time
    timed = [(s["deadline"], s["asked"]) for s in made if s["waiting"] and s["deadline"]]
    assert len(set(timed)) > len({d for d, _ in timed}) > 3  # ties in deadline, not in both
    assert len(set(timed)) < len(timed)  # and in both: the id breaks those
    untimed = [s["asked"] for s in made if s["waiting"] and s["deadline"] is None]
    assert len(set(untimed)) < len(untimed)  # ties in the untimed run's question times
    one = sessions.inbox.page(limit=1000)
    assert [row["session_id"] for row in one[0]] == expected and one[1] is None
    waiting = {s["id"] for s in made if s["waiting"]}
    assert {r["session_id"] for r in one[0] if r["pending_question"]} == waiting
    for size in (1, 2, 3, 7, 13, 119, 120, 121):
        pages = walk(sessions, size)
        assert [sid for page in pages for sid in page] == expected, size
        assert all(len(page) == size for page in pages[:-1]), size
        assert 0 < len(pages[-1]) <= size, size  # no empty page after a full last one


def test_an_inbox_row_is_the_session_objects_fields_it_shows(
    db_url: str, sessions: Sessions
) -> None:
    """The inbox reads only the columns it shows; what it shows is what `list` and every
    other door say of the session (stalled or waiting for a driver included)."""
    made = fill(db_url, 120)
    rows, _ = sessions.inbox.page(limit=1000)
    listed = {doc["session_id"]: doc for doc in sessions.list()}
    assert len(rows) == len(made) == len(listed)
    shown = {"session_id", "status", "task", "pending_question", "created_at"}
    shown |= {"stalled", "waiting_for_driver", "last_error", "owner"}
    for row in rows:
        assert set(row) == shown
        assert row == {key: listed[row["session_id"]][key] for key in row}
    told_apart = {(r["status"], r["stalled"], r["waiting_for_driver"]) for r in rows}
    assert {("running", True, False), ("running", False, True)} <= told_apart
    assert any(r["owner"] for r in rows) and any(r["pending_question"] for r in rows)


def test_the_waiting_count_is_capped(db_url: str, sessions: Sessions) -> None:
    made = fill(db_url, 60)
    waiting = sum(s["waiting"] for s in made)
    assert waiting > 5
    assert sessions.inbox.waiting_count(cap=1000) == waiting
    assert sessions.inbox.waiting_count(cap=5) == 5


def test_an_empty_inbox_has_one_empty_page(sessions: Sessions) -> None:
    assert sessions.inbox.page(limit=50) == ([], None)
    assert sessions.inbox.waiting_count(cap=10) == 0


def _token(keys: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(keys).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not a cursor!",
        "%%%",
        _token({"run": "o"}),
        _token(["x", 2, "2026-11-01T12:00:00+00:00", "abc"]),
        _token(["o", 1, "2026-11-01T12:00:00+00:00", "abc"]),  # page 1 has no cursor
        _token(["o", 2, "yesterday", "abc"]),
        _token(["o", 2, "2026-11-01T12:00:00+00:00", 5]),
        _token(["t", 2, "2026-11-01T12:00:00+00:00", "abc"]),  # no deadline
        _token(["t", 2, "2026-11-01T12:00:00+00:00", "abc", "soon"]),
        _token(["u", 2, "2026-11-01T12:00:00+00:00", "abc", 5.0]),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_that_does_not_decode_is_a_user_error(sessions: Sessions, cursor: str) -> None:
    with pytest.raises(UserError, match="not an inbox cursor"):
        sessions.inbox.page(limit=5, after=cursor)


@pytest.mark.backends("sqlite")
def test_each_run_is_read_off_an_index(db_url: str) -> None:
    """No sort of all sessions, nor of those sharing a deadline: the others come off
    (created_at DESC, id DESC), the waiting off the partial index of open questions whose
    columns are their whole order (issue 44: ties on the deadline were sorted, 1-5 s a
    page on 100,000 sessions)."""
    from orchestrator.store.inbox_sql import _WAITING_CAPPED, page_sql

    params = {"c": "2026-11-01 12:00:00.000000", "id": "abc", "d": 1.0, "limit": 5, "cap": 5}
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    try:

        def plan(sql: str) -> str:
            return " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))

        for after in (False, True):
            others = plan(page_sql("o", after=after))
            assert "ix_sessions_created_at_id" in others and "TEMP B-TREE" not in others, others
            assert "SCAN t" not in others, others
            for run in ("t", "u"):
                waiting = plan(page_sql(run, after=after))
                assert "SEARCH t USING INDEX ix_state_waiting_order" in waiting, waiting
                assert "TEMP B-TREE" not in waiting, waiting
        assert "ix_state_waiting_order" in plan(_WAITING_CAPPED)
        late = plan(page_sql("o", after=True))
        assert "SEARCH s USING INDEX ix_sessions_created_at_id (created_at<?)" in late, late
    finally:
        conn.close()


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


@pytest.mark.backends("postgresql")
def test_postgresql_reads_each_run_in_its_index_order(db_url: str) -> None:
    """On PostgreSQL, with a third of the sessions waiting on one deadline (and more with
    none), no run's plan has a Sort: the index gives the order, ties included."""
    import psycopg

    from orchestrator.store.inbox_sql import page_sql
    from tests.dbcheck import conninfo

    fill_tied(db_url, 3000)
    # A cursor in the middle of the ties: half of each run is still to come.
    middle = datetime(2026, 11, 1, 12, tzinfo=UTC) + timedelta(seconds=500)
    params = {"c": middle, "id": f"{1500:012x}", "d": 1000.0, "limit": 51}
    with psycopg.connect(conninfo(db_url), autocommit=True) as conn:
        conn.execute("ANALYZE")
        for run in ("t", "u", "o"):
            for after in (False, True):
                sql = page_sql(run, after=after)
                sql = re.sub(r":(\w+)", r"%(\1)s", sql)
                (plan,) = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()[0]
                nodes = [node["Node Type"] for node in _plan_nodes(plan["Plan"])]
                assert not any("Sort" in node for node in nodes), (run, after, nodes)
                if run != "o":
                    text = json.dumps(plan)
                    assert "ix_state_waiting_order" in text, (run, after, text)


def fill_tied(db_url: str, count: int) -> None:
    """`count` sessions, a third waiting on one deadline, a third waiting without one, a
    third ended; creation and question times tied in threes."""
    from orchestrator.store import open_engine
    from orchestrator.store.schema import sessions, state

    start = datetime(2026, 11, 1, 12, tzinfo=UTC)
    rows, states = [], []
    for n in range(count):
        sid, when = f"{n:012x}", start + timedelta(seconds=n // 3)
        kind = n % 3
        rows.append(
            {
                "id": sid, "task": f"task {n}", "status": "completed" if kind == 2 else "paused",
                "created_at": when, "updated_at": when, "agents": {}, "settings": {},
                "tasks": [], "round": 1, "answers_used": 0,
            }
        )  # fmt: skip
        states.append(
            {
                "session_id": sid, "clarification_used": True,
                "clarification_resolved": kind == 2, "question_object": {"question": "?"},
                "asked_by": "pm", "asked_at": when, "deadline": 1000.0 if kind == 0 else None,
                "questions_surfaced": 1, "fallbacks_injected": 0, "fallback_counts": {},
            }
        )  # fmt: skip
    engine = open_engine(db_url)
    with engine.begin() as conn:
        conn.execute(insert(sessions), rows)
        conn.execute(insert(state), states)
    engine.dispose()
