"""The `orchestrator` command line: an edge over the session API (`orchestrator.api`).

`commands` registers every command on the Typer app, one module a command (or a noun):
`session_cmds` (run), `resume_cmd` (resume, with a multi-part question's `--part`
answers), `read_cmds` (status, list, log, db upgrade), `cancel` (cancel, clean),
`worker`, `serve`, `mcp`, `suites` (test), `eval_cmd` (eval) and `diagram` (graph); the
options they share are declared once in `options` (the chat-model ones too). `entry` is
the process entry point (usage errors, exit codes), `runs` builds the session API for
run/resume (how to ask, the progress line), `output` prints documents and turns errors
into exit codes, `terminal` asks at the terminal (by keys, or line by line), `progress`
draws the spinner line; the texts come from orchestrator.present. Importing this package
loads none of them: `main` first offers the command line to the fast read path
(orchestrator.cli.fastread, with the read commands' table of options), which answers
`status`, `list` and `log` on SQLite without Typer, SQLAlchemy or pydantic.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["app", "main", "run_cli", "EXIT_CODES"]

if TYPE_CHECKING:
    from orchestrator.cli.commands import EXIT_CODES, app
    from orchestrator.cli.entry import run_cli


def main(argv: list[str] | None = None) -> None:
    """The `orchestrator` entry point: the fast read path if it can answer, else Typer."""
    from orchestrator.cli.fastread import serve

    code = serve(sys.argv[1:] if argv is None else argv)
    if code is not None:
        raise SystemExit(code)
    _full().main(argv)


def _full() -> ModuleType:
    """The Typer command line, every command registered; its entry module."""
    from orchestrator.cli import entry

    return entry


def __getattr__(name: str) -> Any:
    if name in ("app", "EXIT_CODES", "run_cli"):
        return getattr(_full(), name)
    raise AttributeError(f"module 'orchestrator.cli' has no attribute {name!r}")
