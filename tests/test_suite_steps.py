"""Scenario steps, richer `expect` and the virtual clock, played in this process through
the session API (orchestrator.suite.play): deadlines of minutes tested at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.api import Sessions
from orchestrator.domain import clock
from orchestrator.domain.expect import check_expect
from orchestrator.errors import ScenarioError
from orchestrator.scenario import parse_scenario
from orchestrator.suite.play import play
from tests.conftest import EXAMPLES
from tests.dbcheck import sqlite_fault

# The pausing example without its own expect and steps: each test adds what it needs.
PAUSING = (EXAMPLES / "pause-and-resume.yaml").read_text().split("expect:")[0]


@pytest.fixture
def sessions(db_url: str):
    with Sessions(db_url) as api:
        yield api


def run(sessions: Sessions, text: str):
    return play(parse_scenario(text), sessions)


def test_clock_is_real_time_unless_virtual() -> None:
    import time

    assert abs(clock.now() - time.time()) < 5
    with clock.virtual(start=1000.0):
        assert clock.is_virtual() and clock.now() == 1000.0
        assert clock.advance(400) == 1400.0
        assert clock.now() == 1400.0
        with pytest.raises(ValueError):
            clock.advance(-1)
    assert not clock.is_virtual()
    with pytest.raises(RuntimeError):
        clock.advance(1)


@pytest.mark.parametrize(
    ("given", "seconds"), [("400s", 400), ("5m", 300), ("1.5h", 5400), (90, 90), ("250ms", 0.25)]
)
def test_durations(given: object, seconds: float) -> None:
    assert clock.parse_duration(given) == seconds  # type: ignore[arg-type]


def test_a_300s_deadline_with_wait_times_out_and_stays_answerable(sessions: Sessions) -> None:
    played = run(
        sessions,
        PAUSING
        + """
steps:
  - after: 299s
    expect: {status: paused, no_events: [timeout]}
  - after: 2s
    expect: {status: paused, events: [timeout]}
  - answer: Weekly
expect: {status: completed, answer: Weekly, answer_status: answered, events: [timeout]}
""",
    )
    assert played.unmet == ()
    assert played.doc["status"] == "completed"


def test_on_timeout_proceed_takes_the_default_and_records_a_late_answer(
    sessions: Sessions,
) -> None:
    played = run(
        sessions,
        PAUSING
        + """
settings: {timeout: 300, on_timeout: proceed}
steps:
  - after: 400s
    answer: Weekly
    expect: {late_answer: Weekly, answer_status: timeout}
  - answer: Monthly
    refused: a late answer was already recorded
  - action: resume
expect: {status: completed, answer_status: timeout, fallbacks_injected: 1, reconciled: true}
""",
    )
    assert played.unmet == ()
    assert played.doc["orchestrator_state"]["answer_status"] == "timeout"
    assert played.doc["late_answer"]["response"] == "Weekly"


def test_on_timeout_cancel_cancels(sessions: Sessions) -> None:
    played = run(
        sessions,
        PAUSING + "settings: {on_timeout: cancel}\nsteps:\n  - after: 5m\n"
        "expect: {status: cancelled, events: [timeout, {kind: status, text: cancelled}]}\n",
    )
    assert played.unmet == () and played.doc["status"] == "cancelled"


def test_an_answer_before_the_deadline_wins(sessions: Sessions) -> None:
    played = run(
        sessions,
        PAUSING + "settings: {on_timeout: cancel}\nsteps:\n  - {after: 299s, answer: Weekly}\n"
        "expect: {status: completed, no_events: [timeout]}\n",
    )
    assert played.unmet == ()


def test_decline_and_cancel_steps(sessions: Sessions) -> None:
    declined = run(
        sessions,
        PAUSING + "steps:\n  - action: decline\n"
        "expect: {answer_status: declined, fallbacks_injected: 1, events: [decline]}\n",
    )
    assert declined.unmet == () and declined.doc["status"] == "completed"
    cancelled = run(
        sessions,
        PAUSING + "steps:\n  - {action: cancel, note: not now}\nexpect: {status: cancelled}\n",
    )
    assert cancelled.unmet == ()


def test_unmet_expectations_print_expected_against_actual(sessions: Sessions) -> None:
    played = run(
        sessions,
        PAUSING
        + """
steps:
  - answer: Weekly
expect:
  status: failed
  asked_by: developer-1
  question_kind: single_select
  question: columns
  answer_status: declined
  assumptions: 1
  tasks: [{title: Digest job and schedule, status: blocked}, {status: done}, {status: done}]
  error: ran out
  events: [timeout, {kind: agent_reply, agent: developer-9}]
  no_events: [{kind: answer, text: Weekly}]
""",
    )
    assert list(played.unmet) == [
        "expect.status: expected 'failed', got 'completed'",
        "expect.error: expected an error containing 'ran out', got None",
        "expect.question: expected a question containing 'columns', "
        "got 'How often should the digest be sent?'",
        "expect.answer_status: expected 'declined', got 'answered'",
        "expect.assumptions: expected 1 assumption(s), got 0: []",
        "expect.tasks: expected 3 task(s), got 2: ['Digest job and schedule', 'Email template']",
        "expect.tasks[0].status: expected 'blocked', got 'done'",
        "expect.asked_by: expected 'developer-1', got 'pm'",
        "expect.question_kind: expected 'single_select', got 'free_text'",
        "expect.events: expected an event 'timeout', got none among "
        "['session_started', 'agent_reply', 'question_surfaced', 'status', 'answer', "
        "'answer_delivered']",
        "expect.events: expected an event 'agent_reply' by developer-9, got none among "
        "['session_started', 'agent_reply', 'question_surfaced', 'status', 'answer', "
        "'answer_delivered']",
        "expect.no_events: expected no event 'answer' containing 'Weekly', got 1 "
        "(answer by the session)",
    ]


MULTI_PART = (EXAMPLES / "suite" / "multi-part.scenario.yaml").read_text().split("steps:")[0]


def test_a_multi_part_step_and_the_parts_keys(sessions: Sessions) -> None:
    """`parts` answers a multi-part question in a step; `question_parts` and `delivered`
    say what was asked and what each asker got, and fail with what happened."""
    played = run(
        sessions,
        MULTI_PART
        + """
