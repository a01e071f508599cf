"""An eval report as a terminal table, JUnit XML and a self-contained HTML page (an inline
SVG plot of Ask-F1 against outcome per configuration; no external assets)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from orchestrator.evals.metrics import CaseResult
from orchestrator.evals.runner import EvalReport

__all__ = ["table", "write_junit", "write_html", "COLUMNS", "mistakes"]

# (header, key in a total, format)
COLUMNS = (
    ("ask_rate", "ask_rate", "{:.2f}"),
    ("precision", "precision", "{:.2f}"),
    ("recall", "recall", "{:.2f}"),
    ("ask_f1", "ask_f1", "{:.2f}"),
    ("over_ask", "over_ask_rate", "{:.2f}"),
    ("timing", "timing", "{:.2f}"),
    ("outcome", "outcome", "{:.2f}"),
    ("calls", "model_calls", "{}"),
    ("tokens", "tokens", "{}"),
)


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def table(report: EvalReport) -> str:
    """One line per configuration with its totals (`-`: not defined, or not reported)."""
    rows = [["configuration", *(h for h, _, _ in COLUMNS)]]
    for part in report.configs:
        total = part.total
        rows.append([part.config.label, *(_cell(total[k], f) for _, k, f in COLUMNS)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def mistakes(result: CaseResult) -> list[str]:
    """What went wrong in one case, as JUnit failures say it (empty: nothing)."""
    found = []
    if result.status != "completed":
        found.append(f"the session ended {result.status}: {result.error or ''}".rstrip(": "))
    if result.critical and result.found < result.critical:
        found.append("no question about the critical blocker")
    if result.questions > result.hits:
        found.append("asked a question that no critical blocker called for")
    if result.missing:
        found.append("the outcome does not name: " + ", ".join(result.missing))
    return found


def write_junit(report: EvalReport, path: Path) -> None:
    """One test suite per configuration, one test case per eval case."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="orchestrator eval")
    for part in report.configs:
        failures = [mistakes(r) for r in part.results]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=part.config.label,
            tests=str(len(part.results)),
            failures=str(sum(1 for f in failures if f)),
        )
        for result, failed in zip(part.results, failures, strict=True):
            case = ET.SubElement(suite, "testcase", classname=part.config.label, name=result.case)
            if failed:
                ET.SubElement(case, "failure", message="; ".join(failed))
    from orchestrator.present.printable import xml_safe_tree

    xml_safe_tree(root)  # a case's text with control characters: still valid XML
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3}.bad{color:#b00}
"""
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")


def _plot(report: EvalReport) -> str:
    """An SVG scatter plot: x = Ask-F1, y = outcome, one labelled point per configuration."""
    size, pad = 360, 50
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 2 * pad + 220}" '
        f'height="{size + 2 * pad}" role="img" aria-label="Ask-F1 against outcome">',
        f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" fill="none" stroke="#999"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        at = pad + tick * size
        parts += [
            f'<text x="{at:.0f}" y="{pad + size + 16}" font-size="11" '
            f'text-anchor="middle">{tick:g}</text>',
            f'<text x="{pad - 6}" y="{pad + size - tick * size + 4:.0f}" font-size="11" '
            f'text-anchor="end">{tick:g}</text>',
        ]
    parts += [
        f'<text x="{pad + size / 2:.0f}" y="{pad + size + 36}" text-anchor="middle">Ask-F1</text>',
        f'<text x="14" y="{pad + size / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {pad + size / 2:.0f})">outcome</text>',
    ]
    for n, part in enumerate(report.configs):
        total = part.total
        x = pad + float(total["ask_f1"]) * size
        y = pad + size - float(total["outcome"]) * size
        colour = _COLOURS[n % len(_COLOURS)]
        label = escape(part.config.label)
        parts += [
            # Later points are smaller, so that configurations on the same spot show as rings.
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{max(11 - 3 * n, 3)}" fill="{colour}">'
            f"<title>{label}: Ask-F1 {total['ask_f1']}, outcome {total['outcome']}</title>"
            "</circle>",
            f'<circle cx="{pad + size + 20}" cy="{pad + 10 + n * 20}" r="5" fill="{colour}"/>',
            f'<text x="{pad + size + 30}" y="{pad + 14 + n * 20}" font-size="12">{label}</text>',
        ]
    parts.append("</svg>")
    return "\n".join(parts)


def write_html(report: EvalReport, path: Path) -> None:
    """The whole report in one file: the plot, the totals and every case."""
    heads = "".join(f"<th>{escape(h)}</th>" for h, _, _ in COLUMNS)
    totals = []
    for part in report.configs:
        total = part.total
        cells = "".join(f"<td>{escape(_cell(total[k], f))}</td>" for _, k, f in COLUMNS)
        totals.append(f"<tr><td>{escape(part.config.label)}</td>{cells}</tr>")
    sections = []
    for part in report.configs:
        rows = []
        for result in part.results:
            doc = result.to_json()
            cells = "".join(f"<td>{escape(_cell(doc.get(k), f))}</td>" for _, k, f in COLUMNS)
            wrong = escape("; ".join(mistakes(result)))
            rows.append(
                f"<tr><td>{escape(result.case)}{' (control)' if result.control else ''}</td>"
                f'{cells}<td class="bad">{wrong}</td></tr>'
            )
        sections.append(
            f"<h2>{escape(part.config.label)}</h2><table><tr><th>case</th>{heads}"
            f"<th>mistakes</th></tr>{''.join(rows)}</table>"
        )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>orchestrator eval</title><style>{_STYLE}</style></head><body>"
        f"<h1>How well the agents ask</h1><p>{report.cases} cases, "
        f"{len(report.configs)} configurations. Figures: docs/eval.md.</p>"
        f"{_plot(report)}<table><tr><th>configuration</th>{heads}</tr>{''.join(totals)}"
        f"</table>{''.join(sections)}</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")
