"""orchestrator.testing, as a user's tests use it: the example in docs/testing.md runs as
it is written, and chat model objects are accepted where a model is named."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.testing import FakeChatModel, TextOnlyChatModel, fake_model, submit
from tests.conftest import ROOT, invoke

DOC = ROOT / "docs" / "testing.md"


def test_the_documented_example_runs(tmp_path: Path) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    namespace: dict[str, Any] = {}
    exec(compile(block, str(DOC), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0](tmp_path)


def test_fake_model_reads_dicts_as_replies_and_texts_as_text() -> None:
    model = fake_model([{"status": "COMPLETE", "summary": "ok"}, "plain"])
    assert isinstance(model, FakeChatModel)
    first = model.invoke("hi")
    assert first.tool_calls[0]["name"] == "submit_reply"  # type: ignore[attr-defined]
    assert first.tool_calls[0]["args"] == {"status": "COMPLETE", "summary": "ok"}  # type: ignore[attr-defined]
    assert model.invoke("again").content == "plain"
    assert [m[-1].content for m in model.seen] == ["hi", "again"]
    text_only = fake_model(["{}"], tools=False)
    assert isinstance(text_only, TextOnlyChatModel)
    with pytest.raises(NotImplementedError):
        text_only.bind_tools([])


@pytest.mark.backends()
def test_a_session_on_a_model_object_is_resumed_in_its_process_and_refused_elsewhere(
    db_url: str, tmp_path: Path
) -> None:
    """The stored description names the object; this process resumes with it, another
    (the CLI's `resume`, here with the object forgotten) exits 2 with what to do."""
    from orchestrator.agents import models

    from orchestrator import Reply, Sessions

    pm = fake_model(
        [
            {"status": "NEEDS_CLARIFICATION", "question": "Formal or casual?"},
            {"status": "COMPLETE", "summary": "casual it is"},
        ]
    )
    sessions = Sessions(db_url)
    doc = sessions.start("Greet", models={"pm": pm, "developer": pm}, workdir=tmp_path / "w")
    assert doc["status"] == "paused"
    session_id = doc["session_id"]
    (name,) = {k for k, v in models._given.items() if v is pm}
    assert re.fullmatch(r"object:FakeChatModel#\d+", name)

    kept = models._given.pop(name)  # as in a new process
    try:
        refused = invoke("resume", session_id, "--answer", "casual", "--json", db=db_url)
    finally:
        models._given[name] = kept
    assert refused.returncode == 2, refused.stdout
    assert "chat model object (FakeChatModel)" in refused.stdout
    assert sessions.status(session_id)["status"] == "paused"  # nothing changed

    doc = sessions.resume(session_id, Reply(text="casual"))
    assert doc["status"] == "completed", doc.get("error")
    assert "casual" in pm.seen[1][-1].content
    sessions.close()


def test_what_is_not_a_chat_model_is_refused_by_name(db_url: str) -> None:
    from orchestrator import Sessions

    with pytest.raises(ConfigError, match="the model for the pm: expected PROVIDER:NAME or a"):
        Sessions(db_url).start("Greet", models={"pm": 42, "developer": "openai:gpt-4o-mini"})


def test_submit_is_a_tool_call_of_submit_reply() -> None:
    message = submit(status="DONE", summary="s")
    assert message.tool_calls[0]["name"] == "submit_reply"
