"""Property tests for the clarification gate (contract sections 1, 2 and 4).

Two layers:

* the pure decision function `orchestrator.domain.gate.decide`, folded over random event
  sequences the way the store applies it (fast, many examples);
* whole sessions run in-process through `Engine` + `ScriptedBackend` + `Store` on a real
  SQLite file per example, paused and resumed in a fresh Engine/Store (a "new process").

Profiles: the example counts and the seed policy come from ORCHESTRATOR_PROPERTY_PROFILE
(`default`: random, moderate counts; `ci`: derandomized, same counts; `thorough`: random,
many more examples). Hypothesis' own global settings are left alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from orchestrator.domain import gate

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
    gate.Resolve: {"resolved", "response", "resolution", "note", "timed_out"},
    gate.Fallback: {"fallback_counts"},
    gate.Proceed: {"fallback_counts"},  # counted against max_fallbacks, never a question
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
    st.just("ask"),
    st.sampled_from(AGENTS),
    st.sampled_from(["fresh", "fresh", "repeat"]),
    st.sampled_from([None, None, None, 30, 90]),  # uncertainty (threshold 70: 30 proceeds)
)
notes = st.one_of(st.none(), st.text(max_size=8))
user_spec = st.one_of(
    st.tuples(
        st.just("answer"),
        st.text(min_size=1, max_size=8),
        st.sampled_from(["answered", "selected"]),
        notes,
    ),
    st.tuples(st.just("decline"), notes),
    st.tuples(st.just("cancel"), notes),
    st.tuples(st.just("timeout"), st.sampled_from(["wait", "proceed", "cancel"])),
)
event_specs = st.lists(st.one_of(ask_spec, ask_spec, user_spec), max_size=40)


def merge(state: gate.GateState, update: gate.GateUpdate) -> gate.GateState:
    """What the store does with a decision's update: write the named fields, nothing else
    (`GateState.apply`, the same merge the store writes column by column)."""
    named = set(update)
    assert named <= GATE_FIELDS, f"update names unknown fields: {named - GATE_FIELDS}"
    return state.apply(update)


def decide(state: gate.GateState, event: Any, max_fallbacks: int) -> gate.Decision:
    limits = gate.GateLimits(
        max_fallbacks=max_fallbacks, uncertainty_threshold=70, max_question_parts=4, timeout=None
    )
    return gate.decide(state, event, limits)


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
    finished: set[str] = set()  # ask keys with a final decision
    lates = 0  # late answers taken

    for step, spec in enumerate(specs):
        before = state
        waiting = before.used and not before.resolved and before.resolution != "cancelled"
        if before.resolution == "cancelled":
            break  # a cancelled session ends: nothing reaches the gate after it
        kind = spec[0]

        if kind == "ask":
            _, agent, which, uncertainty = spec
            if which == "repeat" and before.request_key is not None:
                agent, key = before.asked_by, before.request_key
                question = before.question
            else:
                fresh[agent] += 1
                key = f"{agent}#{fresh[agent]}"
                question = f"{agent} question {fresh[agent]}?"
            assert agent is not None and question is not None
            if key in finished:
                # The store records a final decision per ask and replays it (gate_ask); the
                # pure function is never asked twice about one finished ask.
                continue
            event: Any = gate.Ask(agent, key, question, uncertainty=uncertainty)
        elif kind == "answer":
            event = gate.Answer(spec[1], kind=spec[2], note=spec[3])
        elif kind == "decline":
            event = gate.Decline(note=spec[1])
        elif kind == "timeout":
            event = gate.Timeout(policy=spec[1])
        else:
            event = gate.Cancel(note=spec[1])
        note(f"step {step}: {event!r} on {before!r}")

        decision = decide(before, event, max_fallbacks)
        note(f"  -> {decision!r}")
        if isinstance(event, gate.Ask) and getattr(decision, "final", False):
            finished.add(event.key)

        # -- what kind of decision may answer what kind of event --
        if isinstance(event, gate.Ask):
            assert isinstance(
                decision,
                gate.Surface | gate.Wait | gate.Rerun | gate.Fallback | gate.Fail | gate.Proceed,
            )
            if isinstance(decision, gate.Proceed):  # below the threshold: nothing surfaced
                assert event.uncertainty is not None and event.uncertainty < 70
        else:
            assert isinstance(decision, gate.Resolve | gate.Reject | gate.Late)

        # A late answer: an Answer after a decline or a deadline that proceeded, taken once,
        # recorded beside the gate's state (the store's late record), never reopening it.
        defaulted = before.resolved and before.resolution in ("declined", "timeout")
        late_due = isinstance(event, gate.Answer) and defaulted and not before.late
        assert isinstance(decision, gate.Late) == late_due, "a late answer taken wrongly"
        if isinstance(decision, gate.Late):
            lates += 1
            assert lates == 1 and not decision.update and not decision.cancel

        update = getattr(decision, "update", gate.GateUpdate())
        named = dict(update)
        assert set(named) <= UPDATE_FIELDS.get(type(decision), set()), (
            f"{type(decision).__name__} names {set(named)}"
        )
        state = merge(before, update)
        # Merge, not overwrite: only named fields may change.
        assert changed_fields(before, state) <= set(named)
        if isinstance(decision, gate.Late):
            state = dataclasses.replace(state, late=True)  # what the store records

        # -- state invariants --
        assert state.used or not before.used, "used went back to False"
        assert state.resolved or not before.resolved, "resolved went back to False"
        assert not state.resolved or state.used, "resolved without a question"
        assert (state.question is not None) == state.used
        assert (state.request_key is not None) == state.used
        assert (state.asked_by is not None) == state.used
        # a cancel records its resolution without resolving the question
        assert (state.resolution is not None) == (state.resolved or state.resolution == "cancelled")
        # A declined question's asker gets one fallback on top of the cap (the decline's).
        # (A timeout that proceeds on the default counts as the asker's decline.)
        decliner = state.asked_by if state.resolution in ("declined", "timeout") else None
        assert all(
            0 <= n <= max_fallbacks + (agent == decliner)
            for agent, n in state.fallback_counts.items()
        ), f"fallback count over max_fallbacks={max_fallbacks}: {state.fallback_counts}"

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
            # ...or an ask below the threshold with no fallback left (a Proceed counts as one)
            below = event.uncertainty is not None and event.uncertainty < 70
            assert (before.used and before.resolved) or (
                below and isinstance(decision, gate.Fail)
            ), "a final decision before the user resolved"
            assert decision.final and decision.agent == event.agent

        if isinstance(event, gate.Ask) and before.used and before.resolved:
            same_ask = event.key == before.request_key
            rerun_case = same_ask and before.resolution not in ("declined", "timeout")
            given_ = before.fallback_counts.get(event.agent, 0)
            if rerun_case:
                assert isinstance(decision, gate.Rerun)
            elif not same_ask and given_ >= max_fallbacks:
                assert isinstance(decision, gate.Fail)
                assert "max_fallbacks" in decision.reason and event.agent in decision.reason
            elif not same_ask and event.uncertainty is not None and event.uncertainty < 70:
                # below the threshold: proceeds on its default, counted like a fallback
                assert isinstance(decision, gate.Proceed)
                assert state.fallback_counts == {**before.fallback_counts, event.agent: given_ + 1}
            else:
                assert isinstance(decision, gate.Fallback)
                assert decision.message == gate.FALLBACK_MESSAGE
                expected_why = before.resolution if same_ask else "hard_cap"
                assert decision.why == expected_why
                # the agent's count moves by one; every other agent's count is kept
                assert state.fallback_counts == {**before.fallback_counts, event.agent: given_ + 1}
        if isinstance(decision, gate.Fail):
            assert before.fallback_counts.get(event.agent, 0) >= max_fallbacks
            assert event.key != before.request_key, "the surfaced ask itself never fails"

        if isinstance(decision, gate.Rerun):
            assert answered and not declined, "Rerun without an accepted Answer"
            assert event.key == before.request_key and event.agent == before.asked_by
            assert before.resolution in ("answered", "selected")
            assert (decision.question, decision.response) == (before.question, before.response)

        if not isinstance(event, gate.Ask):
            if waiting:
                assert isinstance(decision, gate.Resolve)
                # a note is named when given, and then kept in the state
                given = getattr(event, "note", None)
                with_note = {} if given is None else {"note": given}
                if isinstance(event, gate.Timeout):
                    assert (
                        named
                        == {
                            "wait": {"timed_out": True},
                            "proceed": {
                                "resolved": True,
                                "resolution": "timeout",
                                "timed_out": True,
                            },
                            "cancel": {"resolution": "cancelled", "timed_out": True},
                        }[event.policy]
                    )
                    assert decision.cancel == (event.policy == "cancel")
                elif isinstance(event, gate.Answer):
                    assert named == {
                        "resolved": True,
                        "response": event.response,
                        "resolution": event.kind,
                        **with_note,
                    }
                    answered = True
                elif isinstance(event, gate.Decline):
                    assert named == {"resolved": True, "resolution": "declined", **with_note}
                    declined = True
                else:
                    assert decision.cancel
                    assert named == {"resolution": "cancelled", **with_note}
                assert state.note == (given if given is not None else before.note)
            else:
                assert isinstance(decision, gate.Reject | gate.Late)
                assert isinstance(decision, gate.Late) or decision.reason
            assert state.question == before.question  # the question is never erased

    assert surfaced <= 1


@GATE_SETTINGS
@given(agent=st.sampled_from(AGENTS), max_fallbacks=st.integers(min_value=0, max_value=3))
def test_gate_declined_question_gets_its_fallback(agent: str, max_fallbacks: int) -> None:
    """Contract section 1: a decline resolves the question and the asking agent runs again
    with the auto-fallback. The gate re-deciding the declined ask (same key) is not the
    agent asking again, so the max_fallbacks cap cannot turn it into a failure (and the
    asker cannot have had a fallback yet: none is given before the question is resolved).
    """
    ask = gate.Ask(agent, f"{agent}#1", "Which way?")
    state = gate.GateState()
    for step in (ask, gate.Decline()):
        decided = decide(state, step, max_fallbacks)
        assert isinstance(decided, gate.Surface | gate.Resolve)
        state = merge(state, decided.update)
    decision = decide(state, ask, max_fallbacks)
    assert isinstance(decision, gate.Fallback), decision
    assert decision.why == "declined" and decision.agent == agent


@settings(GATE_SETTINGS, max_examples=min(_PROFILE["gate"], 300))
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
_planned = _plan.map(lambda titles: {"status": "PLANNED", "tasks": [{"title": t} for t in titles]})
# one_of picks a branch uniformly: repeating a branch weights it.
pm_reply = st.one_of(
    st.just({"status": "NEEDS_CLARIFICATION"}),
    st.just({"status": "NEEDS_CLARIFICATION"}),
    _planned,
    _planned,
    st.just({"status": "COMPLETE", "summary": "all done"}),
)
dev_reply = st.sampled_from(
    [
        {"status": "NEEDS_CLARIFICATION"},
        {"status": "NEEDS_CLARIFICATION"},
        {"status": "DONE", "summary": "done"},
        {"status": "DONE", "summary": "done"},
        {"status": "BLOCKED", "reason": "cannot"},
    ]
)
_text_answer = st.sampled_from(["Yes", "Use the default", "  spaced answer  "])
scripted_answer = st.one_of(
    _text_answer,
    _text_answer,
    _text_answer,
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
    """Random scripts; one in three is "parallel": the PM plans 2-3 tasks first and the
    developers open with a question, so held questions (contract section 1, last rule)
    come up often."""
    parallel = draw(st.integers(min_value=0, max_value=2)) == 0
    pm = draw(st.lists(pm_reply, min_size=1, max_size=7))
    if parallel:
        titles = draw(st.lists(st.sampled_from(["api", "ui", "docs"]), min_size=2, max_size=3))
        pm = [{"status": "PLANNED", "tasks": [{"title": t} for t in titles]}, *pm]
    agents: dict[str, list[dict[str, Any]]] = {"pm": _questions("pm", pm)}
    opener = [{"status": "NEEDS_CLARIFICATION"}] if parallel else []
    shared = draw(st.lists(dev_reply, max_size=8))
    keep_empty_shared = draw(st.booleans())
    if shared or keep_empty_shared:
        agents["developer"] = _questions("developer", opener + shared)
    for n in range(1, MAX_TASKS + 1):
        if draw(st.booleans()):
            name = f"developer-{n}"
            agents[name] = _questions(name, opener + draw(st.lists(dev_reply, max_size=4)))
    return {
        "task": "property task",
        "agents": agents,
        "answers": draw(st.lists(scripted_answer, max_size=2)),
        "max_fallbacks": draw(st.integers(min_value=0, max_value=3)),
        "max_rounds": draw(st.integers(min_value=1, max_value=3)),
        "resume": draw(resume_reply),
        # how the paused session is continued: `resume ID --answer ...` (reply), or a
        # terminal prompt (ask_user); "peek" first runs `resume ID` with no answer (case B).
        "resume_via": draw(st.sampled_from(["reply", "ask_user"])),
        "peek": draw(st.booleans()),
    }


def _settings(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The settings dict `orchestrator run --script` stores (see orchestrator/cli.py)."""
    return {
        "max_rounds": scenario["max_rounds"],
        "max_fallbacks": scenario["max_fallbacks"],
        "answers": list(scenario["answers"]),
        # The model below is the contract's section 1 (one ask surfaced, the others held):
        # merged questions have their own properties (tests/test_multipart.py).
        "max_question_parts": 1,
    }


