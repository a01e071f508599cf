"""`orchestrator test`: run scenario suites in CI (contract section 7).

Exit 0 when every scenario passed, 1 when any expectation did not hold or a scenario
failed unexpectedly, 2 when a file is malformed (all of them named) or the paths hold no
scenario. With --json, stdout holds one JSON document; the lines and table go to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.options import JsonOption
from orchestrator.cli.output import user_errors

__all__ = ["run_tests"]


def run_tests(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Scenario files, and folders searched for them (.yaml, .yml, .json files "
            "with a top-level 'task' or 'agents' key, or named *.scenario.yaml).",
        ),
    ],
    jobs: Annotated[
        int | None,
        typer.Option(
            "-j",
            "--jobs",
            min=1,
            metavar="N",
            help="Scenarios run at a time, each in its own process. Default: the CPUs.",
        ),
    ] = None,
    junit_xml: Annotated[
        Path | None,
        typer.Option("--junit-xml", metavar="FILE", help="Write a JUnit XML report to FILE."),
    ] = None,
    keyword: Annotated[
        str | None,
        typer.Option(
            "-k",
            metavar="PATTERN",
            help="Only scenarios whose path inside the folder given contains PATTERN "
            "(a glob when it has * ? [).",
        ),
    ] = None,
    exitfirst: Annotated[
        bool, typer.Option("-x", "--exitfirst", help="Stop at the first scenario that fails.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run scenario files, each in a fresh database, and report (exit 0, 1 or 2)."""
    from orchestrator.suite.collect import collect, selected
    from orchestrator.suite.console import SuiteConsole
    from orchestrator.suite.parallel import default_jobs, run_suite

    with user_errors(as_json):
        from orchestrator.errors import ConfigError

        items, malformed = collect(paths)
        items = [i for i in items if selected(i.key, keyword)]
        malformed = [m for m in malformed if selected(m.key, keyword)]
        if not items and not malformed:
            raise ConfigError(f"no scenario matches -k {keyword!r}")
        if junit_xml is not None:
            if junit_xml.is_dir():
                raise ConfigError(f"--junit-xml {junit_xml}: is a folder; give a file name")
            try:  # before the run, not after it
                junit_xml.parent.mkdir(parents=True, exist_ok=True)
                junit_xml.touch()
            except OSError as exc:
                raise ConfigError(f"--junit-xml {junit_xml}: cannot write it ({exc})") from None
    jobs = jobs or default_jobs()
    shown = SuiteConsole(stderr=as_json)
    shown.console.print(
        f"{len(items)} scenario{'s' if len(items) != 1 else ''} to run"
        + (f", {len(malformed)} malformed" if malformed else "")
        + f" (-j {jobs}: each in its own process and database)"
    )
    shown.malformed(malformed)
    report = run_suite(
        items, jobs=jobs, malformed=malformed, exitfirst=exitfirst, on_result=shown.result
    )
    shown.summary(report)
    if malformed:
        shown.console.print("malformed: " + ", ".join(m.name for m in malformed))
    if junit_xml is not None:
        from orchestrator.suite.results import write_junit

        write_junit(report, junit_xml)
        shown.console.print(f"JUnit report: {junit_xml}")
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    raise typer.Exit(report.exit_code)
