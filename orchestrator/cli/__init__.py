"""The `orchestrator` command line: an edge over the session API (`orchestrator.api`).

`commands` declares the commands, `runs` builds the session API for run/resume (how to
ask, the progress line), `output` prints documents and turns errors into exit codes,
`render` writes the human text, `terminal` asks at the terminal, `progress` draws the
spinner line. Importing this package loads none of them: `main` first offers the command
line to the fast read path (orchestrator.fastread), which answers `status`, `list` and
`log` on SQLite without Typer, SQLAlchemy or pydantic.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__all__ = ["app", "main", "EXIT_CODES"]

if TYPE_CHECKING:
    from orchestrator.cli.commands import EXIT_CODES, app


def main() -> None:
    """The `orchestrator` entry point: the fast read path if it can answer, else Typer."""
    from orchestrator.fastread import serve

    code = serve(sys.argv[1:])
    if code is not None:
        raise SystemExit(code)
    from orchestrator.cli.commands import main as full

    full()


def __getattr__(name: str) -> Any:
    if name in ("app", "EXIT_CODES"):
        from orchestrator.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module 'orchestrator.cli' has no attribute {name!r}")
