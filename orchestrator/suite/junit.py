"""The JUnit XML report that CI systems display (GitHub, GitLab, Jenkins, Azure...).

One <testsuite> named "orchestrator"; one <testcase> per scenario file, its classname
the folder (dotted) and its name the file name. An unmet `expect` is a <failure> whose
message is the first unmet line and whose text holds them all; a malformed file or a
crashed run is an <error>; a scenario not run after `-x` is <skipped>.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.present.printable import xml_safe_tree
from orchestrator.suite.results import Report, Result

__all__ = ["junit_xml", "write_junit"]


def _case(suite: ET.Element, name: str, seconds: float) -> ET.Element:
    folder, _, file = name.rpartition("/")
    return ET.SubElement(
        suite,
        "testcase",
        classname=folder.strip("/").replace("/", ".") or ".",
        name=file,
        file=name,
        time=f"{seconds:.3f}",
    )


def _details(result: Result) -> str:
    lines = list(result.unmet)
    if result.session_id:
        lines.append(f"session {result.session_id}: {result.status}")
    if result.database:
        lines.append(f"database kept: {result.database}")
    return "\n".join(lines)


def junit_xml(report: Report) -> str:
    """The report as a JUnit XML document (UTF-8 text)."""
    failures = report.count("failed")
    errors = report.count("error") + len(report.malformed)
    skipped = report.count("skipped")
    tests = len(report.results) + len(report.malformed)
    counts = {
        "tests": str(tests),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
        "time": f"{report.seconds:.3f}",
    }
    root = ET.Element("testsuites", {"name": "orchestrator test", **counts})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": "orchestrator",
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "hostname": socket.gethostname(),
            **counts,
        },
    )
    for malformed in report.malformed:
        case = _case(suite, malformed.name, 0.0)
        error = ET.SubElement(
            case, "error", type="MalformedScenario", message=malformed.message.splitlines()[0]
        )
        error.text = malformed.message
    for result in report.results:
        case = _case(suite, result.name, result.seconds)
        if result.outcome == "failed":
            first = result.unmet[0] if result.unmet else "the scenario did not pass"
            failure = ET.SubElement(case, "failure", type="ExpectNotMet", message=first)
            failure.text = _details(result)
        elif result.outcome == "error":
            message = result.message or "the scenario could not run"
            error = ET.SubElement(
                case, "error", type="ScenarioError", message=message.strip().splitlines()[-1]
            )
            error.text = message
        elif result.outcome == "skipped":
            ET.SubElement(case, "skipped", message=result.message or "not run")
    xml_safe_tree(root)  # a name or message with control characters: still valid XML
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(report), encoding="utf-8")
