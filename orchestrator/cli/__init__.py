"""The `orchestrator` command line: an edge over the session API (`orchestrator.api`).

`commands` declares the commands, `runs` builds the session API for run/resume (how to
ask, the progress line), `output` prints documents and turns errors into exit codes,
`render` writes the human text, `terminal` asks at the terminal, `progress` draws the
spinner line. Commands with their own module register themselves on `app` when imported
here: `mcp` (the MCP server).
"""

from orchestrator.cli import mcp as _mcp  # noqa: F401  (registers `orchestrator mcp`)
from orchestrator.cli.commands import EXIT_CODES, app, main

__all__ = ["app", "main", "EXIT_CODES"]
