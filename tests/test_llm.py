"""The LLM backend with fake chat models: no network, no API key."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import SystemMessage, ToolMessage
from orchestrator.agents.llm import LLMBackend
from orchestrator.skills import DEVELOPER_TOOLS

from orchestrator.domain.gate import FALLBACK_MESSAGE
from orchestrator.domain.question import UserReply
from orchestrator.runtime.engine import Engine
from orchestrator.store import Store
from orchestrator.testing import fake_model as fake
from orchestrator.testing import submit
from orchestrator.testing import tool_call as tool

PLAN = {"status": "PLANNED", "tasks": [{"title": "Write the greeting file"}]}
DONE = {"status": "DONE", "summary": "wrote hello.txt"}
COMPLETE = {"status": "COMPLETE", "summary": "greeting shipped"}
ASK = {
    "status": "NEEDS_CLARIFICATION",
    "question": "Which language should the greeting use?",
    "kind": "single_select",
    "options": [{"label": "English"}, {"label": "Czech"}],
    "reason": "The audience is mixed",
    "default": "English",
}


def use(monkeypatch: pytest.MonkeyPatch, **by_spec: Any) -> None:
    """Make init_model return the given fakes, by model spec: only where a session must
    continue on another model than it started with (a fake is otherwise passed in)."""
    monkeypatch.setattr("orchestrator.agents.models.init_model", lambda spec, **_: by_spec[spec])


def start(
    db_url: str, tmp_path: Path, pm: Any, dev: Any, *, ask: Any = None, **backend: Any
) -> tuple[Store, str]:
    """A session on the models `pm` and `dev` (fakes passed in, or specs)."""
    store = Store.open(db_url)
    llm = LLMBackend({"pm": pm, "developer": dev}, workdir=str(tmp_path / "ws"), **backend)
    session_id = Engine(store, db_url, ask_user=ask).start(
        "Greet the user", llm, {"max_rounds": 3, "max_fallbacks": 2}
    )
    return store, session_id


def test_pm_asks_gets_the_answer_plans_and_a_developer_writes_a_file(
    db_url: str, tmp_path: Path
) -> None:
    pm = fake([submit(**ASK), submit(**PLAN), submit(**COMPLETE)])
    dev = fake([tool("write_file", path="hello.txt", content="Ahoj!\n"), submit(**DONE)])
    store, sid = start(db_url, tmp_path, pm, dev, ask=lambda q: UserReply(choices=("Czech",)))

    view = store.view(sid)
    assert view["status"] == "completed", view["error"]
    assert view["questions_surfaced"] == 1
    assert view["pending_question"] is None
    assert view["orchestrator_state"]["user_clarification_response"] == "Czech"
    assert view["tasks"] == [
        {"number": 1, "title": "Write the greeting file", "status": "done",
         "summary": "wrote hello.txt", "files": ["hello.txt"]}
    ]  # fmt: skip
    assert (tmp_path / "ws" / "hello.txt").read_text() == "Ahoj!\n"
    # the tools the developer was offered, and the answer the PM was given
    assert set(dev.bound) == {*DEVELOPER_TOOLS, "submit_reply"}
    second = pm.seen[1]
    assert "The user answered: Czech" in second[-1].content or "Answer: Czech" in second[-1].content
    # the review sees which files each developer changed
    assert '"hello.txt"' in pm.seen[2][-1].content
    # one conversation per agent: the third PM call carries the whole history
    assert isinstance(pm.seen[2][0], SystemMessage)
    assert len(pm.seen[2]) > len(pm.seen[1]) > len(pm.seen[0])
    assert [m.content for m in pm.seen[2][: len(pm.seen[1])]] == [m.content for m in pm.seen[1]]


def test_malformed_structured_output_is_sent_back_then_accepted(
    db_url: str, tmp_path: Path
) -> None:
    pm = fake([submit(status="PLANNED"), submit(**PLAN), submit(**COMPLETE)])
    dev = fake([submit(**DONE)])
    store, sid = start(db_url, tmp_path, pm, dev)
    assert store.view(sid)["status"] == "completed"
    feedback = pm.seen[1][-1]
    assert isinstance(feedback, ToolMessage)
    assert "tasks: missing or empty; a PLANNED reply lists at least one task" in feedback.content
    assert "Call the submit_reply tool once more" in feedback.content
    assert "scenario" not in feedback.content


def test_malformed_output_past_max_retries_fails_the_session(db_url: str, tmp_path: Path) -> None:
    pm = fake([submit(status="PLANNED")] * 3 + [submit(**COMPLETE)])
    store, sid = start(db_url, tmp_path, pm, fake([]), max_retries=2)
    view = store.view(sid)
    assert view["status"] == "failed"
    assert "pm gave no valid reply in 3 attempts (max_retries=2)" in view["error"]
    assert "tasks" in view["error"]
    assert len(pm.seen) == 3  # the fourth (valid) reply was never asked for


def test_a_model_without_tool_calling_replies_in_json_text(db_url: str, tmp_path: Path) -> None:
    pm = fake(
        [
            '```json\n{"status": "PLANNED", "tasks": [{"title": "t"}]}\n```',
            "Sure! Here it is: done",  # no JSON: sent back
            '{"status": "COMPLETE", "summary": "ok"}',
        ],
        tools=False,
    )
    dev = fake(['{"status": "DONE", "summary": "did it"}'], tools=False)
    store, sid = start(db_url, tmp_path, pm, dev)
    view = store.view(sid)
    assert view["status"] == "completed" and view["summary"] == "ok"
    assert "no JSON object" in pm.seen[2][-1].content


def test_path_escape_is_refused_and_nothing_is_written_outside(db_url: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    dev = fake(
        [
            tool("write_file", path="../outside.txt", content="pwned"),
            tool("write_file", path=str(outside), content="pwned"),
            tool("read_file", path="../../etc/passwd"),
            submit(status="BLOCKED", reason="cannot write outside the workspace"),
        ]
    )
    pm = fake([submit(**PLAN), submit(**COMPLETE)])
    store, sid = start(db_url, tmp_path, pm, dev)
    assert not outside.exists()
    results = [m for m in dev.seen[-1] if isinstance(m, ToolMessage)]
    assert len(results) == 3
    assert all('"ok":false' in m.content for m in results)
    assert all("workspace" in m.content for m in results)
    task = store.view(sid)["tasks"][0]
    assert task["status"] == "blocked" and "files" not in task


def test_fallback_reaches_the_model_as_its_next_instruction(db_url: str, tmp_path: Path) -> None:
    pm = fake([submit(**ASK), submit(**{**ASK, "question": "And the tone?"}), submit(**PLAN),
               submit(**COMPLETE)])  # fmt: skip
    store, sid = start(
        db_url, tmp_path, pm, fake([submit(**DONE)]), ask=lambda q: UserReply(text="English")
    )
    view = store.view(sid)
    assert view["status"] == "completed" and view["fallbacks_injected"] == 1
    assert FALLBACK_MESSAGE in pm.seen[2][-1].content


def test_model_errors_keep_the_session_resumable(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.errors import AgentCallError

    class Boom(Exception):
        pass

    broken = fake([])
    monkeypatch.setattr(
        type(broken), "_generate", lambda *a, **k: (_ for _ in ()).throw(Boom("rate limited"))
    )
    use(monkeypatch, **{"fake:pm": broken, "fake:dev": broken})
    with pytest.raises(AgentCallError, match="rate limited") as caught:
        start(db_url, tmp_path, "fake:pm", "fake:dev")
    assert "orchestrator resume" in caught.value.message
    monkeypatch.undo()
    use(monkeypatch, **{"fake:pm": fake([submit(**COMPLETE)]), "fake:dev": fake([])})
    store = Store.open(db_url)
    (sid,) = [s["session_id"] for s in store.list_views()]
    Engine(store, db_url).resume(sid)
    assert store.view(sid)["status"] == "completed"


def test_api_keys_are_never_written(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-very-secret-value-123"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    pm, dev = fake([submit(**PLAN), submit(**COMPLETE)]), fake([submit(**DONE)])
    store, sid = start(db_url, tmp_path, pm, dev)
    assert store.view(sid)["status"] == "completed"
    store.close()
    path = db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for file in Path(path).parent.glob("orchestrator.db*"):
        assert secret.encode() not in file.read_bytes()


def test_prompts_folder_overrides_the_shipped_prompt(db_url: str, tmp_path: Path) -> None:
    custom = tmp_path / "prompts"
    custom.mkdir()
    (custom / "pm.md").write_text("You are a terse PM. Reply in one call.")
    pm = fake([submit(**PLAN), submit(**COMPLETE)])
    dev = fake([submit(**DONE)])
    store, sid = start(db_url, tmp_path, pm, dev, prompts=str(custom))
    assert store.view(sid)["status"] == "completed"
    assert pm.seen[0][0].content == "You are a terse PM. Reply in one call."
    # developer.md was not overridden: the shipped one is used
    assert "developer agent" in dev.seen[0][0].content


def test_a_missing_provider_package_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import langchain.chat_models
    from orchestrator.agents.models import init_model

    from orchestrator.errors import ConfigError

    def missing(spec: str, **_: Any) -> Any:
        raise ImportError("Initializing ChatOpenAI requires the langchain-openai package.")

    monkeypatch.setattr(langchain.chat_models, "init_chat_model", missing)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[openai\]'"):
        init_model("openai:gpt-4o-mini")


def test_assumptions_and_uncertainty_come_through_submit_reply(db_url: str, tmp_path: Path) -> None:
    sure_enough = {**ASK, "uncertainty": 20}  # below the default threshold: not surfaced
    pm = fake([submit(**sure_enough), submit(**PLAN), submit(**COMPLETE, assumptions=["English"])])
    store, sid = start(db_url, tmp_path, pm, fake([submit(**DONE)]))
    view = store.view(sid)
    assert view["status"] == "completed" and view["questions_surfaced"] == 0
    assert [a["source"] for a in view["assumptions"]] == ["uncertainty", "agent"]
    assert view["assumptions"][1]["assumption"] == "English"
    assert "below the threshold" in pm.seen[1][-1].content


def test_an_unreachable_model_server_is_named_in_the_error(tmp_path: Path) -> None:
    """Issue 44, item 8: a dead --base-url said only "Connection error."; now the error
    names the server, and the session stays resumable (a stalled agent call)."""
    import json
    import os
    import socket

    from tests.conftest import invoke

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"  # (a URL with a password or query is refused)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    ran = invoke(
        *("run", "Build it", "--model", "openai:any", "--base-url", url, "--max-retries", "0"),
        *("--workdir", str(tmp_path / "ws"), "--json"),
        db=f"sqlite:///{tmp_path / 'dead.db'}",
        env=env,
    )
    assert ran.returncode == 1, ran.stderr
    error = json.loads(ran.stdout)["error"]
    assert f"Connection error. (server: http://127.0.0.1:{port}/v1" in error, error
    assert "; is it running and reachable from here?)" in error
