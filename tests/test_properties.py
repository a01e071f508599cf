"""Property tests for the clarification gate (contract sections 1, 2 and 4).

Two layers:

* the pure decision function `orchestrator.gate.decide`, folded over random event
  sequences the way the store applies it (fast, many examples);
* whole sessions run in-process through `Engine` + `ScriptedBackend` + `Store` on a real
  SQLite file per example, paused and resumed in a fresh Engine/Store (a "new process").

Profiles: the example counts and the seed policy come from ORCHESTRATOR_PROPERTY_PROFILE
(`default`: random, moderate counts; `ci`: derandomized, same counts; `thorough`: random,
many more examples). Hypothesis' own global settings are left alone.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from orchestrator import gate

# -- profiles -----------------------------------------------------------------------------

_PROFILES: dict[str, dict[str, Any]] = {
    "default": {"gate": 1500, "e2e": 60, "derandomize": False},
    "ci": {"gate": 1500, "e2e": 60, "derandomize": True},
    "thorough": {"gate": 20000, "e2e": 400, "derandomize": False},
}
_PROFILE = _PROFILES[os.environ.get("ORCHESTRATOR_PROPERTY_PROFILE", "default")]

GATE_SETTINGS = settings(
    max_examples=_PROFILE["gate"], deadline=None, derandomize=_PROFILE["derandomize"]
)
E2E_SETTINGS = settings(
    max_examples=_PROFILE["e2e"],
    deadline=None,
    derandomize=_PROFILE["derandomize"],
    # conftest's autouse `isolated_home` is function-scoped; sharing it across examples is
    # harmless (each example makes its own temp dir and database).
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

AGENTS = ("pm", "developer-1", "developer-2", "developer-3")
GATE_FIELDS = {f.name for f in dataclasses.fields(gate.GateState)}
# Which fields each kind of decision may name in its update (contract section 1).
UPDATE_FIELDS: dict[type, set[str]] = {
    gate.Surface: {"used", "resolved", "question", "asked_by", "request_key"},
    gate.Resolve: {"resolved", "response", "resolution"},
    gate.Fallback: {"fallback_counts"},
    gate.Wait: set(),
    gate.Rerun: set(),
    gate.Fail: set(),
}


# =========================================================================================
# 1. The pure gate
# =========================================================================================

# An event "spec"; keys of asks are bound while folding, because a repeated key must be
# the key of the ask that was surfaced (the gate node re-deciding the same reply).
ask_spec = st.tuples(
    st.just("ask"), st.sampled_from(AGENTS), st.sampled_from(["fresh", "fresh", "repeat"])
)
user_spec = st.one_of(
    st.tuples(
        st.just("answer"),
        st.text(min_size=1, max_size=8),
        st.sampled_from(["answered", "selected"]),
    ),
    st.tuples(st.just("decline")),
    st.tuples(st.just("cancel")),
)
event_specs = st.lists(st.one_of(ask_spec, ask_spec, user_spec), max_size=40)


def merge(state: gate.GateState, update: Mapping[str, Any]) -> gate.GateState:
    """What the store does with a decision's update: write the named fields, nothing else."""
    assert set(update) <= GATE_FIELDS, f"update names unknown fields: {set(update) - GATE_FIELDS}"
    return dataclasses.replace(state, **dict(update))


def changed_fields(before: gate.GateState, after: gate.GateState) -> set[str]:
    return {name for name in GATE_FIELDS if getattr(before, name) != getattr(after, name)}


