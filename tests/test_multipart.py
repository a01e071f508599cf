"""Multi-part questions (docs/multi-part-questions.md): the pure round decision, the answer
rule per part, and sessions end to end on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.domain import gate
from orchestrator.domain.gate_round import decide_round, plan_parts
from orchestrator.domain.question import UserReply, to_gate_event
from orchestrator.errors import InvalidAnswer
from orchestrator.runtime.engine import Engine
from orchestrator.store import Store
from tests.test_sessions import COMPLETE, DONE, PLAN2, start

LIMITS = gate.GateLimits(
    max_fallbacks=2, uncertainty_threshold=70, max_question_parts=4, timeout=None
)


def parts_up_to(max_parts: int) -> gate.GateLimits:
    return dataclasses.replace(LIMITS, max_question_parts=max_parts)


def ask(agent: str, question: str, **kw: Any) -> gate.Ask:
    return gate.Ask(agent, f"{agent}#1", question, **kw)


def spent(decision: gate.Decision) -> gate.GateState:
    """The state a Surface leaves (gate_round.advance)."""
    from orchestrator.domain.gate_round import advance

    assert isinstance(decision, gate.Surface)
    return advance(gate.GateState(), decision)


# -- the pure decision ----------------------------------------------------------------------


def test_two_asks_of_one_round_surface_one_question_with_two_parts() -> None:
    asks = [ask("developer-2", "Where?"), ask("developer-1", "Which cache?", default="Redis")]
    d2, d1 = decide_round(gate.GateState(), asks, parts_up_to(4))
    assert isinstance(d1, gate.Surface) and isinstance(d2, gate.Wait)
    assert [p.askers for p in d1.parts] == [("developer-1",), ("developer-2",)]
    assert d1.parts[0].default == "Redis"
    # the question spent is the first ask's own: clarification_question as before
    assert gate.GateState().apply(d1.update).question == "Which cache?"


def test_max_parts_one_is_the_gate_of_one_ask() -> None:
    asks = [ask("developer-1", "A?"), ask("developer-2", "B?")]
    d1, d2 = decide_round(gate.GateState(), asks, parts_up_to(1))
    assert isinstance(d1, gate.Surface) and not d1.parts
    assert isinstance(d2, gate.Wait)


def test_duplicates_are_one_part_answered_to_both_askers() -> None:
    asks = [
        ask("developer-1", "Which  DB?", kind="single_select", options=("PG", "SQLite")),
        ask("developer-3", "which db?", kind="single_select", options=("pg", "sqlite")),
        ask("developer-2", "Which DB?", kind="single_select", options=("PG", "MySQL")),
    ]
    plan = plan_parts(sorted(asks, key=lambda a: gate.ask_order(a.agent)), 4)
    assert [p.askers for p in plan.parts] == [("developer-1", "developer-3"), ("developer-2",)]
    decisions = decide_round(gate.GateState(), asks, parts_up_to(4))
    surfaced = decisions[0]
    assert isinstance(surfaced, gate.Surface)
    state = spent(surfaced)
    answered = gate.decide(state, gate.Answer("1. PG\n2. MySQL", parts=("PG", "MySQL")), LIMITS)
    assert isinstance(answered, gate.Resolve)
    state = state.apply(answered.update)
    reruns = decide_round(state, asks, parts_up_to(4))
    assert [(type(d).__name__, getattr(d, "response", None)) for d in reruns] == [
        ("Rerun", "PG"),
        ("Rerun", "PG"),
        ("Rerun", "MySQL"),
    ]


def test_asks_over_the_cap_fall_back_to_their_defaults_at_once() -> None:
    asks = [ask(f"developer-{n}", f"Q{n}?", default=f"d{n}") for n in range(1, 5)]
    decisions = decide_round(gate.GateState(), asks, parts_up_to(2))
    assert isinstance(decisions[0], gate.Surface) and len(decisions[0].parts) == 2
    assert isinstance(decisions[1], gate.Wait)
    for n, decision in ((3, decisions[2]), (4, decisions[3])):
        assert isinstance(decision, gate.Fallback) and decision.why == "part_cap"
        assert f"d{n}" in decision.message and decision.assumption is not None
        assert f"Q{n}?" in decision.assumption


def test_a_part_declined_falls_back_and_the_other_is_answered() -> None:
    asks = [ask("developer-1", "A?", default="a"), ask("developer-2", "B?", default="b")]
    surfaced = decide_round(gate.GateState(), asks, parts_up_to(4))[0]
    assert isinstance(surfaced, gate.Surface)
    state = spent(surfaced)
    resolved = gate.decide(state, gate.Answer("1. yes", parts=("yes", None)), LIMITS)
    assert isinstance(resolved, gate.Resolve)
    after = state.apply(resolved.update)
    rerun, fallback = decide_round(after, asks, parts_up_to(4))
    assert isinstance(rerun, gate.Rerun) and rerun.response == "yes" and rerun.question == "A?"
    assert isinstance(fallback, gate.Fallback) and fallback.why == "declined"
    assert "b" in fallback.message


def test_an_answer_with_the_wrong_number_of_parts_is_refused() -> None:
    asks = [ask("developer-1", "A?"), ask("developer-2", "B?")]
    surfaced = decide_round(gate.GateState(), asks, parts_up_to(4))[0]
    assert isinstance(surfaced, gate.Surface)
    state = spent(surfaced)
    wrong = gate.decide(state, gate.Answer("x", parts=("x",)), LIMITS)
    assert isinstance(wrong, gate.Reject)


def two_parts_surfaced() -> tuple[list[gate.Ask], gate.GateState]:
    """developer-1 and developer-2 asked in one round: one question of two parts, open."""
    asks = [ask("developer-1", "A?", default="a"), ask("developer-2", "B?", default="b")]
    surfaced = decide_round(gate.GateState(), asks, parts_up_to(4))[0]
    state = spent(surfaced)
    assert len(state.parts) == 2 and state.request_key == "developer-1#1"
    return asks, state


@pytest.mark.parametrize("settled_by", ["declined", "timeout"])
def test_a_late_answer_to_a_multi_part_question_takes_one_response_per_part(
    settled_by: str,
) -> None:
    """After a decline (or a deadline that proceeded) a late answer is taken once: part by
    part when it gives one response per part, or plain; any other count of parts is
    refused, naming both counts."""
    _, state = two_parts_surfaced()
    event = gate.Decline(parts=2) if settled_by == "declined" else gate.Timeout("proceed")
    settled = gate.decide(state, event, LIMITS)
    assert isinstance(settled, gate.Resolve)
    state = state.apply(settled.update)
    assert state.resolution == settled_by and all(part.declined for part in state.parts)

    by_part = gate.decide(state, gate.Answer("1. x\n2. y", parts=("x", "y")), LIMITS)
    assert by_part == gate.Late("1. x\n2. y", ("x", "y"))
    plain = gate.decide(state, gate.Answer("x"), LIMITS)  # a scripted answer has no parts
    assert plain == gate.Late("x", ())
    for wrong in (("x",), ("x", "y", "z")):
        refused = gate.decide(state, gate.Answer("x", parts=wrong), LIMITS)
        assert refused == gate.Reject(f"the question has 2 part(s); the answer has {len(wrong)}"), (
            wrong
        )
    once = dataclasses.replace(state, late=True)
    again = gate.decide(once, gate.Answer("1. x\n2. y", parts=("x", "y")), LIMITS)
    assert again == gate.Reject("the session's question was already answered late")


def test_a_late_answer_with_parts_to_a_one_part_question_is_refused() -> None:
    declined = gate.GateState(
        used=True, resolved=True, question="Q?", asked_by="pm", request_key="pm#1",
        resolution="declined",
    )  # fmt: skip
    refused = gate.decide(declined, gate.Answer("x", parts=("x", "y")), LIMITS)
    assert refused == gate.Reject("the question has 1 part(s); the answer has 2")


def test_an_answer_without_parts_to_a_multi_part_question_answers_the_surfaced_ask_only() -> None:
    """A scripted answer written before parts settles the surfaced ask, as a one-part
    question's answer does; the other part stays unsettled, so its asker asking again is
    an agent asking twice (the hard cap), never a re-run with a response it was not given."""
    asks, state = two_parts_surfaced()
    resolved = gate.decide(state, gate.Answer("Use a"), LIMITS)
    assert isinstance(resolved, gate.Resolve) and "parts" not in resolved.update
    state = state.apply(resolved.update)
    assert not any(part.declined or part.response is not None for part in state.parts)

    first, second = (gate.decide(state, a, LIMITS) for a in asks)
    assert first == gate.Rerun("developer-1", "A?", "Use a")
    assert isinstance(second, gate.Fallback) and second.why == "hard_cap", second
    assert second.agent == "developer-2" and second.update == gate.GateUpdate(
        fallback_counts={"developer-2": 1}
    )
    # An ask below the threshold is not the question's own ask either: it proceeds.
    unsure = dataclasses.replace(asks[1], uncertainty=10)
    assert isinstance(gate.decide(state, unsure, LIMITS), gate.Proceed)


AGENTS = st.sampled_from(["pm", "developer-1", "developer-2", "developer-3", "developer-4"])


@settings(max_examples=200, deadline=None)
@given(
    asked=st.lists(
        st.tuples(AGENTS, st.sampled_from(["A?", "B?", "C?"]), st.sampled_from([None, 10, 90])),
        min_size=1,
        max_size=5,
        unique_by=lambda t: t[0],
    ),
    max_parts=st.integers(min_value=1, max_value=5),
)
def test_a_round_spends_at_most_one_question_and_decides_every_ask_once(
    asked: list[tuple[str, str, int | None]], max_parts: int
) -> None:
    """Invariants: at most one Surface; every ask of the round gets exactly one decision;
    parts never exceed the cap; every ask is in a part, waits, proceeds or falls back."""
    asks = [ask(agent, q, uncertainty=u, default="d") for agent, q, u in asked]
    decisions = decide_round(gate.GateState(), asks, parts_up_to(max_parts))
    assert len(decisions) == len(asks)
    surfaces = [d for d in decisions if isinstance(d, gate.Surface)]
    assert len(surfaces) <= 1
    askable = [a for a in asks if a.uncertainty is None or a.uncertainty >= 70]
    assert len(surfaces) == (1 if askable else 0)
    if surfaces and surfaces[0].parts:
        parts = surfaces[0].parts
        assert len(parts) <= max_parts
        in_parts = {key for p in parts for key in p.keys}
        for a, d in zip(asks, decisions, strict=True):
            if a.key in in_parts:
                assert isinstance(d, gate.Surface | gate.Wait)
            elif a in askable:
                assert isinstance(d, gate.Fallback) and d.why == "part_cap"
            else:
                assert isinstance(d, gate.Proceed)
    counts = Counter(a.agent for a, d in zip(asks, decisions, strict=True))
    assert all(v == 1 for v in counts.values())


# -- the answer rule per part ---------------------------------------------------------------

PARTS_QUESTION: Any = {
    "question": "Which cache?",
    "kind": "single_select",
    "options": [{"label": "Redis"}, {"label": "Memcached"}],
    "parts": [
        {
            "part": 1,
            "question": "Which cache?",
            "kind": "single_select",
            "options": [{"label": "Redis"}, {"label": "Memcached"}],
        },
        {"part": 2, "question": "Where?", "kind": "free_text"},
    ],
}


def test_each_part_is_validated_by_its_own_rules() -> None:
    event, _ = to_gate_event(
        PARTS_QUESTION, UserReply(parts=(UserReply(choices=("2",)), UserReply(text=" eu ")))
    )
    assert isinstance(event, gate.Answer) and event.parts == ("Memcached", "eu")
    with pytest.raises(InvalidAnswer, match="part 1: 'Mongo' is not one of the options"):
        to_gate_event(
            PARTS_QUESTION, UserReply(parts=(UserReply(choices=("Mongo",)), UserReply(text="eu")))
        )
    with pytest.raises(InvalidAnswer, match="part 2: this question takes a free-text"):
        to_gate_event(
            PARTS_QUESTION, UserReply(parts=(UserReply(text="Redis"), UserReply(choices=("x",))))
        )
    with pytest.raises(InvalidAnswer, match="2 parts; got answers for 1"):
        to_gate_event(PARTS_QUESTION, UserReply(parts=(UserReply(text="Redis"),)))


def test_a_persons_reply_without_parts_is_refused_naming_every_part() -> None:
    """Issue 44, item 4: it answered part 1 and left the others to the hard cap, whose
    ledger then said their question "was not asked". A scenario file's scripted answer
    (written before parts) keeps that old meaning."""
    with pytest.raises(InvalidAnswer) as refused:
        to_gate_event(PARTS_QUESTION, UserReply(choices=("Redis",)))
    assert refused.value.fields == ("parts",)
    message = refused.value.message
    assert message.startswith("this question has 2 parts and an answer without parts would")
    assert "part 1: 'Which cache?'; part 2: 'Where?'" in message
    event, chosen = to_gate_event(PARTS_QUESTION, UserReply(choices=("Redis",)), scripted=True)
    assert isinstance(event, gate.Answer) and event.parts == () and chosen == ["Redis"]


def test_every_part_declined_is_a_decline_of_each_part() -> None:
    declined = UserReply(action="decline")
    event, _ = to_gate_event(PARTS_QUESTION, UserReply(parts=(declined, declined)))
    assert isinstance(event, gate.Decline) and event.parts == 2


# -- end to end -----------------------------------------------------------------------------

PLAN3 = {"status": "PLANNED", "tasks": [{"title": "a"}, {"title": "b"}, {"title": "c"}]}
CACHE = {
    "status": "NEEDS_CLARIFICATION",
    "question": "Which cache?",
    "kind": "single_select",
    "options": [{"label": "Redis"}, {"label": "Memcached"}],
    "default": "Redis",
}
REGION = {"status": "NEEDS_CLARIFICATION", "question": "Which region?", "default": "eu"}


def three_asks(answers: list[Any], **settings_: Any) -> dict[str, Any]:
    return {
        "agents": {
            "pm": [PLAN3, COMPLETE],
            "developer-1": [CACHE, DONE],
            "developer-2": [REGION, DONE],
            "developer-3": [CACHE, DONE],  # the same question as developer-1
        },
        "answers": answers,
        "settings": dict(settings_),  # merging is the default (issue 44, item 6)
    }


def test_asks_of_a_round_are_merged_by_default_into_at_most_four_parts() -> None:
    """Issue 44, item 6: the default was 1 part, so a second ask fell back unseen."""
    from orchestrator.settings import Settings

    assert Settings().max_question_parts == 4
    assert Settings().merged(max_question_parts=1).max_question_parts == 1  # still an option


@pytest.mark.backends()
def test_three_asks_one_question_two_parts_each_asker_rerun_with_its_part(db_url: str) -> None:
    store, sid, backend = start(
        db_url, three_asks([{"parts": [{"choices": ["Memcached"]}, "us-east"]}])
    )
    view = store.view(sid)
    assert view["status"] == "completed", view
    assert view["questions_surfaced"] == 1 and view["fallbacks_injected"] == 0
    assert view["orchestrator_state"]["clarification_question"] == "Which cache?"
    events = store.events(sid)
    surfaced = [e for e in events if e["kind"] == "question_surfaced"]
    assert len(surfaced) == 1
    parts = surfaced[0]["question"]["parts"]
    assert [(p["part"], p["askers"]) for p in parts] == [
        (1, ["developer-1", "developer-3"]),
        (2, ["developer-2"]),
    ]
    assert not [e for e in events if e["kind"] == "question_held"]
    second = {r.agent: r.instruction for r in backend.requests if r.call == 2}
    assert "Answer: Memcached" in second["developer-1"]
    assert "Answer: Memcached" in second["developer-3"]
    assert "Answer: us-east" in second["developer-2"]
    assert "Question: Which region?" in second["developer-2"]


@pytest.mark.backends()
@pytest.mark.parametrize(
    ("answer", "expected"),
    [({"choices": ["Memcached"]}, "answer_delivered"), ({"action": "decline"}, "fallback")],
)
def test_a_plain_reply_to_one_part_asked_twice_reaches_both_askers(
    db_url: str, answer: dict[str, Any], expected: str
) -> None:
    # Two developers ask the same question: one part with two askers. A reply without
    # parts (as every door sent before parts) is that part's, for both askers; neither
    # gets the hard-cap fallback.
    scenario = {
        "agents": {
            "pm": [PLAN2, COMPLETE],
            "developer-1": [CACHE, DONE],
            "developer-2": [CACHE, DONE],
        },
        "answers": [answer],
        "settings": {"max_question_parts": 4},
    }
    store, sid, backend = start(db_url, scenario)
    view = store.view(sid)
    assert view["status"] == "completed", view
    events = store.events(sid)
    (surfaced,) = [e for e in events if e["kind"] == "question_surfaced"]
    assert [p["askers"] for p in surfaced["question"]["parts"]] == [["developer-1", "developer-2"]]
    reached = {e["agent"]: e.get("why") for e in events if e["kind"] == expected}
    assert set(reached) == {"developer-1", "developer-2"}
    if expected == "fallback":
        assert set(reached.values()) == {"declined"}
        second = {r.agent: r.instruction for r in backend.requests if r.call == 2}
        assert all("safe default: Redis" in second[a] for a in ("developer-1", "developer-2"))


@pytest.mark.backends()
def test_the_cap_sends_the_extra_ask_to_its_default_recorded_as_an_assumption(
    db_url: str,
) -> None:
    store, sid, backend = start(db_url, three_asks(["Redis"], max_question_parts=1))
    # one part: today's gate (developer-1 answered, the others the hard-cap fallback)
    assert store.view(sid)["fallbacks_injected"] == 2
    store, sid, backend = start(
        db_url,
        {
            "agents": {
                "pm": [PLAN3, COMPLETE],
                "developer-1": [CACHE, DONE],
                "developer-2": [REGION, DONE],
                "developer-3": [{**REGION, "question": "How many?", "default": "3"}, DONE],
            },
            "answers": [{"parts": ["Redis", "eu-west"]}],
            "settings": {"max_question_parts": 2},
        },
    )
    view = store.view(sid)
    assert view["status"] == "completed", view
    assert view["fallbacks_injected"] == 1
    fallback = [e for e in store.events(sid) if e["kind"] == "fallback"]
    assert [(e["agent"], e["why"]) for e in fallback] == [("developer-3", "part_cap")]
    second = {r.agent: r.instruction for r in backend.requests if r.call == 2}
    assert "take your safe default: 3" in second["developer-3"]


@pytest.mark.backends()
def test_a_pause_shows_the_parts_and_a_resume_answers_them(db_url: str) -> None:
    store, sid, _ = start(db_url, three_asks([]))
    pending = store.view(sid)["pending_question"]
    assert pending["asked_by"] == "developer-1"
    assert [p["question"] for p in pending["parts"]] == ["Which cache?", "Which region?"]
    with pytest.raises(InvalidAnswer, match="part 1"):
        Engine(Store.open(db_url), db_url).resume(
            sid, UserReply(parts=(UserReply(text="Mongo"), UserReply(text="eu")))
        )
    store2 = Store.open(db_url)
    Engine(store2, db_url).resume(
        sid, UserReply(parts=(UserReply(choices=("1",)), UserReply(action="decline")))
    )
    view = store2.view(sid)
    assert view["status"] == "completed", view
    fallback = [e for e in store2.events(sid) if e["kind"] == "fallback"]
    assert [(e["agent"], e["why"]) for e in fallback] == [("developer-2", "declined")]


# -- the command line -----------------------------------------------------------------------


@pytest.mark.backends("sqlite")
def test_resume_answers_each_part_with_part_options(db_url: str, tmp_path: Any) -> None:

    from tests.conftest import EXAMPLES, invoke

    text = (EXAMPLES / "multi-part-question.yaml").read_text()
    script = tmp_path / "paused.yaml"
    script.write_text(text.split("answers:")[0] + "expect:\n  status: completed\n")
    paused = invoke("run", "--script", str(script), "--ui", "none", "--json", db=db_url)
    assert paused.returncode == 3, paused.stderr
    doc = json.loads(paused.stdout)
    sid = doc["session_id"]
    assert [p["askers"] for p in doc["pending_question"]["parts"]] == [
        ["developer-1", "developer-3"],
        ["developer-2"],
    ]
    assert "--part 1 --choice OPTION --part 2 --answer 'YOUR ANSWER'" in paused.stderr
    plain = invoke("resume", sid, "--choice", "Redis", "--json", db=db_url)
    assert plain.returncode == 2, plain.stderr  # a plain answer: refused, nothing written
    said = json.loads(plain.stdout)["error"]
    assert "this question has 2 parts" in said and "`parts` is --part N followed by" in said
    assert json.loads(invoke("status", sid, "--json", db=db_url).stdout)["status"] == "paused"

    missing = invoke("resume", sid, "--part", "2", "--answer", "x", "--json", db=db_url)
    assert missing.returncode == 2 and "--part 1 is missing" in json.loads(missing.stdout)["error"]
    loose = invoke("resume", sid, "--answer", "x", "--part", "1", "--choice", "1", db=db_url)
    assert loose.returncode == 2 and "follows the --part" in loose.stderr
    wrong = invoke(
        "resume", sid, "--part", "1", "--choice", "Mongo", "--part", "2", "--answer", "x",
        "--json", db=db_url,
    )  # fmt: skip
    assert wrong.returncode == 2
    assert "part 1: 'Mongo' is not one of the options" in json.loads(wrong.stdout)["error"]

    done = invoke(
        "resume", sid, "--part", "1", "--choice", "2", "--part", "2", "--answer", "us-east",
        "--json", db=db_url,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed" and view["fallbacks_injected"] == 1
    log = json.loads(invoke("log", sid, "--json", db=db_url).stdout)
    delivered = {e["agent"]: e["response"] for e in log if e["kind"] == "answer_delivered"}
    assert delivered == {
        "developer-1": "Memcached",
        "developer-2": "us-east",
        "developer-3": "Memcached",
    }


@pytest.mark.backends()
def test_sessions_answer_takes_one_reply_per_part(db_url: str, tmp_path: Any) -> None:
    from orchestrator import Reply, Sessions
    from tests.conftest import EXAMPLES

    text = (EXAMPLES / "multi-part-question.yaml").read_text()
    script = tmp_path / "paused.yaml"
    script.write_text(text.split("answers:")[0])
    with Sessions(db_url) as sessions:
        doc = sessions.start_scenario(str(script))
        assert doc["status"] == "paused"
        sid = doc["session_id"]
        with pytest.raises(InvalidAnswer, match="part 2: the answer is empty"):
            sessions.answer(sid, Reply(parts=(Reply(choices=("Redis",)), Reply(text=" "))))
        handed = sessions.answer(
            sid, Reply(parts=(Reply(choices=("Redis",)), Reply(action="decline")), note="n")
        )
        assert handed["status"] == "running"
        done = sessions.run_on(sid)
        assert done["status"] == "completed", done
        assert done["orchestrator_state"]["user_clarification_response"] == (
            "1. Redis\n2. (declined)"
        )
        fallbacks = [e for e in sessions.log(sid) if e["kind"] == "fallback"]
        assert sorted((e["agent"], e["why"]) for e in fallbacks) == [
            ("developer-2", "declined"),
            ("developer-4", "part_cap"),
        ]


@pytest.mark.backends("sqlite")
def test_the_terminal_asks_one_part_after_another(db_url: str, tmp_path: Any) -> None:
    """--ui terminal on a pipe (the line prompt): part 1, then part 2; input closed before
    the last part leaves the whole question open (nothing committed, exit 3)."""
    import subprocess
    import sys

    import forkserver
    from conftest import EXAMPLES, ROOT

    text = (EXAMPLES / "multi-part-question.yaml").read_text()
    script = tmp_path / "paused.yaml"
    script.write_text(text.split("answers:")[0])

    def run(typed: str) -> subprocess.CompletedProcess[str]:
        return forkserver.run(
            [sys.executable, "-m", "orchestrator", "run", "--script", str(script)]
            + ["--ui", "terminal", "--json", "--db", db_url],
            input=typed,
            timeout=60,
            cwd=ROOT,
        )

    done = run("2\nus-east\n")
    assert done.returncode == 0, done.stderr
    assert "part 1/2: developer-1, developer-3 asks" in done.stderr
    assert "part 2/2: developer-2 asks" in done.stderr
    doc = json.loads(done.stdout)
    assert doc["orchestrator_state"]["user_clarification_response"] == "1. Memcached\n2. us-east"

    half = run("2\n")  # input ends before part 2
    assert half.returncode == 3, half.stderr
    assert json.loads(half.stdout)["orchestrator_state"]["clarification_resolved"] is False
