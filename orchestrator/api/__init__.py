"""The session API: the one door to the core that every edge goes through.

`Sessions` starts, answers, runs on, cancels and reads sessions; `Inbox` (as
`Sessions.inbox`) is what a door that lists and links questions needs; `database` opens,
checks and upgrades a database by URL; `running` prepares a process that runs sessions
(workers, forked children); `lean` reads a SQLite file on the standard library alone (the
command line's fast path); `mcp_questions` records the questions the MCP server asks. The
command line, the web inbox, the MCP server and the scenario suites import the core only
through this package. Names load on first use, so that `lean` costs what it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Sessions", "Reply", "AskUser", "EventListener", "Inbox"]

if TYPE_CHECKING:
    from orchestrator.api.inbox import Inbox
    from orchestrator.api.sessions import AskUser, EventListener, Reply, Sessions

_LAZY = {
    "Sessions": "orchestrator.api.sessions",
    "Reply": "orchestrator.api.sessions",
    "AskUser": "orchestrator.api.sessions",
    "EventListener": "orchestrator.api.sessions",
    "Inbox": "orchestrator.api.inbox",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator.api' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
