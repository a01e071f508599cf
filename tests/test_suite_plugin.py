"""The pytest plugin, run through pytester: scenario files as test items (when enabled)
and the `orchestrator_session` fixture. Every inner pytest finds the plugin through its
`pytest11` entry point, as a user's does. One runs in a process of its own, as a user's
would; the others run in this process (`runpytest_inprocess`: a new pytest session, its
own config and plugin manager, without starting and importing everything again).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import _pytest.pytester
import pytest

from tests.conftest import EXAMPLES

pytest_plugins = ["pytester"]


@pytest.fixture
def pytester(keep_imports: None, pytester: pytest.Pytester) -> pytest.Pytester:
    return pytester


@pytest.fixture
def keep_imports(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """After an inner run in this process, pytester drops every module it imported; for the
    package and its dependencies that would leave two copies of them in this test process
    (classes that no longer match). Drop only what was imported from the inner runs' own
    files (their test modules and conftest)."""
    inner = str(tmp_path_factory.getbasetemp())

    class KeepImports(_pytest.pytester.SysModulesSnapshot):
        def restore(self) -> None:
            kept = {
                name: module
                for name, module in sys.modules.items()
                if not str(getattr(module, "__file__", None) or "").startswith(inner)
            }
            super().restore()
            sys.modules.update(kept)

    monkeypatch.setattr(_pytest.pytester, "SysModulesSnapshot", KeepImports)
    yield


PAUSING = (EXAMPLES / "pause-and-resume.yaml").read_text()
FAILING = (
    (EXAMPLES / "hard-cap.yaml")
    .read_text()
    .replace("fallbacks_injected: 1", "fallbacks_injected: 0")
)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".scenario.yaml", digest=PAUSING, capped=FAILING)
    pytester.makefile(".yaml", plain=PAUSING)  # not *.scenario.yaml: never collected
    return pytester


def test_scenario_files_are_not_collected_unless_enabled(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes()  # nothing collected
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_scenario_files_become_test_items_with_the_ini_option(
    project: pytest.Pytester,
) -> None:
    project.makeini("[pytest]\norchestrator_scenarios = true\n")
    result = project.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*capped.scenario.yaml::capped.scenario.yaml FAILED*",
            "*digest.scenario.yaml::digest.scenario.yaml PASSED*",
            "expect.fallbacks_injected: expected 0, got 1",
        ]
    )


def test_the_shipped_suite_examples_pass_as_pytest_items(pytester: pytest.Pytester) -> None:
    shipped = sorted((EXAMPLES / "suite").glob("*.scenario.yaml"))
    assert len(shipped) >= 5  # one per on_timeout policy, decline, a multi-part question
    for path in shipped:
        (pytester.path / path.name).write_text(path.read_text())
    result = pytester.runpytest_inprocess("--orchestrator-scenarios")
    result.assert_outcomes(passed=len(shipped))


def test_the_command_line_flag_enables_collection_too(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("--orchestrator-scenarios", "-k", "digest")
    result.assert_outcomes(passed=1, deselected=1)


def test_a_malformed_scenario_file_fails_with_its_path(pytester: pytest.Pytester) -> None:
    pytester.makefile(".scenario.yaml", broken="task: x\nagents:\n  pm: []\nbogus: 1\n")
    result = pytester.runpytest_inprocess("--orchestrator-scenarios")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["malformed scenario:", "*broken.scenario.yaml: bogus: unknown key*"]
    )


def test_the_fixture_plays_files_text_and_sessions_built_in_python(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", digest=PAUSING)
    pytester.makepyfile(
        """
        from pathlib import Path

        import pytest

        from orchestrator.suite.pytest_plugin import ScenarioFailed


        def test_a_file(orchestrator_session):
            doc = orchestrator_session(Path("digest.yaml"))
            assert doc["status"] == "completed"
            assert doc["orchestrator_state"]["user_clarification_response"] == (
                "Weekly, on Monday mornings"
            )


        def test_a_declined_question_falls_back(orchestrator_session):
            doc = orchestrator_session(
                task="Send a digest email",
                agents={
                    "pm": [
                        {"status": "NEEDS_CLARIFICATION", "question": "How often?"},
                        {"status": "PLANNED", "tasks": [{"title": "Digest job"}]},
                        {"status": "COMPLETE", "summary": "daily digest"},
                    ],
                    "developer": [{"status": "DONE", "summary": "job added"}],
                },
                answers=[{"action": "decline"}],
            )
            assert doc["status"] == "completed"
            assert doc["orchestrator_state"]["answer_status"] == "declined"
            assert [e["kind"] for e in orchestrator_session.log()].count("fallback") == 1


        def test_text_without_expect_returns_the_paused_session(orchestrator_session):
            text = Path("digest.yaml").read_text().split("expect:")[0]
            doc = orchestrator_session(text)
            assert doc["status"] == "paused"
            assert doc["pending_question"]["asked_by"] == "pm"


        def test_unmet_expectations_raise(orchestrator_session):
            text = Path("digest.yaml").read_text().replace(
                "questions_surfaced: 1", "questions_surfaced: 2"
            )
            with pytest.raises(ScenarioFailed) as caught:
                orchestrator_session(text)
            assert caught.value.lines == ("expect.questions_surfaced: expected 2, got 1",)
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=4)