@GATE_SETTINGS
@given(specs=event_specs, max_fallbacks=st.integers(min_value=0, max_value=3))
def test_gate_fold_invariants(specs: list[tuple[Any, ...]], max_fallbacks: int) -> None:
    state = gate.GateState()
    surfaced = 0
    answered = False  # an Answer (not a Decline) was accepted
    declined = False
    fresh = Counter[str]()

    for step, spec in enumerate(specs):
        before = state
        waiting = before.used and not before.resolved
        kind = spec[0]

        if kind == "ask":
            _, agent, which = spec
            if which == "repeat" and before.request_key is not None:
                agent, key = before.asked_by, before.request_key
                question = before.question
            else:
                fresh[agent] += 1
                key = f"{agent}#{fresh[agent]}"
                question = f"{agent} question {fresh[agent]}?"
            assert agent is not None and question is not None
            event: Any = gate.Ask(agent, key, question)
        elif kind == "answer":
            event = gate.Answer(spec[1], kind=spec[2])
        elif kind == "decline":
            event = gate.Decline()
        else:
            event = gate.Cancel()
        note(f"step {step}: {event!r} on {before!r}")

        decision = gate.decide(before, event, max_fallbacks=max_fallbacks)
        note(f"  -> {decision!r}")

        # -- what kind of decision may answer what kind of event --
        if isinstance(event, gate.Ask):
            assert isinstance(
                decision, gate.Surface | gate.Wait | gate.Rerun | gate.Fallback | gate.Fail
            )
        else:
            assert isinstance(decision, gate.Resolve | gate.Reject)

        update = getattr(decision, "update", {})
        assert set(update) <= UPDATE_FIELDS.get(type(decision), set()), (
            f"{type(decision).__name__} names {set(update)}"
        )
        state = merge(before, update)
        # Merge, not overwrite: only named fields may change.
        assert changed_fields(before, state) <= set(update)

        # -- state invariants --
        assert state.used or not before.used, "used went back to False"
        assert state.resolved or not before.resolved, "resolved went back to False"
        assert not state.resolved or state.used, "resolved without a question"
        assert (state.question is not None) == state.used
        assert (state.request_key is not None) == state.used
        assert (state.asked_by is not None) == state.used
        assert (state.resolution is not None) == state.resolved
        assert all(0 <= n <= max_fallbacks for n in state.fallback_counts.values()), (
            f"fallback count over max_fallbacks={max_fallbacks}: {state.fallback_counts}"
        )

        # -- per decision --
        if isinstance(decision, gate.Surface):
            surfaced += 1
            assert surfaced == 1, "a second question was surfaced"
            assert not before.used and not decision.final
            assert isinstance(event, gate.Ask)
            assert decision.question == event.question == state.question
            assert state.asked_by == event.agent and state.request_key == event.key
            assert state.used and not state.resolved
        elif isinstance(decision, gate.Wait):
            assert isinstance(event, gate.Ask)
            assert waiting and not decision.final
            assert decision.question == before.question
        elif isinstance(decision, gate.Rerun | gate.Fallback | gate.Fail):
            assert isinstance(event, gate.Ask)
            assert before.used and before.resolved, "a final decision before the user resolved"
            assert decision.final and decision.agent == event.agent

        if isinstance(event, gate.Ask) and before.used and before.resolved:
            rerun_case = event.key == before.request_key and before.resolution != "declined"
            given_ = before.fallback_counts.get(event.agent, 0)
            if rerun_case:
                assert isinstance(decision, gate.Rerun)
            elif given_ == max_fallbacks:
                assert isinstance(decision, gate.Fail)
                assert "max_fallbacks" in decision.reason and event.agent in decision.reason
            else:
                assert isinstance(decision, gate.Fallback)
                assert decision.message == gate.FALLBACK_MESSAGE
                expected_why = "declined" if event.key == before.request_key else "hard_cap"
                assert decision.why == expected_why
                # the agent's count moves by one; every other agent's count is kept
                assert state.fallback_counts == {
                    **before.fallback_counts, event.agent: given_ + 1
                }
        if isinstance(decision, gate.Fail):
            assert before.fallback_counts.get(event.agent, 0) == max_fallbacks
            assert not (event.key == before.request_key and before.resolution != "declined")

        if isinstance(decision, gate.Rerun):
            assert answered and not declined, "Rerun without an accepted Answer"
            assert event.key == before.request_key and event.agent == before.asked_by
            assert before.resolution in ("answered", "selected")
            assert (decision.question, decision.response) == (before.question, before.response)

        if not isinstance(event, gate.Ask):
            if waiting:
                assert isinstance(decision, gate.Resolve)
                if isinstance(event, gate.Answer):
                    assert dict(update) == {
                        "resolved": True, "response": event.response, "resolution": event.kind
                    }
                    answered = True
                elif isinstance(event, gate.Decline):
                    assert dict(update) == {"resolved": True, "resolution": "declined"}
                    declined = True
                else:
                    assert decision.cancel and dict(update) == {}
            else:
                assert isinstance(decision, gate.Reject) and decision.reason
            assert state.question == before.question  # the question is never erased

    assert surfaced <= 1


