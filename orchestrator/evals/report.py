"""An eval report as a terminal table, JUnit XML and a self-contained HTML page (an inline
SVG plot of Ask-F1 against outcome per configuration; no external assets)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

from orchestrator.evals.metrics import CaseResult
from orchestrator.evals.runner import EvalReport

__all__ = ["table", "write_junit", "write_html", "COLUMNS", "FIGURES", "mistakes", "points"]

# (header, key in a total, format)
COLUMNS = (
    ("ask_rate", "ask_rate", "{:.2f}"),
    ("precision", "precision", "{:.2f}"),
    ("recall", "recall", "{:.2f}"),
    ("ask_f1", "ask_f1", "{:.2f}"),
    ("over_ask", "over_ask_rate", "{:.2f}"),
    ("timing", "timing", "{:.2f}"),
    ("outcome", "outcome", "{:.2f}"),
    ("failed", "failed", "{}"),
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
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}
td.bad{text-align:left}
th{background:#f3f3f3}.bad{color:#b00}
.scroll{overflow-x:auto;max-width:100%}
figure{margin:1em 0}figure svg{width:100%;max-width:640px;height:auto}
figcaption,.muted{color:#555}
ol.legend{padding-left:1.6em}ol.legend li{margin:.15em 0}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:.4em;vertical-align:-.05em}
dl.figures dt{font-weight:600;margin-top:.5em}dl.figures dd{margin-left:1.2em}
td,th{white-space:nowrap}
td:first-child,td.bad{white-space:normal;overflow-wrap:anywhere;min-width:12em}
p,li,dd,figcaption{overflow-wrap:anywhere}
@media (max-width:640px){body{margin:1em auto;font-size:13px}h1{font-size:1.3em}}
"""
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")
# (figure, what it means): the table's columns, in their order, then the plot's axes.
FIGURES = (
    ("ask_rate", "the share of cases in which a question reached the (simulated) user"),
    ("precision", "of the questions asked, the share about a critical blocker"),
    ("recall", "of the critical blockers, the share a question asked about"),
    (
        "ask_f1",
        "the harmonic mean of precision and recall: 1 asks exactly when and what it"
        " should; asking everywhere or nowhere scores low",
    ),  # fmt: skip
    (
        "over_ask",
        "on the completed controls (nothing to ask), the share with a question"
        " anyway: lower is better",
    ),  # fmt: skip
    (
        "timing",
        "how much of the plan was done when the first question came (0: before any work was done)",
    ),  # fmt: skip
    ("outcome", "the share of cases that completed with every required fact in the result"),
    ("failed", "sessions that did not complete: failures, counted against recall"),
    ("calls", "model calls, where the provider reports them (- for the reference policies)"),
    ("tokens", "tokens used, where the provider reports them (- for the reference policies)"),
)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "eval.md"
_SIZE, _PAD, _NEAR, _FAN = 360, 50, 12.0, 14.0


def _docs_link() -> str:
    """A link to docs/eval.md where this package sits in its repository (a file URL),
    else the path in words."""
    if DOCS.is_file():
        return f'<a href="{escape(DOCS.as_uri())}">docs/eval.md</a>'
    return "docs/eval.md in the orchestrator repository"


def points(report: EvalReport) -> list[tuple[float, float, float, float]]:
    """Where each configuration's marker goes, in the plot's pixels: (x, y) of its figures,
    then the marker's centre. Configurations whose figures fall within a marker of each
    other are fanned out on a small circle around their spot (each joined to it by a
    line), so that no marker hides another's."""
    spots = []
    for part in report.configs:
        total = part.total
        spots.append(
            (
                _PAD + float(total["ask_f1"] or 0) * _SIZE,
                _PAD + _SIZE - float(total["outcome"] or 0) * _SIZE,
            )
        )
    groups: list[list[int]] = []
    for n, (x, y) in enumerate(spots):
        for group in groups:
            gx, gy = spots[group[0]]
            if math.hypot(x - gx, y - gy) < _NEAR:
                group.append(n)
                break
        else:
            groups.append([n])
    placed: list[tuple[float, float, float, float]] = [(x, y, x, y) for x, y in spots]
    for group in groups:
        if len(group) == 1:
            continue
        for k, n in enumerate(group):
            angle = 2 * math.pi * k / len(group) - math.pi / 2
            x, y = spots[n]
            placed[n] = (x, y, x + _FAN * math.cos(angle), y + _FAN * math.sin(angle))
    return placed


