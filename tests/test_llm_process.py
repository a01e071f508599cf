"""A model-backed session paused in one process continues the same conversation in another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import forkserver

from tests.conftest import ROOT

HARNESS = """
import json, os, sys
sys.path.insert(0, os.environ["HARNESS_ROOT"])
from langchain_core.messages import messages_to_dict
import orchestrator.agents.models
from orchestrator.testing import FakeChatModel, submit, tool_call

script = json.loads(open(os.environ["FAKE_SCRIPT"]).read())
models = {}

def init_model(spec, **_):
    if spec not in models:
        replies = [submit(**r) if "status" in r else tool_call(r["tool"], **r["args"])
                   for r in script[spec]]
        models[spec] = FakeChatModel(messages=iter(replies))
    return models[spec]

_generate = FakeChatModel._generate
def record(self, messages, *args, **kwargs):
    with open(os.environ["FAKE_SEEN"], "a") as out:
        out.write(json.dumps(messages_to_dict(messages)) + "\\n")
    return _generate(self, messages, *args, **kwargs)

FakeChatModel._generate = record
orchestrator.agents.models.init_model = init_model
sys.argv[0] = "orchestrator"
from orchestrator.cli import main
main()
"""

ASK = {"status": "NEEDS_CLARIFICATION", "question": "Formal or casual greeting?"}


def run(tmp_path: Path, script: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "harness.py").write_text(HARNESS)
    env = {
        **os.environ,
        "HARNESS_ROOT": str(ROOT),
        "FAKE_SCRIPT": str(tmp_path / "script.json"),
        "FAKE_SEEN": str(tmp_path / "seen.jsonl"),
    }
    return forkserver.run(
        [sys.executable, str(tmp_path / "harness.py"), *args], env=env, cwd=ROOT, timeout=120
    )


def seen(tmp_path: Path) -> list[list[dict[str, Any]]]:
    lines = (tmp_path / "seen.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_resume_in_a_new_process_continues_the_same_conversation(
    tmp_path: Path, db_url: str
) -> None:
    common = ["--db", db_url, "--json"]
    first = run(
        tmp_path,
        {"fake:pm": [ASK], "fake:dev": []},
        "run", "Greet the user", "--model", "fake:pm", "--developer-model", "fake:dev",
        "--workdir", str(tmp_path / "ws"), *common,
    )  # fmt: skip
    assert first.returncode == 3, first.stderr
    session_id = json.loads(first.stdout)["session_id"]
    (tmp_path / "seen.jsonl").unlink()

    second = run(
        tmp_path,
        {
            "fake:pm": [
                {"status": "PLANNED", "tasks": [{"title": "Write greeting"}]},
                {"status": "COMPLETE", "summary": "formal greeting written"},
            ],
            "fake:dev": [
                {"tool": "write_file", "args": {"path": "greeting.txt", "content": "Good day."}},
                {"status": "DONE", "summary": "wrote greeting.txt"},
            ],
        },
        "resume", session_id, "--answer", "Formal", *common,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    view = json.loads(second.stdout)
    assert view["status"] == "completed"
    assert view["tasks"][0]["files"] == ["greeting.txt"]
    assert (tmp_path / "ws" / "greeting.txt").read_text() == "Good day."

    pm_call = seen(tmp_path)[0]  # the PM's first call in the new process
    kinds = [m["type"] for m in pm_call]
    assert kinds[:4] == ["system", "human", "ai", "tool"], kinds  # the first process's turn
    assert pm_call[2]["data"]["tool_calls"][0]["args"]["question"] == ASK["question"]
    assert "Formal" in pm_call[-1]["data"]["content"]  # and the answer, as the new turn
