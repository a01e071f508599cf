"""What a suite run is made of: the scenario files found, and how each one went; and the
run as the JUnit report CI systems display (orchestrator.present.junit writes it).

In JUnit, one <testsuite> named "orchestrator"; one <testcase> per scenario file, its
classname the folder (dotted) and its name the file name. An unmet `expect` is a <failure>
whose message is the first unmet line and whose text holds them all; a malformed file or a
crashed run is an <error>; a scenario not run after `-x` is <skipped>.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.present import junit

__all__ = ["Item", "Malformed", "Result", "Report", "Outcome", "junit_xml", "write_junit"]

Outcome = Literal["passed", "failed", "error", "skipped"]


@dataclass(frozen=True)
class Item:
    """A scenario file to run; `name` is how reports call it (its path from the current
    folder), `key` what `-k` matches (its path inside the folder that was given)."""

    path: str
    name: str
    key: str = ""


@dataclass(frozen=True)
class Malformed:
    """A file that looks like a scenario and does not validate (exit code 2)."""

    path: str
    name: str
    message: str
    key: str = ""


@dataclass(frozen=True)
class Result:
    """How one scenario went. `unmet`: one line per expectation that did not hold;
    `message`: why it could not run (a crash) or was skipped."""

    name: str
    path: str
    outcome: Outcome
    seconds: float = 0.0
    status: str | None = None
    session_id: str | None = None
    unmet: tuple[str, ...] = ()
    message: str | None = None
    database: str | None = None  # kept when the scenario did not pass, for `orchestrator log`


@dataclass(frozen=True)
class Report:
    """A whole run: results in collection order, the malformed files, the exit code."""

    results: tuple[Result, ...]
    malformed: tuple[Malformed, ...] = ()
    seconds: float = 0.0
    jobs: int = 1

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def exit_code(self) -> int:
        """2 when a file is malformed, else 1 when any scenario did not pass, else 0."""
        if self.malformed:
            return 2
        if any(r.outcome in ("failed", "error") for r in self.results):
            return 1
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "total": len(self.results) + len(self.malformed),
            "passed": self.count("passed"),
            "failed": self.count("failed"),
            "errors": self.count("error") + len(self.malformed),
            "skipped": self.count("skipped"),
            "seconds": round(self.seconds, 3),
            "jobs": self.jobs,
            "scenarios": [
                {**asdict(r), "unmet": list(r.unmet), "seconds": round(r.seconds, 3)}
                for r in self.results
            ],
            "malformed": [asdict(m) for m in self.malformed],
        }


# -- the report as JUnit XML --------------------------------------------------------------


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


def junit_suite(report: Report) -> junit.Suite:
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
    return junit.junit_xml("orchestrator test", [junit_suite(report)], seconds=report.seconds)


def write_junit(report: Report, path: Path) -> None:
    junit.write_junit(path, "orchestrator test", [junit_suite(report)], seconds=report.seconds)
