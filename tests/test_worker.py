"""Workers (`orchestrator worker`, orchestrator/runtime/worker_loop.py) on SQLite and
PostgreSQL: every ready session run exactly once whoever races for it, a killed worker's
session finished by another, a clean stop on SIGTERM, and (PostgreSQL) a server restart
under a working worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import forkserver
import pgcluster
import pytest
import yaml
from conftest import EXAMPLES, ROOT, argv
from dbcheck import payload, query
from waiting import until

from orchestrator import Reply, Sessions
from orchestrator.domain import clock
from orchestrator.runtime.worker_loop import run_worker
from orchestrator.store.queue import claim_ready

pytestmark = pytest.mark.backends()

PAUSE = EXAMPLES / "pause-and-resume.yaml"
THREE_AND_TWO = {"pm": 3, "developer-1": 1, "developer-2": 1}
KILLED = -signal.SIGKILL


@pytest.fixture(autouse=True)
def no_crash_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORCHESTRATOR_CRASH_AT", raising=False)


def answered(db_url: str, count: int, scenario: Path = PAUSE) -> list[str]:
    """`count` sessions paused on their question, answered and left to the workers
    (`Sessions.answer` runs nothing and hands the session off: waiting for a driver)."""
    ids = []
    with Sessions(db_url) as sessions:
        for _ in range(count):
            doc = sessions.start_scenario(scenario)
            assert doc["status"] == "paused", doc
            doc = sessions.answer(doc["session_id"], Reply(text="Weekly"))
            assert doc["status"] == "running" and doc["waiting_for_driver"], doc
            assert not doc["stalled"] and doc["owner"] is None
            ids.append(doc["session_id"])
    return ids


def log_of(db_url: str, session_id: str) -> list[dict[str, Any]]:
    rows = query(
        db_url,
        "SELECT kind, agent, payload FROM events WHERE session_id = ? ORDER BY id",
        session_id,
    )
    return [{"kind": k, "agent": a, **payload(p)} for k, a, p in rows]


def assert_ran_once(db_url: str, session_id: str, replies: dict[str, int]) -> list[dict[str, Any]]:
    log = log_of(db_url, session_id)
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == replies
    finals = [e for e in log if e["kind"] == "status" and e["status"] == "completed"]
    assert len(finals) == 1, finals
    assert Counter(e["kind"] for e in log)["answer"] == 1
    return log


def popen(*args: str, db: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return forkserver.Popen(
        argv(*args, db=db),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def test_a_worker_runs_every_answered_session_and_nothing_else(db_url: str) -> None:
    ready = answered(db_url, 3)
    with Sessions(db_url) as sessions:
        waiting = sessions.start_scenario(PAUSE)["session_id"]  # paused: not work
    seen: list[str] = []
    stats = run_worker(db_url, 2, idle_exit=0.5, poll=0.05, on_session=lambda s, _: seen.append(s))
    assert sorted(seen) == sorted(ready)
    assert stats.claimed == 3 and stats.ended == {"completed": 3}
    for session_id in ready:
        assert_ran_once(db_url, session_id, THREE_AND_TWO)
    with Sessions(db_url) as sessions:
        assert sessions.status(waiting)["status"] == "paused"


def test_a_live_owner_is_not_claimed_and_a_gone_one_is(db_url: str) -> None:
    (session_id,) = answered(db_url, 1)
    with Sessions(db_url) as sessions:
        from orchestrator.store import Owner

        holder, other = Owner(), Owner()
        claim = sessions._opened.claim(session_id, holder)  # this process: alive
        assert claim_ready(sessions._opened, other) is None
        assert claim_ready(sessions._opened, holder, busy={session_id}) is None
        sessions._opened.abandon(claim)  # lease dropped: free for anyone
        taken = claim_ready(sessions._opened, other)
        assert taken is not None and taken.session_id == session_id
        assert taken.generation == claim.generation + 1  # the old holder is fenced out


def test_two_workers_and_cli_resumes_race_each_session_runs_once(db_url: str) -> None:
    ready = answered(db_url, 6)
    workers = [popen("worker", "--exit-when-idle", "3", "--json", db=db_url) for _ in range(2)]
    resumes = [popen("resume", sid, "--json", db=db_url) for sid in ready]
    codes = [proc.wait(timeout=180) for proc in resumes]
    outputs = [proc.communicate(timeout=180) for proc in workers]
    assert [w.returncode for w in workers] == [0, 0], [err for _, err in outputs]
    claimed = [json.loads(out)["claimed"] for out, _ in outputs]
    # Every session was run by exactly one of the three kinds of racer.
    cli_runs = codes.count(0)
    assert set(codes) <= {0, 2}, codes
    assert sum(claimed) + cli_runs == len(ready), (claimed, codes)
    for session_id in ready:
        log = assert_ran_once(db_url, session_id, THREE_AND_TWO)
        drivers = [e for e in log if e["kind"] == "status" and e.get("previous") == "running"]
        assert len(drivers) == 1, drivers  # one driver took it after the hand-off


def test_a_worker_killed_mid_session_is_replaced_by_another(db_url: str) -> None:
    (session_id,) = answered(db_url, 1)
    crash = {**os.environ, "ORCHESTRATOR_CRASH_AT": "reply_recorded:developer-1#1"}
    first = popen("worker", db=db_url, env=crash)
    _, err = first.communicate(timeout=120)
    assert first.returncode == KILLED, err
    row = query(db_url, "SELECT status, owner_pid FROM sessions WHERE id = ?", session_id)
    assert row == [("running", first.pid)]
    second = popen("worker", "--exit-when-idle", "1", "--json", db=db_url)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out)["ended"] == {"completed": 1}
    log = assert_ran_once(db_url, session_id, THREE_AND_TWO)
    takeovers = [e for e in log if e["kind"] == "status" and e.get("previous") == "running"]
    assert len(takeovers) == 2  # from the hand-off, then from the killed worker
    assert "gone" in takeovers[1]["note"]


def long_scenario(path: Path, rounds: int = 4, tasks: int = 5) -> tuple[Path, int]:
    pm: list[dict[str, Any]] = [{"status": "NEEDS_CLARIFICATION", "question": "Go?"}]
    pm += [
        {"status": "PLANNED", "tasks": [{"title": f"r{r} t{t}"} for t in range(tasks)]}
        for r in range(rounds)
    ]
    pm.append({"status": "COMPLETE", "summary": "all rounds done"})
    developer = [{"status": "DONE", "summary": f"reply {n}"} for n in range(rounds * tasks)]
    document = {
        "task": "A long run for a worker",
        "agents": {"pm": pm, "developer": developer},
        "settings": {"max_rounds": rounds + 1},
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path, len(pm) + len(developer)


def replies_so_far(db_url: str, session_id: str) -> int:
    return int(
        query(
            db_url,
            "SELECT count(*) FROM events WHERE session_id = ? AND kind = 'agent_reply'",
            session_id,
        )[0][0]
    )


def wait_for(condition: Any, timeout: float = 60, what: str = "") -> None:
    until(condition, what, timeout=timeout)


def test_sigterm_finishes_the_session_being_driven(db_url: str, tmp_path: Path) -> None:
    script, total = long_scenario(tmp_path / "long.yaml")
    (session_id,) = answered(db_url, 1, script)
    proc = popen("worker", "--json", db=db_url)
    wait_for(lambda: replies_so_far(db_url, session_id) >= 3, what="the worker to start")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["ended"] == {"completed": 1}
    assert "SIGTERM" in err
    assert replies_so_far(db_url, session_id) == total


@pytest.mark.backends("postgresql")
def test_postgresql_restarts_while_a_worker_waits_and_works(
    db_url: str, pg_cluster: pgcluster.Cluster, tmp_path: Path
) -> None:
    proc = popen("worker", "--json", db=db_url)
    try:
        assert proc.stderr is not None
        started = ""  # the worker is up (its database open) and polls an empty queue
        while "worker started: " not in started:
            line = proc.stderr.readline()
            assert line, f"the worker ended: {started}"
            started += line
        pg_cluster.restart()
        (first,) = answered(db_url, 1)  # work that arrives after the restart
        wait_for(
            lambda: (
                query(db_url, "SELECT status FROM sessions WHERE id = ?", first) == [("completed",)]
            ),
            what="the first session",
        )
        # A restart in the middle of a drive: the drive is cut off; the worker takes the
        # session up again once the server answers and repeats nothing.
        script, total = long_scenario(tmp_path / "long.yaml")
        (second,) = answered(db_url, 1, script)
        wait_for(lambda: replies_so_far(db_url, second) >= 3, what="the second drive")
        pg_cluster.restart()
        wait_for(
            lambda: (
                query(db_url, "SELECT status FROM sessions WHERE id = ?", second)
                == [("completed",)]
            ),
            timeout=120,
            what="the second session after the restart",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["ended"] == {"completed": 2}, err
    assert_ran_once(db_url, first, THREE_AND_TWO)
    assert replies_so_far(db_url, second) == total
    assert_ran_once(db_url, second, {"pm": 6, **{f"developer-{n}": 4 for n in range(1, 6)}})


def test_stop_event_stops_an_idle_worker(db_url: str) -> None:
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    stats = run_worker(db_url, 3, stop, poll=0.05)  # returns: the event stopped it
    assert stats.claimed == 0


@pytest.mark.parametrize("policy", ["proceed", "cancel", "wait"])
def test_a_worker_applies_a_passed_deadline_and_runs_on_what_it_answers(
    db_url: str, policy: str
) -> None:
    """No `status` or `resume` needed: a worker applies the on-timeout policy of a paused
    session whose question's deadline has passed, and runs on a `proceed`. (On the
    virtual clock that deadlines are measured in: the worker reads it too.)"""
    with clock.virtual():
        with Sessions(db_url) as sessions:
            settings = {"timeout": 60, "on_timeout": policy}
            sid = sessions.start_scenario(PAUSE, settings=settings)["session_id"]
            not_due = sessions.start_scenario(PAUSE, settings={"timeout": 3600})["session_id"]
        clock.advance(61)
        seen: list[str] = []
        stats = run_worker(
            db_url, 1, idle_exit=0.5, poll=0.05, on_session=lambda s, _: seen.append(s)
        )
    with Sessions(db_url) as sessions:
        done = sessions._opened.view(sid)
        assert sessions._opened.view(not_due)["status"] == "paused"  # its deadline is ahead
    log = log_of(db_url, sid)
    assert [e["policy"] for e in log if e["kind"] == "timeout"] == [policy]  # applied once
    if policy == "proceed":
        assert seen == [sid] and stats.claimed == 1
        assert done["status"] == "completed", done
        assert done["orchestrator_state"]["answer_status"] == "timeout"
        assert any(e["kind"] == "fallback" and e.get("why") == "timeout" for e in log)
    else:
        assert seen == [] and stats.claimed == 0
        expected = {"cancel": "cancelled", "wait": "paused"}[policy]
        assert done["status"] == expected, done
        if policy == "wait":
            assert done["pending_question"]["timed_out"] is True


def test_a_session_stalled_by_a_budget_waits_for_resume_not_a_worker(db_url: str) -> None:
    """A provider outage is retried by workers; a budget stall is not (the same turn
    would spend the same again): only an explicit `resume` runs it."""
    from orchestrator.errors import AgentCallError, BudgetExceeded
    from orchestrator.store import Owner

    outage, budget = answered(db_url, 2)
    with Sessions(db_url) as sessions:
        store = sessions._opened
        owner = Owner()
        for session_id, error in (
            (outage, "the model call for pm failed: APIConnectionError"),
            (budget, BudgetExceeded("pm made 12 model calls in one turn").message),
        ):
            claim = store.claim(session_id, owner)
            kind = BudgetExceeded.code if session_id == budget else AgentCallError.code
            store.record_failure(claim, "pm", error, code=kind)  # as the engine records it
        assert sessions.status(budget)["stalled"] and sessions.status(outage)["stalled"]
        taken = claim_ready(store, Owner(), failed_before=time.time() + 1)
        assert taken is not None and taken.session_id == outage
        assert claim_ready(store, Owner(), busy={outage}, failed_before=time.time() + 1) is None
        assert sessions.status(budget)["last_error"].startswith("budget exceeded: pm made 12")
        assert sessions.run_on(budget)["status"] == "completed"  # `resume` runs it


def test_the_queue_reads_the_stored_error_kind_not_the_messages_words(db_url: str) -> None:
    """A budget stall is told by sessions.last_error_kind (migration 0011), whatever its
    message says: an outage whose message happens to start like a budget's is retried."""
    from orchestrator.errors import AgentCallError, BudgetExceeded
    from orchestrator.store import Owner

    budget, outage = answered(db_url, 2)
    with Sessions(db_url) as sessions:
        store = sessions._opened
        owner = Owner()
        for session_id, error, kind in (
            (budget, "pm went past its turn", BudgetExceeded.code),
            (outage, "budget exceeded: words from the provider", AgentCallError.code),
        ):
            store.record_failure(store.claim(session_id, owner), "pm", error, code=kind)
        kinds = dict(query(db_url, "SELECT id, last_error_kind FROM sessions"))
        assert kinds == {budget: "budget_exceeded", outage: "agent_call_failed"}
        taken = claim_ready(store, Owner(), failed_before=time.time() + 1)
        assert taken is not None and taken.session_id == outage
        assert claim_ready(store, Owner(), busy={outage}, failed_before=time.time() + 1) is None
        assert sessions.run_on(budget)["status"] == "completed"  # `resume` runs it
    # a new claim clears the kind with the message
    cleared = "SELECT last_error, last_error_kind FROM sessions WHERE id = ?"
    assert query(db_url, cleared, budget) == [(None, None)]


