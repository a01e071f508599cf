"""The `orchestrator` command line (contract section 3). A thin edge over the core.

Exit codes: 0 completed, 1 failed or an unmet `expect`, 2 bad input (nothing changed),
3 paused waiting for an answer, 4 cancelled. With --json, stdout carries exactly one JSON
document; progress and prose go to stderr.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli.output import EXIT_CODES, emit, err, finish, user_errors
from orchestrator.cli.runs import (
    NO_AGENTS,
    OnTimeout,
    Status,
    Ui,
    collect_from_here_on,
    question_shown,
    read_sessions,
    sessions_for,
)
from orchestrator.readout import (
    DEFAULT_LIMIT,
    handed_off_text,
    list_text,
    log_text,
    next_page_hint,
    status_text,
)

__all__ = ["app", "EXIT_CODES", "DEFAULTS", "DbOption", "JsonOption"]

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
        help="How to ask when scripted answers run out: 'terminal' prompts, 'web' opens a "
        "one-question page in the browser, 'none' pauses (exit 3). Default: terminal when "
        "stdin is a terminal, else none.",
    ),
]
NoBrowserOption = Annotated[
    bool, typer.Option("--no-browser", help="With --ui web: print the URL, open no browser.")
]
NotifyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--notify",
        metavar="URL",
        help="Tell people when a question waits: an Apprise URL (json://, slack://, "
        "mailto://, ntfy://, ...). Repeatable. Default: $ORCHESTRATOR_NOTIFY.",
    ),
]
PublicUrlOption = Annotated[
    str | None,
    typer.Option(
        "--public-url",
        metavar="URL",
        help="Where `orchestrator serve` is reached: notifications carry the answer link.",
    ),
]

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


def _default(field: str) -> str:
    """A default from Settings, shown in `--help` as Click shows its own: [default: 5].
    (The options themselves default to None, so that a scenario's settings apply.)"""
    value = DEFAULTS[field]
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f" \\[default: {shown}]"  # escaped: the help is rich markup


# -- plumbing ---------------------------------------------------------------------------


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
            max=10,
            help="Invalid model replies sent back for correction before the session fails.",
        ),
    ] = 2,
    max_rounds: Annotated[
        int | None,
        typer.Option(
            "--max-rounds",
            help="Planning rounds allowed, 1-100." + _default("max_rounds"),
        ),
    ] = None,
    max_fallbacks: Annotated[
        int | None,
        typer.Option(
            "--max-fallbacks",
            help="Fallbacks an agent may ignore, 0-100." + _default("max_fallbacks"),
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS|none",
            help="How long the question waits for an answer: seconds (at most 30 days) or "
            "'none' for no deadline." + _default("timeout"),
        ),
    ] = None,
    on_timeout: Annotated[
        OnTimeout | None,
        typer.Option(
            "--on-timeout",
            help="When the deadline passes: wait (stay paused and "
            "answerable), proceed (the asker takes its default), cancel." + _default("on_timeout"),
        ),
    ] = None,
    uncertainty_threshold: Annotated[
        int | None,
        typer.Option(
            "--uncertainty-threshold",
            metavar="0-100",
            help="Questions from agents less uncertain than this are not asked; "
            "the agent proceeds with its default." + _default("uncertainty_threshold"),
        ),
    ] = None,
    ui: UiOption = None,
    no_browser: NoBrowserOption = False,
    notify: NotifyOption = None,
    public_url: PublicUrlOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a session and run it until it completes, fails or pauses for an answer."""
    with user_errors(as_json):
        from orchestrator.errors import ConfigError
        from orchestrator.limits import MAX_TASK_CHARS, check_length

        limits = checked_settings(
            {
                "max_rounds": max_rounds,
                "max_fallbacks": max_fallbacks,
                "timeout": timeout,
                "on_timeout": on_timeout.value if on_timeout else None,
                "uncertainty_threshold": uncertainty_threshold,
            }
        )
        check_length("the TASK", task, MAX_TASK_CHARS)
        if script is not None:
            if model or pm_model or developer_model:
                raise ConfigError("give either --script or a model, not both")
            if task is not None:
                raise ConfigError(
                    f"give either a TASK or --script, not both: the scenario {script} "
                    "has its own task"
                )
            view = _run_script(script, limits, ui, db, _asking(no_browser, notify, public_url))
        else:
            from orchestrator.agents.models import resolve_models

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
            asking = _asking(no_browser, notify, public_url)
            view = sessions_for(db, progress=True, ui=ui, create=True, **asking).start(
                task,
                models=models,
                settings=limits,
                prompts=prompts,
                workdir=workdir,
                max_retries=max_retries,
            )
    finish(as_json, view, db, question_shown=question_shown(str(view["session_id"])))


def checked_settings(limits: Mapping[str, Any]) -> dict[str, Any]:
    """The options given, checked by Settings (the limits scenarios have too): exit 2
    naming the option and what it takes."""
    from pydantic import ValidationError

    from orchestrator.errors import ConfigError
    from orchestrator.settings import Settings

    given = {k: v for k, v in limits.items() if v is not None}
    try:
        Settings().merged(**given)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = str(error["loc"][0]) if error["loc"] else "?"
        message = str(error["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"--{field.replace('_', '-')} {given.get(field)!r}: {message}") from None
    return given


def _asking(no_browser: bool, notify: list[str] | None, public_url: str | None) -> dict[str, Any]:
    """--no-browser, --notify (else $ORCHESTRATOR_NOTIFY) and --public-url, for sessions_for."""
    from orchestrator.cli.serve import notify_urls

    return {"no_browser": no_browser, "notify": notify_urls(notify), "public_url": public_url}


def _run_script(
    script: Path,
    limits: Mapping[str, object],
    ui: Ui | None,
    db: str | None,
    asking: dict[str, Any],
) -> dict[str, object]:
    from orchestrator.scenario import load_scenario

    scenario = load_scenario(script)  # before the database is touched, or LangGraph loaded
    import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)

    collect_from_here_on()
    sessions = sessions_for(
        db, progress=True, ui=ui, scripted=bool(scenario.answers), create=True, **asking
    )
    return dict(sessions.start_scenario(scenario, settings=limits, source=str(script)))


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
            metavar="LABEL|N",
            help="Choose an option by its label or its number from 1 (repeat for a "
            "multi_select question). An answer of your own goes with --answer.",
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
    no_run: Annotated[
        bool,
        typer.Option(
            "--no-run",
            help="Commit the answer (or decline) and run nothing: `orchestrator worker` or "
            "`orchestrator serve` runs the session on. Exit 0 once the answer is committed.",
        ),
    ] = False,
    ui: UiOption = None,
    no_browser: NoBrowserOption = False,
    notify: NotifyOption = None,
    public_url: PublicUrlOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a paused session: answer, decline or cancel its question, or see it again."""
    with user_errors(as_json):
        from orchestrator.answers import UserReply
        from orchestrator.errors import ConfigError

        if not no_run:  # --no-run runs no graph: no LangGraph to load
            import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)

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
        if no_run and not (answer is not None or choice or decline):
            raise ConfigError(
                "--no-run goes with --answer, --choice or --decline (the answer to commit)"
            )
        sessions = sessions_for(
            db,
            progress=not no_run,
            ui=ui,
            session_id=session_id,
            **_asking(no_browser, notify, public_url),
        )
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
        with cli_flags():
            if no_run:
                assert reply is not None
                view = dict(sessions.answer(session_id, reply))
            else:
                view = sessions.resume(session_id, reply)
    if no_run:
        emit(as_json, view, handed_off_text(view, db))
        raise typer.Exit(0)
    finish(as_json, view, db, question_shown=question_shown(session_id))


