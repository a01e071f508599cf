"""The session API: the one door to the core that every edge goes through.

`Sessions` starts, answers, runs on, cancels and reads sessions; `Inbox` (as
`Sessions.inbox`) is what a door that lists and links questions needs; `database` opens,
checks and upgrades a database by URL; `running` prepares a process that runs sessions
(workers, forked children); `mcp_questions` records the questions the MCP server asks.
`lean` is the store's lean read (orchestrator.store.lean_sql: `status`, `log` and a page
of `list` off a SQLite file on the standard library alone, for the command line's fast
path), handed to the edges here rather than through a module of its own. The command line,
the web inbox, the MCP server and the scenario suites import the core only through this
package. Names load on first use, so that `lean` costs what it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Sessions", "Reply", "AskUser", "EventListener", "Inbox", "lean"]

if TYPE_CHECKING:
    from orchestrator.api.inbox import Inbox
    from orchestrator.api.sessions import AskUser, EventListener, Reply, Sessions
    from orchestrator.store import lean_sql as lean

_LAZY = {
    "Sessions": "orchestrator.api.sessions",
    "Reply": "orchestrator.api.sessions",
    "AskUser": "orchestrator.api.sessions",
    "EventListener": "orchestrator.api.sessions",
    "Inbox": "orchestrator.api.inbox",
}
_MODULES = {"lean": "orchestrator.store.lean_sql"}


def __getattr__(name: str) -> Any:
    from importlib import import_module

    if name in _MODULES:
        value = import_module(_MODULES[name])
    elif name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'orchestrator.api' has no attribute {name!r}")
    globals()[name] = value
    return value
