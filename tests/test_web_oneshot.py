"""The one-question page: serve_question / ask_in_browser, and `run`/`resume --ui web`."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
from pathlib import Path

import forkserver
import httpx
import pytest

from orchestrator.api import Reply
from orchestrator.web.oneshot import serve_question
from tests.conftest import ROOT, argv
from tests.web_support import scenario

QUESTION = {
    "question": "Which columns should the export contain?",
    "kind": "single_select",
    "options": [
        {"label": "All visible columns", "description": "what the table shows now"},
        {"label": "A fixed summary set", "recommended": True},
    ],
    "allow_other": False,
    "asked_by": "pm",
    "deadline": None,
    "timed_out": False,
}


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found
    return found.group(1)


def answer_in_thread(wait: object) -> queue.Queue:
    out: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: out.put(wait()), daemon=True).start()  # type: ignore[operator]
    return out


def test_one_question_one_answer_then_the_server_stops() -> None:
    url, wait = serve_question(QUESTION, time.time() + 60)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/choice/[\w-]{30,}", url)
    replies = answer_in_thread(wait)
    with httpx.Client() as browser:
        page = browser.get(url)
        assert page.status_code == 200
        assert 'value="A fixed summary set" checked' in page.text
        assert "what the table shows now" in page.text
        assert browser.get(url.rsplit("/", 1)[0] + "/guessed").status_code == 404
        assert browser.get(url, headers={"Host": "evil.example"}).status_code == 400
        bad = browser.post(url, data={"csrf": csrf_of(page.text), "choice": "Nope"})
        assert bad.status_code == 422 and "not one of the options" in bad.text
        assert browser.post(url, data={"choice": "All visible columns"}).status_code == 403
        ok = browser.post(url, data={"csrf": csrf_of(page.text), "choice": "All visible columns"})
        assert ok.status_code == 200 and "Thank you" in ok.text
    assert replies.get(timeout=10) == Reply(choices=("All visible columns",))
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)


def test_the_deadline_ends_the_wait_without_an_answer() -> None:
    deadline = time.time() + 1
    url, wait = serve_question(QUESTION, deadline)
    assert wait() is None
    assert time.time() >= deadline  # not before the deadline (no upper bound: load)
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)


def test_cancel_when_the_caller_allows_it() -> None:
    url, wait = serve_question(
        {**QUESTION, "kind": "multi_select"}, None, allow_cancel=True, title="Pick"
    )
    replies = answer_in_thread(wait)
    with httpx.Client() as browser:
        page = browser.get(url)
        assert 'value="cancel"' in page.text and 'type="checkbox"' in page.text
        browser.post(url, data={"csrf": csrf_of(page.text), "action": "cancel"})
    assert replies.get(timeout=10) == Reply(action="cancel")


def _start(args: list[str], db: str) -> tuple[subprocess.Popen, queue.Queue]:
    proc = forkserver.Popen(
        argv(*args, db=db),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


def _url_from(lines: queue.Queue) -> str:
    seen = []
    while True:
        line = lines.get(timeout=60)
        if line is None:
            raise AssertionError("no URL printed:\n" + "".join(seen))
        seen.append(line)
        found = re.search(r"answer in your browser: (\S+)", line)
        if found:
            return found.group(1)


def test_run_with_ui_web_asks_in_the_browser_and_runs_on(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(scenario())
    proc, lines = _start(
        ["run", "--script", str(path), "--ui", "web", "--no-browser", "--json"], db_url
    )
    url = _url_from(lines)
    with httpx.Client() as browser:
        page = browser.get(url)
        browser.post(url, data={"csrf": csrf_of(page.text), "choice": "A fixed summary set"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    doc = json.loads(out)
    assert doc["status"] == "completed"
    assert doc["orchestrator_state"]["user_clarification_response"] == "A fixed summary set"


def test_resume_with_ui_web_waits_until_the_deadline(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(scenario())
    proc, lines = _start(
        ["run", "--script", str(path), "--ui", "web", "--no-browser", "--timeout", "2", "--json"],
        db_url,
    )
    url = _url_from(lines)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3  # on-timeout wait: still paused, answerable
    sid = json.loads(out)["session_id"]
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)
    # resume --ui web: the deadline passed, the page still takes the answer
    proc, lines = _start(["resume", sid, "--ui", "web", "--no-browser", "--json"], db_url)
    url = _url_from(lines)
    with httpx.Client() as browser:
        page = browser.get(url)
        assert "deadline passed" in page.text
        browser.post(url, data={"csrf": csrf_of(page.text), "action": "decline"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert json.loads(out)["orchestrator_state"]["answer_status"] == "declined"
