"""The server as a real process over a real SQLite file: crashes, restarts, CLI races."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import forkserver
import httpx
import pytest

from tests.conftest import ROOT, argv, cli
from tests.waiting import until
from tests.web_support import AUTH, TOKEN, free_port, scenario


@contextmanager
def server(db: str, *, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    proc = forkserver.Popen(
        argv("serve", "--port", str(port), "--token", TOKEN, db=db),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def serving() -> bool:
            try:
                return httpx.get(f"{base}/api/sessions", headers=AUTH, timeout=2).status_code == 200
            except httpx.TransportError:
                assert proc.poll() is None, f"the server ended: {proc.communicate()}"
                return False

        until(serving, "the server to start")
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def paused_by_cli(tmp_path: Path, db: str) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(scenario())
    run = cli("run", "--script", str(path), "--ui", "none", "--json", db=db)
    assert run.returncode == 3, run.stderr
    import json

    return str(json.loads(run.stdout)["session_id"])


def wait_status(base: str, sid: str, status: str, timeout: float = 60) -> dict:

    def reached() -> dict | None:
        doc: dict = httpx.get(f"{base}/api/sessions/{sid}", headers=AUTH).json()
        return doc if doc["status"] == status else None

    return until(reached, f"{sid} to reach {status}", timeout=timeout)


def test_server_prints_the_start_url_without_a_token_it_was_given(db_url: str) -> None:
    """Only a generated token is printed (docs/security.md); one given with --token,
    --token-file or the environment stays out of the terminal (and its logs)."""
    with server(db_url) as (base, proc):
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert f"orchestrator inbox: {base}/?token=YOUR_TOKEN" in err
    assert TOKEN not in err


def test_a_port_in_use_is_bad_input(db_url: str) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = cli("serve", "--port", str(port), "--token", TOKEN, db=db_url, timeout=60)
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_killed_after_accepting_an_answer_loses_nothing(
    tmp_path: Path, db_url: str
) -> None:
    sid = paused_by_cli(tmp_path, db_url)
    with server(db_url, env={"ORCHESTRATOR_CRASH_AT": "web_run_on"}) as (base, proc):
        r = httpx.post(
            f"{base}/api/sessions/{sid}/answer",
            headers=AUTH,
            json={"answer": "All visible columns"},
        )
        assert r.status_code == 200, r.text
        assert proc.wait(timeout=30) == -signal.SIGKILL
    state = cli("status", sid, "--json", db=db_url)
    doc = json.loads(state.stdout)  # answered and handed off by `Sessions.answer`, not run on
    assert doc["status"] == "running" and doc["waiting_for_driver"] and not doc["stalled"]
    with server(db_url) as (base, _proc):
        done = wait_status(base, sid, "completed")
        log = httpx.get(f"{base}/api/sessions/{sid}/events", headers=AUTH).json()
    assert done["orchestrator_state"]["user_clarification_response"] == "All visible columns"
    assert [e["response"] for e in log if e["kind"] == "answer"] == ["All visible columns"]
    assert any(e["kind"] == "status" and e.get("note") == "picked up by a driver" for e in log), (
        "the restarted server picked up the session the dead one had answered"
    )


def test_a_running_server_runs_on_a_session_answered_with_no_run(
    tmp_path: Path, db_url: str
) -> None:
    """`resume --no-run` in another process: the serving process picks the session up at
    its poll (as a worker would) and runs it to its end."""
    sid = paused_by_cli(tmp_path, db_url)
    with server(db_url) as (base, _proc):
        answered = cli(
            "resume", sid, "--choice", "All visible columns", "--no-run", "--json", db=db_url
        )
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout)["waiting_for_driver"] is True
        done = wait_status(base, sid, "completed")
        log = httpx.get(f"{base}/api/sessions/{sid}/events", headers=AUTH).json()
    assert done["orchestrator_state"]["user_clarification_response"] == "All visible columns"
    notes = [e.get("note") for e in log if e["kind"] == "status" and e["status"] == "running"]
    assert notes[-1] == "picked up by a driver", notes


@pytest.mark.parametrize("web_first", [True, False])
def test_an_answer_racing_a_cli_resume_has_one_winner(
    tmp_path: Path, db_url: str, web_first: bool
) -> None:
    sid = paused_by_cli(tmp_path, db_url)
    with server(db_url) as (base, _proc):
        resume = forkserver.Popen(
            argv("resume", sid, "--choice", "A fixed summary set", "--json", db=db_url),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if not web_first:  # the CLI's answer is in: the page comes second
            events = f"{base}/api/sessions/{sid}/events"
            until(
                lambda: any(e["kind"] == "answer" for e in httpx.get(events, headers=AUTH).json()),
                "the CLI's answer",
            )
        r = httpx.post(
            f"{base}/api/sessions/{sid}/answer",
            headers=AUTH,
            json={"answer": "All visible columns"},
        )
        out, err = resume.communicate(timeout=120)
        web_won = r.status_code == 200
        cli_won = resume.returncode == 0
        assert web_won != cli_won, (r.status_code, r.text, resume.returncode, err)
        assert r.status_code in (200, 409) and resume.returncode in (0, 2)
        done = wait_status(base, sid, "completed")
        log = httpx.get(f"{base}/api/sessions/{sid}/events", headers=AUTH).json()
    winner = "All visible columns" if web_won else "A fixed summary set"
    assert done["orchestrator_state"]["user_clarification_response"] == winner
    assert [e["response"] for e in log if e["kind"] == "answer"] == [winner]
    assert [e for e in log if e["kind"] == "status" and e["status"] == "completed"]
    if not web_first:
        assert cli_won and r.status_code == 409
