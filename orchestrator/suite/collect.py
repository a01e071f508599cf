"""Finding scenario files under the paths given to `orchestrator test`.

The rule: a file named on the command line is a scenario. In a folder (searched
recursively, hidden folders and `node_modules` left out) a `.yaml`, `.yml` or `.json`
file is a scenario when its name ends in `.scenario.yaml` / `.scenario.yml` /
`.scenario.json`, or when it has a top-level `task` or `agents` key (a line starting
with `task:` / `agents:` in YAML, a `"task"` / `"agents"` key in JSON). So CI workflows,
configuration files and other data next to the scenarios are left alone, while a
scenario with a syntax error is still found, and reported as malformed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from pathlib import Path

from orchestrator.errors import ConfigError, ScenarioError
from orchestrator.suite.results import Item, Malformed

__all__ = ["collect", "looks_like_scenario", "SUFFIXES", "selected"]

SUFFIXES = (".yaml", ".yml", ".json")
NAMED = tuple(f".scenario{suffix}" for suffix in SUFFIXES)
_YAML_KEY = re.compile(r"^(task|agents)\s*:", re.MULTILINE)
_JSON_KEY = re.compile(r'"(task|agents)"\s*:')
_SKIP_DIRS = {"node_modules", "__pycache__"}


def looks_like_scenario(path: Path) -> bool:
    """The folder rule above (files named on the command line are not asked)."""
    name = path.name.lower()
    if not name.endswith(SUFFIXES):
        return False
    if name.endswith(NAMED):
        return True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    pattern = _JSON_KEY if name.endswith(".json") else _YAML_KEY
    return pattern.search(text) is not None


def _files(root: Path) -> Iterable[Path]:
    for path in sorted(root.iterdir()):
        if path.is_dir():
            if not path.name.startswith(".") and path.name not in _SKIP_DIRS:
                yield from _files(path)
        elif looks_like_scenario(path):
            yield path


def _name(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def collect(paths: Iterable[Path | str]) -> tuple[list[Item], list[Malformed]]:
    """The scenarios under `paths` (each once, in path order) and the malformed ones.

    A path that does not exist, or a folder with no scenario at all, is a ConfigError."""
    from orchestrator.scenario import load_scenario

    found: dict[Path, tuple[Path, str]] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = list(_files(path))
            if not files:
                raise ConfigError(
                    f"{path}: no scenario files in this folder (expected .yaml, .yml or "
                    ".json files with a top-level 'task' or 'agents' key)"
                )
            keyed = [(file, file.relative_to(path).as_posix()) for file in files]
        elif path.is_file():
            keyed = [(path, path.name)]
        else:
            raise ConfigError(f"{path}: no such file or folder")
        for file, key in keyed:
            found.setdefault(file.resolve(), (file, key))
    items, malformed = [], []
    for file, key in found.values():
        name = _name(file)
        try:
            load_scenario(file)
        except ScenarioError as exc:
            malformed.append(Malformed(path=str(file), name=name, message=exc.message, key=key))
        else:
            items.append(Item(path=str(file), name=name, key=key))
    return items, malformed


def selected(name: str, pattern: str | None) -> bool:
    """`-k PATTERN` against a scenario's key (its path inside the folder given): a glob
    when it has * ? or [, else a substring (case-insensitive)."""
    if not pattern:
        return True
    name, pattern = name.lower(), pattern.lower()
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(
            name.rsplit("/", 1)[-1], pattern
        )
    return pattern in name
