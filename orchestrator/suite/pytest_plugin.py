"""pytest plugin (entry point `pytest11`): scenario files as tests, and a fixture.

- With `orchestrator_scenarios = true` in the ini file (or `--orchestrator-scenarios`),
  every `*.scenario.yaml` / `*.scenario.yml` / `*.scenario.json` file is a test: it is
  played in a fresh database (steps, virtual clock, `expect`) and fails with the unmet
  expectations, one per line.
- The `orchestrator_session` fixture plays a scenario — a file, YAML text, a dict, or
  parts given as keywords (`task=`, `agents=`, `answers=`, `steps=`, ...) — in a fresh
  database and returns the session document (`orchestrator.documents.SessionDoc`).

Loaded whenever the package is installed, so this module imports only pytest up front.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from orchestrator.api import Sessions
    from orchestrator.documents import EventDoc, SessionDoc
    from orchestrator.scenario import Scenario
    from orchestrator.suite.play import Played

__all__ = ["ScenarioRunner", "ScenarioFailed", "orchestrator_session"]

SCENARIO_SUFFIXES = (".scenario.yaml", ".scenario.yml", ".scenario.json")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "orchestrator_scenarios",
        type="bool",
        default=False,
        help="collect *.scenario.yaml files as orchestrator scenario tests",
    )
    parser.getgroup("orchestrator").addoption(
        "--orchestrator-scenarios",
        action="store_true",
        default=False,
        help="collect *.scenario.yaml files as orchestrator scenario tests",
    )


def _enabled(config: pytest.Config) -> bool:
    return bool(
        config.getoption("orchestrator_scenarios") or config.getini("orchestrator_scenarios")
    )


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(SCENARIO_SUFFIXES) and _enabled(parent.config):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFailed(AssertionError):
    """A scenario's expectations did not hold (or it is malformed): one line each."""

    def __init__(self, lines: list[str] | tuple[str, ...]) -> None:
        super().__init__("\n".join(lines))
        self.lines = tuple(lines)


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield ScenarioItem.from_parent(self, name=self.path.name)


class ScenarioItem(pytest.Item):
    def runtest(self) -> None:
        from orchestrator.errors import ScenarioError
        from orchestrator.scenario import load_scenario

        try:
            scenario = load_scenario(self.path)
        except ScenarioError as exc:
            raise ScenarioFailed(["malformed scenario:", *exc.message.splitlines()]) from None
        factory = getattr(self.config, "_tmp_path_factory", None)  # pytest's tmp_path root
        folder = factory.mktemp("scenario") if factory else Path(tempfile.mkdtemp())
        runner = ScenarioRunner(folder / "orchestrator.db")
        try:
            played = runner.play(scenario, source=str(self.path))
        finally:
            runner.close()
        if not played.passed:
            raise ScenarioFailed(
                [*played.unmet, f"session {played.doc['session_id']}: {played.doc['status']}"]
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            return "\n".join(excinfo.value.lines)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"


class ScenarioRunner:
    """Plays scenarios in one fresh database (what `orchestrator_session` gives a test).

    Call it with a scenario (a Path, YAML/JSON text, a dict, a Scenario) or with its parts
    as keywords; it returns the session document after the steps. Expectations written in
    the scenario are enforced (ScenarioFailed); without any, the document is returned
    whatever the session's status, for the test to assert on. `log()` reads the events
    of the last session; `sessions` is the session API on the same database.
    """

    def __init__(self, db: Path | str) -> None:
        from orchestrator.api import Sessions

        self.sessions: Sessions = Sessions(str(db))
        self.last: Played | None = None

    def __call__(self, scenario: Any = None, /, **parts: Any) -> SessionDoc:
        played = self.play(_scenario(scenario, parts), require_completed=False)
        if not played.passed:
            raise ScenarioFailed(played.unmet)
        return played.doc

    def play(
        self, scenario: Scenario, *, source: str | None = None, require_completed: bool = True
    ) -> Played:
        from orchestrator.suite.play import play

        self.last = play(
            scenario, self.sessions, source=source, require_completed=require_completed
        )
        return self.last

    def log(self) -> list[EventDoc]:
        if self.last is None:
            raise RuntimeError("no scenario has been played yet")
        return self.sessions.log(self.last.doc["session_id"])

    def close(self) -> None:
        self.sessions.close()


def _scenario(given: Any, parts: Mapping[str, Any]) -> Scenario:
    from orchestrator.scenario import Scenario, load_scenario, parse_scenario

    if given is None:
        given = dict(parts)
    elif parts:
        raise TypeError("give a scenario or its parts as keywords, not both")
    if isinstance(given, Scenario):
        return given
    if isinstance(given, Path):
        return load_scenario(given)
    if isinstance(given, Mapping):
        return parse_scenario(json.dumps(given), "<scenario>.json")
    if isinstance(given, str):
        return parse_scenario(given)
    raise TypeError(f"expected a Path, YAML text, a dict or a Scenario, got {type(given).__name__}")


@pytest.fixture
def orchestrator_session(tmp_path: Path) -> Iterator[ScenarioRunner]:
    """Play scenarios in a fresh database under tmp_path; returns session documents."""
    runner = ScenarioRunner(tmp_path / "orchestrator.db")
    try:
        yield runner
    finally:
        runner.close()
