"""The one JUnit writer (orchestrator.present.junit), as `orchestrator test` and
`orchestrator eval` use it: both documents have the shape CI tools read."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from orchestrator.evals.metrics import CaseResult
from orchestrator.evals.report import write_junit as write_eval_junit
from orchestrator.evals.runner import Config, ConfigReport, EvalReport
from orchestrator.suite.results import Malformed, Report, Result, junit_xml

# What Jenkins' junit-10.xsd allows (GitLab, GitHub's reporters and Azure read the same
# shape), plus `file`, which GitLab and pytest's xunit1 family add to a test case.
SUITE_ATTRIBUTES = {
    "name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname",
    "id", "package", "disabled",
}  # fmt: skip
CASE_ATTRIBUTES = {"name", "classname", "time", "file", "line", "assertions", "status"}
OUTCOMES = {"failure", "error", "skipped"}


def check_junit(text: str) -> ET.Element:
    """`text` parsed, with every rule CI tools rely on asserted: the counts on each
    <testsuite> (and their totals on <testsuites>) are those of its cases, times are
    decimals, a case has a name and a classname and at most one failure, error or skip,
    each with a message."""
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root:
        assert suite.tag == "testsuite"
        assert set(suite.attrib) <= SUITE_ATTRIBUTES, set(suite.attrib) - SUITE_ATTRIBUTES
        assert suite.get("name")
        float(suite.get("time", "x"))
        cases = list(suite)
        found = {"tests": len(cases), "failures": 0, "errors": 0, "skipped": 0}
        for case in cases:
            assert case.tag == "testcase"
            assert set(case.attrib) <= CASE_ATTRIBUTES, set(case.attrib) - CASE_ATTRIBUTES
            assert case.get("name") and case.get("classname") is not None
            assert float(case.get("time", "x")) >= 0
            outcomes = [child for child in case if child.tag in OUTCOMES]
            assert len(outcomes) <= 1 and len(outcomes) == len(case)
            for child in outcomes:
                assert child.get("message") is not None
                found["skipped" if child.tag == "skipped" else child.tag + "s"] += 1
        for key, count in found.items():
            assert suite.get(key) == str(count), (key, suite.attrib)
            totals[key] += count
    for key, count in totals.items():
        assert root.get(key) == str(count), (key, root.attrib)
    return root


def test_a_suites_report_has_the_shape_ci_tools_read() -> None:
    report = Report(
        results=(
            Result(name="ok.yaml", path="ok.yaml", outcome="passed", seconds=0.25),
            Result(
                name="a/b/late.yaml", path="p", outcome="failed", seconds=1.5,
                unmet=("status: expected completed, got failed", "questions_surfaced: 2"),
                session_id="s1", status="failed",
            ),
            Result(name="c.yaml", path="c", outcome="error", message="Traceback\nboom"),
            Result(name="d.yaml", path="d", outcome="skipped"),
        ),
        malformed=(Malformed(path="m", name="bad.yaml", message="bad.yaml: tasks\nmore"),),
        seconds=3.0,
    )  # fmt: skip
    root = check_junit(junit_xml(report))
    assert root.get("name") == "orchestrator test" and root.get("time") == "3.000"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    late = cases["late.yaml"]
    assert (late.get("classname"), late.get("file"), late.get("time")) == (
        "a.b", "a/b/late.yaml", "1.500"
    )  # fmt: skip
    failure = late.find("failure")
    assert failure is not None and failure.get("type") == "ExpectNotMet"
    assert failure.get("message") == "status: expected completed, got failed"
    assert failure.text == (
        "status: expected completed, got failed\nquestions_surfaced: 2\nsession s1: failed"
    )
    error = cases["c.yaml"].find("error")
    assert error is not None and error.get("message") == "boom"
    malformed = cases["bad.yaml"].find("error")
    assert malformed is not None and malformed.get("type") == "MalformedScenario"
    assert malformed.get("message") == "bad.yaml: tasks"
    assert cases["d.yaml"].find("skipped") is not None
    assert list(cases["ok.yaml"]) == []


def result(case: str, *, asked: bool, status: str = "completed") -> CaseResult:
    return CaseResult(
        case=case, control=False, status=status, questions=int(asked), hits=int(asked),
        critical=1, found=int(asked), calls=3, done_before=0.0, late_goal=0, assumptions=0,
        assumptions_matching=0, outcome=asked, missing=() if asked else ("the export",),
        model_calls=None, tokens=None,
    )  # fmt: skip


def test_an_evals_report_has_the_same_shape_one_suite_per_configuration(
    tmp_path: Path,
) -> None:
    report = EvalReport(
        configs=(
            ConfigReport(Config("eval:oracle"), (result("export", asked=True),)),
            ConfigReport(
                Config("eval:never-ask"),
                (result("export", asked=False), result("import", asked=False, status="failed")),
            ),
        ),
        cases=2,
        seconds=4.0,
    )
    path = tmp_path / "deeper" / "junit.xml"
    write_eval_junit(report, path)
    root = check_junit(path.read_text(encoding="utf-8"))
    assert root.get("name") == "orchestrator eval" and root.get("time") == "4.000"
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        ("eval:oracle", "1", "0"),
        ("eval:never-ask", "2", "2"),
    ]
    failure = suites[1].find("testcase[@name='import']/failure")
    assert failure is not None
    assert failure.get("message", "").startswith("the session ended failed")
    assert "no question about the critical blocker" in (failure.text or "").splitlines()
