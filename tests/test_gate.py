"""The pure gate decision: each case of contract section 1, with no database."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.domain import gate
from orchestrator.domain.gate import (
    FALLBACK_MESSAGE,
    Answer,
    Ask,
    Cancel,
    Decline,
    Fail,
    Fallback,
    GateState,
    GateUpdate,
    Late,
    Reject,
    Rerun,
    Resolve,
    Surface,
    Wait,
)


def decide(state: GateState, event: object, *, max_fallbacks: int = 2) -> gate.Decision:
    """gate.decide with the limits every call must name (here: the contract's defaults)."""
    limits = gate.GateLimits(
        max_fallbacks=max_fallbacks, uncertainty_threshold=70, max_question_parts=4, timeout=None
    )
    return gate.decide(state, event, limits)  # type: ignore[arg-type]


ASK = Ask("pm", "pm#1", "Which columns?")
OPEN = GateState(
    used=True, resolved=False, question="Which columns?", asked_by="pm", request_key="pm#1"
)
ANSWERED = GateState(
    used=True,
    resolved=True,
    question="Which columns?",
    response="All",
    asked_by="pm",
    request_key="pm#1",
    resolution="answered",
)
DECLINED = GateState(
    used=True,
    resolved=True,
    question="Which columns?",
    asked_by="pm",
    request_key="pm#1",
    resolution="declined",
)


def test_fallback_message_is_the_contract_text() -> None:
    assert FALLBACK_MESSAGE == (
        "Previous clarification was already provided. You MUST proceed with available "
        "information.\nMake reasonable assumptions and document them. Do not request "
        "further clarification."
    )


def test_case_a_first_ask_surfaces_and_saves_only_the_named_fields() -> None:
    decision = decide(GateState(), ASK)
    assert isinstance(decision, Surface)
    assert decision.question == "Which columns?"
    assert dict(decision.update) == {
        "used": True,
        "resolved": False,
        "question": "Which columns?",
        "asked_by": "pm",
        "request_key": "pm#1",
    }
    assert "response" not in dict(decision.update)  # merge, not overwrite


def test_case_b_open_question_waits_and_runs_nothing() -> None:
    decision = decide(OPEN, ASK)
    assert isinstance(decision, Wait)
    assert decision.question == "Which columns?"
    assert not decision.update


def test_another_agent_asking_while_open_waits_on_the_stored_question() -> None:
    decision = decide(OPEN, Ask("developer-2", "developer-2#1", "Where?"))
    assert isinstance(decision, Wait) and decision.question == "Which columns?"


def test_case_c_answer_resolves_then_the_asker_reruns_with_q_and_r() -> None:
    resolved = decide(OPEN, Answer("All"))
    assert isinstance(resolved, Resolve)
    assert dict(resolved.update) == {
        "resolved": True,
        "response": "All",
        "resolution": "answered",
    }
    rerun = decide(ANSWERED, ASK)
    assert rerun == Rerun("pm", "Which columns?", "All")


def test_case_d_asking_again_after_resolution_gets_the_fallback() -> None:
    decision = decide(ANSWERED, Ask("pm", "pm#2", "And the region?"))
    assert isinstance(decision, Fallback)
    assert decision.message == FALLBACK_MESSAGE and decision.why == "hard_cap"
    assert dict(decision.update) == {"fallback_counts": {"pm": 1}}


def test_decline_resolves_without_answer_and_the_asker_gets_the_fallback() -> None:
    resolved = decide(OPEN, Decline())
    assert isinstance(resolved, Resolve)
    assert dict(resolved.update) == {"resolved": True, "resolution": "declined"}
    decision = decide(DECLINED, ASK)
    assert isinstance(decision, Fallback) and decision.why == "declined"


def test_every_fallback_states_the_assumption_its_ledger_entry_records() -> None:
    # The store writes `assumption` to the ledger as it is: an empty one would be lost.
    safe = dataclasses.replace(DECLINED, default="id, name")
    declined = decide(safe, ASK)
    assert isinstance(declined, Fallback) and declined.why == "declined"
    assert (
        declined.assumption
        == "proceeds without an answer to: Which columns? (safe default: id, name)"
    )
    timed_out = decide(dataclasses.replace(DECLINED, resolution="timeout"), ASK)
    assert isinstance(timed_out, Fallback) and timed_out.why == "timeout"
    assert timed_out.assumption == "proceeds without an answer to: Which columns?"
    again = decide(ANSWERED, Ask("developer-1", "developer-1#1", "Which format?"))
    assert isinstance(again, Fallback) and again.why == "hard_cap"
    assert again.assumption == "proceeds on its own assumptions; its further question was not asked"
    assert set(gate.FALLBACK_WHY) == {"hard_cap", "declined", "timeout", "part_cap"}


def test_cancel_is_accepted_only_while_waiting() -> None:
    assert decide(OPEN, Cancel()) == Resolve(GateUpdate(resolution="cancelled"), cancel=True)
    assert isinstance(decide(ANSWERED, Cancel()), Reject)


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (state, event)
        for state in (GateState(), ANSWERED, DECLINED, dataclasses.replace(DECLINED, late=True))
        for event in (Answer("x"), Decline())
        # not an answer to a declined question: taken as late, once (below)
        if not (state is DECLINED and isinstance(event, Answer))
    ],
)
def test_user_events_are_rejected_when_no_question_waits(state: GateState, event: object) -> None:
    decision = decide(state, event)  # type: ignore[arg-type]
    assert isinstance(decision, Reject)
    assert ("already" in decision.reason) == state.resolved