def _user_reply(kind: str) -> Any:
    from orchestrator.domain.question import UserReply

    if kind == "decline":
        return UserReply(action="decline")
    if kind == "cancel":
        return UserReply(action="cancel")
    return UserReply(text="Resumed answer")


class _Prompt:
    """An `ask_user` (the terminal UI) that gives one reply and keeps what it was shown."""

    def __init__(self, reply: Any) -> None:
        self.reply, self.asked = reply, []  # type: ignore[var-annotated]

    def __call__(self, question: Mapping[str, Any]) -> Any:
        self.asked.append(question)
        return self.reply


def _open(url: str) -> tuple[Any, Any]:
    from orchestrator.store import Store, open_engine

    engine = open_engine(url)
    return engine, Store(engine)


def _event_rows(store: Any, session_id: str) -> list[dict[str, Any]]:
    """The raw event rows, keys included (`Store.events` leaves the key out).

    Plain SQL on the `events` table (migrations/), so this does not depend on how the
    store's Python schema module is organised.
    """
    from sqlalchemy import text

    query = text("SELECT key, kind, agent, payload FROM events WHERE session_id = :sid ORDER BY id")
    from orchestrator.store import open_engine

    engine = open_engine(store.url, migrate=False)
    with engine.connect() as conn:
        rows = conn.execute(query, {"sid": session_id}).mappings().all()
    engine.dispose()
    out = []
    for row in rows:
        payload = row["payload"]
        if isinstance(payload, str):
            payload = json.loads(payload)
        out.append({**row, "payload": payload or {}})
    return out