def _plot(report: EvalReport) -> str:
    """An SVG scatter plot: x = Ask-F1, y = outcome, one numbered marker per configuration
    (the legend below names them)."""
    size, pad = _SIZE, _PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size + 2 * pad} '
        f'{size + 2 * pad}" role="img" aria-label="Ask-F1 against outcome, one numbered'
        ' marker per configuration">',
        f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" fill="none" stroke="#999"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        at = pad + tick * size
        parts += [
            f'<line x1="{at:.0f}" y1="{pad}" x2="{at:.0f}" y2="{pad + size}" stroke="#eee"/>',
            f'<line x1="{pad}" y1="{at:.0f}" x2="{pad + size}" y2="{at:.0f}" stroke="#eee"/>',
            f'<text x="{at:.0f}" y="{pad + size + 16}" font-size="11" '
            f'text-anchor="middle">{tick:g}</text>',
            f'<text x="{pad - 6}" y="{pad + size - tick * size + 4:.0f}" font-size="11" '
            f'text-anchor="end">{tick:g}</text>',
        ]
    parts += [
        f'<text x="{pad + size / 2:.0f}" y="{pad + size + 36}" text-anchor="middle">'
        "Ask-F1 (asks when and what it should) →</text>",
        f'<text x="14" y="{pad + size / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {pad + size / 2:.0f})">outcome (result correct) →</text>',
    ]
    for n, (part, (x, y, cx, cy)) in enumerate(zip(report.configs, points(report), strict=True)):
        total = part.total
        colour = _COLOURS[n % len(_COLOURS)]
        label = escape(part.config.label)
        if (cx, cy) != (x, y):
            parts += [
                f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{cx:.1f}" y2="{cy:.1f}" stroke="{colour}"/>',
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="#333"/>',
            ]
        parts.append(
            f'<g class="point"><circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="{colour}" '
            f'stroke="#fff" stroke-width="1.5"><title>{n + 1}. {label}: Ask-F1 '
            f"{total['ask_f1']}, outcome {total['outcome']}</title></circle>"
            f'<text x="{cx:.1f}" y="{cy + 3.5:.1f}" font-size="9" fill="#fff" '
            f'text-anchor="middle">{n + 1}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _legend(report: EvalReport) -> str:
    items = []
    for n, part in enumerate(report.configs):
        total = part.total
        colour = _COLOURS[n % len(_COLOURS)]
        items.append(
            f'<li><span class="swatch" style="background:{colour}"></span>'
            f"{escape(part.config.label)}: Ask-F1 {escape(_cell(total['ask_f1'], '{:.2f}'))}, "
            f"outcome {escape(_cell(total['outcome'], '{:.2f}'))}</li>"
        )
    return f'<ol class="legend">{"".join(items)}</ol>'


def _figures() -> str:
    terms = "".join(f"<dt>{escape(name)}</dt><dd>{escape(text)}</dd>" for name, text in FIGURES)
    return (
        '<section id="figures"><h2>What the figures mean</h2><p>Each row of a table is'
        " one configuration (the totals) or one case; <code>-</code>: not defined (e.g."
        ' no question, so no precision) or not reported.</p><dl class="figures">'
        f"{terms}</dl><p>How each is counted, and its caveats: {_docs_link()}.</p></section>"
    )


def write_html(report: EvalReport, path: Path) -> None:
    """The whole report in one file: the plot, the totals, what the figures mean and every
    case; it reads on a phone too (the tables scroll sideways within the page)."""
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
            f'<h2>{escape(part.config.label)}</h2><div class="scroll"><table><tr><th>case</th>'
            f"{heads}<th>mistakes</th></tr>{''.join(rows)}</table></div>"
        )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>orchestrator eval</title><style>{_STYLE}</style></head><body>"
        f"<h1>How well the agents ask</h1><p>{report.cases} cases, "
        f"{len(report.configs)} configurations. What each figure means: "
        f'<a href="#figures">below</a>; how it is counted: {_docs_link()}.</p>'
        f"<figure>{_plot(report)}<figcaption>Each configuration's Ask-F1 (across) against its"
        " outcome (up): the top right asks exactly when it should and gets the result right."
        " Configurations on the same spot are fanned out around it, each joined to it by a"
        f" line.</figcaption></figure>{_legend(report)}"
        f'<div class="scroll"><table><tr><th>configuration</th>{heads}</tr>{"".join(totals)}'
        f"</table></div>{_figures()}{''.join(sections)}</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")
