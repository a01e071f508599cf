"""Trust boundaries outside the web server: what a database path can be."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import cli


@pytest.mark.parametrize("command", [["list"], ["run", "--script", "examples/hard-cap.yaml"]])
def test_a_fifo_as_database_is_refused_not_waited_on(tmp_path: Path, command: list[str]) -> None:
    """Opening a FIFO blocks until someone writes to it: the check must not open it."""
    fifo = tmp_path / "db.sqlite"
    os.mkfifo(fifo)
    done = cli(*command, "--json", db=str(fifo), timeout=60)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)
    assert "not a regular file" in error["error"] and error["exit_code"] == 2


EVIL = "\x1b]52;c;ZXZpbA==\x07\x1b[2K\rorchestrator resume x --answer rm\u202e -rf \x9b31m"
SHOWN = "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2K\\x0dorchestrator resume x --answer rm\\u202e -rf \\x9b31m"


def _evil_scenario(tmp_path: Path) -> Path:
    doc = {
        "task": f"task {EVIL}",
        "agents": {
            "pm": [
                {
                    "status": "NEEDS_CLARIFICATION",
                    "question": f"Which one? {EVIL}",
                    "kind": "single_select",
                    "options": [{"label": f"A {EVIL}", "description": EVIL}, {"label": "B"}],
                    "reason": EVIL,
                },
                {"status": "COMPLETE", "summary": EVIL},
            ]
        },
    }
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    return path


def _unsafe(text: str) -> list[str]:
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    return sorted(
        {
            c
            for c in text
            if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c in bidi
        }
    )


def test_text_an_agent_wrote_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """Escape sequences in a question (clipboard write, line erase, a forged resume
    command, a bidi override) reach no output raw: they are shown as escapes."""
    db = str(tmp_path / "t.db")
    paused = cli("run", "--script", str(_evil_scenario(tmp_path)), "--ui", "none", db=db)
    assert paused.returncode == 3, paused.stderr
    outputs = [paused.stdout, paused.stderr]
    session_id = json.loads(cli("list", "--json", db=db).stdout)[0]["session_id"]
    for args in (["status", session_id], ["log", session_id], ["list"]):
        fast = cli(*args, db=db)  # the fast read path
        full = cli(*args, "--limit", "5", db=db) if args == ["list"] else fast
        for done in (fast, full):
            assert done.returncode == 0, done.stderr
            outputs += [done.stdout, done.stderr]
    answered = cli("resume", session_id, "--choice", "2", db=db)
    outputs += [answered.stdout, answered.stderr]
    assert answered.returncode == 0, answered.stderr
    for text in outputs:
        assert _unsafe(text) == [], text
    assert SHOWN in paused.stderr  # the question, shown with its escapes visible


def test_the_terminal_prompt_shows_an_agents_escapes_as_text() -> None:
    """What the arrow-key prompt draws: the option titles and the header above them."""
    from orchestrator.cli import terminal

    question = {"question": EVIL, "asked_by": EVIL, "reason": EVIL, "default": EVIL}
    title = terminal._title({"label": EVIL, "description": EVIL})
    header = terminal._header(question, None).plain
    for text in (title, header):
        assert _unsafe(text) == [] and "\\x1b]52" in text
