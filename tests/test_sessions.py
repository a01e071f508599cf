"""Sessions end to end, in-process, on a real SQLite file and a real PostgreSQL database:
every gate case through the graph."""

from __future__ import annotations

from collections import Counter
from typing import Any

import forkserver
import pytest
from orchestrator.agents.scripted import ScriptedBackend

from orchestrator.domain.gate import FALLBACK_MESSAGE
from orchestrator.domain.question import UserReply
from orchestrator.errors import InvalidAnswer, SessionNotFound, SessionNotWaiting
from orchestrator.runtime.engine import Engine
from orchestrator.scenario import Scenario
from orchestrator.store import Owner, Store, open_engine

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
    store = Store.open(db_url)
    backend = Recorder(ScriptedBackend(parsed.agents, replies_so_far={}))
    engine = Engine(store, db_url, ask_user=ask)
    session_id = engine.start(parsed.task, backend, parsed.session_settings(**overrides))
    return store, session_id, backend


def resume(db_url: str, session_id: str, reply: UserReply | None = None, *, ask: Any = None):
    """A fresh store and engine, as a new process would have."""
    store = Store.open(db_url)
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
        "parts": None,  # a question without parts
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


def test_a_cancel_answer_drops_the_pause_checkpoint_as_cancel_does(db_url: str) -> None:
    """Issue 50 (3): `resume --cancel` that won left the session's pause checkpoint behind
    (20 of 20), where `orchestrator cancel` drops it; so did a deadline whose policy cancels."""
    from tests.dbcheck import query

    def checkpoints(sid: str) -> int:
        return int(query(db_url, "SELECT count(*) FROM checkpoints WHERE thread_id = ?", sid)[0][0])

    _, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    assert checkpoints(sid) > 0  # paused at its question
    resume(db_url, sid, UserReply(action="cancel")).close()
    assert checkpoints(sid) == 0

    from orchestrator.domain import clock

    with clock.virtual():
        store, timed, _ = start(
            db_url, {"agents": {"pm": [ASK, COMPLETE]}}, timeout=60, on_timeout="cancel"
        )
        store.close()
        assert checkpoints(timed) > 0
        clock.advance(61)
        store = Store.open(db_url)
        assert store.expire(timed) is not None  # on_timeout: cancel ends it
        store.close()
    assert checkpoints(timed) == 0


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
        max_question_parts=1,  # the contract's section 1: the first surfaced, the other held
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
    from orchestrator.domain import gate

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, ASK, COMPLETE]}})
    resume(db_url, sid, UserReply(text="first"))
    fallback_events = [e for e in store.events(sid) if e["kind"] == "fallback"]
    assert len(fallback_events) == 1
    from orchestrator.store import gate_tx
    from orchestrator.store.views import joined_row

    ask = gate.Ask("pm", "pm#2", "Which columns?")
    with store.db.write() as tx:  # the node's transaction, as a re-run makes it
        row = joined_row(
            tx, sid, lock=True, extra=gate_tx.STORED_DECISION, params={"final_key": "gate:pm#2"}
        )
        limits = gate.GateLimits(
            max_fallbacks=2, uncertainty_threshold=70, max_question_parts=4, timeout=None
        )
        again = gate_tx.ask(tx, row, ask, {"question": "Which columns?"}, limits, repaired=None)
    assert isinstance(again, gate.Fallback)  # the recorded decision, replayed
    assert store.view(sid)["fallbacks_injected"] == 1
    assert [e for e in store.events(sid) if e["kind"] == "fallback"] == fallback_events


def test_a_stored_proceed_is_replayed_as_it_was_decided(db_url: str) -> None:
    """A re-run gate node gets the `proceed` it stored (its message and default), not a
    fresh decision: under a lower threshold a fresh one would surface the question."""
    from orchestrator.domain import gate

    unsure = {**SELECT, "uncertainty": 30, "default": "Per API key"}
    store, sid, backend = start(db_url, {"agents": {"pm": [unsure, COMPLETE]}})
    told = backend.requests[1].instruction
    assert "below the threshold" in told and "Per API key" in told
    events = store.events(sid)
    (proceed,) = [e for e in events if e["kind"] == "proceed"]
    from orchestrator.store import gate_tx
    from orchestrator.store.views import joined_row

    ask = gate.Ask("pm", "pm#1", SELECT["question"], uncertainty=30, default="Per API key")
    with store.db.write() as tx:  # the node's transaction, as a re-run makes it
        row = joined_row(
            tx, sid, lock=True, extra=gate_tx.STORED_DECISION, params={"final_key": "gate:pm#1"}
        )
        limits = gate.GateLimits(
            max_fallbacks=2, uncertainty_threshold=10, max_question_parts=4, timeout=None
        )
        again = gate_tx.ask(tx, row, ask, {"question": SELECT["question"]}, limits, repaired=None)
    assert isinstance(again, gate.Proceed)
    assert (again.agent, again.default) == ("pm", "Per API key")
    assert again.message == proceed["message"] and again.message in told
    assert store.events(sid) == events  # nothing written twice
    assert len(store.view(sid)["assumptions"]) == 1


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


