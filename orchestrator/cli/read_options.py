"""The options of `status`, `list` and `log`, said once for both paths that answer them:
the fast read path (orchestrator.cli.fastread) parses argv with this table, and the Typer
commands (orchestrator.cli.read_cmds) declare the same names and status values; a test
holds Typer's registered options equal to it. Standard library only (and the contract's
statuses, `orchestrator.documents`)."""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import documents

__all__ = ["ReadOptions", "READ_COMMANDS", "STATUSES"]

# --status values: the session statuses, and "waiting" (a question is open).
STATUSES = documents.STATUS_FILTERS


class ReadOptions(NamedTuple):
    valued: frozenset[str]  # options that take a value
    flags: frozenset[str]  # options that take none
    positional: int  # arguments (the session id)


_ONE_SESSION = ReadOptions(frozenset({"--db"}), frozenset({"--json"}), 1)
READ_COMMANDS = {
    "status": _ONE_SESSION,
    "log": _ONE_SESSION,
    "list": ReadOptions(
        frozenset({"--db", "--status", "--limit", "--after"}), frozenset({"--json", "--all"}), 0
    ),
}