def run_scenario(
    scenario: Mapping[str, Any], workdir: Path, url: str | None = None
) -> dict[str, Any]:
    """Start a session, then resume it in a fresh Engine/Store while it is paused."""
    from orchestrator.agents.scripted import ScriptedBackend

    from orchestrator.errors import SessionNotWaiting
    from orchestrator.runtime.engine import Engine
    from orchestrator.scenario import Scenario

    # The generated agents are valid scenario content (what `run --script` would accept).
    Scenario.model_validate({"task": scenario["task"], "agents": scenario["agents"]})

    # Every agent call, in both "processes" (the resumed backend is rebuilt by
    # agents.load_backend from the stored description: same class, so the patch sees it).
    requests: list[Any] = []
    respond = ScriptedBackend.respond

    def recording(self: ScriptedBackend, request: Any) -> Any:
        requests.append(request)
        return respond(self, request)

    url = url or f"sqlite:///{workdir / 'orchestrator.db'}"  # tests/test_properties_pg.py
    with mock.patch.object(ScriptedBackend, "respond", recording):
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
                "pm",
                *(f"developer-{n}" for n in range(1, MAX_TASKS + 1)),
            )
            resumes += 1
            reply = _user_reply(scenario["resume"])
            if scenario.get("peek"):
                # `orchestrator resume ID --ui none`: case B, the question again, nothing runs
                engine, store = _open(url)
                try:
                    log = _event_rows(store, session_id)
                    Engine(store, url).resume(session_id, None)
                    assert _event_rows(store, session_id) == log, "case B changed the log"
                    assert store.view(session_id)["status"] == "paused"
                    assert store.view(session_id)["pending_question"] == paused["pending_question"]
                finally:
                    engine.dispose()
            engine, store = _open(url)  # a new process: nothing is shared but the database
            try:
                if scenario.get("resume_via") == "ask_user":
                    prompt = _Prompt(reply)
                    Engine(store, url, ask_user=prompt).resume(session_id, None)
                    assert prompt.asked == [paused["pending_question"]]
                else:
                    Engine(store, url).resume(session_id, reply)
                views.append(store.view(session_id))
            finally:
                engine.dispose()

        # Once it has ended, a session takes no resume and no decline, and no answer but
        # one late answer when its question was declined or timed out: recorded, the
        # gate's state and the session's status unchanged (no second question).
        engine, store = _open(url)
        try:
            log = _event_rows(store, session_id)
            ended = store.view(session_id)
            if ended["status"] in ("completed", "failed", "cancelled"):
                for attempt in (None, _user_reply("decline")):
                    with pytest.raises(SessionNotWaiting):
                        Engine(store, url).resume(session_id, attempt)
                assert _event_rows(store, session_id) == log
                if ended["late_question"] is not None:
                    options = ended["late_question"].get("options") or []
                    late = (
                        _user_reply("answer")
                        if not options or ended["late_question"].get("parts")
                        else type(_user_reply("answer"))(choices=(options[0]["label"],))
                    )
                    taken = Engine(store, url).resume(session_id, late)
                    assert taken["status"] == ended["status"]
                    assert taken["orchestrator_state"] == ended["orchestrator_state"]
                    sent = late.choices[0] if late.choices else late.text
                    assert taken["late_answer"]["response"] == sent
                    log = _event_rows(store, session_id)
                    assert [r["kind"] for r in log[-1:]] == ["late_answer"]
                for attempt in (None, _user_reply("answer"), _user_reply("decline")):
                    with pytest.raises(SessionNotWaiting):
                        Engine(store, url).resume(session_id, attempt)
                assert _event_rows(store, session_id) == log
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
            "requests": requests,
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


