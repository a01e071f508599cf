""" "A question is open" is spelled once in Python (GateState.waiting, and pending_question
for a session that has not ended) and once in SQL (views.OPEN_QUESTION_SQL, with
LIVE_SESSION_SQL): generated states, written to the real tables on both backends, must be
selected by the SQL exactly when the Python says so. The worker's query for passed
deadlines (which also says the partial index's terms) must agree on every reachable state."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from test_properties import _PROFILE

from orchestrator.store import Owner, Store
from orchestrator.store.inbox_sql import waiting_sessions
from orchestrator.store.queue import _OVERDUE
from orchestrator.store.views import (
    LIVE_SESSION_SQL,
    OPEN_QUESTION_SQL,
    pending_question,
    state_from_row,
)

pytestmark = pytest.mark.backends()

ROWS = 6  # sessions rewritten by every example
STATUSES = ("running", "paused", "completed", "failed", "cancelled")
RESOLUTIONS = (None, "answered", "selected", "declined", "timeout", "cancelled")
SETTINGS = settings(
    max_examples=max(20, _PROFILE["gate"] // 10),
    deadline=None,
    derandomize=_PROFILE["derandomize"],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Any combination of the columns the predicate reads (reachable or not).
any_state = st.fixed_dictionaries(
    {
        "status": st.sampled_from(STATUSES),
        "used": st.booleans(),
        "resolved": st.booleans(),
        "resolution": st.sampled_from(RESOLUTIONS),
        "timed_out": st.booleans(),
        "deadline": st.sampled_from([None, -3600.0, -1.0, 60.0, 3600.0]),  # from now
    }
)
# The states the gate can leave behind: not asked; asked and open (maybe past its
# deadline under `wait`); resolved one way or another; withdrawn by a cancel.
reachable_gate = st.one_of(
    st.just({"used": False, "resolved": False, "resolution": None, "timed_out": False}),
    st.fixed_dictionaries(
        {
            "used": st.just(True),
            "resolved": st.just(False),
            "resolution": st.just(None),
            "timed_out": st.booleans(),
        }
    ),
    st.fixed_dictionaries(
        {
            "used": st.just(True),
            "resolved": st.just(True),
            "resolution": st.sampled_from(RESOLUTIONS[1:]),
            "timed_out": st.booleans(),
        }
    ),
    st.just({"used": True, "resolved": False, "resolution": "cancelled", "timed_out": False}),
)
reachable_state = st.builds(
    lambda gate, status, deadline: {**gate, "status": status, "deadline": deadline},
    reachable_gate,
    st.sampled_from(STATUSES),
    st.sampled_from([None, -3600.0, -1.0, 60.0, 3600.0]),
)


@pytest.fixture
def store(db_url: str) -> Iterator[tuple[Store, list[str]]]:
    opened = Store.open(db_url)
    ids = [
        opened.create(f"task {i}", agents={}, settings={}, owner=Owner())[0].session_id
        for i in range(ROWS)
    ]
    yield opened, ids
    opened.close()


def _write(store: Store, ids: list[str], states: list[dict[str, Any]]) -> float:
    """Give each session its state (as raw column values); return the `now` used."""
    now = time.time()
    with store.writing() as tx:
        for session_id, state in zip(ids, states, strict=True):
            deadline = None if state["deadline"] is None else now + state["deadline"]
            tx.run(
                "UPDATE sessions SET status = :status WHERE id = :id",
                {"status": state["status"], "id": session_id},
            )
            tx.run(
                "UPDATE orchestrator_state SET clarification_used = :used,"
                " clarification_resolved = :resolved, resolution = :resolution,"
                " timed_out = :timed_out, deadline = :deadline,"
                " clarification_question = 'Which one?', question_object = :question"
                " WHERE session_id = :id",
                {
                    "used": state["used"],
                    "resolved": state["resolved"],
                    "resolution": state["resolution"],
                    "timed_out": state["timed_out"],
                    "deadline": deadline,
                    "question": '{"question": "Which one?", "kind": "free_text"}',
                    "id": session_id,
                },
            )
    return now


_JOINED = "SELECT s.id FROM sessions AS s JOIN orchestrator_state AS t ON t.session_id = s.id"


def _rows(store: Store) -> dict[str, Any]:
    with store.reading() as tx:
        rows = tx.rows(
            "SELECT s.*, t.* FROM sessions AS s JOIN orchestrator_state AS t ON t.session_id = s.id"
        )
    return {row.id: row for row in rows}


@SETTINGS
@given(states=st.lists(any_state, min_size=ROWS, max_size=ROWS))
def test_the_sql_selects_the_questions_python_calls_open(
    store: tuple[Store, list[str]], states: list[dict[str, Any]]
) -> None:
    opened, ids = store
    note(f"states: {states}")
    _write(opened, ids, states)
    rows = _rows(opened)
    with opened.reading() as tx:
        open_sql = {r.id for r in tx.rows(f"{_JOINED} WHERE {OPEN_QUESTION_SQL}")}
        live_sql = {
            r.id for r in tx.rows(f"{_JOINED} WHERE {OPEN_QUESTION_SQL} AND {LIVE_SESSION_SQL}")
        }
    open_py = {i for i, row in rows.items() if state_from_row(row).waiting}
    live_py = {i for i, row in rows.items() if pending_question(row, row) is not None}
    assert open_sql == open_py
    assert live_sql == live_py
    assert {doc["session_id"] for doc in waiting_sessions(opened)} == live_py  # the inbox's


@SETTINGS
@given(states=st.lists(reachable_state, min_size=ROWS, max_size=ROWS))
def test_the_workers_overdue_query_agrees_on_reachable_states(
    store: tuple[Store, list[str]], states: list[dict[str, Any]]
) -> None:
    opened, ids = store
    note(f"states: {states}")
    now = _write(opened, ids, states)
    rows = _rows(opened)
    with opened.reading() as tx:
        overdue = {r.id for r in tx.rows(_OVERDUE, {"now": now, "batch": ROWS + 1})}
    expected = {
        i
        for i, row in rows.items()
        if state_from_row(row).waiting
        and not row.timed_out
        and row.deadline is not None
        and row.deadline <= now
    }
    assert overdue == expected


@pytest.mark.backends("sqlite")
def test_the_overdue_query_still_uses_the_partial_index(store: tuple[Store, list[str]]) -> None:
    """Saying the index's own terms is what lets SQLite's planner use it: a poll costs what
    is due, not a scan of every session. (Revision 0009's index of open questions by
    deadline, for the inbox, serves it as well: the planner may take either, both partial.)"""
    opened, _ids = store
    with opened.reading() as tx:
        plan = tx.rows("EXPLAIN QUERY PLAN " + _OVERDUE, {"now": time.time(), "batch": 5})
    details = " | ".join(str(row["detail"]) for row in plan)
    assert re.search(r"SEARCH t USING INDEX ix_state_(open|waiting)_deadline \(deadline", details)
    assert "SCAN t" not in details, details
