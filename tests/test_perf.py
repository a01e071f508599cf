"""What makes the store fast without trading anything: list pages off an index, and an fsync
only where a power loss could lose what nothing can replay (a person's answer)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator import Reply, Sessions
from orchestrator.errors import SessionNotFound
from orchestrator.readout import page_sql
from tests.conftest import EXAMPLES


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Sessions, list[str]]]:
    """Sessions whose store connection (the checkpointer's too) records every statement."""
    statements: list[str] = []
    sessions = Sessions(str(tmp_path / "traced.db"))
    sessions.store.db.conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    yield sessions, statements
    sessions.close()


def test_a_scripted_answer_is_not_fsynced(traced: tuple[Sessions, list[str]]) -> None:
    sessions, statements = traced
    doc = sessions.start_scenario(EXAMPLES / "answered-question.yaml")
    assert doc["status"] == "completed" and doc["orchestrator_state"]["clarification_resolved"]
    assert any("INSERT INTO events" in s for s in statements)  # the trace saw the run
    assert not [s for s in statements if "synchronous = FULL" in s]


def test_a_persons_answer_is_fsynced_before_the_call_returns(
    traced: tuple[Sessions, list[str]],
) -> None:
    sessions, statements = traced
    paused = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
    assert not [s for s in statements if "synchronous = FULL" in s]
    sessions.answer(paused, Reply(text="Weekly"))
    # the answer's transaction commits at synchronous=FULL, then the connection is NORMAL again
    (full,) = [i for i, s in enumerate(statements) if "synchronous = FULL" in s]
    back = next(i for i, s in enumerate(statements) if "synchronous = NORMAL" in s and i > full)
    assert "COMMIT" in [s.strip().upper() for s in statements[full:back]]
    assert any("INSERT INTO events" in s for s in statements[full:back])


@pytest.mark.backends()
def test_list_pages_through_the_api(db_url: str) -> None:
    """One SQL text for every backend (orchestrator.readout.page_sql)."""
    with Sessions(db_url) as sessions:
        ids = [
            sessions.start_scenario(EXAMPLES / name)["session_id"]
            for name in ("pause-and-resume.yaml", "answered-question.yaml") * 3
        ]
        newest_first = ids[::-1]
        assert [s["session_id"] for s in sessions.list()] == newest_first
        first = sessions.list(limit=4)
        rest = sessions.list(limit=4, after=first[-1]["session_id"])
        assert [s["session_id"] for s in first + rest] == newest_first
        paused = sessions.list("paused", limit=2)
        assert [s["session_id"] for s in paused] == newest_first[1::2][:2]
        assert [
            s["session_id"] for s in sessions.list("paused", after=paused[-1]["session_id"])
        ] == (newest_first[1::2][2:])
        with pytest.raises(SessionNotFound):
            sessions.list(after="nope")


@pytest.mark.parametrize(
    "status, after", [(False, False), (True, False), (False, True), (True, True)]
)
def test_a_page_is_read_off_an_index_without_sorting(
    tmp_path: Path, status: bool, after: bool
) -> None:
    with Sessions(str(tmp_path / "plan.db")) as sessions:
        sessions.store  # noqa: B018  (creates and migrates the file)
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN " + page_sql(status=status, after=after, limit=True),
            {"status": "paused", "after_created": "x", "after_id": "y", "limit": 51},
        ).fetchall()
    details = " | ".join(row[-1] for row in plan)
    assert "TEMP B-TREE" not in details, details
    assert "USING INDEX ix_sessions_" in details, details
