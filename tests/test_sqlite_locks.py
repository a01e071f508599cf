"""SQLite's locks belong to the process: a process that holds the store open must never
open the file by other means (closing that descriptor drops every lock the process holds on
the file). The issue-43 report: an MCP server looked at its own database file while asking
(to print the resume command), after which any `orchestrator status` deleted the -wal file
under it, and the answer `resume` committed never reached it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.api.database import is_default, locate
from orchestrator.store import Owner, Store

pytestmark = pytest.mark.backends("sqlite")

# Another process: one read (as `orchestrator status` on the fast path), then one write
# (as `orchestrator resume` committing an answer), each on a connection of its own.
OTHER = """
import sqlite3, sys
read = sqlite3.connect(sys.argv[1]); read.execute("SELECT count(*) FROM sessions").fetchall()
read.close()
write = sqlite3.connect(sys.argv[1], isolation_level=None)
write.execute("UPDATE sessions SET task = 'changed elsewhere'")
write.close()
"""


def test_looking_at_an_open_database_keeps_the_process_locks(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        claim, _ = store.create("task", agents={"kind": "scripted"}, settings={}, owner=Owner())
        session_id = claim.session_id
        assert locate(db_url).exists  # what a command checks before it opens a database
        path = db_url.removeprefix("sqlite:///")
        subprocess.run([sys.executable, "-c", OTHER, path], check=True, timeout=60)
        assert Path(path + "-wal").exists()  # not deleted from under this process
        assert store.session(session_id).task == "changed elsewhere"  # and seen here
    finally:
        store.close()


def test_is_default_names_the_environment_database_without_opening_it(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setenv("ORCHESTRATOR_DB", db_url)
        assert is_default(db_url)
        assert not is_default(db_url + "-other")