@GATE_SETTINGS
@given(st.lists(st.sampled_from(["pm", *(f"developer-{n}" for n in range(1, 13))]), unique=True))
def test_ask_order_pm_first_then_task_number(agents: list[str]) -> None:
    ordered = sorted(agents, key=gate.ask_order)
    numbers = [int(a.split("-")[1]) for a in ordered if a != "pm"]
    if "pm" in agents:
        assert ordered[0] == "pm"
    assert numbers == sorted(numbers)


# =========================================================================================
# 2. End to end: Engine + ScriptedBackend + Store on a SQLite file
# =========================================================================================

MAX_TASKS = 3

_plan = st.lists(st.sampled_from(["api", "ui", "docs", "tests"]), min_size=1, max_size=MAX_TASKS)
pm_reply = st.one_of(
    st.just({"status": "NEEDS_CLARIFICATION"}),
    _plan.map(lambda titles: {"status": "PLANNED", "tasks": [{"title": t} for t in titles]}),
    _plan.map(lambda titles: {"status": "PLANNED", "tasks": [{"title": t} for t in titles]}),
    st.just({"status": "COMPLETE", "summary": "all done"}),
)
dev_reply = st.sampled_from(
    [
        {"status": "NEEDS_CLARIFICATION"},
        {"status": "DONE", "summary": "done"},
        {"status": "DONE", "summary": "done"},
        {"status": "BLOCKED", "reason": "cannot"},
    ]
)
scripted_answer = st.one_of(
    st.sampled_from(["Yes", "Use the default", "  spaced answer  "]),
    st.just({"action": "decline"}),
    st.just({"action": "cancel"}),
)
resume_reply = st.sampled_from(["answer", "answer", "decline", "cancel"])


def _questions(source: str, replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every NEEDS_CLARIFICATION a distinct free_text question naming its source."""
    out = []
    for index, reply in enumerate(replies):
        if reply["status"] == "NEEDS_CLARIFICATION":
            reply = {**reply, "question": f"{source}[{index}]: which way?"}
        out.append(reply)
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    agents: dict[str, list[dict[str, Any]]] = {
        "pm": _questions("pm", draw(st.lists(pm_reply, min_size=1, max_size=6)))
    }
    shared = draw(st.lists(dev_reply, max_size=6))
    if shared or draw(st.booleans()):
        agents["developer"] = _questions("developer", shared)
    for n in range(1, MAX_TASKS + 1):
        if draw(st.booleans()):
            name = f"developer-{n}"
            agents[name] = _questions(name, draw(st.lists(dev_reply, max_size=4)))
    return {
        "task": "property task",
        "agents": agents,
        "answers": draw(st.lists(scripted_answer, max_size=2)),
        "max_fallbacks": draw(st.integers(min_value=0, max_value=3)),
        "max_rounds": draw(st.integers(min_value=1, max_value=3)),
        "resume": draw(resume_reply),
    }


def _settings(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The settings dict `orchestrator run --script` stores (see orchestrator/cli.py)."""
    return {
        "max_rounds": scenario["max_rounds"],
        "max_fallbacks": scenario["max_fallbacks"],
        "answers": list(scenario["answers"]),
    }


def _user_reply(kind: str) -> Any:
    from orchestrator.answers import UserReply

    if kind == "decline":
        return UserReply(action="decline")
    if kind == "cancel":
        return UserReply(action="cancel")
    return UserReply(text="Resumed answer")


def _open(url: str) -> tuple[Any, Any]:
    from orchestrator.store import Store, open_engine

    engine = open_engine(url)
    return engine, Store(engine)


def _event_rows(store: Any, session_id: str) -> list[dict[str, Any]]:
    """The raw event rows, keys included (`Store.events` leaves the key out)."""
    from sqlalchemy import select

    from orchestrator.store.schema import EventRow

    table = EventRow.__table__
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(table).where(table.c.session_id == session_id).order_by(table.c.id)
        )
        return [dict(row._mapping) for row in rows]


