"""The session API: the one door to the core that every edge goes through.

`Sessions` starts, answers, runs on, cancels and reads sessions; `Inbox` (as
`Sessions.inbox`) is what a door that lists and links questions needs; `database` opens,
checks and upgrades a database by URL; `running` prepares a process that runs sessions
(workers, forked children). The command line, the web inbox, the MCP server and the
scenario suites import the core only through this package.
"""

from orchestrator.api.inbox import Inbox
from orchestrator.api.sessions import AskUser, EventListener, Reply, Sessions

__all__ = ["Sessions", "Reply", "AskUser", "EventListener", "Inbox"]
