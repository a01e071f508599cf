"""The `orchestrator` command line (contract section 3). A thin edge over the core.

Exit codes: 0 completed, 1 failed or an unmet `expect`, 2 bad input (nothing changed),
3 paused waiting for an answer, 4 cancelled. With --json, stdout carries exactly one JSON
document; progress and prose go to stderr.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.output import EXIT_CODES, emit, err, finish, user_errors
from orchestrator.cli.runs import (
    NO_AGENTS,
    OnTimeout,
    Status,
    Ui,
    collect_from_here_on,
    sessions_for,
)
from orchestrator.readout import DEFAULT_LIMIT, list_text, log_text, next_page_hint, status_text

__all__ = ["app", "main", "EXIT_CODES"]

# Shown in the help; the defaults themselves live in orchestrator/settings.py only. Kept
# as literals checked against Settings by a test, so that `--help` needs no pydantic.
DEFAULTS = {
    "max_rounds": 5,
    "max_fallbacks": 2,
    "uncertainty_threshold": 70,
    "timeout": 300.0,
    "on_timeout": "wait",
}


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="SQLAlchemy URL or SQLite file path. Default: $ORCHESTRATOR_DB, else "
        "orchestrator.db in the user data directory.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
]
UiOption = Annotated[
    Ui | None,
    typer.Option(
        "--ui",
        help="How to ask when scripted answers run out: 'terminal' prompts, 'none' pauses "
        "(exit 3). Default: terminal when stdin is a terminal, else none.",
    ),
]

app = typer.Typer(
    name="orchestrator",
    help="Run teams of agents that ask the user at most one question per session.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@app.command()
def run(
    task: Annotated[
        str | None, typer.Argument(help="What the agents should do (a scenario has its own).")
    ] = None,
    script: Annotated[
        Path | None,
        typer.Option(
            "--script",
            metavar="FILE",
            help="Scenario file (YAML/JSON): scripted agents and answers, no model is called.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            metavar="PROVIDER:NAME",
            help="Chat model for every agent, e.g. openai:gpt-4o-mini (or $ORCHESTRATOR_MODEL).",
        ),
    ] = None,
    pm_model: Annotated[
        str | None, typer.Option("--pm-model", metavar="PROVIDER:NAME", help="The PM's model.")
    ] = None,
    developer_model: Annotated[
        str | None,
        typer.Option("--developer-model", metavar="PROVIDER:NAME", help="The developers' model."),
    ] = None,
    prompts: Annotated[
        Path | None,
        typer.Option(
            "--prompts",
            metavar="DIR",
            help="Folder with pm.md / developer.md to use instead of the shipped prompts.",
        ),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(
            "--workdir",
            metavar="DIR",
            help="The developers' workspace. Default: "
            "workspaces/<session id> in the user data directory.",
        ),
    ] = None,
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries",
            min=0,
            help="Invalid model replies sent back for correction before the session fails.",
        ),
    ] = 2,
    max_rounds: Annotated[
        int | None,
        typer.Option(
            "--max-rounds", min=1, help=f"Planning rounds allowed [{DEFAULTS['max_rounds']}]."
        ),
    ] = None,
    max_fallbacks: Annotated[
        int | None,
        typer.Option(
            "--max-fallbacks",
            min=0,
            help=f"Fallbacks an agent may ignore [{DEFAULTS['max_fallbacks']}].",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=1,
            metavar="SECONDS",
            help=f"How long the question waits for an answer [{DEFAULTS['timeout']:g}].",
        ),
    ] = None,
    on_timeout: Annotated[
        OnTimeout | None,
        typer.Option(
            "--on-timeout",
            help="When the deadline passes: wait (stay paused and "
            "answerable), proceed (the asker takes its default), cancel "
            f"[{DEFAULTS['on_timeout']}].",
        ),
    ] = None,
    uncertainty_threshold: Annotated[
        int | None,
        typer.Option(
            "--uncertainty-threshold",
            min=0,
            max=100,
            metavar="0-100",
            help="Questions from agents less uncertain than this are not asked; "
            f"the agent proceeds with its default [{DEFAULTS['uncertainty_threshold']}].",
        ),
    ] = None,
    ui: UiOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a session and run it until it completes, fails or pauses for an answer."""
    with user_errors(as_json):
        from orchestrator.errors import ConfigError

        limits = {
            "max_rounds": max_rounds,
            "max_fallbacks": max_fallbacks,
            "timeout": timeout,
            "on_timeout": on_timeout.value if on_timeout else None,
            "uncertainty_threshold": uncertainty_threshold,
        }
        if script is not None:
            if model or pm_model or developer_model:
                raise ConfigError("give either --script or a model, not both")
            view = _run_script(script, task, limits, ui, db)
        else:
            from agents.models import resolve_models

            models = resolve_models(model, pm=pm_model, developer=developer_model)
            if models is None:
                raise ConfigError(NO_AGENTS)
            if not task or not task.strip():
                raise ConfigError(
                    'give the TASK for the agents, e.g. orchestrator run "Add a CSV '
                    'export to the reports page" --model openai:gpt-4o-mini'
                )
            import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)

            collect_from_here_on()
            view = sessions_for(db, progress=True, ui=ui).start(
                task,
                models=models,
                settings=limits,
                prompts=prompts,
                workdir=workdir,
                max_retries=max_retries,
            )
    finish(as_json, view, db)


