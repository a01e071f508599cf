"""What `orchestrator test` shows while it runs: one line per finished scenario (its
unmet expectations under it), then a summary table and the total. Drawn with rich; plain
text when the stream is not a terminal."""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.suite.results import Malformed, Report, Result

__all__ = ["SuiteConsole"]

_STYLE = {"passed": "green", "failed": "red", "error": "red", "skipped": "yellow"}
_WORD = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}


class SuiteConsole:
    def __init__(self, stream: IO[str] | None = None, *, stderr: bool = False) -> None:
        self.console = Console(file=stream, stderr=stderr, highlight=False, soft_wrap=True)

    def malformed(self, items: list[Malformed] | tuple[Malformed, ...]) -> None:
        for item in items:
            self.console.print(f"[red]MALFORMED[/] {escape(item.name)}")
            for line in item.message.splitlines():
                self.console.print(f"    {escape(line)}")

    def result(self, result: Result) -> None:
        style = _STYLE[result.outcome]
        status = f"  ({result.status})" if result.status else ""
        self.console.print(
            f"[{style}]{_WORD[result.outcome]:<5}[/] {escape(result.name)}  "
            f"{result.seconds:.2f}s{escape(status)}"
        )
        for line in result.unmet:
            self.console.print(f"    {escape(line)}")
        if result.outcome == "error" and result.message:
            for line in result.message.rstrip().splitlines():
                self.console.print(f"    {escape(line)}")
        if result.database:
            self.console.print(f"    database kept: {escape(result.database)}")

    def summary(self, report: Report) -> None:
        table = Table(title=None, show_edge=False, pad_edge=False)
        table.add_column("scenario")
        table.add_column("outcome")
        table.add_column("status")
        table.add_column("time", justify="right")
        for item in report.malformed:
            table.add_row(escape(item.name), "[red]malformed[/]", "", "")
        for r in report.results:
            table.add_row(
                escape(r.name),
                f"[{_STYLE[r.outcome]}]{r.outcome}[/]",
                r.status or "",
                f"{r.seconds:.2f}s",
            )
        self.console.print()
        self.console.print(table)
        self.console.print(self.total(report))

    @staticmethod
    def total(report: Report) -> str:
        parts = [
            f"{report.count('passed')} passed",
            f"{report.count('failed')} failed",
        ]
        errors = report.count("error")
        if errors:
            parts.append(f"{errors} error{'s' if errors != 1 else ''}")
        if report.malformed:
            parts.append(f"{len(report.malformed)} malformed")
        if report.count("skipped"):
            parts.append(f"{report.count('skipped')} not run (-x)")
        count = len(report.results) + len(report.malformed)
        return (
            f"{count} scenario{'s' if count != 1 else ''}: {', '.join(parts)} "
            f"in {report.seconds:.2f}s (-j {report.jobs})"
        )
