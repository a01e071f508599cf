"""An eval report as a terminal table, JUnit XML and a self-contained HTML page (an inline
SVG plot of Ask-F1 against outcome per configuration; no external assets), rendered from
the Jinja2 templates in `templates/` with autoescape: what an agent wrote stays text."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from orchestrator.evals.metrics import CaseResult
from orchestrator.evals.runner import EvalReport

__all__ = ["table", "write_junit", "write_html", "html", "COLUMNS", "FIGURES", "mistakes", "points"]

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
    """One test suite per configuration, one test case per eval case; a case with a
    mistake is a failure that names them (orchestrator.present.junit writes it)."""
    from orchestrator.present import junit

    suites = []
    for part in report.configs:
        cases = []
        for result in part.results:
            found = mistakes(result)
            cases.append(
                junit.Case(
                    part.config.label,
                    result.case,
                    outcome="failure" if found else "passed",
                    kind="AskedBadly" if found else "",
                    message="; ".join(found),
                    details="\n".join(found),
                )
            )
        suites.append(junit.Suite(part.config.label, cases))
    junit.write_junit(path, "orchestrator eval", suites, seconds=report.seconds)


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


@functools.cache
def _templates() -> Any:
    """The report's templates (orchestrator/evals/templates), autoescaped: a case's name,
    a mistake or a model's label is text, never markup."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
        auto_reload=False,
    )


def _page(report: EvalReport) -> dict[str, Any]:
    """What the template shows: every figure already formatted (`-`: not defined)."""
    configs = []
    for n, (part, (x, y, cx, cy)) in enumerate(zip(report.configs, points(report), strict=True)):
        total = part.total
        cases = []
        for result in part.results:
            doc = result.to_json()
            cases.append(
                {
                    "name": result.case,
                    "control": result.control,
                    "cells": [_cell(doc.get(k), f) for _, k, f in COLUMNS],
                    "mistakes": "; ".join(mistakes(result)),
                }
            )
        configs.append(
            {
                "number": n + 1,
                "label": part.config.label,
                "colour": _COLOURS[n % len(_COLOURS)],
                "ask_f1": _cell(total["ask_f1"], "{:.2f}"),
                "outcome": _cell(total["outcome"], "{:.2f}"),
                "totals": [_cell(total[k], f) for _, k, f in COLUMNS],
                "cases": cases,
                "fanned": (cx, cy) != (x, y),
                **{k: f"{v:.1f}" for k, v in {"x": x, "y": y, "cx": cx, "cy": cy}.items()},
                "text_y": f"{cy + 3.5:.1f}",
            }
        )
    ticks = [
        {
            "at": f"{_PAD + tick * _SIZE:.0f}",
            "up": f"{_PAD + _SIZE - tick * _SIZE + 4:.0f}",
            "label": f"{tick:g}",
        }
        for tick in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    return {
        "cases": report.cases,
        "configs": configs,
        "heads": [h for h, _, _ in COLUMNS],
        "figures": FIGURES,
        "docs_uri": DOCS.as_uri() if DOCS.is_file() else None,
        "size": _SIZE,
        "pad": _PAD,
        "ticks": ticks,
    }


def html(report: EvalReport) -> str:
    """The whole report as one HTML page (templates/report.html)."""
    return str(_templates().get_template("report.html").render(_page(report)))


def write_html(report: EvalReport, path: Path) -> None:
    """The whole report in one file: the plot, the totals, what the figures mean and every
    case; it reads on a phone too (the tables scroll sideways within the page)."""
    path.write_text(html(report), encoding="utf-8")
