"""Git repositories and scenario files for the tests of developers that run code."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

__all__ = ["make_repo", "commit_all", "scenario"]


def commit_all(path: Path, message: str = "first") -> None:
    """Commit everything in the repository at `path` (as a user would, hooks and all)."""
    for args in (
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git repository at `path` with one commit of `files` (name -> text)."""
    path.mkdir(parents=True)
    for name, text in (files or {"README.md": "a project\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    commit_all(path)
    return path


def scenario(folder: Path, body: dict[str, Any]) -> Path:
    """`body` written as the scenario file `folder/scenario.yaml`."""
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path