def test_a_session_whose_drive_raises_a_bug_does_not_stop_the_others(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker -c 2` lost both threads to one session (an uncaught OSError from a tool,
    one thread after the other) and exited 0, leaving an answered session waiting. Now the
    bad session is set aside, logged with its traceback, and the other one completes."""
    from orchestrator.runtime.engine import Engine

    bad, good = answered(db_url, 2)
    original = Engine.resume
    calls: list[str] = []

    def resume(self: Engine, session_id: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(session_id)
        if session_id == bad:
            raise OSError(36, "File name too long")
        return original(self, session_id, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Engine, "resume", resume)
        stats = run_worker(db_url, 2, idle_exit=0.5, poll=0.05)
    assert calls.count(bad) == 1  # set aside: not claimed again by this worker
    assert stats.ended == {"completed": 1} and stats.interrupted == 1
    assert_ran_once(db_url, good, THREE_AND_TWO)


@pytest.mark.backends("sqlite")
def test_a_worker_thread_that_dies_stops_the_worker_with_the_reason(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.errors import WorkerFailed
    from orchestrator.runtime import worker_loop

    def broken(self: Any) -> str | None:
        raise RuntimeError("claiming is broken")

    with monkeypatch.context() as patch:
        patch.setattr(worker_loop._Worker, "_claim", broken)
        with pytest.raises(WorkerFailed) as raised:
            run_worker(db_url, 2, poll=0.05)  # no idle_exit: only the failure stops it
    assert "worker-" in raised.value.message
    assert "died: RuntimeError: claiming is broken" in raised.value.message