def test_each_developers_result_is_merged_into_its_own_task_on_the_board(db_url: str) -> None:
    # The board is merged in place task by task (on SQLite by the database itself): each
    # result lands on its task, the plan's fields stay, other text survives as written.
    store, sid, _ = start(
        db_url,
        {
            "agents": {
                "pm": [
                    {
                        "status": "PLANNED",
                        "tasks": [
                            {"title": "a", "description": "first"},
                            {"title": "b"},
                            {"title": "c – ünïcode ✓"},
                        ],
                    },
                    COMPLETE,
                ],
                "developer": [
                    {"status": "DONE", "summary": "s1"},
                    {"status": "BLOCKED", "reason": 'needs a key: "x"'},
                    {"status": "DONE", "summary": "naïve ✓"},
                ],
            }
        },
    )
    assert store.view(sid)["tasks"] == [
        {"number": 1, "title": "a", "description": "first", "status": "done", "summary": "s1"},
        {"number": 2, "title": "b", "status": "blocked", "reason": 'needs a key: "x"'},
        {"number": 3, "title": "c – ünïcode ✓", "status": "done", "summary": "naïve ✓"},
    ]


def test_the_developers_of_one_round_are_shown_one_board_built_once(db_url: str) -> None:
    # A hundred developers each building and rendering the whole plan made every start
    # grow with the number of tasks: one fan-out's developers share one board (the same
    # object), the review sees the results, and a new round gets a board of its own.
    from orchestrator.agents.prompts import turn_message

    store, sid, backend = start(
        db_url,
        {
            "agents": {
                "pm": [PLAN2, {"status": "PLANNED", "tasks": [{"title": "three"}]}, COMPLETE],
                "developer": [DONE, DONE, DONE],
            }
        },
    )
    assert store.view(sid)["status"] == "completed"
    developers = [r for r in backend.requests if r.agent != "pm"]
    first, second, third = developers
    assert first.round == second.round == 1 and third.round == 2
    assert first.tasks is second.tasks
    assert [(t["number"], t["title"], t["status"]) for t in first.tasks] == [
        (1, "one", "pending"),
        (2, "two", "pending"),
    ]
    assert "- #1 [pending] one\n- #2 [pending] two" in turn_message(second)
    review = [r for r in backend.requests if r.agent == "pm"][1]
    assert [(t["status"], t.get("summary")) for t in review.tasks] == [("done", "done")] * 2
    assert "- #1 [done] one: done" in turn_message(review)
    assert third.tasks is not first.tasks
    assert [t["title"] for t in third.tasks] == ["three"]
    assert "- #1 [pending] three" in turn_message(third)


def test_a_board_given_as_a_list_is_rendered_as_it_is_now() -> None:
    # Only a board that cannot change (a tuple) is rendered once for its callers.
    from orchestrator.agents.prompts import turn_message

    from orchestrator.runtime.agent import AgentRequest

    board: list[dict[str, Any]] = [{"number": 1, "title": "one", "status": "pending"}]
    request = AgentRequest(
        agent="pm",
        session_id="s",
        task="t",
        round=1,
        call=2,
        tasks=board,  # type: ignore[arg-type]
    )
    assert "- #1 [pending] one" in turn_message(request)
    board[0] = {"number": 1, "title": "one", "status": "done", "summary": "ok"}
    assert "- #1 [done] one: ok" in turn_message(request)


# -- fenced claims: a driver that lost its claim writes nothing and calls no agent --------


