"""The orchestrator merges (contract section 9): task branches into the session branch one
at a time, in task order; conflicts and red checks go back to the developer; file scopes
that overlap run one after another; a kill mid-merge; a race between two mergers; the PM
reviews what was merged; `orchestrator clean`."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, cli, invoke
from dbcheck import query
from repos import make_repo, scenario

from orchestrator import Sessions
from orchestrator.domain.replies import parse_reply
from orchestrator.errors import RepositoryElsewhere
from orchestrator.runtime.agent import AgentRequest, AgentTurn
from orchestrator.runtime.developers import MergeRaced, Workroom
from orchestrator.runtime.worker_loop import run_worker
from orchestrator.runtime.worktrees import Workbench, discover, git

pytestmark = pytest.mark.backends()

MERGES = EXAMPLES / "merges.yaml"
COMPLETE = {"status": "COMPLETE", "summary": "all merged"}


def write(path: str, content: str, summary: str = "done") -> dict[str, Any]:
    return {
        "tools": [{"write_file": {"path": path, "content": content}}],
        "status": "DONE",
        "summary": summary,
    }


def merged_tasks(repo: Path, session_id: str) -> list[str]:
    """The session branch's merges, oldest first (their messages)."""
    out = git("log", "--merges", "--reverse", "--format=%s", f"orchestrator/{session_id}", cwd=repo)
    return out.splitlines()


def merge_events(sessions: Sessions, session_id: str) -> list[tuple[int, str]]:
    return [(e["task"], e["outcome"]) for e in sessions.log(session_id) if e["kind"] == "merge"]


# -- the example ------------------------------------------------------------------------