def _run_script(
    script: Path, task: str | None, limits: Mapping[str, object], ui: Ui | None, db: str | None
) -> dict[str, object]:
    import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)
    from orchestrator.scenario import load_scenario

    collect_from_here_on()
    scenario = load_scenario(script)  # before the database is touched
    sessions = sessions_for(db, progress=True, ui=ui, scripted=bool(scenario.answers))
    return dict(sessions.start_scenario(scenario, task=task, settings=limits, source=str(script)))


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to continue.")],
    answer: Annotated[
        str | None, typer.Option("--answer", metavar="TEXT", help="Answer the open question.")
    ] = None,
    choice: Annotated[
        list[str] | None,
        typer.Option(
            "--choice",
            metavar="LABEL",
            help="Choose an option (repeat for a multi_select question).",
        ),
    ] = None,
    decline: Annotated[
        bool, typer.Option("--decline", help="Resolve the question without an answer.")
    ] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Stop the session.")] = False,
    note: Annotated[
        str | None,
        typer.Option("--note", metavar="TEXT", help="A remark kept with your answer."),
    ] = None,
    ui: UiOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a paused session: answer, decline or cancel its question, or see it again."""
    with user_errors(as_json):
        import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)
        from orchestrator.answers import UserReply
        from orchestrator.errors import ConfigError

        collect_from_here_on()

        given = [
            name
            for name, on in (
                ("--answer", answer is not None),
                ("--choice", bool(choice)),
                ("--decline", decline),
                ("--cancel", cancel),
            )
            if on
        ]
        if len(given) > 1:
            raise ConfigError(f"give at most one of {', '.join(given)}")
        reply = None
        if answer is not None:
            reply = UserReply(text=answer, note=note)
        elif choice:
            reply = UserReply(choices=tuple(choice), note=note)
        elif decline:
            reply = UserReply(action="decline", note=note)
        elif cancel:
            reply = UserReply(action="cancel", note=note)
        elif note is not None:
            raise ConfigError("--note goes with --answer, --choice, --decline or --cancel")
        view = sessions_for(db, progress=True, ui=ui).resume(session_id, reply)
    finish(as_json, view, db)


@app.command()
def status(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one session."""
    with user_errors(as_json):
        view = sessions_for(db).status(session_id)
    emit(as_json, view, status_text(view))


@app.command("list")
def list_(
    status_: Annotated[
        Status | None, typer.Option("--status", help="Only sessions with this status.")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, metavar="N", help=f"At most N sessions [{DEFAULT_LIMIT}]."),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every session, no paging.")] = False,
    after: Annotated[
        str | None,
        typer.Option(
            "--after",
            metavar="ID",
            help="The page after this session (the command for the next page is printed "
            "on stderr when there is one).",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, newest first, a page at a time."""
    with user_errors(as_json):
        from orchestrator.errors import ConfigError

        if all_ and limit is not None:
            raise ConfigError("give either --limit or --all, not both")
        page = None if all_ else (limit or DEFAULT_LIMIT)
        status = status_.value if status_ else None
        # One more than the page: it tells whether a next page exists.
        views = sessions_for(db).list(status, limit=None if page is None else page + 1, after=after)
        if page is not None and len(views) > page:
            del views[page:]
            err(next_page_hint(views[-1]["session_id"], status=status, limit=page, db=db))
    emit(as_json, views, list_text(views))


@app.command()
def log(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's events: agent replies, questions, answers, fallbacks, status."""
    with user_errors(as_json):
        events = sessions_for(db).log(session_id)
    emit(as_json, events, log_text(events))


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Apply database migrations (they also run automatically before first use)."""
    with user_errors(as_json):
        from orchestrator.store.db import open_engine, resolve_url, upgrade
        from orchestrator.store.schema import HEAD_REVISION

        url = resolve_url(db)
        upgrade(open_engine(url, migrate=False))
    emit(
        as_json, {"database": url, "revision": HEAD_REVISION}, f"{url}: at revision {HEAD_REVISION}"
    )


def main() -> None:
    # A CLI process is short-lived and allocates mostly at import time: the collector's
    # passes over those objects cost ~50-80 ms per start and as much again at exit.
    # Collection is switched back on (with import-time objects frozen) before a graph
    # runs; see collect_from_here_on().
    gc.disable()
    try:
        app()
    finally:
        gc.freeze()


def _add_worker() -> None:
    from orchestrator.cli.worker import worker  # needs DbOption/JsonOption from above

    app.command()(worker)


_add_worker()