def test_a_lost_claim_is_fenced_out_of_every_write(db_url: str) -> None:
    from orchestrator.errors import ClaimLost

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    first = store.claim(sid, Owner())
    store.abandon(first)  # as if its lease ran out
    second = store.claim(sid, Owner())
    assert second.generation == first.generation + 1
    before = store.events(sid)
    with pytest.raises(ClaimLost, match="no longer driven by this process"):
        store.record_reply(first, "pm#9", "pm", {"reply": COMPLETE})
    for write in (
        lambda: store.check_call(first),
        lambda: store.check_fence(first),
        lambda: store.release(first, "failed", error="late"),
        lambda: store.record_failure(first, "pm", "late"),
    ):
        with pytest.raises(ClaimLost):
            write()
    assert store.heartbeat(first) is False and store.heartbeat(second) is True
    store.abandon(first)  # a lost claim's abandon changes nothing either
    assert store.events(sid) == before
    assert store.view(sid)["owner"]["alive"] is True


def test_a_driver_taken_over_mid_call_stops_without_another_call_or_write(db_url: str) -> None:
    """The frozen-owner case in one process: while pm's call runs, another command takes
    the session over; the first driver records nothing of that call and calls no agent."""
    from sqlalchemy import update

    from orchestrator.errors import ClaimLost
    from orchestrator.store.schema import sessions

    parsed = Scenario.model_validate(
        {"task": "t", "agents": {"pm": [PLAN1, COMPLETE], "developer": [DONE]}}
    )
    engine = open_engine(db_url)
    store = Store(engine)
    taken: list[Any] = []

    class TakenOverDuringTheCall(ScriptedBackend):
        calls: list[str] = []

        def respond(self, request: Any) -> Any:
            self.calls.append(f"{request.agent}#{request.call}")
            if not taken:
                with engine.begin() as conn:  # the lease runs out while frozen
                    conn.execute(update(sessions).values(lease_expires_at=0.0))
                taken.append(store.claim(request.session_id, Owner()))
            return super().respond(request)

    backend = TakenOverDuringTheCall(parsed.agents, replies_so_far={})
    with pytest.raises(ClaimLost):
        Engine(store, db_url).start("t", backend, parsed.session_settings())
    assert backend.calls == ["pm#1"]
    (sid,) = [v["session_id"] for v in store.list_views()]
    assert kinds(store, sid)["agent_reply"] == 0  # the call's reply was not kept
    view = store.view(sid)
    assert view["status"] == "running" and view["owner"]["alive"]
    assert store.session(sid).owner == taken[0].owner.id


def test_checkpoints_are_fenced() -> None:
    from orchestrator.errors import ClaimLost
    from orchestrator.runtime.checkpoints import fenced

    writes: list[str] = []

    class Saver:
        def put(self, *args: Any) -> str:
            writes.append("put")
            return "config"

        def put_writes(self, *args: Any) -> None:
            writes.append("put_writes")

    lost = False

    def check() -> None:
        if lost:
            raise ClaimLost("s1", "taken over")

    saver = fenced(Saver(), check)
    assert saver.put(1, 2, 3, 4) == "config"
    saver.put_writes(1, [], "t")
    lost = True
    with pytest.raises(ClaimLost):
        saver.put(1, 2, 3, 4)
    with pytest.raises(ClaimLost):
        saver.put_writes(1, [], "t")
    assert writes == ["put", "put_writes"]


def test_a_lease_taken_over_says_so_at_its_next_check(db_url: str) -> None:
    """The lease's own check (what the driver calls before each agent call); the driver
    stopping on it is test_a_driver_taken_over_mid_call_stops_without_another_call_or_write."""
    from orchestrator.errors import ClaimLost
    from orchestrator.runtime.lease import Lease

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    claim = store.claim(sid, Owner())
    lease = Lease(store, claim)
    lease.renew()
    lease.check()  # still ours
    store.abandon(claim)
    store.claim(sid, Owner())
    lease.renew()
    with pytest.raises(ClaimLost, match="taken over"):
        lease.check()


def test_owner_identity_beyond_the_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import sys
    import time

    from orchestrator.store import owner as owner_mod

    me = owner_mod.Owner()
    lease = time.time() + 30
    ident = {"owner_boot": me.boot, "owner_pidns": me.pidns}
    assert me.started is not None and me.started == owner_mod.process_start(os.getpid())
    assert not owner_mod.is_dead(me.pid, me.host, lease, owner_started=me.started, **ident)
    # another PID namespace (a container on this host): its pid means nothing here
    assert not owner_mod.is_dead(
        999_999, me.host, lease, owner_boot=me.boot, owner_pidns="pid:[1]", owner_started=1
    )
    # same namespace, the pid gone or reused by a process that started at another time
    gone = forkserver.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert owner_mod.is_dead(gone.pid, me.host, lease, owner_started=1, **ident)
    assert owner_mod.is_dead(os.getpid(), "elsewhere", lease, owner_started=1, **ident) is False
    assert owner_mod.is_dead(os.getppid(), me.host, lease, owner_started=1, **ident)
    # the lease is the final word everywhere
    assert owner_mod.is_dead(me.pid, me.host, time.time() - 1, owner_started=me.started, **ident)
    monkeypatch.setenv(owner_mod.LEASE_ENV, "2.5")
    assert owner_mod.lease_seconds() == 2.5
    monkeypatch.setenv(owner_mod.LEASE_ENV, "nonsense")
    assert owner_mod.lease_seconds() == owner_mod.DEFAULT_LEASE_SECONDS