# What the session API's answer fields are called on the command line.
_FLAGS = {"answer": "--answer TEXT", "choices": "--choice LABEL|N", "note": "--note TEXT"}


@contextmanager
def cli_flags() -> Iterator[None]:
    """An invalid answer's message (worded for the session API) with the flags that give
    those fields here."""
    from orchestrator.errors import InvalidAnswer

    try:
        yield
    except InvalidAnswer as exc:
        if not exc.fields:
            raise
        flags = ", ".join(f"`{field}` is {_FLAGS[field]}" for field in exc.fields)
        raise InvalidAnswer(f"{exc.message} On the command line, {flags}.") from None


@app.command()
def status(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one session."""
    with user_errors(as_json):
        view = read_sessions(db, session_id).status(session_id)
    emit(as_json, view, status_text(view, db))


@app.command("list")
def list_(
    status_: Annotated[
        Status | None,
        typer.Option("--status", help="Only sessions with this status ('waiting' = paused)."),
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
    wanted = None if status_ is None else "paused" if status_ is Status.waiting else status_.value
    with user_errors(as_json):
        from orchestrator.errors import ConfigError, SessionNotFound

        if all_ and limit is not None:
            raise ConfigError("give either --limit or --all, not both")
        page = None if all_ else (limit or DEFAULT_LIMIT)
        sessions = read_sessions(db)
        if sessions is None and after is not None:
            raise SessionNotFound(after)
        # One more than the page: it tells whether a next page exists.
        more = None if page is None else page + 1
        views = [] if sessions is None else sessions.list(wanted, limit=more, after=after)
        if page is not None and len(views) > page:
            del views[page:]
            shown = status_.value if status_ else None
            err(next_page_hint(views[-1]["session_id"], status=shown, limit=page, db=db))
    emit(as_json, views, list_text(views))


@app.command()
def log(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's events: agent replies, questions, answers, fallbacks, status."""
    with user_errors(as_json):
        events = read_sessions(db, session_id).log(session_id)
    emit(as_json, events, log_text(session_id, events))


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Apply database migrations (they also run automatically before first use)."""
    with user_errors(as_json):
        from orchestrator.store.db import (
            check_sqlite_file,
            db_origin,
            open_engine,
            resolve_url,
            upgrade,
        )
        from orchestrator.store.schema import HEAD_REVISION

        url = resolve_url(db)
        check_sqlite_file(url, create=True, origin=db_origin(db))
        upgrade(open_engine(url, migrate=False))
    emit(
        as_json, {"database": url, "revision": HEAD_REVISION}, f"{url}: at revision {HEAD_REVISION}"
    )