def test_the_merge_example_leaves_every_tasks_change_on_the_session_branch(db_url: str) -> None:
    done = cli("run", "--script", str(MERGES), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    sid, bench = view["session_id"], view["workbench"]
    repo = Path(bench["repository"])
    assert view["expect"]["held"], view["expect"]
    assert merged_tasks(repo, sid) == [
        "Merge task 1: French greeting",
        "Merge task 2: A farewell",
        "Merge task 3: German greeting",
    ]
    greetings = git("show", f"orchestrator/{sid}:greetings.py", cwd=repo)
    assert '"fr": "Bonjour"' in greetings and '"de": "Hallo"' in greetings
    assert "farewell" in git("ls-tree", "--name-only", f"orchestrator/{sid}", cwd=repo)
    # The conflict went back to developer-3 with the file, on top of the merged work.
    log = json.loads(cli("log", sid, "--json", db=db_url).stdout)
    conflict = next(e for e in log if e["kind"] == "merge" and e["outcome"] == "conflict")
    assert conflict["task"] == 3 and conflict["files"] == ["greetings.py"]
    assert bench["see"].endswith(f"diff {bench['base'][:12]}..orchestrator/{sid} --stat")
    assert bench["take"].endswith(f"merge orchestrator/{sid}")
    assert "take it: git -C" in cli("status", sid, db=db_url).stdout


# -- merges, in task order ----------------------------------------------------------------


def test_parallel_tasks_merge_cleanly_in_task_order(db_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    body = {
        "task": "four files",
        "agents": {
            "pm": [
                {"status": "PLANNED", "tasks": [{"title": f"file {n}"} for n in range(1, 5)]},
                COMPLETE,
            ],
            **{f"developer-{n}": [write(f"f{n}.txt", str(n))] for n in range(1, 5)},
        },
    }
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(scenario(tmp_path, body), workdir=repo)
        assert merge_events(sessions, view["session_id"]) == [(n, "clean") for n in range(1, 5)]
    sid = view["session_id"]
    assert merged_tasks(repo, sid) == [f"Merge task {n}: file {n}" for n in range(1, 5)]
    names = git("ls-tree", "--name-only", f"orchestrator/{sid}", cwd=repo).split()
    assert names == ["README.md", "f1.txt", "f2.txt", "f3.txt", "f4.txt"]
    assert all(t["merged"] and t["merge"]["outcome"] == "clean" for t in view["tasks"])


def test_checks_that_pass_on_each_branch_but_fail_merged_go_back(
    db_url: str, tmp_path: Path
) -> None:
    """Each branch adds one line to the notes; the check allows one line in all."""
    repo = make_repo(tmp_path / "repo")
    body = {
        "task": "notes",
        "checks": ["test $(cat notes/* 2>/dev/null | wc -l) -le 1"],
        "agents": {
            "pm": [{"status": "PLANNED", "tasks": [{"title": "a"}, {"title": "b"}]}, COMPLETE],
            "developer-1": [write("notes/a", "one\n")],
            "developer-2": [write("notes/b", "two\n"), write("notes/b", "")],
        },
    }
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(scenario(tmp_path, body), workdir=repo)
        sid = view["session_id"]
        assert merge_events(sessions, sid) == [(1, "clean"), (2, "checks_failed"), (2, "clean")]
        checks = [e for e in sessions.log(sid) if e["kind"] == "check"]
    # Each branch alone passed its checks; only the merged tree failed them.
    assert all(c["passed"] for c in checks)
    assert view["status"] == "completed"
    assert [t["status"] for t in view["tasks"]] == ["done", "done"]


class Conflicting:
    """Two tasks that rewrite the same line of a.txt: task 2's first merge conflicts."""

    def __init__(self) -> None:
        self.seen: list[AgentRequest] = []

    def respond(self, request: AgentRequest) -> AgentTurn:
        self.seen.append(request)
        if request.agent == "pm":
            reply = (
                {"status": "PLANNED", "tasks": [{"title": "one"}, {"title": "two"}]}
                if request.call == 1
                else COMPLETE
            )
            return AgentTurn(parse_reply("pm", reply))
        (request.desk.root / "a.txt").write_text(f"{request.agent} {request.call}\n")
        return AgentTurn(parse_reply(request.agent, {"status": "DONE", "summary": "s"}))

    def describe(self) -> dict[str, Any]:
        return {"kind": "script", "agents": {}}


def test_a_conflict_goes_back_with_its_files_and_the_second_attempt_merges(
    db_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "base\n"})
    backend = Conflicting()
    with Sessions(db_url) as sessions:
        view = sessions.start("t", backend=backend, workdir=repo)
        assert merge_events(sessions, view["session_id"]) == [
            (1, "clean"),
            (2, "conflict"),
            (2, "clean"),
        ]
    told = [r.instruction for r in backend.seen if r.agent == "developer-2" and r.instruction]
    assert len(told) == 1 and "conflicts with work merged before it, in a.txt" in told[0]
    assert "What you changed before" in told[0] and "+developer-2 1" in told[0]
    sid = view["session_id"]
    # The second attempt started from the session branch's head: task 1's work was there.
    assert git("log", "--format=%s", f"orchestrator/{sid}/task-2", cwd=repo).splitlines()[1] == (
        "Merge task 1: one"
    )
    assert git("show", f"orchestrator/{sid}:a.txt", cwd=repo) == "developer-2 2"
    assert view["status"] == "completed"


def test_a_task_that_does_not_merge_is_blocked_and_the_pm_sees_why(
    db_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "base\n"})
    backend = Conflicting()
    with Sessions(db_url) as sessions:
        view = sessions.start(
            "t", backend=backend, workdir=repo, settings={"max_check_attempts": 1}
        )
        assert merge_events(sessions, view["session_id"]) == [(1, "clean"), (2, "conflict")]
    task2 = view["tasks"][1]
    assert task2["status"] == "blocked" and "blocked after 1 attempts" in task2["reason"]
    assert "in a.txt" in task2["reason"]
    review = [r for r in backend.seen if r.agent == "pm"][-1]
    board = {t["number"]: t for t in review.tasks}
    assert board[1]["merge"]["outcome"] == "clean" and board[2]["status"] == "blocked"
    from orchestrator.agents.prompts import turn_message

    text = turn_message(review)
    assert "merged into the session branch" in text and 'not merged: conflict in ["a.txt"]' in text


# -- file scopes ------------------------------------------------------------------------


