"""The `orchestrator` command line: an edge over the session API (`orchestrator.api`).

`commands` declares the commands (`cancel`, `worker`, `mcp`, `serve`, `test` and `graph`
have their own modules, imported below to register themselves), `entry` is the process entry
point (usage errors, exit codes), `runs` builds the session API for run/resume (how to
ask, the progress line), `output` prints documents and turns errors into exit codes,
`render` writes the human text, `terminal` asks at the terminal, `progress` draws the
spinner line.
"""

from orchestrator.cli import cancel as _cancel  # noqa: F401  (registers `cancel`)
from orchestrator.cli import graph as _graph  # noqa: F401  (registers `graph`)
from orchestrator.cli import mcp as _mcp  # noqa: F401  (registers `mcp`)
from orchestrator.cli import serve as _serve  # noqa: F401  (registers `serve`)
from orchestrator.cli import suite as _suite  # noqa: F401  (registers `test`)
from orchestrator.cli import worker as _worker  # noqa: F401  (registers `worker`)
from orchestrator.cli.commands import EXIT_CODES, app
from orchestrator.cli.entry import main, run_cli

__all__ = ["app", "main", "run_cli", "EXIT_CODES"]
