"""A scenario suite's report as JUnit XML (orchestrator.present.junit writes it).

One <testsuite> named "orchestrator"; one <testcase> per scenario file, its classname
the folder (dotted) and its name the file name. An unmet `expect` is a <failure> whose
message is the first unmet line and whose text holds them all; a malformed file or a
crashed run is an <error>; a scenario not run after `-x` is <skipped>.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.present import junit
from orchestrator.suite.results import Report, Result

__all__ = ["junit_xml", "write_junit"]


def _named(
    name: str,
    seconds: float = 0.0,
    outcome: junit.Outcome = "passed",
    *,
    kind: str = "",
    message: str = "",
    details: str = "",
) -> junit.Case:
    """A case for the scenario file `name`: classname its folder (dotted), name the file."""
    folder, _, file = name.rpartition("/")
    classname = folder.strip("/").replace("/", ".") or "."
    return junit.Case(classname, file, seconds, outcome, message, details, kind, file=name)


def _details(result: Result) -> str:
    lines = list(result.unmet)
    if result.session_id:
        lines.append(f"session {result.session_id}: {result.status}")
    if result.database:
        lines.append(f"database kept: {result.database}")
    return "\n".join(lines)


def _case(result: Result) -> junit.Case:
    if result.outcome == "failed":
        first = result.unmet[0] if result.unmet else "the scenario did not pass"
        return _named(
            result.name,
            result.seconds,
            "failure",
            kind="ExpectNotMet",
            message=first,
            details=_details(result),
        )
    if result.outcome == "error":
        message = result.message or "the scenario could not run"
        return _named(
            result.name,
            result.seconds,
            "error",
            kind="ScenarioError",
            message=message.strip().splitlines()[-1],
            details=message,
        )
    if result.outcome == "skipped":
        return _named(
            result.name,
            result.seconds,
            "skipped",
            message=result.message or "not run",
        )
    return _named(result.name, result.seconds)


def suite(report: Report) -> junit.Suite:
    """The report as one JUnit suite: malformed files first (as errors), then each result."""
    malformed = [
        _named(
            m.name,
            0.0,
            "error",
            kind="MalformedScenario",
            message=m.message.splitlines()[0],
            details=m.message,
        )
        for m in report.malformed
    ]
    return junit.Suite(
        "orchestrator", [*malformed, *(_case(r) for r in report.results)], report.seconds
    )


def junit_xml(report: Report) -> str:
    """The report as a JUnit XML document (UTF-8 text)."""
    return junit.junit_xml("orchestrator test", [suite(report)], seconds=report.seconds)


def write_junit(report: Report, path: Path) -> None:
    junit.write_junit(path, "orchestrator test", [suite(report)], seconds=report.seconds)
