"""Real processes on a real SQLite file and a real PostgreSQL database: pause/resume across
processes, racing resumes, SIGKILL at every crash point (and from outside), and taking over
a dead process's session.

Every `orchestrator` command here runs in its own process (`cli` / `subprocess.Popen`) with
stdin closed, so the UI is `none`. The test process reads the database directly
(tests/dbcheck.py) or through `orchestrator.store.Store`; it never drives a session itself.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import forkserver
import pytest
import yaml
from conftest import EXAMPLES, ROOT, argv, cli
from dbcheck import dump_db, payload, query, session_row, write_lock, writing_now
from waiting import until

from orchestrator.store import Owner, Store

PAUSE = EXAMPLES / "pause-and-resume.yaml"
ANSWERED = EXAMPLES / "answered-question.yaml"
HARD_CAP = EXAMPLES / "hard-cap.yaml"
PARALLEL = EXAMPLES / "parallel-developers.yaml"

KILLED = -signal.SIGKILL  # returncode of a process that died of SIGKILL
BUSY_OR_ANSWERED = re.compile(
    r"being resumed elsewhere|just taken by another command|already answered|not waiting",
)

pytestmark = pytest.mark.backends()


# -- helpers ----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_crash_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash points are armed only where a test passes them explicitly."""
    monkeypatch.delenv("ORCHESTRATOR_CRASH_AT", raising=False)


def crash_env(point: str) -> dict[str, str]:
    return {**os.environ, "ORCHESTRATOR_CRASH_AT": point}


def events(db_url: str, session_id: str) -> list[dict[str, Any]]:
    rows = query(
        db_url,
        "SELECT kind, agent, key, payload FROM events WHERE session_id = ? ORDER BY id",
        session_id,
    )
    return [
        {"kind": kind, "agent": agent, "key": key, **payload(data)}
        for kind, agent, key, data in rows
    ]


