"""`orchestrator test` (contract section 7) as a CI job runs it: the real command in a new
process, scenario children forked from it, exit codes 0/1/2, JUnit XML, -j, -k, -x."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import forkserver
import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT, argv, cli

# Every shipped scenario: the examples, and examples/suite/ (steps, deadlines, policies);
# examples/eval/ and examples/eval-repos/ hold eval cases (`orchestrator eval`), which
# `test` leaves alone.
SHIPPED = sorted(
    p.relative_to(EXAMPLES).as_posix()
    for p in EXAMPLES.glob("**/*.yaml")
    if not p.is_relative_to(EXAMPLES / "eval") and not p.is_relative_to(EXAMPLES / "eval-repos")
)


def as_json(result) -> dict:
    return json.loads(result.stdout)


@pytest.fixture(autouse=True)
def own_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The databases of scenarios that fail are kept under TMPDIR: keep them in tmp_path."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A folder with a passing, a failing and a malformed scenario, and a CI file."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    good = (EXAMPLES / "hard-cap.yaml").read_text()
    (folder / "good.yaml").write_text(good)
    (folder / "failing.yaml").write_text(
        good.replace("fallbacks_injected: 1", "fallbacks_injected: 0")
    )
    (folder / "broken.yaml").write_text("task: Broken\nagents:\n  pm: []\nexpectations: {}\n")
    (folder / "workflow.yml").write_text("on: push\njobs: {build: {runs-on: x}}\n")
    return folder


def test_the_shipped_examples_all_pass() -> None:
    result = cli("test", "examples/", "-j", "2", "--json")
    assert result.returncode == 0, result.stderr
    report = as_json(result)
    names = [s["name"] for s in report["scenarios"]]
    assert names == [f"examples/{name}" for name in SHIPPED]  # examples/ci/ left alone
    assert any(name.startswith("suite/") for name in SHIPPED)
    assert {s["outcome"] for s in report["scenarios"]} == {"passed"}
    assert report["total"] == report["passed"] == len(SHIPPED)
    assert report["jobs"] == 2
    # --json: the lines and the total are on stderr, one line per scenario.
    for name in names:
        assert f"PASS  {name}" in result.stderr
    assert f"{len(SHIPPED)} scenarios: {len(SHIPPED)} passed, 0 failed" in result.stderr


def test_a_failing_scenario_exits_1_with_its_unmet_expect(suite: Path, tmp_path: Path) -> None:
    xml = tmp_path / "report.xml"
    result = cli("test", str(suite), "-k", "failing", "--junit-xml", str(xml))
    assert result.returncode == 1, result.stderr
    assert "FAIL  " in result.stdout and "failing.yaml" in result.stdout
    assert "expect.fallbacks_injected: expected 0, got 1" in result.stdout
    assert "1 scenario: 0 passed, 1 failed" in result.stdout
    # The failed scenario's database is kept for `orchestrator log`, and named.
    [kept] = tmp_path.glob("orchestrator-test-*/orchestrator.db")
    assert f"database kept: {kept}" in result.stdout
    case = ET.parse(xml).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "failing.yaml"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == "expect.fallbacks_injected: expected 0, got 1"


def test_a_malformed_scenario_exits_2_and_the_report_has_everything(
    suite: Path, tmp_path: Path
) -> None:
    (suite / "nested").mkdir()
    (suite / "nested" / "also-broken.scenario.yaml").write_text("task: [unclosed\n")
    xml = tmp_path / "out" / "report.xml"
    result = cli("test", str(suite), "--junit-xml", str(xml), "--json")
    assert result.returncode == 2, result.stderr
    report = as_json(result)
    assert report["exit_code"] == 2
    assert sorted(Path(m["path"]).name for m in report["malformed"]) == [
        "also-broken.scenario.yaml",
        "broken.yaml",
    ]
    assert "expectations: unknown key" in result.stderr
    assert "invalid YAML" in result.stderr
    # The well-formed scenarios still ran; the workflow file was not taken for one.
    outcomes = {Path(s["path"]).name: s["outcome"] for s in report["scenarios"]}
    assert outcomes == {"failing.yaml": "failed", "good.yaml": "passed"}
    root = ET.parse(xml).getroot()
    suite_el = root.find("testsuite")
    assert suite_el is not None
    assert (suite_el.get("tests"), suite_el.get("failures"), suite_el.get("errors")) == (
        "4",
        "1",
        "2",
    )
    failures = root.findall(".//failure")
    assert [f.get("message") for f in failures] == ["expect.fallbacks_injected: expected 0, got 1"]
    errors = {c.get("name"): c.find("error") for c in root.iter("testcase")}
    broken = errors["broken.yaml"]
    assert broken is not None and "expectations: unknown key" in (broken.get("message") or "")


def test_j1_and_j4_give_the_same_results(suite: Path) -> None:
    (suite / "broken.yaml").unlink()
    for example in SHIPPED:
        (suite / example.replace("/", "-")).write_text((EXAMPLES / example).read_text())

    def outcome(jobs: str) -> list[tuple[str, str, str, list[str]]]:
        result = cli("test", str(suite), "-j", jobs, "--json")
        assert result.returncode == 1, result.stderr
        report = as_json(result)
        assert report["jobs"] == int(jobs)
        return [(s["name"], s["outcome"], s["status"], s["unmet"]) for s in report["scenarios"]]

    one, four = outcome("1"), outcome("4")
    assert one == four
    assert len(one) == len(SHIPPED) + 2
    assert [o[1] for o in one].count("failed") == 1


def test_x_stops_at_the_first_failure(suite: Path) -> None:
    (suite / "broken.yaml").unlink()
    (suite / "zz-later.yaml").write_text((EXAMPLES / "hard-cap.yaml").read_text())
    result = cli("test", str(suite), "-x", "-j", "1", "--json")
    assert result.returncode == 1
    outcomes = [s["outcome"] for s in as_json(result)["scenarios"]]
    assert outcomes == ["failed", "skipped", "skipped"]  # failing, good, zz-later
    assert "2 not run (-x)" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no/such/folder",), "no/such/folder: no such file or folder"),
        (("examples/ci",), "examples/ci: no scenario files in this folder"),
        (("examples", "-k", "nothing-like-this"), "no scenario matches -k 'nothing-like-this'"),
    ],
)
def test_bad_input_exits_2_with_a_json_error(args: tuple[str, ...], message: str) -> None:
    result = cli("test", *args, "--json")
    assert result.returncode == 2
    document = as_json(result)
    assert document["exit_code"] == 2 and message in document["error"]


def test_graph_prints_mermaid() -> None:
    result = cli("graph")
    assert result.returncode == 0, result.stderr
    for line in ("graph TD;", "__start__ --> pm;", "developer --> join;", "pm -.-> gate;"):
        assert line in result.stdout
    # docs/ci.md and the README show the same picture.
    for doc in (ROOT / "docs" / "ci.md", ROOT / "README.md"):
        block = doc.read_text().split("```mermaid\n", 1)[1].split("```", 1)[0]
        assert block.strip() == result.stdout.strip(), f"{doc.name} shows another graph"


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_the_ci_examples_parse_and_their_command_works(name: str, tmp_path: Path) -> None:
    workflow = yaml.safe_load((EXAMPLES / "ci" / name).read_text())
    assert isinstance(workflow, dict)
    if name == "github-actions.yml":
        steps = workflow["jobs"]["scenarios"]["steps"]
        commands = [s["run"] for s in steps if "run" in s]
        uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
        assert "actions/upload-artifact" in uses and "mikepenz/action-junit-report" in uses
    else:
        job = workflow["scenarios"]
        commands = job["script"]
        assert job["artifacts"]["reports"]["junit"] == "report.xml"
    [line] = [c for c in commands if c.startswith("orchestrator test")]
    args = shlex.split(line)[1:]
    assert args == ["test", "examples/", "--junit-xml", "report.xml"]
    (tmp_path / "examples").symlink_to(EXAMPLES)  # the command as CI runs it, in a checkout
    result = forkserver.run(argv(*args), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    root = ET.parse(tmp_path / "report.xml").getroot()
    assert root.find("testsuite").get("tests") == str(len(SHIPPED))  # type: ignore[union-attr]
    assert not root.findall(".//failure") and not root.findall(".//error")


def test_the_fork_server_path_used_off_linux_gives_the_same_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """macOS and others start scenario children from a fork server (no plain fork)."""
    from orchestrator.api.running import load_runtime
    from orchestrator.suite import collect
    from orchestrator.suite.parallel import run_suite

    items, malformed = collect([EXAMPLES / "hard-cap.yaml", EXAMPLES / "pause-and-resume.yaml"])
    # Imported before the platform is faked, as a real macOS process imports them for its
    # own platform (urllib, imported on the way, reads sys.platform at import).
    load_runtime()
    monkeypatch.setattr("sys.platform", "darwin")
    report = run_suite(items, jobs=2, malformed=malformed)
    assert [(r.outcome, r.status) for r in report.results] == [("passed", "completed")] * 2
    assert report.exit_code == 0


def test_a_scenario_process_that_dies_is_an_error_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child that ends without a result (killed, a crash in C code) is reported as an
    error with its exit code; the other scenarios still run and the suite exits 1."""
    import os

    from orchestrator.suite import child, collect
    from orchestrator.suite.parallel import run_suite
    from orchestrator.suite.results import junit_xml

    real = child.run_file

    def dies_on_hard_cap(path: str, name: str, **kwargs: object):  # type: ignore[no-untyped-def]
        if "hard-cap" in path:
            os._exit(7)
        return real(path, name)

    monkeypatch.setattr(child, "run_file", dies_on_hard_cap)  # the forked children see it
    items, _ = collect([EXAMPLES / "hard-cap.yaml", EXAMPLES / "answered-question.yaml"])
    report = run_suite(items, jobs=2)
    by_name = {Path(r.path).name: r for r in report.results}
    assert by_name["answered-question.yaml"].outcome == "passed"
    died = by_name["hard-cap.yaml"]
    assert died.outcome == "error"
    assert died.message == "the scenario's process ended without a result (exit code 7)"
    assert report.exit_code == 1
    error = ET.fromstring(junit_xml(report)).find(".//error")
    assert error is not None and "exit code 7" in (error.get("message") or "")


def test_an_unwritable_junit_path_is_refused_before_anything_runs(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = cli("test", "examples/", "--junit-xml", str(blocker / "report.xml"), "--json")
    assert result.returncode == 2
    assert "cannot write it" in as_json(result)["error"]
    assert "PASS" not in result.stderr  # nothing ran