def run_scenario(scenario: Mapping[str, Any], workdir: Path) -> dict[str, Any]:
    """Start a session, then resume it in a fresh Engine/Store while it is paused."""
    from agents.scripted import ScriptedBackend
    from orchestrator.engine import Engine
    from orchestrator.scenario import Scenario

    # The generated agents are valid scenario content (what `run --script` would accept).
    Scenario.model_validate({"task": scenario["task"], "agents": scenario["agents"]})

    url = f"sqlite:///{workdir / 'orchestrator.db'}"
    engine, store = _open(url)
    try:
        backend = ScriptedBackend(scenario["agents"], replies_so_far={})
        session_id = Engine(store, url).start(scenario["task"], backend, _settings(scenario))
        first = store.view(session_id)
    finally:
        engine.dispose()

    views = [first]
    resumes = 0
    while views[-1]["status"] == "paused" and resumes < 3:
        paused = views[-1]
        assert paused["pending_question"] is not None, "paused without a pending question"
        assert paused["pending_question"]["asked_by"] in (
            "pm", *(f"developer-{n}" for n in range(1, MAX_TASKS + 1))
        )
        resumes += 1
        engine, store = _open(url)  # a new process: nothing is shared but the database
        try:
            Engine(store, url).resume(session_id, _user_reply(scenario["resume"]))
            views.append(store.view(session_id))
        finally:
            engine.dispose()

    engine, store = _open(url)
    try:
        return {
            "session_id": session_id,
            "views": views,
            "view": store.view(session_id),
            "events": store.events(session_id),
            "rows": _event_rows(store, session_id),
            "state": store.gate_state(session_id),
            "resumes": resumes,
        }
    finally:
        engine.dispose()


def call_bound(scenario: Mapping[str, Any]) -> int:
    """An upper bound on agent calls derived from max_rounds and max_fallbacks.

    Per agent name, NEEDS_CLARIFICATION replies are at most max_fallbacks + 2: the one
    surfaced (answered: re-run; declined: a fallback), max_fallbacks fallbacks, and the one
    that fails the session (or that is held when the user cancels). The PM otherwise plans
    at most max_rounds + 1 times (the last one fails) and completes once; a developer gives
    one DONE/BLOCKED per round. Developer names are developer-1..developer-T, T the largest
    plan in the PM's script.
    """
    mf, rounds = scenario["max_fallbacks"], scenario["max_rounds"]
    plans = [len(r["tasks"]) for r in scenario["agents"]["pm"] if r["status"] == "PLANNED"]
    widest = max(plans, default=0)
    asks = (1 + widest) * (mf + 2)
    pm_other = (rounds + 1) + 1
    dev_other = rounds * widest
    return asks + pm_other + dev_other


FAIL_REASONS = {
    "script": re.compile(r"ran out of replies for ([\w-]+)"),
    "fallbacks": re.compile(r"max_fallbacks=\d+"),
    "rounds": re.compile(r"max_rounds=\d+"),
}


