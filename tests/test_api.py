"""The session API: the front door every edge calls, and the README's example of it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import orchestrator
from orchestrator import Reply, Sessions, Settings
from orchestrator.errors import ConfigError, InvalidAnswer, ScenarioError, SessionNotWaiting
from tests.conftest import EXAMPLES, ROOT


def test_the_package_exports_the_api() -> None:
    assert set(orchestrator.__all__) >= {"Sessions", "Reply", "Settings"}
    assert orchestrator.Sessions is Sessions
    with pytest.raises(AttributeError):
        orchestrator.NoSuchName  # noqa: B018


def test_readme_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## From Python: the session API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the README's session API section has a Python example"
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        (tmp_path / "examples").symlink_to(EXAMPLES)
        exec(compile(code.group(1), "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    # What the example did is in its database: one session, answered as it says, done.
    with Sessions(f"sqlite:///{tmp_path / 'sessions.db'}") as sessions:
        (doc,) = sessions.list()
        kinds = [event["kind"] for event in sessions.log(doc["session_id"])]
    assert doc["status"] == "completed"
    assert doc["orchestrator_state"]["user_clarification_response"] == "Weekly, on Monday mornings"
    assert kinds.count("question_surfaced") == 1 and kinds.count("answer") == 1


def test_answer_commits_without_running_and_run_on_finishes(db_url: str) -> None:
    sessions = Sessions(db_url)
    doc = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")
    sid = doc["session_id"]
    assert doc["status"] == "paused"
    replies = len([e for e in sessions.log(sid) if e["kind"] == "agent_reply"])

    doc = sessions.answer(sid, Reply(text="Weekly"))
    assert doc["orchestrator_state"]["user_clarification_response"] == "Weekly"
    assert doc["pending_question"] is None
    # No agent ran: the answer is committed, nothing else.
    assert len([e for e in sessions.log(sid) if e["kind"] == "agent_reply"]) == replies

    with pytest.raises(SessionNotWaiting):
        sessions.answer(sid, Reply(text="again"))

    doc = sessions.run_on(sid)
    assert doc["status"] == "completed"
    assert doc["expect"] == {"held": True, "unmet": []}
    assert [d["session_id"] for d in sessions.list()] == [sid]
    assert sessions.list("paused") == []


def test_start_scenario_from_text_with_overrides(db_url: str) -> None:
    text = (EXAMPLES / "hard-cap.yaml").read_text(encoding="utf-8")
    with Sessions(db_url) as sessions:
        doc = sessions.start_scenario(text, settings={"max_fallbacks": 0})
        assert doc["status"] == "failed"
        assert "max_fallbacks=0" in (doc["error"] or "")
        assert doc["expect"]["held"] is False  # the file expects completed


def test_invalid_reply_and_settings_are_user_errors(db_url: str) -> None:
    sessions = Sessions(db_url)
    doc = sessions.start_scenario(EXAMPLES / "answered-question.yaml", settings=None)
    assert doc["status"] == "completed"
    with pytest.raises(ScenarioError):
        sessions.start_scenario("task: x\nagents: {}\n")
    with pytest.raises(ConfigError):
        sessions.start("   ", models="openai:gpt-4o-mini")
    paused = sessions.start_scenario(EXAMPLES / "choose-at-the-terminal.yaml", settings=None)
    assert paused["status"] == "paused"
    with pytest.raises(InvalidAnswer):
        sessions.answer(paused["session_id"], Reply(choices=("A", "B", "C")))
    assert sessions.status(paused["session_id"])["status"] == "paused"  # nothing changed


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"timeout": float("inf")}, "finite"),
        ({"timeout": 1e12}, "30 days"),
        ({"timeout": -1}, "positive"),
        ({"max_fallbacks": True}, "integer"),
        ({"max_rounds": 0}, "greater than or equal to 1"),
        ({"on_timeout": "later"}, "wait"),
        ({"bogus": 1}, "Extra inputs"),
    ],
)
def test_settings_refuse_bad_values(given: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Settings().merged(**given)


def test_settings_none_timeout_and_defaults_shown_in_help() -> None:
    assert Settings(timeout="none").timeout is None  # type: ignore[arg-type]
    from orchestrator.cli.options import DEFAULTS

    assert {name: field.default for name, field in Settings.model_fields.items()} == DEFAULTS


def test_a_missing_extra_names_the_command_that_installs_it() -> None:
    from orchestrator.install_hints import require_extra

    require_extra("web", "orchestrator serve", "json")  # present: nothing happens
    with pytest.raises(ConfigError, match=r"needs the web extra .*install -e"):
        require_extra("web", "orchestrator serve", "no_such_module_here")


def test_oversized_answers_and_tasks_are_refused_by_the_api_for_every_edge(db_url: str) -> None:
    from orchestrator.limits import MAX_ANSWER_CHARS, MAX_TASK_CHARS

    sessions = Sessions(db_url)
    sid = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")["session_id"]
    huge = "x" * (MAX_ANSWER_CHARS + 1)
    for reply in (Reply(text=huge), Reply(text="Weekly", note=huge)):
        with pytest.raises(InvalidAnswer, match="at most"):
            sessions.answer(sid, reply)
        with pytest.raises(InvalidAnswer, match="at most"):
            sessions.resume(sid, reply)
    assert sessions.status(sid)["status"] == "paused"  # nothing was written
    with pytest.raises(ConfigError, match="the task"):
        sessions.start("y" * (MAX_TASK_CHARS + 1), models="openai:gpt-4o-mini")
    assert len(sessions.list()) == 1


def test_the_open_question_is_what_its_one_type_says(db_url: str, tmp_path: Path) -> None:
    """`pending_question` has one type from the store's view to every door
    (documents.PendingQuestion): a real paused question, with options and parts, carries
    every key the type requires and none it does not name."""
    from orchestrator.documents import OptionDoc, PendingQuestion
    from tests.test_multipart_doors import paused_with_parts

    sid = paused_with_parts(db_url, tmp_path)
    with Sessions(db_url) as sessions:
        pending = sessions.status(sid)["pending_question"]
    assert pending is not None
    named = PendingQuestion.__required_keys__ | PendingQuestion.__optional_keys__
    assert PendingQuestion.__required_keys__ <= set(pending) <= named
    options = [option for part in pending["parts"] for option in part.get("options", [])]
    assert options, "the example's question has a part with options"
    for option in options:
        assert OptionDoc.__required_keys__ <= set(option) <= OptionDoc.__optional_keys__ | {"label"}