def test_overlapping_file_scopes_run_one_after_another(db_url: str, tmp_path: Path) -> None:
    """Tasks 1 and 3 overlap (shared.txt), task 2 does not: 1 and 2 run at once (a barrier
    only both can pass), 3 only once 1 is merged, from the merged work."""
    repo = make_repo(tmp_path / "repo")
    together = threading.Barrier(2, timeout=30)
    spans: dict[str, tuple[float, float]] = {}

    class Timed:
        sequential = False

        def respond(self, request: AgentRequest) -> AgentTurn:
            if request.agent == "pm":
                reply = (
                    {
                        "status": "PLANNED",
                        "tasks": [
                            {"title": "one", "files": ["shared.txt"]},
                            {"title": "two", "files": ["docs/*.md"]},
                            {"title": "three", "files": ["shared.txt", "x.txt"]},
                        ],
                    }
                    if request.call == 1
                    else COMPLETE
                )
                return AgentTurn(parse_reply("pm", reply))
            started = time.monotonic()
            root = request.desk.root
            if request.agent in ("developer-1", "developer-2"):
                together.wait()  # fails unless the two run at the same time
            if request.agent == "developer-3":
                assert (root / "shared.txt").read_text() == "one\n"  # task 1's, merged
                (root / "shared.txt").write_text("one\nthree\n")
            elif request.agent == "developer-1":
                (root / "shared.txt").write_text("one\n")
            else:
                (root / "docs").mkdir(exist_ok=True)
                (root / "docs" / "two.md").write_text("two\n")
            spans[request.agent] = (started, time.monotonic())
            return AgentTurn(parse_reply(request.agent, {"status": "DONE", "summary": "s"}))

        def describe(self) -> dict[str, Any]:
            return {"kind": "script", "agents": {}}

    with Sessions(db_url) as sessions:
        view = sessions.start("t", backend=Timed(), workdir=repo)
        sid = view["session_id"]
        log = sessions.log(sid)
        assert merge_events(sessions, sid) == [(1, "clean"), (2, "clean"), (3, "clean")]
    assert view["status"] == "completed", view["error"]
    assert spans["developer-1"][1] <= spans["developer-3"][0]
    # By the log's own times: task 3's turn came after task 1's merge.
    merged_1 = next(e for e in log if e["kind"] == "merge" and e["task"] == 1)
    reply_3 = next(e for e in log if e["kind"] == "agent_reply" and e["agent"] == "developer-3")
    assert merged_1["time"] <= reply_3["time"]
    assert git("show", f"orchestrator/{sid}:shared.txt", cwd=repo) == "one\nthree"


# -- a kill mid-merge, and a race ---------------------------------------------------------


