"""The same sessions on PostgreSQL: opt in with ORCHESTRATOR_TEST_POSTGRES_URL.

    ORCHESTRATOR_TEST_POSTGRES_URL=postgresql+psycopg://user:pw@127.0.0.1/db \\
        .venv/bin/python -m pytest tests/test_postgres.py

Needs the postgres extra (pip install -e '.[postgres]') and a server. Not in `make test`'s
default run, which needs no server: SQLite is the default and what CI exercises.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import uuid

import pytest

from tests.conftest import EXAMPLES, ROOT, argv

URL = os.environ.get("ORCHESTRATOR_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(
    not URL or importlib.util.find_spec("psycopg") is None,
    reason="set ORCHESTRATOR_TEST_POSTGRES_URL and install the postgres extra",
)


def orchestrator(*args: str) -> subprocess.CompletedProcess[str]:
    assert URL is not None
    return subprocess.run(
        argv(*args, "--json", db=URL),
        capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("example", "fallbacks"),
    [("answered-question", 0), ("hard-cap", 1), ("parallel-developers", 1)],
)
def test_examples_complete(example: str, fallbacks: int) -> None:
    result = orchestrator("run", "--script", str(EXAMPLES / f"{example}.yaml"))
    assert result.returncode == 0, result.stderr
    view = json.loads(result.stdout)
    assert (view["questions_surfaced"], view["fallbacks_injected"]) == (1, fallbacks)


def test_concurrent_resumes_exactly_one_wins() -> None:
    paused = orchestrator("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"))
    assert paused.returncode == 3, paused.stderr
    session_id = json.loads(paused.stdout)["session_id"]
    answers = [f"answer-{uuid.uuid4().hex[:6]}" for _ in range(4)]
    racers = [
        subprocess.Popen(
            argv("resume", session_id, "--answer", answer, "--json", db=URL or ""),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        for answer in answers
    ]
    codes = [racer.wait(timeout=120) for racer in racers]
    assert sorted(codes) == [0, 2, 2, 2]
    winner = answers[codes.index(0)]
    view = json.loads(orchestrator("status", session_id).stdout)
    assert view["orchestrator_state"]["user_clarification_response"] == winner
    log = json.loads(orchestrator("log", session_id).stdout)
    assert [e["kind"] for e in log].count("answer") == 1
