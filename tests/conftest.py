"""Shared fixtures: every test gets its own database and never sees the real home."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point HOME and the XDG dirs at a temp dir, and drop ORCHESTRATOR_DB."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)
    for key in list(os.environ):
        if key.endswith("_API_KEY"):
            monkeypatch.delenv(key)
    return home


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'orchestrator.db'}"


@pytest.fixture
def store(db_url: str) -> Iterator[object]:
    from orchestrator.store import Store, open_engine

    engine = open_engine(db_url)
    yield Store(engine)
    engine.dispose()


def argv(*args: str, db: str | None = None) -> list[str]:
    """The command line of the real `orchestrator`, run as `python -m orchestrator`."""
    return [sys.executable, "-m", "orchestrator", *args, *(["--db", db] if db else [])]


def cli(
    *args: str, db: str | None = None, timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run the real `orchestrator` command in a new process (stdin is not a terminal)."""
    return subprocess.run(
        argv(*args, db=db),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        **kwargs,  # type: ignore[arg-type]
    )