@pytest.mark.parametrize("point", ["merge_committed:2", "merge_advanced:2", "merge_recorded:2"])
def test_a_kill_mid_merge_advances_the_branch_exactly_once(
    db_url: str, tmp_path: Path, point: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    body = {
        "task": "two files",
        "agents": {
            "pm": [{"status": "PLANNED", "tasks": [{"title": "a"}, {"title": "b"}]}, COMPLETE],
            "developer-1": [write("a.txt", "a")],
            "developer-2": [write("b.txt", "b")],
        },
    }
    path = scenario(tmp_path, body)
    killed = cli(
        "run",
        "--script",
        str(path),
        "--workdir",
        str(repo),
        db=db_url,
        env={**os.environ, "ORCHESTRATOR_CRASH_AT": point},
    )
    assert killed.returncode == -9, killed.stderr
    ((sid,),) = query(db_url, "SELECT id FROM sessions")
    resumed = cli("resume", sid, "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert merged_tasks(repo, sid) == ["Merge task 1: a", "Merge task 2: b"]
    first_parents = git("rev-list", "--first-parent", f"orchestrator/{sid}", cwd=repo).split()
    assert len(first_parents) == 3  # the base and one merge a task
    events = json.loads(cli("log", sid, "--json", db=db_url).stdout)
    assert [(e["task"], e["outcome"]) for e in events if e["kind"] == "merge"] == [
        (1, "clean"),
        (2, "clean"),
    ]


def test_two_mergers_of_one_session_one_merges_the_other_refuses(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    found = discover(repo)
    assert found is not None
    bench = Workbench.create("race", found, tmp_path / "wt")
    room = Workroom.of("race", {"workbench": bench.describe(), "sandbox": "none"})
    assert room is not None
    tips = {}
    for n in (1, 2):
        (bench.prepare(n, found.head) / f"{n}.txt").write_text(str(n))
        tips[n] = bench.commit(n, f"task {n}")
    results: dict[int, Any] = {}

    def merge(n: int) -> None:
        try:
            results[n] = room.merge("race", n, f"t{n}", found.head, tips[n])["outcome"]
        except MergeRaced as exc:
            results[n] = exc

    threads = [threading.Thread(target=merge, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes = sorted(
        str(type(r).__name__ if isinstance(r, BaseException) else r) for r in results.values()
    )
    assert outcomes == ["MergeRaced", "clean"]
    # The branch holds exactly one merge, and the compare-and-swap refuses a stale move.
    head = bench.head(bench.session_branch)
    assert head is not None and len(bench.parents(head)) == 2
    assert not bench.advance(bench.session_branch, found.head, found.head)


# -- the user's repository, and clean ------------------------------------------------------


def test_merging_never_touches_the_users_branch_index_or_tree(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n"})
    decoy = make_repo(tmp_path / "decoy")
    (repo / "a.txt").write_text("mine, not committed\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True)
    (repo / "b.txt").write_text("also mine\n")
    before = (
        git("symbolic-ref", "HEAD", cwd=repo),
        git("rev-parse", "HEAD", cwd=repo),
        git("status", "--porcelain", cwd=repo),
        (repo / ".git" / "index").read_bytes(),
        (repo / "a.txt").read_text(),
        (repo / "b.txt").read_text(),
    )
    body = {
        "task": "t",
        "agents": {
            "pm": [{"status": "PLANNED", "tasks": [{"title": "a"}, {"title": "b"}]}, COMPLETE],
            "developer-1": [write("a.txt", "theirs\n")],
            "developer-2": [write("c.txt", "c\n")],
        },
    }
    # A GIT_DIR in the environment (a hook, an editor's shell) never points our git elsewhere.
    monkeypatch.setenv("GIT_DIR", str(decoy / ".git"))
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(scenario(tmp_path, body), workdir=repo)
    monkeypatch.delenv("GIT_DIR")
    assert view["status"] == "completed"
    assert "orchestrator" not in git("for-each-ref", cwd=decoy)
    after = (
        git("symbolic-ref", "HEAD", cwd=repo),
        git("rev-parse", "HEAD", cwd=repo),
        git("status", "--porcelain", cwd=repo),
        (repo / ".git" / "index").read_bytes(),
        (repo / "a.txt").read_text(),
        (repo / "b.txt").read_text(),
    )
    assert after == before


def test_clean_removes_worktrees_and_with_branches_the_branches(
    db_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    body = {
        "task": "t",
        "agents": {
            "pm": [
                {"status": "PLANNED", "tasks": [{"title": "a"}]},
                {"status": "PLANNED", "tasks": [{"title": "b"}]},
            ],
            "developer": [
                write("a.txt", "a"),
                {"status": "NEEDS_CLARIFICATION", "question": "Which?"},
            ],
        },
    }
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(scenario(tmp_path, body), workdir=repo)
    sid = view["session_id"]
    assert view["status"] == "paused"
    worktree = Path(view["workbench"]["tasks"][0]["worktree"])
    assert worktree.is_dir()
    refused = invoke("clean", sid, db=db_url)
    assert refused.returncode == 2 and "orchestrator cancel" in refused.stderr
    assert worktree.is_dir()
    assert invoke("cancel", sid, db=db_url).returncode == 0
    kept = invoke("clean", sid, "--json", db=db_url)
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["worktrees_removed"] == [str(worktree)]
    assert not worktree.exists()
    assert f"refs/orchestrator/{sid}/task-1" in git("for-each-ref", cwd=repo)  # kept
    gone = invoke("clean", sid, "--branches", "--json", db=db_url)
    deleted = json.loads(gone.stdout)["branches_deleted"]
    assert f"orchestrator/{sid}" in deleted and f"orchestrator/{sid}/task-1" in deleted
    assert f"orchestrator/{sid}" not in git("for-each-ref", "--format=%(refname)", cwd=repo)


def test_a_session_whose_repository_is_not_here_is_left_alone(db_url: str, tmp_path: Path) -> None:
    """As a worker on another machine finds it: `resume` changes nothing but says which
    host and path the session needs, and the session's document says it too."""
    repo = make_repo(tmp_path / "repo")
    body = {
        "task": "t",
        "agents": {
            "pm": [{"status": "PLANNED", "tasks": [{"title": "a"}]}, COMPLETE],
            "developer": [
                {"status": "NEEDS_CLARIFICATION", "question": "Which one?"},
                write("a.txt", "a"),
            ],
        },
    }
    with Sessions(db_url) as sessions:
        sid = sessions.start_scenario(scenario(tmp_path, body), workdir=repo)["session_id"]
    repo.rename(tmp_path / "moved")  # the repository is no longer where the session says
    done = invoke("resume", sid, "--answer", "this one", db=db_url)
    assert done.returncode == 2
    assert f"{repo.resolve()}" in done.stderr and "is not on this machine" in done.stderr
    assert "--no-run" in done.stderr
    view = json.loads(invoke("status", sid, "--json", db=db_url).stdout)
    assert view["status"] == "paused" and view["pending_question"] is not None  # unchanged
    assert view["workbench"]["repository"] == str(repo.resolve())
    # A driver here (a worker, `resume` of an answered session) leaves it alone, and
    # its document says why.
    assert invoke("resume", sid, "--answer", "this one", "--no-run", db=db_url).returncode == 0
    with Sessions(db_url) as sessions, pytest.raises(RepositoryElsewhere):
        sessions.run_on(sid)
    stats = run_worker(db_url, 1, idle_exit=0.5, poll=0.05)
    assert stats.claimed == 1 and stats.ended == {}  # a worker took it, left it alone
    view = json.loads(invoke("status", sid, "--json", db=db_url).stdout)
    assert "is not on this machine" in (view["last_error"] or "") and view["stalled"]
    (tmp_path / "moved").rename(repo)  # back where it was: it runs on
    with Sessions(db_url) as sessions:
        assert sessions.run_on(sid)["status"] == "completed"