def check_session(scenario: Mapping[str, Any], out: Mapping[str, Any]) -> None:
    view, events, rows, state = out["view"], out["events"], out["rows"], out["state"]
    agents = scenario["agents"]
    kinds = Counter(e["kind"] for e in events)
    note(f"view: { {k: view[k] for k in ('status', 'error', 'questions_surfaced', 'fallbacks_injected', 'round')} }")
    note("events: " + ", ".join(
        f"{r['kind']}:{r['agent'] or ''}:{r['key']}" for r in rows
    ))

    event(f"status: {view['status']}")
    event(f"paused: {out['resumes']}, surfaced: {view['questions_surfaced']}")
    event(f"fallbacks: {view['fallbacks_injected']}")

    # -- every session ends, with at most one pause --
    assert out["resumes"] <= 1, f"paused {out['resumes']} times; one question means one pause"
    assert view["status"] in ("completed", "failed", "cancelled"), view["status"]
    assert view["pending_question"] is None

    # -- at most one question surfaced --
    assert view["questions_surfaced"] in (0, 1)
    assert kinds["question_surfaced"] == view["questions_surfaced"]
    assert view["orchestrator_state"]["clarification_used"] == (view["questions_surfaced"] == 1)
    if out["resumes"]:
        assert view["questions_surfaced"] == 1

    # -- no duplicated event keys, and the counters match the log --
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), f"duplicated keys: {Counter(keys).most_common(3)}"
    assert view["fallbacks_injected"] == kinds["fallback"]
    assert kinds["answer"] + kinds["decline"] + kinds["cancel"] <= 1
    assert kinds["answer_delivered"] <= 1 and kinds["answer_delivered"] <= kinds["answer"]
    assert kinds["gate_failed"] <= MAX_TASKS

    # -- agent calls bounded: by the scripts and by max_rounds/max_fallbacks --
    replies = [r for r in rows if r["kind"] == "agent_reply"]
    calls = Counter(r["agent"] for r in replies)
    per_source: Counter[str] = Counter()
    for agent, count in calls.items():
        per_source[agent if agent in agents or agent == "pm" else "developer"] += count
    for source, count in per_source.items():
        assert count <= len(agents.get(source, [])), f"{source} called {count} times"
    assert len(replies) <= sum(len(r) for r in agents.values())
    assert len(replies) <= call_bound(scenario), (len(replies), call_bound(scenario))
    assert view["round"] <= scenario["max_rounds"]

    mf = scenario["max_fallbacks"]
    fallbacks_by_agent = Counter(e["agent"] for e in events if e["kind"] == "fallback")
    asks_by_agent = Counter(
        r["agent"] for r in replies if r["payload"]["reply"]["status"] == "NEEDS_CLARIFICATION"
    )
    for agent, count in fallbacks_by_agent.items():
        assert count <= mf, f"{agent} got {count} fallbacks, max_fallbacks={mf}"
    assert dict(state.fallback_counts) == dict(fallbacks_by_agent)
    for agent, count in asks_by_agent.items():
        assert count <= mf + 2, f"{agent} asked {count} times, max_fallbacks={mf}"

    # -- every ask got at most one gate decision, and only the surfaced one a rerun --
    row_by_key = {r["key"]: r for r in rows}
    surfaced_keys = [k.removeprefix("surface:") for k in keys if k.startswith("surface:")]
    for reply in replies:
        if reply["payload"]["reply"]["status"] != "NEEDS_CLARIFICATION":
            continue
        key = reply["key"]
        final = row_by_key.get(f"gate:{key}")
        if final is not None:
            assert final["agent"] == reply["agent"]
            if final["kind"] == "answer_delivered":
                assert surfaced_keys == [key] and kinds["answer"] == 1
        elif view["status"] == "completed":
            pytest.fail(f"completed, but the ask {key} never got a gate decision")
    if surfaced_keys:
        assert state.request_key == surfaced_keys[0]
        if kinds["decline"]:
            final = row_by_key.get(f"gate:{surfaced_keys[0]}")
            if final is not None:
                assert final["kind"] in ("fallback", "gate_failed")
                if final["kind"] == "fallback":
                    assert final["payload"]["why"] == "declined"

    # -- how the session ended --
    if view["status"] == "completed":
        assert view["error"] is None
        last_pm = [r for r in replies if r["agent"] == "pm"][-1]["payload"]["reply"]
        assert last_pm["status"] == "COMPLETE" and view["summary"] == last_pm["summary"]
    elif view["status"] == "cancelled":
        assert kinds["cancel"] == 1
        cancel_asked = {"action": "cancel"} in scenario["answers"][:1] or (
            out["resumes"] and scenario["resume"] == "cancel"
        )
        assert cancel_asked
    else:
        error = view["error"]
        assert error, "a failed session must say why"
        matched = [name for name, pattern in FAIL_REASONS.items() if pattern.search(error)]
        assert matched, f"failure reason names no known cause: {error!r}"
        event(f"failed: {'+'.join(matched)}")
        if "fallbacks" in matched:
            failed = [e for e in events if e["kind"] == "gate_failed"]
            assert failed and error == failed[-1]["reason"]
            agent = failed[-1]["agent"]
            assert fallbacks_by_agent[agent] == mf
        if "script" in matched:
            agent = FAIL_REASONS["script"].search(error).group(1)
            source = agent if agent in agents or agent == "pm" else "developer"
            assert per_source[source] == len(agents.get(source, [])), (
                f"{error!r} but {source} used {per_source[source]} of "
                f"{len(agents.get(source, []))}"
            )
        if "rounds" in matched:
            last_pm = [r for r in replies if r["agent"] == "pm"][-1]["payload"]["reply"]
            assert last_pm["status"] == "PLANNED"
            assert view["round"] == scenario["max_rounds"]


