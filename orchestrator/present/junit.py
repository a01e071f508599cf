"""JUnit XML, the report CI systems display (GitHub, GitLab, Jenkins, Azure...): the one
writer of `orchestrator test --junit-xml` and `orchestrator eval --junit-xml`.

The shape is the one those tools read (Jenkins' junit-10.xsd, which the others follow):
<testsuites> holds <testsuite>s, each with its `tests`, `failures`, `errors`, `skipped`
and `time`; a <testcase> has a `classname`, a `name` and a `time`, and at most one of
<failure> (an expectation not met), <error> (it could not run) or <skipped>, each with a
one-line `message` and the details as its text. Text from scenario or case files that
XML 1.0 cannot hold (control characters) is written as visible escapes.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from orchestrator.present.printable import xml_safe_tree

__all__ = ["Case", "Suite", "Outcome", "junit_xml", "write_junit"]

Outcome = Literal["passed", "failure", "error", "skipped"]


@dataclass(frozen=True)
class Case:
    """One <testcase>: `outcome` other than passed says why in `message` (one line shown
    by CI) and `details` (the element's text); `kind` is its `type` attribute."""

    classname: str
    name: str
    seconds: float = 0.0
    outcome: Outcome = "passed"
    message: str = ""
    details: str = ""
    kind: str = ""
    file: str | None = None


@dataclass(frozen=True)
class Suite:
    """One <testsuite>; its counts are those of its cases."""

    name: str
    cases: Sequence[Case]
    seconds: float | None = None  # None: the sum of its cases' times

    @property
    def time(self) -> float:
        return sum(c.seconds for c in self.cases) if self.seconds is None else self.seconds

    def count(self, outcome: Outcome) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)


def _counts(tests: int, failures: int, errors: int, skipped: int, seconds: float) -> dict[str, str]:
    return {
        "tests": str(tests),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
        "time": f"{seconds:.3f}",
    }


def junit_xml(name: str, suites: Sequence[Suite], *, seconds: float | None = None) -> str:
    """The suites as one JUnit XML document (UTF-8 text); `seconds`: the whole run's time
    (default: the sum of the suites')."""
    total = sum(s.time for s in suites) if seconds is None else seconds
    counts = _counts(
        sum(len(s.cases) for s in suites),
        sum(s.count("failure") for s in suites),
        sum(s.count("error") for s in suites),
        sum(s.count("skipped") for s in suites),
        total,
    )
    root = ET.Element("testsuites", {"name": name, **counts})
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    host = socket.gethostname()
    for n, suite in enumerate(suites):
        element = ET.SubElement(
            root,
            "testsuite",
            {
                "name": suite.name,
                **_counts(
                    len(suite.cases),
                    suite.count("failure"),
                    suite.count("error"),
                    suite.count("skipped"),
                    suite.time,
                ),
                "id": str(n),
                "timestamp": stamp,
                "hostname": host,
            },
        )
        for case in suite.cases:
            attributes = {"classname": case.classname, "name": case.name}
            if case.file is not None:
                attributes["file"] = case.file
            attributes["time"] = f"{case.seconds:.3f}"
            item = ET.SubElement(element, "testcase", attributes)
            if case.outcome == "passed":
                continue
            why = ET.SubElement(item, case.outcome, message=case.message)
            if case.kind:
                why.set("type", case.kind)
            if case.details:
                why.text = case.details
    xml_safe_tree(root)  # a name or message with control characters: still valid XML
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    path: Path, name: str, suites: Sequence[Suite], *, seconds: float | None = None
) -> None:
    """Write `junit_xml(name, suites)` to `path` (its folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(name, suites, seconds=seconds), encoding="utf-8")