def test_busy_message_names_the_owner_its_lease_and_the_takeover_time(db_url: str) -> None:
    from orchestrator.errors import SessionBusy

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    holder = Owner()
    store.claim(sid, holder)
    with pytest.raises(SessionBusy) as caught:
        resume(db_url, sid, UserReply(text="x"))
    message = caught.value.message
    assert f"pid {holder.pid} on {holder.host}" in message
    assert "lease until" in message and "takeover is possible in" in message
    owner = store.view(sid)["owner"]
    assert owner["pid"] == holder.pid and owner["alive"] is True
    assert 0 < owner["takeover_possible_in"] <= 30 and owner["lease_expires_at"].endswith("Z")


# -- stalled sessions and cancel ----------------------------------------------------------


class FailingCall(ScriptedBackend):
    """A backend whose model call fails (no network) on the agents named in `failing`."""

    failing: tuple[str, ...] = ("pm",)
    calls: list[str] = []

    def respond(self, request: Any) -> Any:
        from orchestrator.errors import AgentCallError

        self.calls.append(request.agent)
        if request.agent in self.failing:
            raise AgentCallError("the model provider could not be reached (connection refused)")
        return super().respond(request)


def test_a_failed_agent_call_leaves_the_session_stalled_then_resume_retries(db_url: str) -> None:
    from orchestrator.errors import AgentCallError

    parsed = Scenario.model_validate(
        {"task": "t", "agents": {"pm": [PLAN1, COMPLETE], "developer": [DONE]}}
    )
    store = Store.open(db_url)
    with pytest.raises(AgentCallError, match="try again with: orchestrator resume"):
        Engine(store, db_url).start(
            "t", FailingCall(parsed.agents, replies_so_far={}), parsed.session_settings()
        )
    (sid,) = [v["session_id"] for v in store.list_views()]
    view = store.view(sid)
    assert view["status"] == "running" and view["error"] is None
    assert view["stalled"] is True and "could not be reached" in view["last_error"]
    assert store.list_views()[0]["stalled"] is True
    (failed,) = [e for e in store.events(sid) if e["kind"] == "agent_failed"]
    assert failed["agent"] == "pm" and "could not be reached" in failed["error"]
    done = resume(db_url, sid)  # the stored (scripted) backend: the call goes through now
    final = done.view(sid)
    assert final["status"] == "completed"
    assert final["stalled"] is False and final["last_error"] is None


def test_cancel_a_stalled_session_ends_it_at_once(db_url: str) -> None:
    from orchestrator.errors import AgentCallError, SessionNotWaiting

    parsed = Scenario.model_validate({"task": "t", "agents": {"pm": [COMPLETE]}})
    store = Store.open(db_url)
    with pytest.raises(AgentCallError):
        Engine(store, db_url).start(
            "t", FailingCall(parsed.agents, replies_so_far={}), parsed.session_settings()
        )
    (sid,) = [v["session_id"] for v in store.list_views()]
    assert store.cancel(sid) == "cancelled"
    view = store.view(sid)
    assert view["status"] == "cancelled" and view["stalled"] is False and view["owner"] is None
    with pytest.raises(SessionNotWaiting):
        store.cancel(sid)
    with pytest.raises(SessionNotFound):
        store.cancel("nope")


def test_cancel_a_waiting_session_cancels_its_question(db_url: str) -> None:
    store, sid, backend = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    assert store.cancel(sid) == "cancelled"
    view = store.view(sid)
    assert view["status"] == "cancelled" and view["pending_question"] is None
    assert view["orchestrator_state"]["answer_status"] == "cancelled"
    assert kinds(store, sid)["cancel"] == 1
    assert [r.agent for r in backend.requests] == ["pm"]