steps:
  - parts: [Redis, eu-central, "5"]
expect:
  question_parts: 2
  delivered: {developer-1: Memcached, developer-3: "5", pm: x}
""",
    )
    assert list(played.unmet) == [
        "expect.question_parts: expected 2, got 3",
        "expect.delivered.developer-1: expected an answer containing 'Memcached', got 'Redis'",
        "expect.delivered.pm: expected an answer containing 'x', got no answer delivered",
    ]
    paused = run(sessions, MULTI_PART + "expect: {status: paused, question_parts: 3}\n")
    assert paused.unmet == ()


def test_assumptions_by_text_and_tasks_by_count(sessions: Sessions) -> None:
    text = (EXAMPLES / "choose-at-the-terminal.yaml").read_text()
    played = run(
        sessions,
        text.replace(
            "    expect: {status: completed, answer_status: selected, assumptions: 2}",
            "    expect:\n      assumptions: [settings.toml, 100 requests]\n      tasks: 1\n"
            "      answer: Both\n      question_kind: single_select",
        ),
    )
    assert played.unmet == ()


def test_the_existing_messages_are_kept() -> None:
    doc = {"status": "failed", "questions_surfaced": 1, "error": "boom"}
    outcome = check_expect({"status": "completed", "error_contains": "bang"}, doc)
    assert outcome == {
        "held": False,
        "unmet": [
            "expect.status: expected 'completed', got 'failed'",
            "expect.error_contains: 'bang' not in error 'boom'",
        ],
    }


def test_a_step_stops_the_scenario_at_the_first_problem(sessions: Sessions) -> None:
    played = run(
        sessions,
        PAUSING + "steps:\n  - expect: {status: completed}\n  - answer: Weekly\n",
    )
    assert played.unmet == ("steps[0].expect.status: expected 'completed', got 'paused'",)
    assert played.doc["status"] == "paused"  # the answer step never ran


def test_an_unexpected_refusal_fails_the_scenario(sessions: Sessions) -> None:
    played = run(sessions, PAUSING + "steps:\n  - answer: Weekly\n  - answer: again\n")
    assert len(played.unmet) == 1
    assert played.unmet[0].startswith("steps[1]: the answer was refused: session ")
    assert "not waiting for an answer" in played.unmet[0]


def test_a_storage_fault_in_a_step_is_no_refusal(
    sessions: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step expecting a refusal is not met by the disk failing: the fault ends the
    scenario (the runner reports it as an error with its message), whatever `refused:` says."""
    import sqlite3

    from orchestrator.errors import StorageFailed
    from orchestrator.store import gate_tx

    def failing(*_args: object, **_kwargs: object) -> None:
        raise sqlite_fault(sqlite3.SQLITE_IOERR)

    monkeypatch.setattr(gate_tx, "resolve_answer", failing)
    text = PAUSING + "steps:\n  - answer: Weekly\n    refused: disk\n"
    with pytest.raises(StorageFailed, match="disk I/O error"):
        run(sessions, text)


def test_a_paused_scenario_without_expect_does_not_pass(sessions: Sessions) -> None:
    played = run(sessions, PAUSING)
    assert played.unmet[0].startswith("status: expected 'completed', got 'paused' (pm asked")
    assert run(sessions, PAUSING + "expect: {status: paused}\n").unmet == ()


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("  - {answer: a, action: decline}\n", "steps[0]: give at most one of answer, choices"),
        ("  - {after: soon}\n", "steps[0].after: expected a duration such as 400s"),
        ("  - {}\n", "steps[0]: an empty step"),
        (
            "  - {after: 1s, refused: x}\n",
            "steps[0]: 'refused' goes with answer, choices, parts or action",
        ),
        ("  - {choices: [A]}\n", "steps[0].choices: 'choices' answers a select question"),
        ("  - {expect: {tasks: many}}\n", "steps[0].expect.tasks: expected a count"),
        ("  - {expect: {events: [{kind: x, who: y}]}}\n", "steps[0].expect.events[0].who"),
        ("  - {expect: {asked_by: boss}}\n", "steps[0].expect.asked_by"),
        ("  - {expect: {delivered: {boss: x}}}\n", "steps[0].expect.delivered.boss"),
        ("  - {expect: {question_parts: -1}}\n", "steps[0].expect.question_parts"),
        ("  - {parts: []}\n", "steps[0].parts"),
        ("  - {parts: [a], answer: b}\n", "steps[0]: give at most one of answer, choices, parts"),
    ],
)
def test_malformed_steps_name_the_path(steps: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(PAUSING + "steps:\n" + steps, Path("s.yaml"))
    assert f"s.yaml: {message}" in caught.value.message


def test_run_script_checks_the_richer_expect_too(sessions: Sessions) -> None:
    """`orchestrator run --script` (Sessions.start_scenario) reports log-based keys too."""
    text = (EXAMPLES / "hard-cap.yaml").read_text() + (
        "  asked_by: developer-1\n  events: [{kind: fallback, agent: pm}]\n"
    )
    doc = sessions.start_scenario(text)
    assert doc["status"] == "completed"
    assert doc["expect"] == {
        "held": False,
        "unmet": ["expect.asked_by: expected 'developer-1', got 'pm'"],
    }
