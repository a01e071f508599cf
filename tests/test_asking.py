"""Asking well: repaired questions, answer statuses, deadlines, uncertainty, assumptions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from orchestrator.domain import clock
from orchestrator.domain.gate import FALLBACK_MESSAGE
from orchestrator.domain.question import UserReply
from orchestrator.errors import InvalidAnswer, SessionNotWaiting
from orchestrator.store import Store
from tests.test_sessions import COMPLETE, DONE, PLAN1, kinds, resume, start

SELECT = {
    "status": "NEEDS_CLARIFICATION",
    "question": "Which database?",
    "kind": "single_select",
    "options": [
        {"label": "SQLite", "description": "one file, no server", "recommended": True},
        {"label": "PostgreSQL"},
    ],
    "default": "SQLite",
}

pytestmark = pytest.mark.backends()


def flow(first: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"agents": {"pm": [first, PLAN1, COMPLETE], "developer": [DONE]}, **extra}


# -- malformed questions are repaired, not refused -------------------------------------


def test_a_blank_select_without_options_is_rebuilt_from_the_ambiguity_and_reason(
    db_url: str,
) -> None:
    broken = {
        "status": "NEEDS_CLARIFICATION",
        "question": "   ",
        "kind": "single_select",
        "ambiguity": "target",
        "reason": "two services are called api",
    }
    store, sid, _ = start(db_url, flow(broken))
    pending = store.view(sid)["pending_question"]
    assert pending["question"] == "Which one should pm work on? (two services are called api)"
    assert pending["kind"] == "free_text"  # no options to choose from
    (surfaced,) = [e for e in store.events(sid) if e["kind"] == "question_surfaced"]
    assert surfaced["repaired"] == [
        "a single_select question came without options",
        "the question was blank",
    ]


def test_repeated_and_over_long_labels_are_cleaned(db_url: str) -> None:
    long = "x" * 120
    broken = {**SELECT, "options": [{"label": "A"}, {"label": "A"}, {"label": long}]}
    store, sid, _ = start(db_url, flow(broken))
    options = store.view(sid)["pending_question"]["options"]
    assert [o["label"] for o in options] == ["A", "x" * 79 + "…"]
    assert options[1]["description"] == long  # nothing the agent said is lost


# -- answers: validated against the question, with a status and a note ----------------


def test_selected_answer_with_a_note(db_url: str) -> None:
    store, sid, _ = start(db_url, flow(SELECT))
    resume(db_url, sid, UserReply(choices=("PostgreSQL",), note="we already run one"))
    state = store.view(sid)["orchestrator_state"]
    assert state["user_clarification_response"] == "PostgreSQL"
    assert state["answer_status"] == "selected"
    assert state["answer_note"] == "we already run one"


def test_allow_other_accepts_an_answer_that_is_not_an_option(db_url: str) -> None:
    store, sid, _ = start(db_url, flow({**SELECT, "allow_other": True}))
    resume(db_url, sid, UserReply(text="DuckDB"))
    state = store.view(sid)["orchestrator_state"]
    assert state["user_clarification_response"] == "DuckDB"
    assert state["answer_status"] == "answered"


def test_without_allow_other_a_foreign_answer_is_refused(db_url: str) -> None:
    store, sid, _ = start(db_url, flow(SELECT))
    with pytest.raises(InvalidAnswer, match="not one of the options"):
        resume(db_url, sid, UserReply(text="DuckDB"))
    assert store.view(sid)["status"] == "paused"


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (UserReply(text="SQLite"), "selected"),
        (UserReply(action="decline", note="no idea"), "declined"),
        (UserReply(action="cancel"), "cancelled"),
    ],
)
def test_every_outcome_is_recorded_with_its_status(
    db_url: str, reply: UserReply, status: str
) -> None:
    store, sid, _ = start(db_url, flow(SELECT))
    resume(db_url, sid, reply)
    assert store.view(sid)["orchestrator_state"]["answer_status"] == status


# -- deadlines ---------------------------------------------------------------------------


def expire_now(db_url: str, session_id: str) -> Store:
    """Let the question's deadline pass on the project's clock (virtual: nothing waits it
    out), then do what `orchestrator status` does."""
    store = Store.open(db_url)
    deadline = store.view(session_id)["pending_question"]["deadline"]
    assert deadline is not None
    with clock.virtual(start=datetime.fromisoformat(deadline).timestamp() - 1):
        assert store.expire(session_id) is None  # a second before it: nothing applies
        clock.advance(2)
        assert store.expire(session_id) is not None
    return store


def test_on_timeout_wait_records_the_timeout_and_stays_answerable(db_url: str) -> None:
    _, sid, _ = start(db_url, flow(SELECT), timeout=300)
    store = expire_now(db_url, sid)
    view = store.view(sid)
    assert view["status"] == "paused"
    assert view["pending_question"]["timed_out"] is True
    assert kinds(store, sid)["timeout"] == 1
    resume(db_url, sid, UserReply(text="SQLite"))
    assert store.view(sid)["status"] == "completed"


def test_on_timeout_proceed_gives_the_asker_the_fallback_with_its_default(db_url: str) -> None:
    _, sid, backend = start(db_url, flow(SELECT), timeout=300, on_timeout="proceed")
    store = expire_now(db_url, sid)
    assert store.view(sid)["orchestrator_state"]["answer_status"] == "timeout"
    resume(db_url, sid)  # a plain resume runs the session on
    view = store.view(sid)
    assert view["status"] == "completed"
    assert view["fallbacks_injected"] == 1
    (ledger,) = view["assumptions"]
    assert ledger["source"] == "timeout" and "SQLite" in ledger["assumption"]


def test_on_timeout_cancel_ends_the_session(db_url: str) -> None:
    _, sid, _ = start(db_url, flow(SELECT), timeout=300, on_timeout="cancel")
    store = expire_now(db_url, sid)
    assert store.view(sid)["status"] == "cancelled"
    with pytest.raises(SessionNotWaiting):
        resume(db_url, sid, UserReply(text="SQLite"))


def test_a_prompt_that_outlives_the_deadline_applies_the_policy(db_url: str) -> None:
    def slow_user(question: Any) -> None:
        clock.advance(301)  # the prompt stays open past its deadline, and closes unanswered
        return None

    with clock.virtual():
        store, sid, backend = start(
            db_url, flow(SELECT), ask=slow_user, timeout=300, on_timeout="proceed"
        )
    view = store.view(sid)
    assert view["status"] == "completed"
    pm_calls = [r for r in backend.requests if r.agent == "pm"]
    assert pm_calls[1].instruction.startswith(FALLBACK_MESSAGE)
    assert "safe default: SQLite" in pm_calls[1].instruction


# -- uncertainty --------------------------------------------------------------------------


def test_low_uncertainty_is_not_surfaced_and_does_not_spend_the_question(db_url: str) -> None:
    unsure = {**SELECT, "uncertainty": 30}
    agents = {"pm": [unsure, SELECT, PLAN1, COMPLETE], "developer": [DONE]}
    store, sid, backend = start(db_url, {"agents": agents}, max_fallbacks=2)
    view = store.view(sid)
    assert view["status"] == "paused"  # the second, confident-less ask was surfaced
    assert view["questions_surfaced"] == 1
    assert view["fallbacks_injected"] == 0
    second = [r for r in backend.requests if r.agent == "pm"][1]
    assert "below the threshold" in second.instruction and "SQLite" in second.instruction
    (ledger,) = view["assumptions"]
    assert ledger["source"] == "uncertainty"


def test_the_threshold_comes_from_the_scenario_settings(db_url: str) -> None:
    unsure = {**SELECT, "uncertainty": 30}
    store, sid, _ = start(db_url, flow(unsure), uncertainty_threshold=20)
    assert store.view(sid)["questions_surfaced"] == 1


# -- the assumptions ledger ----------------------------------------------------------------


def test_every_assumption_is_in_status_in_order_and_in_the_log(db_url: str) -> None:
    agents = {
        "pm": [
            SELECT,
            {**SELECT, "question": "And the port?"},
            {**PLAN1, "assumptions": ["port 5432"]},
            {**COMPLETE, "assumptions": ["backups are out of scope"]},
        ],
        "developer": [{**DONE, "assumptions": ["UTF-8 everywhere"]}],
    }
    store, sid, _ = start(db_url, {"agents": agents, "answers": [{"action": "decline"}]})
    ledger = store.view(sid)["assumptions"]
    assert [(a["agent"], a["source"]) for a in ledger] == [
        ("pm", "declined"),
        ("pm", "hard_cap"),
        ("pm", "agent"),
        ("developer-1", "agent"),
        ("pm", "agent"),
    ]
    assert ledger[2]["assumption"] == "port 5432"
    logged = [e for e in store.events(sid) if e["kind"] == "assumption"]
    assert [e["assumption"] for e in logged] == [a["assumption"] for a in ledger]


def test_the_progress_line_hears_of_every_agent_call(db_url: str) -> None:
    from orchestrator.agents.scripted import ScriptedBackend

    from orchestrator.runtime.engine import Engine
    from orchestrator.scenario import Scenario

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def start(self, agent: str) -> None:
            self.calls.append(("start", agent))

        def stop(self, agent: str) -> None:
            self.calls.append(("stop", agent))

    scenario = Scenario.model_validate(
        {"task": "t", "agents": {"pm": [PLAN1, COMPLETE], "developer": [DONE]}}
    )
    activity = Recorder()
    store = Store.open(db_url)
    Engine(store, db_url, activity=activity).start(
        "t", ScriptedBackend(scenario.agents, replies_so_far={}), scenario.session_settings()
    )
    assert activity.calls == [
        ("start", "pm"), ("stop", "pm"),
        ("start", "developer-1"), ("stop", "developer-1"),
        ("start", "pm"), ("stop", "pm"),
    ]  # fmt: skip