def test_cancel_a_live_driver_stops_it_before_its_next_agent_call(db_url: str) -> None:
    parsed = Scenario.model_validate(
        {"task": "t", "agents": {"pm": [PLAN1, COMPLETE], "developer": [DONE]}}
    )
    store = Store.open(db_url)
    answers: list[str] = []

    class CancelledDuringTheCall(ScriptedBackend):
        calls: list[str] = []

        def respond(self, request: Any) -> Any:
            self.calls.append(request.agent)
            if request.agent == "pm":  # `orchestrator cancel` from another shell, meanwhile
                answers.append(Store.open(db_url).cancel(request.session_id))
            return super().respond(request)

    backend = CancelledDuringTheCall(parsed.agents, replies_so_far={})
    sid = Engine(store, db_url).start("t", backend, parsed.session_settings())
    assert answers == ["cancel_requested"]
    assert backend.calls == ["pm"]  # developer-1 was never called
    view = store.view(sid)
    assert view["status"] == "cancelled" and view["owner"] is None
    assert view["cancel_requested"] is False
    assert kinds(store, sid)["cancel_requested"] == 1


def test_store_answer_commits_without_running_and_resume_drives(db_url: str) -> None:
    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    engine = Engine(Store.open(db_url), db_url)
    decision = engine.store.answer(sid, engine.owner, UserReply(text="All"))
    assert not decision.cancel
    view = store.view(sid)
    assert view["orchestrator_state"]["user_clarification_response"] == "All"
    assert view["status"] == "running" and kinds(store, sid)["agent_reply"] == 1
    assert engine.resume(sid)["status"] == "completed"
    with pytest.raises(SessionNotWaiting):
        engine.store.answer(sid, engine.owner, UserReply(text="again"))


def test_plain_resume_racing_an_answer_reports_waiting_or_busy(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain resume decides on one snapshot; an answer committed meanwhile makes it
    SessionBusy (exit 2), never an assertion or a "running" outcome (exit 1)."""
    from orchestrator.errors import SessionBusy
    from orchestrator.store import views

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    real = views.snapshot
    injected: list[int] = []

    def answered_meanwhile(conn: Any, session_id: str) -> Any:
        snap = real(conn, session_id)
        if not injected:  # after the plain resume's read, before it acts
            injected.append(1)
            Store.open(db_url).answer(session_id, Owner(), UserReply(text="A"))
        return snap

    monkeypatch.setattr(views, "snapshot", answered_meanwhile)
    with pytest.raises(SessionBusy, match="answered by another command meanwhile"):
        Engine(Store.open(db_url), db_url).resume(sid)
    monkeypatch.setattr(views, "snapshot", real)
    # without a race, the same command reports the question still waiting
    store2, sid2, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    assert Engine(store2, db_url).resume(sid2)["status"] == "paused"


def test_engine_does_not_import_typer_or_the_agents_package() -> None:
    import subprocess
    import sys

    # The names as they install: the agents package is orchestrator.agents (a bare
    # `agents` would never be imported, so looking for it could not fail).
    heavy = ("typer", "click", "orchestrator.agents", "orchestrator.cli", "fastapi")
    code = (
        "import sys, orchestrator.runtime.engine; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    # ...and the probe itself sees an import when there is one
    code = code.replace("orchestrator.runtime.engine", "orchestrator.agents")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "orchestrator.agents" in out.stdout


def test_backends_are_loaded_through_the_registry() -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.runtime.backends import load_backend, register_backend

    backend = load_backend({"kind": "script", "agents": {"pm": [COMPLETE]}}, {"pm": 1})
    assert isinstance(backend, ScriptedBackend)
    sentinel = object()
    register_backend("test-kind", lambda description, replies: sentinel)  # type: ignore[arg-type,return-value]
    assert load_backend({"kind": "test-kind"}, {}) is sentinel
    with pytest.raises(ConfigError, match="'martian'"):
        load_backend({"kind": "martian"}, {})


def test_a_second_drive_in_the_same_process_fences_out_the_first(db_url: str) -> None:
    """Two threads of one process (one owner) cannot both drive a session either."""
    from orchestrator.errors import ClaimLost

    store, sid, _ = start(db_url, {"agents": {"pm": [ASK, COMPLETE]}})
    me = Owner()
    first = store.claim(sid, me)
    second = store.claim(sid, me)
    assert second.generation == first.generation + 1
    with pytest.raises(ClaimLost):
        store.check_call(first)
    store.check_call(second)
    assert kinds(store, sid)["status"] == 2  # started, resumed: a re-claim logs nothing
