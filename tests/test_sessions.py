"""Sessions end to end, in-process, on a real SQLite file and a real PostgreSQL database:
every gate case through the graph."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from agents.scripted import ScriptedBackend
from orchestrator.answers import UserReply
from orchestrator.engine import Engine
from orchestrator.errors import InvalidAnswer, SessionNotFound, SessionNotWaiting
from orchestrator.gate import FALLBACK_MESSAGE
from orchestrator.scenario import Scenario
from orchestrator.store import Store, open_engine

ASK = {"status": "NEEDS_CLARIFICATION", "question": "Which columns?"}
SELECT = {
    "status": "NEEDS_CLARIFICATION",
    "question": "Per key or per IP?",
    "kind": "single_select",
    "options": [{"label": "Per API key"}, {"label": "Per IP address"}],
}
PLAN2 = {"status": "PLANNED", "tasks": [{"title": "one"}, {"title": "two"}]}
PLAN1 = {"status": "PLANNED", "tasks": [{"title": "one"}]}
COMPLETE = {"status": "COMPLETE", "summary": "shipped"}
DONE = {"status": "DONE", "summary": "done"}

pytestmark = pytest.mark.backends()


class Recorder:
    """A backend wrapper that keeps every request, to check what agents were told."""

    def __init__(self, inner: ScriptedBackend) -> None:
        self.inner, self.requests = inner, []  # type: ignore[var-annotated]
        self.sequential = True

    def respond(self, request: Any) -> Any:
        self.requests.append(request)
        return self.inner.respond(request)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def start(db_url: str, scenario: dict[str, Any], *, ask: Any = None, **overrides: Any):
    parsed = Scenario.model_validate({"task": "t", **scenario})
    store = Store(open_engine(db_url))
    backend = Recorder(ScriptedBackend(parsed.agents, replies_so_far={}))
    engine = Engine(store, db_url, ask_user=ask)
    session_id = engine.start(parsed.task, backend, parsed.session_settings(**overrides))
    return store, session_id, backend


def resume(db_url: str, session_id: str, reply: UserReply | None = None, *, ask: Any = None):
    """A fresh store and engine, as a new process would have."""
    store = Store(open_engine(db_url))
    Engine(store, db_url, ask_user=ask).resume(session_id, reply)
    return store


def kinds(store: Store, session_id: str) -> Counter[str]:
    return Counter(e["kind"] for e in store.events(session_id))


def test_case_a_then_c_answered_question_reaches_the_pm_and_completes(db_url: str) -> None:
    store, sid, backend = start(
        db_url,
        {
            "agents": {"pm": [ASK, PLAN2, COMPLETE], "developer": [DONE, DONE]},
            "answers": ["All visible columns"],
        },
    )
    view = store.view(sid)
    assert view["status"] == "completed" and view["summary"] == "shipped"
    assert view["orchestrator_state"] == {
        "clarification_used": True,
        "clarification_resolved": True,
        "clarification_question": "Which columns?",
        "user_clarification_response": "All visible columns",
        "answer_status": "answered",
        "answer_note": None,
    }
    assert view["questions_surfaced"] == 1 and view["fallbacks_injected"] == 0
    assert [t["status"] for t in view["tasks"]] == ["done", "done"]
    second_pm_call = [r for r in backend.requests if r.agent == "pm"][1]
    assert "Which columns?" in second_pm_call.instruction
    assert "All visible columns" in second_pm_call.instruction
    # every later agent sees the clarification in its context
    developer_call = next(r for r in backend.requests if r.agent == "developer-1")
    assert developer_call.clarification.response == "All visible columns"


def test_case_a_pauses_without_answers_and_case_b_resurfaces_without_running(db_url: str) -> None:
    store, sid, backend = start(
        db_url, {"agents": {"pm": [ASK, PLAN1, COMPLETE], "developer": [DONE]}}
    )
    view = store.view(sid)
    assert view["status"] == "paused"
    pending = dict(view["pending_question"])
    assert pending.pop("deadline").endswith("Z")  # the default 300 s deadline, stored
    assert pending == {
        "question": "Which columns?",
        "kind": "free_text",
        "options": [],
        "allow_other": False,
        "urgency": "medium",
        "asked_by": "pm",
        "timed_out": False,
    }
    before = store.events(sid)
    seen: list[Any] = []
    store2 = resume(db_url, sid, ask=lambda q: seen.append(q) or None)  # case B, user says nothing
    assert seen == [view["pending_question"]]
    assert store2.events(sid) == before  # no agent ran, nothing written
    assert store2.view(sid)["status"] == "paused"
    store3 = resume(db_url, sid, UserReply(text="Only the date"))
    final = store3.view(sid)
    assert final["status"] == "completed"
    assert final["orchestrator_state"]["user_clarification_response"] == "Only the date"
    assert kinds(store3, sid)["question_surfaced"] == 1


def test_case_d_second_ask_gets_the_exact_fallback_and_is_not_surfaced(db_url: str) -> None:
    store, sid, backend = start(
        db_url,
        {
            "agents": {
                "pm": [ASK, {**ASK, "question": "And the region?"}, PLAN1, COMPLETE],
                "developer": [DONE],
            },
            "answers": ["All"],
        },
    )
    view = store.view(sid)
    assert view["status"] == "completed"
    assert view["questions_surfaced"] == 1 and view["fallbacks_injected"] == 1
    assert view["orchestrator_state"]["clarification_question"] == "Which columns?"
    third_pm_call = [r for r in backend.requests if r.agent == "pm"][2]
    assert third_pm_call.instruction == FALLBACK_MESSAGE


def test_decline_resolves_and_the_asker_gets_the_fallback(db_url: str) -> None:
    store, sid, backend = start(
        db_url,
        {
            "agents": {"pm": [ASK, PLAN1, COMPLETE], "developer": [DONE]},
            "answers": [{"action": "decline"}],
        },
    )
    view = store.view(sid)
    assert view["status"] == "completed"
    assert view["orchestrator_state"]["clarification_resolved"] is True
    assert view["orchestrator_state"]["user_clarification_response"] is None
    assert view["fallbacks_injected"] == 1
    assert [r for r in backend.requests if r.agent == "pm"][1].instruction == FALLBACK_MESSAGE


def test_cancel_ends_the_session_and_no_agent_runs_after_it(db_url: str) -> None:
    store, sid, backend = start(
        db_url,
        {
            "agents": {"pm": [ASK, PLAN1, COMPLETE], "developer": [DONE]},
            "answers": [{"action": "cancel"}],
        },
    )
    assert store.view(sid)["status"] == "cancelled"
    assert [r.agent for r in backend.requests] == ["pm"]
    with pytest.raises(SessionNotWaiting):
        resume(db_url, sid, UserReply(text="too late"))


def test_cancel_from_resume(db_url: str) -> None:
    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    store2 = resume(db_url, sid, UserReply(action="cancel"))
    assert store2.view(sid)["status"] == "cancelled"
    assert store2.view(sid)["pending_question"] is None


@pytest.mark.parametrize("max_fallbacks", [0, 1, 2])
def test_stubborn_agent_fails_the_session_after_max_fallbacks(
    db_url: str, max_fallbacks: int
) -> None:
    store, sid, backend = start(
        db_url, {"agents": {"pm": [ASK] * 10}, "answers": ["x"]}, max_fallbacks=max_fallbacks
    )
    view = store.view(sid)
    assert view["status"] == "failed"
    assert "max_fallbacks" in view["error"] and "pm" in view["error"]
    assert view["fallbacks_injected"] == max_fallbacks
    assert view["questions_surfaced"] == 1
    # ask, answered rerun, then one more call per fallback
    assert len(backend.requests) == 2 + max_fallbacks


def test_parallel_developers_asking_in_one_round_are_ordered_by_task_number(db_url: str) -> None:
    store, sid, backend = start(
        db_url,
        {
            "agents": {
                "pm": [PLAN2, COMPLETE],
                "developer-1": [SELECT, DONE],
                "developer-2": [{**ASK, "question": "Where?"}, DONE],
            },
            "answers": ["Per API key"],
        },
    )
    view = store.view(sid)
    assert view["status"] == "completed"
    assert view["questions_surfaced"] == 1 and view["fallbacks_injected"] == 1
    assert view["orchestrator_state"]["clarification_question"] == "Per key or per IP?"
    events = store.events(sid)
    surfaced = [e for e in events if e["kind"] == "question_surfaced"]
    assert [e["agent"] for e in surfaced] == ["developer-1"]
    fallback = [e for e in events if e["kind"] == "fallback"]
    assert [e["agent"] for e in fallback] == ["developer-2"]
    by_agent = {r.agent: r for r in backend.requests if r.call == 2}
    assert "Per API key" in by_agent["developer-1"].instruction
    assert by_agent["developer-2"].instruction == FALLBACK_MESSAGE


def test_parallel_question_waits_across_a_pause_and_resume(db_url: str) -> None:
    store, sid, _ = start(
        db_url,
        {
            "agents": {
                "pm": [PLAN2, COMPLETE],
                "developer-1": [ASK, DONE],
                "developer-2": [{**ASK, "question": "Where?"}, DONE],
            }
        },
    )
    assert store.view(sid)["pending_question"]["asked_by"] == "developer-1"
    store2 = resume(db_url, sid, UserReply(text="All"))
    view = store2.view(sid)
    assert view["status"] == "completed" and view["fallbacks_injected"] == 1
    assert kinds(store2, sid)["question_surfaced"] == 1


def test_blocked_developer_goes_back_to_the_pm(db_url: str) -> None:
    store, sid, backend = start(
        db_url,
        {
            "agents": {
                "pm": [PLAN1, PLAN1, COMPLETE],
                "developer": [{"status": "BLOCKED", "reason": "no schema"}, DONE],
            }
        },
    )
    assert store.view(sid)["status"] == "completed"
    review = [r for r in backend.requests if r.agent == "pm"][1]
    assert review.tasks[0]["status"] == "blocked" and review.tasks[0]["reason"] == "no schema"


def test_max_rounds_bounds_replanning(db_url: str) -> None:
    store, sid, _ = start(
        db_url, {"agents": {"pm": [PLAN1] * 5, "developer": [DONE] * 5}}, max_rounds=2
    )
    view = store.view(sid)
    assert view["status"] == "failed" and "max_rounds=2" in view["error"]


def test_script_running_out_fails_naming_the_agent_and_count(db_url: str) -> None:
    store, sid, _ = start(db_url, {"agents": {"pm": [PLAN2], "developer": [DONE]}})
    view = store.view(sid)
    assert view["status"] == "failed"
    assert "developer-2" in view["error"] and "1 reply" in view["error"]


def test_invalid_answer_is_refused_and_changes_nothing(db_url: str) -> None:
    store, sid, _ = start(db_url, {"agents": {"pm": [SELECT, COMPLETE]}})
    before = store.events(sid)
    with pytest.raises(InvalidAnswer, match="not one of the options"):
        resume(db_url, sid, UserReply(text="Per moon phase"))
    assert store.events(sid) == before
    assert store.view(sid)["status"] == "paused"


def test_unknown_session(db_url: str) -> None:
    with pytest.raises(SessionNotFound):
        resume(db_url, "nope", UserReply(text="x"))


def test_second_answer_is_refused(db_url: str) -> None:
    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, ASK, COMPLETE]}})
    resume(db_url, sid, UserReply(text="first"))
    with pytest.raises(SessionNotWaiting, match="completed"):
        resume(db_url, sid, UserReply(text="second"))
    assert store.view(sid)["orchestrator_state"]["user_clarification_response"] == "first"


def test_gate_writes_are_idempotent_when_a_node_reruns(db_url: str) -> None:
    """A re-run gate node (LangGraph re-executes it on resume) writes nothing twice."""
    from orchestrator import gate

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, ASK, COMPLETE]}})
    resume(db_url, sid, UserReply(text="first"))
    fallback_events = [e for e in store.events(sid) if e["kind"] == "fallback"]
    assert len(fallback_events) == 1
    ask = gate.Ask("pm", "pm#2", "Which columns?")
    again = store.gate_ask(sid, ask, {"question": "Which columns?"}, max_fallbacks=2)
    assert isinstance(again, gate.Fallback)  # the recorded decision, replayed
    assert store.view(sid)["fallbacks_injected"] == 1
    assert [e for e in store.events(sid) if e["kind"] == "fallback"] == fallback_events


def test_shared_developer_list_is_consumed_in_task_order(db_url: str) -> None:
    store, sid, _ = start(
        db_url,
        {
            "agents": {
                "pm": [
                    {
                        "status": "PLANNED",
                        "tasks": [{"title": "a"}, {"title": "b"}, {"title": "c"}],
                    },
                    COMPLETE,
                ],
                "developer": [{"status": "DONE", "summary": f"s{i}"} for i in (1, 2, 3)],
            }
        },
    )
    assert [t["summary"] for t in store.view(sid)["tasks"]] == ["s1", "s2", "s3"]
