"""Which files `orchestrator test` takes for scenarios (the rule in docs/ci.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.suite.collect import collect, looks_like_scenario, selected
from tests.conftest import EXAMPLES

SCENARIO = (EXAMPLES / "hard-cap.yaml").read_text()


@pytest.mark.parametrize(
    ("name", "text", "taken"),
    [
        ("a.yaml", SCENARIO, True),
        ("a.yml", "agents:\n  pm: []\n", True),  # malformed, but clearly meant as one
        ("a.json", '{"task": "x", "agents": {}}', True),
        ("a.yaml", "task: [unclosed\n", True),  # a syntax error is reported, not skipped
        ("a.scenario.yaml", "anything: at all\n", True),
        ("a.scenario.json", "{}", True),
        ("workflow.yml", "on: push\njobs:\n  build:\n    task: x\n", False),  # nested key
        ("package.json", '{"name": "x", "scripts": {}}', False),
        ("scenario.yaml", "name: x\n", False),
        ("notes.txt", SCENARIO, False),
    ],
)
def test_the_folder_rule(tmp_path: Path, name: str, text: str, taken: bool) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert looks_like_scenario(path) is taken


def test_collect_searches_folders_skips_hidden_ones_and_names_files_once(tmp_path: Path) -> None:
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "one.yaml").write_text(SCENARIO)
    (tmp_path / ".github" / "workflows" / "two.yaml").write_text(SCENARIO)
    (tmp_path / "bad.yaml").write_text("task: x\nagents: {}\n")
    items, malformed = collect([tmp_path, tmp_path / "deep" / "er" / "one.yaml"])
    assert [i.key for i in items] == ["deep/er/one.yaml"]
    assert [m.key for m in malformed] == ["bad.yaml"]
    assert "agents: the scenario needs scripted replies for 'pm'" in malformed[0].message


def test_a_file_named_on_the_command_line_is_always_a_scenario(tmp_path: Path) -> None:
    path = tmp_path / "odd.txt"
    path.write_text(SCENARIO)
    items, malformed = collect([path])
    assert [i.key for i in items] == ["odd.txt"] and malformed == []


def test_missing_paths_and_empty_folders_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file or folder"):
        collect([tmp_path / "nope"])
    with pytest.raises(ConfigError, match="no scenario files in this folder"):
        collect([tmp_path])


@pytest.mark.parametrize(
    ("pattern", "hit"),
    [
        (None, True),
        ("hard", True),
        ("HARD", True),
        ("suite/*", False),
        ("*.yaml", True),
        ("hard-cap.y?ml", True),
        ("timeout", False),
    ],
)
def test_k_selects_by_substring_or_glob(pattern: str | None, hit: bool) -> None:
    assert selected("nested/hard-cap.yaml", pattern) is hit