def _source(agents: Mapping[str, Any], agent: str) -> str:
    """The scenario list an agent's replies come from (agents/scripted.py)."""
    return agent if agent in agents or not agent.startswith("developer-") else "developer"


FAIL_REASONS = {
    "script": re.compile(r"ran out of replies for ([\w-]+)"),
    "fallbacks": re.compile(r"max_fallbacks=\d+"),
    "rounds": re.compile(r"max_rounds=\d+"),
}


def check_session(scenario: Mapping[str, Any], out: Mapping[str, Any]) -> None:
    view, events, rows, state = out["view"], out["events"], out["rows"], out["state"]
    agents = scenario["agents"]
    kinds = Counter(e["kind"] for e in events)
    shown = ("status", "error", "questions_surfaced", "fallbacks_injected", "round")
    note(f"view: { {k: view[k] for k in shown} }")
    note("events: " + ", ".join(f"{r['kind']}:{r['agent'] or ''}:{r['key']}" for r in rows))

    event(f"status: {view['status']}")
    event(f"paused: {out['resumes']}, surfaced: {view['questions_surfaced']}")
    event(f"fallbacks: {view['fallbacks_injected']}")
    event(f"held: {kinds['question_held']}")

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
        # scripted answers are used first: a session pauses only when none is left
        assert not scenario["answers"], "paused although a scripted answer was left"

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
        per_source[_source(agents, agent)] += count
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
    decliner = state.asked_by if state.resolution == "declined" else None
    for agent, count in fallbacks_by_agent.items():
        # the asker of a declined question gets the decline's fallback on top of the cap
        allowed = mf + (agent == decliner)
        assert count <= allowed, f"{agent} got {count} fallbacks, max_fallbacks={mf}"
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

    # -- the stored answer is the one given (trimmed), by script or on resume --
    if kinds["answer"]:
        scripted = scenario["answers"][:1]
        given_text = scripted[0] if scripted else "Resumed answer"
        assert isinstance(given_text, str)
        assert state.response == given_text.strip() and state.resolution == "answered"
    elif kinds["decline"]:
        assert state.resolution == "declined" and state.response is None
    planned = sum(
        1 for r in replies if r["agent"] == "pm" and r["payload"]["reply"]["status"] == "PLANNED"
    )
    assert view["round"] == min(planned, scenario["max_rounds"])

    # -- how the session ended --
    if view["status"] == "completed":
        assert view["error"] is None
        last_pm = [r for r in replies if r["agent"] == "pm"][-1]["payload"]["reply"]
        assert last_pm["status"] == "COMPLETE" and view["summary"] == last_pm["summary"]
        # the PM reviews only after every developer of the round has finished
        assert all(t["status"] in ("done", "blocked") for t in view["tasks"]), view["tasks"]
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
            # a declined question's asker fails on its first ask after the decline's
            # fallback when mf == 0
            assert fallbacks_by_agent[agent] == (max(mf, 1) if agent == decliner else mf)
        if "script" in matched:
            found = FAIL_REASONS["script"].search(error)
            assert found is not None
            agent = found.group(1)
            source = _source(agents, agent)
            assert per_source[source] == len(agents.get(source, [])), (
                f"{error!r} but {source} used {per_source[source]} of {len(agents.get(source, []))}"
            )
        if "rounds" in matched:
            last_pm = [r for r in replies if r["agent"] == "pm"][-1]["payload"]["reply"]
            assert last_pm["status"] == "PLANNED"
            assert view["round"] == scenario["max_rounds"]


