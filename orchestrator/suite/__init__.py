"""Scenario suites for CI (contract section 7): collect scenario files, run each in its
own fresh database and process, N at a time, and report (lines, a table, JUnit XML).

`play` runs one scenario in this process through the session API (steps, the virtual
clock, expectations); `run_suite` runs many, each in a child process.
"""

from orchestrator.suite.collect import collect, looks_like_scenario
from orchestrator.suite.results import Item, Malformed, Report, Result

__all__ = [
    "collect",
    "looks_like_scenario",
    "run_suite",
    "play",
    "Item",
    "Malformed",
    "Report",
    "Result",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    if name == "run_suite":
        from orchestrator.suite.parallel import run_suite

        return run_suite
    if name == "play":
        from orchestrator.suite.play import play

        return play
    raise AttributeError(name)