def run_json(result: subprocess.CompletedProcess[str]) -> Any:
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:  # pragma: no cover - a failure message, not a test path
        pytest.fail(
            f"stdout is not one JSON document (exit {result.returncode})\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def newest_session_id(db_url: str) -> str:
    """The killed process printed nothing: find its session with `list --json`."""
    listed = cli("list", "--json", db=db_url)
    assert listed.returncode == 0, describe(listed)
    sessions = run_json(listed)
    assert len(sessions) == 1, sessions  # every test has its own database
    return str(sessions[0]["session_id"])


def only_session_id(db_url: str) -> str:
    """Same as `newest_session_id`, read straight from the file (saves a process)."""
    rows = query(db_url, "SELECT id FROM sessions")
    assert len(rows) == 1, rows  # every test has its own database
    return str(rows[0][0])


def start_paused(db_url: str) -> dict[str, Any]:
    result = cli("run", "--script", str(PAUSE), "--json", db=db_url)
    assert result.returncode == 3, describe(result)
    view = run_json(result)
    assert view["status"] == "paused"
    return view


def scenario(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def first_question(path: Path) -> str:
    for replies in scenario(path)["agents"].values():
        for reply in replies:
            if reply["status"] == "NEEDS_CLARIFICATION":
                return str(reply["question"])
    raise AssertionError(f"{path} asks no question")


def contract_state(view: dict[str, Any]) -> dict[str, Any]:
    """The four fields contract section 1 names (the object may carry more)."""
    keys = ("clarification_used", "clarification_resolved", "clarification_question",
            "user_clarification_response")  # fmt: skip
    return {k: view["orchestrator_state"][k] for k in keys}


# -- 1. pause in one process, resume in another ----------------------------------------


def test_pause_in_one_process_and_answer_in_another(db_url: str) -> None:
    paused = start_paused(db_url)
    session_id = paused["session_id"]
    question = paused["pending_question"]
    assert question is not None
    assert question["asked_by"] == "pm"
    assert question["question"] == first_question(PAUSE)
    assert paused["questions_surfaced"] == 1
    assert paused["orchestrator_state"]["clarification_used"] is True
    assert paused["orchestrator_state"]["clarification_resolved"] is False

    # `resume ID` with no answer: case B, the stored question again, exit 3, no write.
    log_before = cli("log", session_id, "--json", db=db_url)
    assert log_before.returncode == 0, describe(log_before)
    db_before = dump_db(db_url)

    again_json = cli("resume", session_id, "--json", db=db_url)
    assert again_json.returncode == 3, describe(again_json)
    assert run_json(again_json)["pending_question"] == question
    assert question["question"] in again_json.stderr  # prose goes to stderr under --json
    assert f"orchestrator resume {session_id}" in again_json.stderr

    again_text = cli("resume", session_id, db=db_url)
    assert again_text.returncode == 3, describe(again_text)
    assert question["question"] in again_text.stdout
    assert f"orchestrator resume {session_id}" in again_text.stdout

    assert dump_db(db_url) == db_before, "re-asking the stored question wrote to the database"
    log_after = cli("log", session_id, "--json", db=db_url)
    assert log_after.returncode == 0, describe(log_after)
    assert json.loads(log_after.stdout) == json.loads(log_before.stdout)

    # The answer, in yet another process.
    answered = cli("resume", session_id, "--answer", "Weekly", "--json", db=db_url)
    assert answered.returncode == 0, describe(answered)
    done = run_json(answered)
    assert done["session_id"] == session_id
    assert done["status"] == "completed"
    assert done["questions_surfaced"] == 1
    assert done["fallbacks_injected"] == 0
    assert done["pending_question"] is None
    assert contract_state(done) == {
        "clarification_used": True,
        "clarification_resolved": True,
        "clarification_question": first_question(PAUSE),
        "user_clarification_response": "Weekly",
    }
    assert [t["status"] for t in done["tasks"]] == ["done", "done"]

    kinds = Counter(e["kind"] for e in events(db_url, session_id))
    assert kinds["question_surfaced"] == 1
    assert kinds["answer"] == 1

    # A completed session takes no answer, and nothing changes (exit 2).
    db_done = dump_db(db_url)
    late = cli("resume", session_id, "--answer", "Daily", "--json", db=db_url)
    assert late.returncode == 2, describe(late)
    assert "not waiting" in late.stderr
    assert dump_db(db_url) == db_done


# -- 2. concurrent resumes: exactly one wins ----------------------------------------------


@pytest.mark.parametrize("attempt", range(5))
def test_concurrent_resumes_exactly_one_wins(db_url: str, attempt: int) -> None:
    session_id = start_paused(db_url)["session_id"]
    racers = 4
    answers = [f"answer {attempt}.{n}" for n in range(racers)]
    # All started before any is waited on; each pays ~1 s of imports before touching the
    # database, so they reach it together.
    procs = [
        forkserver.Popen(
            argv("resume", session_id, "--answer", answer, "--json", db=db_url),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for answer in answers
    ]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        results.append((proc.returncode, stdout, stderr))

    codes = [code for code, _, _ in results]
    winners = [n for n, code in enumerate(codes) if code == 0]
    assert len(winners) == 1, f"exit codes {codes}: " + "\n".join(e for _, _, e in results)
    assert sorted(codes) == [0] + [2] * (racers - 1), codes
    winner = winners[0]
    assert json.loads(results[winner][1])["status"] == "completed"
    for n, (code, stdout, stderr) in enumerate(results):
        if n == winner:
            continue
        assert BUSY_OR_ANSWERED.search(stderr), f"racer {n} (exit {code}) said: {stderr}"
        assert json.loads(stdout)["exit_code"] == 2

    log = events(db_url, session_id)
    answer_events = [e for e in log if e["kind"] == "answer"]
    assert len(answer_events) == 1, answer_events
    assert answer_events[0]["response"] == answers[winner]
    resumed = [e for e in log if e["kind"] == "status" and e.get("previous") == "paused"]
    assert len(resumed) == 1, "a losing racer claimed the session too"

    view = json.loads(results[winner][1])
    assert view["questions_surfaced"] == 1
    assert view["orchestrator_state"]["user_clarification_response"] == answers[winner]
    assert session_row(db_url, session_id)["status"] == "completed"
    assert checkpoint_forks(db_url, session_id) == []
    assert query(
        db_url,
        "SELECT questions_surfaced, user_clarification_response FROM orchestrator_state "
        "WHERE session_id = ?",
        session_id,
    ) == [(1, answers[winner])]
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == {
        "pm": 3,
        "developer-1": 1,
        "developer-2": 1,
    }


# -- 3. SIGKILL at every crash point, then resume: nothing lost, nothing twice ------------


@dataclass(frozen=True)
class CrashCase:
    scenario: Path
    point: str
    # "run": the `run` process dies; "answer": `resume ID --answer ...` dies.
    killed_in: str
    replies: dict[str, int]  # agent_reply events per agent once the session completes
    answer: str  # the answer that must end up stored
    source: str  # "script" (scenario answers) or "user" (--answer)
    fallbacks: int = 0
    # After the kill, with no accepted answer: "plain" resumes first (expects exit 3),
    # "answer" goes straight to `resume --answer` on the session the dead process left running.
    then: str = "plain"


THREE_AND_TWO = {"pm": 3, "developer-1": 1, "developer-2": 1}
DIGEST_ANSWER = "Weekly, on Monday mornings"
CRASH_CASES = [
    # answered-question: the scripted answer is used on whichever side of the kill it falls.
    *(
        CrashCase(ANSWERED, point, "run", THREE_AND_TWO, "All visible columns", "script")
        for point in (
            "session_created",
            "reply_recorded:pm#1",
            "gate_decided",
            "answer_committed",
            "reply_recorded:developer-1#1",
            "before_finish",
        )
    ),
    # pause-and-resume: killed before the pause, then answered with --answer.
    CrashCase(PAUSE, "gate_decided", "run", THREE_AND_TWO, DIGEST_ANSWER, "user"),
    CrashCase(PAUSE, "before_pause", "run", THREE_AND_TWO, DIGEST_ANSWER, "user", then="answer"),
    # pause-and-resume: the `resume --answer` process dies after the answer committed.
    *(
        CrashCase(PAUSE, point, "answer", THREE_AND_TWO, DIGEST_ANSWER, "user")
        for point in (
            "answer_committed",
            "reply_recorded:pm#2",
            "before_finish",
        )
    ),
    # hard-cap: the PM's second ask gets the fallback once, whatever the kill point.
    *(
        CrashCase(
            HARD_CAP,
            point,
            "run",
            {"pm": 4, "developer-1": 1},
            "Keep them; build the token bridge.",
            "script",
            fallbacks=1,
        )
        for point in ("reply_recorded:pm#2", "reply_recorded:pm#3")
    ),
    # parallel developers: developer-1 surfaced, developer-2 held then given the fallback.
    *(
        CrashCase(
            PARALLEL,
            point,
            "run",
            {"pm": 2, "developer-1": 2, "developer-2": 2},
            "Per API key",
            "script",
            fallbacks=1,
        )
        for point in ("gate_decided", "answer_committed", "reply_recorded:developer-2#2")
    ),
]


@pytest.mark.parametrize(
    "case", CRASH_CASES, ids=[f"{c.scenario.stem}-{c.killed_in}-{c.point}" for c in CRASH_CASES]
)
def test_sigkill_at_crash_point_then_resume(db_url: str, case: CrashCase) -> None:
    if case.killed_in == "run":
        crashed = cli(
            "run", "--script", str(case.scenario), "--json", db=db_url, env=crash_env(case.point)
        )
        assert crashed.returncode == KILLED, describe(crashed)
        assert crashed.stdout == ""
        session_id = only_session_id(db_url)
    else:
        session_id = start_paused(db_url)["session_id"]
        crashed = cli(
            "resume",
            session_id,
            "--answer",
            case.answer,
            "--json",
            db=db_url,
            env=crash_env(case.point),
        )
        assert crashed.returncode == KILLED, describe(crashed)
    # The dead process left the session mid-run.
    assert session_row(db_url, session_id)["status"] == "running"

    answer_accepted = case.source == "script" or case.killed_in == "answer"
    if not answer_accepted:
        if case.then == "plain":
            shown = cli("resume", session_id, "--json", db=db_url)
            assert shown.returncode == 3, describe(shown)
            pending = run_json(shown)["pending_question"]
            assert pending["question"] == first_question(case.scenario)
            assert pending["asked_by"] == "pm"
        finished = cli("resume", session_id, "--answer", case.answer, "--json", db=db_url)
    else:
        # The accepted answer is used as it is: the user is not asked again.
        finished = cli("resume", session_id, "--json", db=db_url)
    assert finished.returncode == 0, describe(finished)
    view = run_json(finished)

    assert view["status"] == "completed", view
    assert view["questions_surfaced"] == 1
    assert view["fallbacks_injected"] == case.fallbacks
    assert view["pending_question"] is None
    assert contract_state(view) == {
        "clarification_used": True,
        "clarification_resolved": True,
        "clarification_question": first_question(case.scenario),
        "user_clarification_response": case.answer,
    }
    assert view["summary"] == scenario(case.scenario)["agents"]["pm"][-1]["summary"]

    log = events(db_url, session_id)
    kinds = Counter(e["kind"] for e in log)
    assert kinds["question_surfaced"] == 1
    assert kinds["answer"] == 1
    assert kinds["answer_delivered"] == 1  # the asker ran again with the answer, once
    assert kinds["fallback"] == case.fallbacks
    answer_event = next(e for e in log if e["kind"] == "answer")
    assert (answer_event["response"], answer_event["source"]) == (case.answer, case.source)
    # Every scripted reply consumed exactly once: no reply recorded twice, none skipped.
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == case.replies
    pm_statuses = [
        e["reply"]["status"] for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"
    ]
    assert pm_statuses == [r["status"] for r in scenario(case.scenario)["agents"]["pm"]]
    finals = [e for e in log if e["kind"] == "status" and e["status"] == "completed"]
    assert len(finals) == 1
    assert session_row(db_url, session_id)["answers_used"] == (1 if case.source == "script" else 0)

    if case.killed_in == "answer":
        # The answer committed before the kill: a second answer is refused, nothing changes.
        before = dump_db(db_url)
        second = cli("resume", session_id, "--answer", "Daily", "--json", db=db_url)
        assert second.returncode == 2, describe(second)
        assert "not waiting" in second.stderr
        assert dump_db(db_url) == before


# -- 3b. kill -9 from outside, at no crash point ------------------------------------------


def long_scenario(path: Path, rounds: int = 3, tasks: int = 6) -> tuple[Path, list[str]]:
    """PM plans `rounds` rounds of `tasks` tasks; every developer reply has its own summary."""
    pm: list[dict[str, Any]] = [
        {
            "status": "PLANNED",
            "tasks": [{"title": f"round {r} task {t}"} for t in range(1, tasks + 1)],
        }
        for r in range(1, rounds + 1)
    ]
    pm.append({"status": "COMPLETE", "summary": "all rounds done"})
    summaries = [f"developer reply {n}" for n in range(rounds * tasks)]
    document = {
        "task": "A long scripted run to kill from outside",
        "agents": {"pm": pm, "developer": [{"status": "DONE", "summary": s} for s in summaries]},
        "settings": {"max_rounds": rounds + 1},
        "expect": {"status": "completed", "questions_surfaced": 0},
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path, summaries


def test_kill_9_from_outside_then_plain_resume_finishes(
    db_url: str,
    tmp_path: Path,
    store: Store,  # `store` migrates the file before we lock it
) -> None:
    # 16 tasks a round: 52 replies, so that the run cannot end in one gap between two polls
    # of a loaded machine (with 6 it once completed before the kill, in a full `make test`)
    script, summaries = long_scenario(tmp_path / "long.yaml", tasks=16)
    total_replies = len(summaries) + 4
    proc = forkserver.Popen(
        argv("run", "--script", str(script), "--json", db=db_url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    # Deterministic kill point: we poll while holding off every write to `events` (SQLite's
    # write lock, BEGIN IMMEDIATE; PostgreSQL: LOCK TABLE ... EXCLUSIVE). Once we see the run
    # mid-way we keep the lock, so the child is stuck at its next write and cannot finish
    # before the SIGKILL lands. Between two polls the child gets ~2 ms, far less than its
    # dozens of remaining writes (a whole scripted reply, agent call and store writes, takes
    # it a few ms).
    with write_lock(db_url) as lock:
        try:
            deadline = time.monotonic() + 60
            while True:
                lock.acquire()
                rows = lock.fetch("SELECT id, status FROM sessions")
                replies = lock.fetch("SELECT count(*) FROM events WHERE kind = 'agent_reply'")[0][0]
                if rows and replies >= 3:
                    break
                lock.release()
                assert proc.poll() is None, f"the run ended (exit {proc.returncode}) too soon"
                assert time.monotonic() < deadline, "the run never got going"
                time.sleep(0.002)  # a bounded poll; the lock is let go for the run to write
            ((session_id, status),) = rows
            assert status == "running"
            assert replies < total_replies
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=30) == KILLED
        finally:
            if proc.poll() is None:  # pragma: no cover - only if an assertion fired above
                proc.kill()
                proc.wait()

    left = session_row(db_url, session_id)
    assert left["status"] == "running"
    assert left["owner_pid"] == proc.pid

    finished = cli("resume", session_id, "--json", db=db_url)
    assert finished.returncode == 0, describe(finished)
    view = run_json(finished)
    assert view["status"] == "completed"
    assert view["summary"] == "all rounds done"
    assert view["questions_surfaced"] == 0

    log = events(db_url, session_id)
    consumed = [
        e["reply"].get("summary") for e in log if e["kind"] == "agent_reply" and e["agent"] != "pm"
    ]
    assert sorted(consumed) == sorted(summaries)  # every reply once: none lost, none twice
    assert [
        e["reply"]["status"] for e in log if e["kind"] == "agent_reply" and e["agent"] == "pm"
    ] == ["PLANNED", "PLANNED", "PLANNED", "COMPLETE"]
    assert any(e["kind"] == "status" and e.get("previous") == "running" for e in log)


# -- 3c. a kill after the work, before the release that records it -----------------------

# The engine checkpoints at interrupts only (durability="exit", and no checkpoint at the
# run's end: the release deletes the session's checkpoints in the same breath,
# runtime.checkpoints.not_at_the_end). So a kill after the last agent turn, before the
# release commits, leaves every turn of the resumed run in our tables while LangGraph's
# newest checkpoint is still the one at the question: the widest gap between the two
# sources of truth. The next `resume` re-runs the graph from that checkpoint and must
# replay every recorded turn, never call an agent twice.


def test_a_kill_after_the_run_before_its_release_then_resume_replays_every_turn(
    db_url: str,
) -> None:
    session_id = start_paused(db_url)["session_id"]
    checkpoints_at_question = checkpoint_count(db_url, session_id)
    assert checkpoints_at_question > 0
    killed = cli(
        "resume",
        session_id,
        "--answer",
        "Weekly",
        "--json",
        db=db_url,
        env=crash_env("before_finish"),
    )
    assert killed.returncode == KILLED, describe(killed)
    assert session_row(db_url, session_id)["status"] == "running"
    # every turn is in our tables; LangGraph's newest checkpoint is still the question's
    log = events(db_url, session_id)
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == THREE_AND_TWO
    assert checkpoint_count(db_url, session_id) == checkpoints_at_question

    finished = cli("resume", session_id, "--json", db=db_url)
    assert finished.returncode == 0, describe(finished)
    view = run_json(finished)
    assert view["status"] == "completed", view
    assert view["orchestrator_state"]["user_clarification_response"] == "Weekly"
    assert view["questions_surfaced"] == 1
    log = events(db_url, session_id)
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == THREE_AND_TWO
    kinds = Counter(e["kind"] for e in log)
    assert (kinds["answer"], kinds["answer_delivered"]) == (1, 1)
    # an ended session keeps no checkpoint: nothing reads it any more
    assert checkpoint_count(db_url, session_id) == 0


# A database an older version left: it wrote a checkpoint at the run's end, and was killed
# after that, before the release. The harness is the real CLI with that checkpoint written
# again (runtime.checkpoints.not_at_the_end made a pass-through).
END_CHECKPOINT_WRITTEN = """
import os, sys

sys.path.insert(0, os.environ["KILL_HARNESS_ROOT"])  # this checkout, as `python -m` from ROOT
from orchestrator.runtime import checkpoints

checkpoints.not_at_the_end = lambda saver, ended: saver
sys.argv[0] = "orchestrator"
from orchestrator.cli import main

main()
"""


def test_an_end_checkpoint_an_older_version_left_finishes_without_an_agent_call(
    db_url: str, tmp_path: Path
) -> None:
    session_id = start_paused(db_url)["session_id"]
    checkpoints_at_question = checkpoint_count(db_url, session_id)
    harness = tmp_path / "end_checkpoint_written.py"
    harness.write_text(END_CHECKPOINT_WRITTEN, encoding="utf-8")
    argv = [sys.executable, str(harness), "resume", session_id, "--answer", "Weekly"]
    killed = forkserver.run(
        [*argv, "--json", "--db", db_url],
        timeout=120,
        cwd=ROOT,
        env={**crash_env("before_finish"), "KILL_HARNESS_ROOT": str(ROOT)},
    )
    assert killed.returncode == KILLED, describe(killed)
    assert session_row(db_url, session_id)["status"] == "running"
    assert checkpoint_count(db_url, session_id) > checkpoints_at_question  # the end's

    finished = cli("resume", session_id, "--json", db=db_url)
    assert finished.returncode == 0, describe(finished)
    assert run_json(finished)["status"] == "completed"
    log = events(db_url, session_id)
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == THREE_AND_TWO
    assert Counter(e["kind"] for e in log)["answer"] == 1
    assert checkpoint_count(db_url, session_id) == 0


def checkpoint_count(db_url: str, session_id: str) -> int:
    sql = "SELECT count(*) FROM checkpoints WHERE thread_id = ?"
    return int(query(db_url, sql, session_id)[0][0])


# -- 4. who may drive a session: dead owners are taken over, live ones are not -------------


def test_session_left_running_by_killed_process_is_taken_over(db_url: str) -> None:
    proc = forkserver.Popen(
        argv("run", "--script", str(ANSWERED), "--json", db=db_url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=crash_env("reply_recorded:developer-1#1"),
    )
    proc.communicate(timeout=120)
    assert proc.returncode == KILLED
    session_id = newest_session_id(db_url)

    left = session_row(db_url, session_id)
    assert left["status"] == "running"
    assert (left["owner_pid"], left["owner_host"]) == (proc.pid, socket.gethostname())
    # The lease still runs for ~30 s: only "same host, pid gone" can free the session now.
    assert left["lease_expires_at"] > time.time() + 5

    finished = cli("resume", session_id, "--json", db=db_url)
    assert finished.returncode == 0, describe(finished)
    assert run_json(finished)["status"] == "completed"
    takeovers = [
        e
        for e in events(db_url, session_id)
        if e["kind"] == "status" and e.get("previous") == "running"
    ]
    assert len(takeovers) == 1
    assert "gone" in takeovers[0]["note"]
    row = session_row(db_url, session_id)
    assert (row["status"], row["owner"], row["owner_pid"]) == ("completed", None, None)


def test_session_held_by_live_process_is_not_taken(db_url: str, store: Store) -> None:
    session_id = start_paused(db_url)["session_id"]
    holder = Owner(pid=os.getpid())  # this test process: alive, same host
    claim = store.claim(session_id, holder)
    assert session_row(db_url, session_id)["status"] == "running"
    held = dump_db(db_url)

    for args in (["--answer", "Weekly"], []):
        refused = cli("resume", session_id, *args, "--json", db=db_url)
        assert refused.returncode == 2, describe(refused)
        assert "being resumed elsewhere" in refused.stderr, refused.stderr
        assert json.loads(refused.stdout)["exit_code"] == 2
        assert dump_db(db_url) == held, f"resume {args} changed a session it does not hold"

    # Once the holder lets go, the same command goes through: the claim was the reason.
    store.release(claim, "paused")
    answered = cli("resume", session_id, "--answer", "Weekly", "--json", db=db_url)
    assert answered.returncode == 0, describe(answered)
    view = run_json(answered)
    assert view["status"] == "completed"
    assert view["orchestrator_state"]["user_clarification_response"] == "Weekly"


# -- 5. exactly one driver: fenced claims, identities, first use, racing plain resumes ------

# The real CLI with slow scripted agents: every agent call is logged (pid, agent, call,
# time) to $HARNESS_LOG, and calls of agents whose name starts with $HARNESS_SLOW wait
# until the file $HARNESS_HOLD exists (a test releases them when it is done).
# $HARNESS_SNAPSHOT_HOLD holds a plain resume's first decision read open until that file
# exists (the marker file $HARNESS_MARK says when it is in it).
SLOW_AGENTS = """
import json, os, sys, time

sys.path.insert(0, os.environ["HARNESS_ROOT"])
from orchestrator.agents.scripted import ScriptedBackend

_respond = ScriptedBackend.respond


def respond(self, request):
    with open(os.environ["HARNESS_LOG"], "a", encoding="utf-8") as log:
        line = {"pid": os.getpid(), "agent": request.agent, "call": request.call,
                "time": time.time()}
        log.write(json.dumps(line) + "\\n")
    if request.agent.startswith(os.environ.get("HARNESS_SLOW", "-")):
        _released(os.environ["HARNESS_HOLD"])
    return _respond(self, request)


def _released(hold):
    until = time.monotonic() + 120  # a bound for a test that hangs, never a margin
    while not os.path.exists(hold) and time.monotonic() < until:
        time.sleep(0.02)


ScriptedBackend.respond = respond

if os.environ.get("HARNESS_SNAPSHOT_HOLD"):
    from orchestrator.store import views

    _snapshot = views.snapshot
    _held = []

    def snapshot(conn, session_id):
        snap = _snapshot(conn, session_id)
        if not _held:
            _held.append(1)
            open(os.environ["HARNESS_MARK"], "w").close()
            _released(os.environ["HARNESS_SNAPSHOT_HOLD"])
        return snap

    views.snapshot = snapshot

sys.argv[0] = "orchestrator"
from orchestrator.cli import main

main()
"""

TWO_TASKS = {
    "task": "Two slow developers",
    "agents": {
        "pm": [
            {"status": "PLANNED", "tasks": [{"title": "one"}, {"title": "two"}]},
            {"status": "COMPLETE", "summary": "both done"},
        ],
        "developer": [
            {"status": "DONE", "summary": "one done"},
            {"status": "DONE", "summary": "two done"},
        ],
    },
}


@dataclass
class Harness:
    path: Path
    log: Path
    script: Path
    db_url: str

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "HARNESS_ROOT": str(ROOT),
            "HARNESS_LOG": str(self.log),
            "ORCHESTRATOR_LEASE_SECONDS": "2",
            **extra,
        }

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, str(self.path), *args, "--json", "--db", self.db_url]

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def wait_for_call(self, agent: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
        def called() -> bool:
            assert proc.poll() is None, f"exit {proc.returncode}: {proc.communicate()}"
            return any(c["agent"] == agent for c in self.calls())

        until(called, f"{agent} to be called", timeout=timeout)


@pytest.fixture
def harness(tmp_path: Path, db_url: str) -> Harness:
    return make_harness(tmp_path, db_url)


def make_harness(tmp_path: Path, db_url: str) -> Harness:
    path = tmp_path / "slow_agents.py"
    path.write_text(SLOW_AGENTS, encoding="utf-8")
    script = tmp_path / "two-tasks.yaml"
    script.write_text(yaml.safe_dump(TWO_TASKS), encoding="utf-8")
    return Harness(path, tmp_path / "calls.jsonl", script, db_url)


def checkpoint_forks(db_url: str, session_id: str) -> list[tuple[Any, ...]]:
    """Checkpoints of the session's main thread that have more than one child."""
    return query(
        db_url,
        "SELECT parent_checkpoint_id, count(*) FROM checkpoints WHERE thread_id = ? "
        "AND checkpoint_ns = '' AND parent_checkpoint_id IS NOT NULL "
        "GROUP BY parent_checkpoint_id HAVING count(*) > 1",
        session_id,
    )


def _unshare_works() -> bool:
    try:
        probe = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "true"],
            capture_output=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def test_live_owner_in_another_pid_namespace_is_not_taken_over(
    harness: Harness, db_url: str, tmp_path: Path
) -> None:
    """An owner whose pid cannot be checked from here (another PID namespace) is alive for as
    long as its lease is renewed: a resume after its first lease ran out is still refused.
    Its slow call is held until the test is done, so no machine is too slow for the check."""
    if not _unshare_works():
        pytest.skip("unshare --pid is not available here (needs root or user namespaces)")
    hold = tmp_path / "release-the-owner"
    owner = forkserver.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc",
         *harness.argv("run", "--script", str(harness.script))],
        env=harness.env(
            HARNESS_SLOW="developer-1", HARNESS_HOLD=str(hold), ORCHESTRATOR_LEASE_SECONDS="2"
        ),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT,
    )  # fmt: skip
    try:
        harness.wait_for_call("developer-1", owner)
        session_id = only_session_id(db_url)
        row = session_row(db_url, session_id)
        assert row["owner_pidns"] != os.readlink("/proc/self/ns/pid")  # really elsewhere
        first_lease = float(row["lease_expires_at"])
        _refused_as_driven_elsewhere(session_id, db_url, harness)

        # The first lease runs out; only the owner's heartbeats keep it from a takeover.
        # (Leases keep real time, not the project's clock: the first one must run out.)
        def renewed() -> bool:
            assert owner.poll() is None, f"exit {owner.returncode}: {owner.communicate()}"
            return time.time() > first_lease + 0.1 and (
                float(session_row(db_url, session_id)["lease_expires_at"]) > first_lease
            )

        until(renewed, "the owner to renew its lease")
        _refused_as_driven_elsewhere(session_id, db_url, harness)
        assert owner.poll() is None  # held: both refusals came while it was running
    except BaseException:
        owner.kill()  # not left running after a failure
        raise
    finally:
        hold.touch()
    stdout, stderr = owner.communicate(timeout=120)
    assert owner.returncode == 0, f"exit {owner.returncode}\n{stdout}\n{stderr}"
    assert json.loads(stdout)["status"] == "completed"
    assert not [e for e in events(db_url, session_id) if e.get("previous") == "running"]


def _refused_as_driven_elsewhere(session_id: str, db_url: str, harness: Harness) -> None:
    refused = cli("resume", session_id, "--json", db=db_url, env=harness.env())
    assert refused.returncode == 2, describe(refused)
    assert "being resumed elsewhere" in refused.stderr
    assert "takeover is possible in" in refused.stderr


def test_eight_concurrent_first_uses_of_a_fresh_database(empty_db_url: str) -> None:
    """Migrations (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL) and LangGraph's
    checkpoint setup (once per database per process, serialised) do not race."""
    db_url = empty_db_url
    procs = [
        forkserver.Popen(
            argv("run", "--script", str(ANSWERED), "--json", db=db_url),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )  # fmt: skip
        for _ in range(8)
    ]
    results = [(p.communicate(timeout=180), p.returncode) for p in procs]
    for (stdout, stderr), code in results:
        assert code == 0, f"exit {code}\n{stdout}\n{stderr}"
        assert json.loads(stdout)["status"] == "completed"
    assert len(query(db_url, "SELECT id FROM sessions WHERE status = 'completed'")) == 8
    for (session_id,) in query(db_url, "SELECT id FROM sessions"):
        assert checkpoint_forks(db_url, session_id) == []


def test_plain_resume_racing_an_answer_exits_2_or_3_never_1(
    harness: Harness, db_url: str, tmp_path: Path
) -> None:
    session_id = start_paused(db_url)["session_id"]
    mark, hold = tmp_path / "in-snapshot", tmp_path / "answered"
    plain = forkserver.Popen(
        harness.argv("resume", session_id),
        env=harness.env(HARNESS_SNAPSHOT_HOLD=str(hold), HARNESS_MARK=str(mark)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT,
    )  # fmt: skip
    try:
        # the plain resume has read the session, and waits in its read
        until(lambda: mark.exists() or plain.poll() is not None, "the plain resume's read")
        assert plain.poll() is None, plain.communicate()
        answered = cli("resume", session_id, "--answer", "Weekly", "--json", db=db_url)
        assert answered.returncode == 0, describe(answered)
    finally:
        hold.touch()  # the answer is in: the plain resume goes on from what it read
    stdout, stderr = plain.communicate(timeout=120)
    assert plain.returncode in (2, 3), f"exit {plain.returncode}\n{stdout}\n{stderr}"
    assert "Traceback" not in stderr
    document = json.loads(stdout)
    if plain.returncode == 2:
        assert document["exit_code"] == 2 and "answered by another command" in stderr
    else:
        assert document["status"] == "paused"
    assert checkpoint_forks(db_url, session_id) == []
    assert session_row(db_url, session_id)["status"] == "completed"


def test_plain_resumes_racing_an_answer_never_exit_1(db_url: str) -> None:
    """One `resume --answer` against three plain `resume`s, started together: the answer
    wins (0); each plain one still saw the question (3) or found it answered or being run
    on elsewhere (2). Never 1, never a traceback."""
    for _ in range(2):
        paused = cli("run", "--script", str(PAUSE), "--json", db=db_url)
        assert paused.returncode == 3, describe(paused)
        session_id = run_json(paused)["session_id"]
        commands = [["--answer", "Weekly"], [], [], []]
        procs = [
            forkserver.Popen(
                argv("resume", session_id, *extra, "--json", db=db_url),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )  # fmt: skip
            for extra in commands
        ]
        results = [(*p.communicate(timeout=180), p.returncode) for p in procs]
        answer_out, answer_err, answer_code = results[0]
        assert answer_code == 0, f"{answer_out}\n{answer_err}"
        for stdout, stderr, code in results[1:]:
            assert code in (2, 3), f"exit {code}\n{stdout}\n{stderr}"
            assert "Traceback" not in stderr
            document = json.loads(stdout)
            assert (document.get("status") == "paused") if code == 3 else document["exit_code"] == 2
        final = run_json(cli("status", session_id, "--json", db=db_url))
        assert final["status"] == "completed" and final["questions_surfaced"] == 1


def test_frozen_owner_taken_over_calls_no_agent_and_writes_nothing_after(
    harness: Harness, db_url: str, tmp_path: Path
) -> None:
    hold = tmp_path / "release-the-owner"  # developer-1's call waits for it: frozen inside
    first = forkserver.Popen(
        harness.argv("run", "--script", str(harness.script)),
        env=harness.env(
            HARNESS_SLOW="developer-1", HARNESS_HOLD=str(hold), ORCHESTRATOR_LEASE_SECONDS="1"
        ),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT,
    )  # fmt: skip
    try:
        harness.wait_for_call("developer-1", first)
        session_id = only_session_id(db_url)
        # Frozen between two of its writes (a heartbeat's transaction held open by a
        # stopped process would hold the takeover up until its statement timeout).
        for _ in range(100):
            os.kill(first.pid, signal.SIGSTOP)
            if not writing_now(db_url):
                break
            os.kill(first.pid, signal.SIGCONT)
            time.sleep(0.01)  # the point: let it finish that write before freezing it again
        else:  # pragma: no cover - a heartbeat takes milliseconds of every third of a second
            pytest.fail("the owner was always inside a write")
        # Past the lease the frozen process last wrote: it renews nothing while stopped.
        lease = float(session_row(db_url, session_id)["lease_expires_at"])
        while time.time() <= lease + 0.1:
            time.sleep(0.05)  # the point: a lease keeps real time, and must run out here
        taken = forkserver.run(
            harness.argv("resume", session_id),
            env=harness.env(ORCHESTRATOR_LEASE_SECONDS="1"), timeout=120, cwd=ROOT,
        )  # fmt: skip
        assert taken.returncode == 0, describe(taken)
        assert run_json(taken)["status"] == "completed"
        after_takeover = dump_db(db_url)
    except BaseException:
        first.kill()  # not left running after a failure
        raise
    finally:
        hold.touch()
        os.kill(first.pid, signal.SIGCONT)
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 2, f"exit {first.returncode}\n{stdout}\n{stderr}"
    assert "no longer driven by this process" in stderr
    assert json.loads(stdout)["exit_code"] == 2
    # Nothing the woken process did reached the database: no event, no checkpoint.
    assert dump_db(db_url) == after_takeover
    # It made no agent call after the takeover: only the two it had started before.
    by_first = [(c["agent"], c["call"]) for c in harness.calls() if c["pid"] == first.pid]
    assert by_first == [("pm", 1), ("developer-1", 1)]
    log = run_json(cli("log", session_id, "--json", db=db_url))
    assert Counter(e["agent"] for e in log if e["kind"] == "agent_reply") == {
        "pm": 2, "developer-1": 1, "developer-2": 1,
    }  # fmt: skip
    assert [e.get("note") for e in log if e.get("previous") == "running"] == [
        "took over from a process that is gone"
    ]
    assert checkpoint_forks(db_url, session_id) == []


def _stopped(pid: int) -> bool:
    """Has the process stopped itself (SIGSTOP at an ORCHESTRATOR_STOP_AT point)?"""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_while_an_agent_works_names_the_session_its_state_and_how_to_go_on(
    db_url: str, as_json: bool
) -> None:
    """Ctrl+C (SIGINT) lands while the PM's second turn is in hand (the process stopped
    itself there, so no timing is involved): exit 130, the session's id (printed when it
    started), its state and `orchestrator resume ID`; `status` says why it is stalled, and
    a plain resume finishes it without calling the PM's first turn again (issue 44, item 3)."""
    proc = forkserver.Popen(
        argv("run", "--script", str(ANSWERED), *(["--json"] if as_json else []), db=db_url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "ORCHESTRATOR_STOP_AT": "reply_received:pm#2"},
        # A suite started in the background runs with SIGINT ignored, and a child inherits
        # that: Python then installs no KeyboardInterrupt handler at all.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # waits on the process's own stop, never a margin
        until(lambda: _stopped(proc.pid) or proc.poll() is not None, "the stop point")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # pragma: no cover - only if an assertion fired above
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    ((session_id,),) = query(db_url, "SELECT id FROM sessions")
    assert f"session {session_id} started: " in err
    assert f"session {session_id} is running, stalled: no process drives it now" in err
    assert f"Go on with: orchestrator resume {session_id} --db " in err
    if as_json:
        document = json.loads(out)
        assert document["exit_code"] == 130 and document["session_id"] == session_id
    status = json.loads(cli("status", session_id, "--json", db=db_url).stdout)
    assert status["status"] == "running" and status["stalled"]
    assert status["last_error"].startswith("interrupted (Ctrl+C)")
    assert "interrupted (Ctrl+C)" in cli("status", session_id, db=db_url).stdout
    done = cli("resume", session_id, db=db_url)
    assert done.returncode == 0, done.stderr
    calls = [e["agent"] for e in events(db_url, session_id) if e["kind"] == "agent_reply"]
    assert calls.count("pm") == 3  # NEEDS_CLARIFICATION, PLANNED (run again), COMPLETE