def test_an_answer_to_a_declined_question_is_taken_as_late_once() -> None:
    assert decide(DECLINED, Answer("x")) == Late("x")
    assert isinstance(decide(dataclasses.replace(DECLINED, late=True), Answer("y")), Reject)


@pytest.mark.parametrize("max_fallbacks", [0, 1, 2, 3])
def test_stubborn_agent_fails_after_max_fallbacks(max_fallbacks: int) -> None:
    state = ANSWERED
    for call in range(2, 2 + max_fallbacks):
        decision = decide(state, Ask("pm", f"pm#{call}", "again?"), max_fallbacks=max_fallbacks)
        assert isinstance(decision, Fallback)
        state = state.apply(decision.update)
    final = decide(state, Ask("pm", "pm#99", "again?"), max_fallbacks=max_fallbacks)
    assert isinstance(final, Fail)
    assert f"max_fallbacks={max_fallbacks}" in final.reason and final.agent == "pm"


def test_fallbacks_are_counted_per_agent() -> None:
    state = GateState(**{**ANSWERED.__dict__, "fallback_counts": {"pm": 2}})
    assert isinstance(decide(state, Ask("developer-1", "developer-1#2", "?")), Fallback)
    assert isinstance(decide(state, Ask("pm", "pm#5", "?")), Fail)


def test_asks_in_one_round_are_ordered_pm_first_then_by_task_number() -> None:
    agents = ["developer-10", "developer-2", "pm", "developer-1"]
    assert sorted(agents, key=gate.ask_order) == [
        "pm",
        "developer-1",
        "developer-2",
        "developer-10",
    ]


def test_decline_always_gets_its_fallback_even_with_max_fallbacks_zero() -> None:
    decision = decide(DECLINED, ASK, max_fallbacks=0)
    assert isinstance(decision, Fallback) and decision.why == "declined"
    after = DECLINED.apply(decision.update)
    # asking *again* after that fallback is what the cap is for
    assert isinstance(decide(after, Ask("pm", "pm#2", "?"), max_fallbacks=0), Fail)


def test_waiting_is_the_one_spelling_of_an_open_question() -> None:
    assert OPEN.waiting
    assert not GateState().waiting and not ANSWERED.waiting and not DECLINED.waiting
    cancelled = OPEN.apply(GateUpdate(resolution="cancelled"))
    assert not cancelled.waiting and not cancelled.resolved


def test_an_answer_with_a_note_names_only_fields_the_state_has() -> None:
    """The note used to be named `note` in an update whose state had no such field."""
    decision = decide(OPEN, Answer("All", note="from the standup"))
    assert isinstance(decision, Resolve)
    after = OPEN.apply(decision.update)
    assert (after.response, after.note, after.resolved) == ("All", "from the standup", True)
    assert OPEN.apply(decide(OPEN, Decline(note="n")).update).note == "n"
    # without a note, an earlier note is not erased
    assert GateState(note="kept").apply(decide(OPEN, Answer("x")).update).note == "kept"


def test_update_fields_are_state_fields_and_the_store_maps_every_one() -> None:
    import dataclasses

    from orchestrator.store.gate_tx import GATE_COLUMNS

    update_fields = set(GateUpdate.__annotations__)
    assert update_fields <= {f.name for f in dataclasses.fields(GateState)}
    assert set(GATE_COLUMNS) == update_fields


def test_the_gate_limits_are_read_from_the_sessions_settings_as_one_value() -> None:
    """GateLimits.of: what a session stored is what its gate decides with; a session stored
    before a limit existed takes that limit's one default (Settings), never a second copy."""
    from orchestrator.settings import Settings

    stored = {"max_fallbacks": 0, "uncertainty_threshold": 10, "max_question_parts": 2}
    limits = gate.GateLimits.of({**stored, "timeout": 90, "max_rounds": 3})
    assert limits == gate.GateLimits(
        max_fallbacks=0, uncertainty_threshold=10, max_question_parts=2, timeout=90.0
    )
    assert gate.GateLimits.of({"timeout": None}).timeout is None  # no deadline
    defaults = Settings()
    assert gate.GateLimits.of({}) == gate.GateLimits(
        max_fallbacks=defaults.max_fallbacks,
        uncertainty_threshold=defaults.uncertainty_threshold,
        max_question_parts=defaults.max_question_parts,
        timeout=defaults.timeout,
    )
    # Every limit is a setting: its default and bounds live there, once.
    names = {f.name for f in dataclasses.fields(gate.GateLimits)}
    assert names <= set(Settings.model_fields)
