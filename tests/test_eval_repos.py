"""Eval cases with a repository (examples/eval-repos): a fixture copied into a git
repository per session, developers in worktrees, and checks that decide the outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Sessions
from orchestrator.evals.cases import load_cases, parse_cases
from orchestrator.evals.runner import configs_for, run_eval
from tests.conftest import invoke

ROOT = Path(__file__).resolve().parent.parent
REPOS = ROOT / "examples" / "eval-repos"
POLICIES = ("eval:never-ask", "eval:always-ask", "eval:oracle")


def _by_case(report: Any, n: int) -> dict[str, Any]:
    return {c["case"]: c for c in report.configs[n].to_json()["cases"]}


def test_the_checks_tell_the_reference_policies_apart(db_url: str) -> None:
    """Only the answer makes the checks pass: the oracle asks and does the work; never-ask
    and always-ask guess, their checks fail twice and the task is BLOCKED, so their
    outcome is 0 on every case with a blocker and 1 on the control."""
    cases = load_cases([REPOS])
    assert len(cases) >= 4 and all(c.repo and c.checks for c in cases)
    assert sum(c.is_control for c in cases) >= 1
    report = run_eval(cases, configs_for(POLICIES), jobs=2, db=db_url)
    never, always, oracle = (part.total for part in report.configs)
    share = round(sum(c.is_control for c in cases) / len(cases), 4)
    assert never["outcome"] == always["outcome"] == share
    assert oracle["outcome"] == 1.0 and oracle["ask_f1"] == 1.0
    assert always["over_ask_rate"] == 1.0 and oracle["over_ask_rate"] == 0.0
    for case, result in _by_case(report, 0).items():
        if case == "repo-control-slugify":
            assert result["outcome"] == 1.0 and result["undone_tasks"] == []
            continue
        assert result["status"] == "completed"  # the PM completes: the check says no
        assert result["undone_tasks"] and result["undone_tasks"][0].endswith(": blocked")
    assert all(r["undone_tasks"] == [] for r in _by_case(report, 2).values())


def test_the_hidden_check_gives_the_answer_away_neither_in_its_text_nor_its_output(
    db_url: str,
) -> None:
    (case,) = [c for c in load_cases([REPOS]) if c.name == "repo-audit-retention"]
    report = run_eval([case], configs_for(["eval:never-ask"]), db=db_url)
    (result,) = report.configs[0].results
    with Sessions(db_url) as sessions:
        checks = [e for e in sessions.log(result.session_id or "") if e["kind"] == "check"]
    assert [c["passed"] for c in checks] == [False, False]
    said = json.dumps(checks) + " ".join(case.checks)
    assert case.blockers[0].answer == "400" and "400" not in said


def test_a_scratch_eval_removes_each_sessions_repository_and_db_keeps_it(
    db_url: str, tmp_path: Path
) -> None:
    (case,) = [c for c in load_cases([REPOS]) if c.name == "repo-control-slugify"]
    scratch = run_eval([case], configs_for(["eval:never-ask"]))
    kept = run_eval([case], configs_for(["eval:never-ask"]), db=db_url)
    with Sessions(db_url) as sessions:
        (kept_id,) = [r.session_id for r in kept.configs[0].results]
        repository = Path(sessions.status(kept_id or "")["workbench"]["repository"])
    assert (repository / "slug.py").is_file()
    (gone_id,) = [r.session_id for r in scratch.configs[0].results]
    assert not (repository.parent / str(gone_id)).exists()


def test_the_command_runs_the_repository_cases(tmp_path: Path) -> None:
    result = invoke("eval", str(REPOS), "--model", "eval:oracle", "--json")
    assert result.returncode == 0, result.stderr
    (config,) = json.loads(result.stdout)["configs"]
    assert config["total"]["outcome"] == 1.0


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"repo": None}, "checks run in the case's repository: give `repo`"),
        ({"repo": "nowhere"}, "repo: "),
        ({"checks": [], "repo": None}, "a solution is written into the case's repository"),
    ],
)
def test_a_repository_case_is_checked_when_read(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    (tmp_path / "project").mkdir()
    case = {
        "name": "c",
        "task": "t",
        "spec": "s",
        "repo": "project",
        "checks": ["test -e done"],
        "solution": {"path": "done", "content": "{value}"},
    }
    with pytest.raises(ValueError, match=said):
        parse_cases({**case, **change}, str(tmp_path / "cases.yaml"))


def test_case_dir_in_a_check_is_the_case_files_folder_quoted(tmp_path: Path) -> None:
    folder = tmp_path / "my cases"
    (folder / "project").mkdir(parents=True)
    entry = {
        "task": "t",
        "spec": "s",
        "repo": "project",
        "checks": ["python -B {case_dir}/checks/digest.py m 'm.f()' 0"],
    }
    (case,) = parse_cases(entry, str(folder / "one.yaml"))
    assert case.repo == str(folder / "project")
    assert case.checks == [f"python -B '{folder}'/checks/digest.py m 'm.f()' 0"]
