"""The `orchestrator` command line: an edge over the session API (`orchestrator.api`).

`commands` declares the commands, `runs` builds the session API for run/resume (how to
ask, the progress line), `output` prints documents and turns errors into exit codes,
`render` writes the human text, `terminal` asks at the terminal, `progress` draws the
spinner line.
"""

from orchestrator.cli import serve as _serve  # noqa: F401  (registers `serve`)
from orchestrator.cli.commands import EXIT_CODES, app, main

__all__ = ["app", "main", "EXIT_CODES"]