@E2E_SETTINGS
@given(scenario=scenarios())
def test_sessions_end_with_at_most_one_question(scenario: dict[str, Any]) -> None:
    note(f"scenario: {scenario}")
    with tempfile.TemporaryDirectory(prefix="orch-prop-") as tmp:
        out = run_scenario(scenario, Path(tmp))
    check_session(scenario, out)


# -- the decline path, end to end (contract section 1) -------------------------------------


@E2E_SETTINGS
@given(
    max_fallbacks=st.integers(min_value=0, max_value=3),
    via=st.sampled_from(["script", "resume"]),
    asker=st.sampled_from(["pm", "developer-1"]),
)
def test_decline_reruns_the_asker_with_the_fallback(
    max_fallbacks: int, via: str, asker: str
) -> None:
    """A decline resolves the question and the asking agent runs again with the fallback
    (counted in fallbacks_injected), whatever max_fallbacks is: the agent has not asked again.
    """
    question = {"status": "NEEDS_CLARIFICATION", "question": "Which way?"}
    done = {"status": "DONE", "summary": "done"}
    plan = {"status": "PLANNED", "tasks": [{"title": "only task"}]}
    complete = {"status": "COMPLETE", "summary": "shipped"}
    if asker == "pm":
        agents = {"pm": [question, plan, complete], "developer": [done]}
    else:
        agents = {"pm": [plan, complete], "developer": [question, done]}
    scenario = {
        "task": "decline",
        "agents": agents,
        "answers": [{"action": "decline"}] if via == "script" else [],
        "max_fallbacks": max_fallbacks,
        "max_rounds": 1,
        "resume": "decline",
    }
    with tempfile.TemporaryDirectory(prefix="orch-prop-") as tmp:
        out = run_scenario(scenario, Path(tmp))
    check_session(scenario, out)
    view = out["view"]
    fallbacks = [e for e in out["events"] if e["kind"] == "fallback"]
    assert [(e["agent"], e["why"]) for e in fallbacks] == [(asker, "declined")], (
        f"max_fallbacks={max_fallbacks}: {view['status']}, error={view['error']!r}"
    )
    assert view["fallbacks_injected"] == 1
    assert view["status"] == "completed", view["error"]
