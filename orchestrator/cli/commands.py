"""The `orchestrator` command line (contract section 3): the Typer app, every command
registered here, in one place. A thin edge over the session API.

Exit codes: 0 completed, 1 failed or an unmet `expect`, 2 bad input (nothing changed),
3 paused waiting for an answer, 4 cancelled. With --json, stdout carries exactly one JSON
document; progress and prose go to stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli import (
    cancel,
    diagram,
    eval_cmd,
    mcp,
    read_cmds,
    resume_cmd,
    serve,
    session_cmds,
    suites,
    worker,
)
from orchestrator.cli.output import EXIT_CODES

__all__ = ["app", "EXIT_CODES"]

app = typer.Typer(
    name="orchestrator",
    help="Run teams of agents that ask the user at most one question per session.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _version(value: bool) -> None:
    if value:
        from orchestrator import __version__

        typer.echo(f"orchestrator {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Run teams of agents that ask the user at most one question per session."""


app.command()(session_cmds.run)
app.command(cls=resume_cmd.PartsCommand)(resume_cmd.resume)
app.command()(read_cmds.status)
app.command("list")(read_cmds.list_)
app.command()(read_cmds.log)
app.command()(cancel.cancel)
app.command()(cancel.clean)
app.command()(worker.worker)
app.command()(serve.serve)
app.command()(mcp.mcp)
app.command("test")(suites.run_tests)
app.command("eval")(eval_cmd.evaluate)
app.command("graph")(diagram.graph)
db_app.command("upgrade")(read_cmds.db_upgrade)