def check_agent_requests(scenario: Mapping[str, Any], out: Mapping[str, Any]) -> None:
    """What each agent call was told (contract section 1, cases C and D and decline).

    After a Rerun the asking agent's next call carries the question and the answer; after
    a fallback the agent's next call carries exactly FALLBACK_MESSAGE; any other call
    carries no instruction. Once the question is resolved every call has it in context.
    """
    rows, state, view = out["rows"], out["state"], out["view"]
    pending: dict[str, Any] = {}
    expected: dict[tuple[str, int], Any] = {}
    for row in rows:
        agent = row["agent"]
        if row["kind"] == "answer_delivered":
            pending[agent] = ("rerun", row["payload"]["question"], row["payload"]["response"])
        elif row["kind"] == "fallback":
            pending[agent] = ("fallback",)
        elif row["kind"] == "agent_reply":
            call = int(row["key"].rpartition("#")[2])
            expected[(agent, call)] = pending.pop(agent, None)
    requests = out["requests"]
    seen = Counter((r.agent, r.call) for r in requests)
    assert all(n == 1 for n in seen.values()), f"an agent call was made twice: {seen}"
    made = [(r.agent, r.call) for r in requests]
    replied = list(expected)
    assert set(replied) <= set(made), "a recorded reply that no call produced"
    # A call without a recorded reply is one whose script had run out (parallel developers
    # of one round may each hit that before the step fails).
    unanswered = [k for k in made if k not in expected]
    if unanswered:
        assert view["status"] == "failed" and "ran out of replies" in view["error"]
        assert len(unanswered) <= MAX_TASKS
        agents = scenario["agents"]
        for agent, call in unanswered:
            source = _source(agents, agent)
            used = sum(1 for key in replied if _source(agents, key[0]) == source)
            assert used == len(agents.get(source, [])), f"{agent} called with replies left"
            expected[(agent, call)] = pending.pop(agent, None)

    clarified = False
    for request in requests:
        want = expected[(request.agent, request.call)]
        if want is None:
            assert request.instruction is None, (request.agent, request.call, request.instruction)
        elif want[0] == "fallback":
            assert request.instruction == gate.FALLBACK_MESSAGE, (request.agent, request.call)
        else:
            _, question, response = want
            assert request.instruction is not None
            assert question in request.instruction and response in request.instruction
        if request.clarification is not None:
            clarified = True
            assert state.resolved
            assert request.clarification.question == state.question
            assert request.clarification.response == state.response
        else:
            assert not clarified, "a call after the resolution lost the clarification"
        if want is not None:
            assert request.clarification is not None, "re-run without the clarification"


@E2E_SETTINGS
@given(scenario=scenarios())
def test_sessions_end_with_at_most_one_question(scenario: dict[str, Any]) -> None:
    note(f"scenario: {scenario}")
    with tempfile.TemporaryDirectory(prefix="orch-prop-") as tmp:
        out = run_scenario(scenario, Path(tmp))
    check_session(scenario, out)
    check_agent_requests(scenario, out)


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
        "resume_via": "reply",
        "peek": False,
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
