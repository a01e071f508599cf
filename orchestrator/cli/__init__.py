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
`status`, `list` and `log` on SQLite without Typer, SQLAlchemy or pydantic. The
installed command (and `python -m orchestrator`) is `console`: `main`, then an exit that
does not take the heap apart.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

__all__ = ["app", "console", "main", "run_cli", "EXIT_CODES"]

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


def console() -> NoReturn:
    """The installed `orchestrator` command and `python -m orchestrator`: `main`, then the
    process ends as a normal exit would but without the interpreter's teardown.

    Once a command is over, a normal exit frees every object the process made, one by
    one: about 35 ms after a session of a hundred developers (docs/parallel.md), which
    the user waits for with nothing left to do. What a normal exit does that matters is
    done first: the atexit handlers run (logging's flush, the progress line, temporary
    folders) and the standard streams are flushed; then `os._exit` (as mypy ends). Where
    a thread of the command's own is still running (not a daemon), the exit status is not
    a number, or the interpreter has no way to run the handlers early, the usual exit is
    taken (which waits for the thread). `main` itself raises SystemExit as always, for
    callers in the same process."""
    import atexit
    import os
    import threading  # here: the fast read path does without it

    try:
        main()
        code: Any = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    working = [
        thread
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
    ]
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's (3.11-3.13 checked)
    if working or not isinstance(code, int) or run_exitfuncs is None:
        sys.exit(code)
    try:
        run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass  # a closed pipe or stream: what it would have said is gone anyway
        os._exit(code)


def _full() -> ModuleType:
    """The Typer command line, every command registered; its entry module."""
    from orchestrator.cli import entry

    return entry


def __getattr__(name: str) -> Any:
    if name in ("app", "EXIT_CODES", "run_cli"):
        return getattr(_full(), name)
    raise AttributeError(f"module 'orchestrator.cli' has no attribute {name!r}")
