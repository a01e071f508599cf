"""Trust boundaries outside the web server: what a database path can be."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import cli


@pytest.mark.parametrize("command", [["list"], ["run", "--script", "examples/hard-cap.yaml"]])
def test_a_fifo_as_database_is_refused_not_waited_on(tmp_path: Path, command: list[str]) -> None:
    """Opening a FIFO blocks until someone writes to it: the check must not open it."""
    fifo = tmp_path / "db.sqlite"
    os.mkfifo(fifo)
    done = cli(*command, "--json", db=str(fifo), timeout=60)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)
    assert "not a regular file" in error["error"] and error["exit_code"] == 2
