"""The `orchestrator` command line (contract section 3). A thin edge over the core.

Exit codes: 0 completed, 1 failed or an unmet `expect`, 2 bad input (nothing changed),
3 paused waiting for an answer, 4 cancelled. With --json, stdout carries exactly one JSON
document; progress and prose go to stderr.
"""

from __future__ import annotations

import atexit
import gc
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from orchestrator.errors import OrchestratorError, UserError
from orchestrator.render import event_line, question_text, resume_hint, session_text

__all__ = ["app", "main", "EXIT_CODES"]

EXIT_CODES = {"completed": 0, "failed": 1, "paused": 3, "cancelled": 4, "running": 1}
EXIT_BAD_INPUT = 2


class Ui(StrEnum):
    terminal = "terminal"
    none = "none"


class OnTimeout(StrEnum):
    wait = "wait"
    proceed = "proceed"
    cancel = "cancel"


class Status(StrEnum):
    running = "running"
    paused = "paused"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


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


# -- plumbing ---------------------------------------------------------------------------


def _err(text: str) -> None:
    typer.echo(text, err=True)


def _emit(as_json: bool, document: Any, text: str) -> None:
    if as_json:
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        typer.echo(text)


@contextmanager
def _user_errors(as_json: bool) -> Iterator[None]:
    """Turn our errors into exit codes; bugs keep their traceback."""
    try:
        yield
    except UserError as exc:
        _fail(as_json, exc.message, EXIT_BAD_INPUT)
    except OrchestratorError as exc:
        _fail(as_json, exc.message, 1)


def _fail(as_json: bool, message: str, code: int) -> NoReturn:
    _err(f"error: {message}")
    if as_json:
        typer.echo(json.dumps({"error": message, "exit_code": code}, indent=2))
    raise typer.Exit(code)


def _store(
    db: str | None, *, progress: bool = False, ui: Ui | None = None, scripted: bool = False
) -> tuple[Any, str]:
    from orchestrator.store import Store, open_engine, resolve_url

    url = resolve_url(db)
    # When the interactive prompt will draw the question, it is not logged above it too.
    quiet = {"question_surfaced"} if _interactive(ui) and not scripted else set()

    def show(_session_id: str, event: dict[str, Any]) -> None:
        if event["kind"] not in quiet:
            _err(event_line(event))

    return Store(open_engine(url), listener=show if progress else None), url


def _interactive(ui: Ui | None) -> bool:
    chosen = ui or (Ui.terminal if sys.stdin.isatty() else Ui.none)
    return chosen is Ui.terminal and sys.stdin.isatty() and sys.stderr.isatty()


def _engine(store: Any, url: str, ui: Ui | None) -> Any:
    """The engine for run/resume: the UI's way of asking, and a progress line on a tty."""
    from orchestrator.engine import Engine

    activity = None
    if sys.stderr.isatty():
        from orchestrator.progress import Activity

        activity = Activity()
        atexit.register(activity.close)
    return Engine(store, url, ask_user=_ask_user(ui), activity=activity)


def _ask_user(ui: Ui | None) -> Any:
    chosen = ui or (Ui.terminal if sys.stdin.isatty() else Ui.none)
    if chosen is not Ui.terminal:
        return None
    from orchestrator.terminal import ask  # questionary and rich only when asking

    return ask


def _finish(as_json: bool, view: dict[str, Any], db: str | None) -> NoReturn:
    """Print the session and exit with the code its status (and `expect`) calls for."""
    code = EXIT_CODES.get(view["status"], 1)
    text = session_text(view)
    if view["status"] == "paused" and view["pending_question"]:
        question = view["pending_question"]
        hint = (
            f"waiting for an answer. {question_text(question)}\n"
            f"answer with:\n  {resume_hint(view['session_id'], question, db)}"
        )
        if as_json:
            _err(hint)
        else:
            text += "\n" + hint
    expect = view.pop("_expect", None)
    # A scenario's expect describes how the run ends; a pause is not an end, and a user's
    # cancel is the user's call (exit 4), not the script's result.
    if expect and view["status"] in ("completed", "failed"):
        differences = _expect_differences(expect, view)
        if differences:
            _err("the scenario's expect did not hold:")
            for line in differences:
                _err(f"  {line}")
            code = 1
    _emit(as_json, view, text)
    raise typer.Exit(code)


def _expect_differences(expect: Mapping[str, Any], view: Mapping[str, Any]) -> list[str]:
    out = []
    for field in ("status", "questions_surfaced", "fallbacks_injected", "summary"):
        wanted = expect.get(field)
        if wanted is not None and view.get(field) != wanted:
            out.append(f"expect.{field}: expected {wanted!r}, got {view.get(field)!r}")
    needle = expect.get("error_contains")
    if needle is not None and needle not in (view.get("error") or ""):
        out.append(f"expect.error_contains: {needle!r} not in error {view.get('error')!r}")
    return out


def _with_expect(store: Any, session_id: str) -> dict[str, Any]:
    view: dict[str, Any] = store.view(session_id)
    expect = store.session(session_id).settings.get("expect")
    if expect:
        view["_expect"] = expect
    return view


# -- commands ---------------------------------------------------------------------------


NO_AGENTS = """nothing to run the agents with. Either:
  1. --script FILE             a scenario: scripted agents and answers, no model (see examples/)
  2. --model PROVIDER:NAME     a chat model, e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
                               ollama:llama3.1 (per agent: --pm-model, --developer-model)
  3. ORCHESTRATOR_MODEL=PROVIDER:NAME in the environment, the default model"""


def _run_script(
    script: Path, task: str | None, limits: dict[str, Any], ui: Ui | None, db: str | None
) -> tuple[str, Any]:
    import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)
    from agents.scripted import ScriptedBackend
    from orchestrator.scenario import load_scenario

    _collect_from_here_on()
    scenario = load_scenario(script)  # before the database is touched
    settings = scenario.session_settings(source=str(script), **limits)
    store, url = _store(db, progress=True, ui=ui, scripted=bool(scenario.answers))
    backend = ScriptedBackend(scenario.agents, replies_so_far={})
    return _engine(store, url, ui).start(task or scenario.task, backend, settings), store


def _run_models(
    task: str | None,
    specs: dict[str, str | None],
    *,
    prompts: Path | None,
    workdir: Path | None,
    max_retries: int,
    settings: dict[str, Any],
    ui: Ui | None,
    db: str | None,
) -> tuple[str, Any]:
    from agents.models import check_models, resolve_models
    from orchestrator.errors import ConfigError

    models = resolve_models(specs["model"], pm=specs["pm"], developer=specs["developer"])
    if models is None:
        raise ConfigError(NO_AGENTS)
    if not task or not task.strip():
        raise ConfigError(
            'give the TASK for the agents, e.g. orchestrator run "Add a CSV '
            'export to the reports page" --model openai:gpt-4o-mini'
        )
    import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)
    from agents.llm import LLMBackend
    from agents.prompts import check_prompts

    _collect_from_here_on()
    if prompts is not None:
        check_prompts(prompts)
    check_models(models)  # a missing package or key fails here, before any write
    backend = LLMBackend(
        models,
        prompts=str(prompts.resolve()) if prompts else None,
        workdir=str(workdir.resolve()) if workdir else None,
        max_retries=max_retries,
    )
    store, url = _store(db, progress=True, ui=ui)
    return _engine(store, url, ui).start(task, backend, settings), store


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
        int | None, typer.Option("--max-rounds", min=1, help="Planning rounds allowed [5].")
    ] = None,
    max_fallbacks: Annotated[
        int | None,
        typer.Option("--max-fallbacks", min=0, help="Fallbacks an agent may ignore [2]."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=1,
            metavar="SECONDS",
            help="How long the question waits for an answer [300].",
        ),
    ] = None,
    on_timeout: Annotated[
        OnTimeout | None,
        typer.Option(
            "--on-timeout",
            help="When the deadline passes: wait (stay paused and "
            "answerable), proceed (the asker takes its default), cancel [wait].",
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
            "the agent proceeds with its default [70].",
        ),
    ] = None,
    ui: UiOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a session and run it until it completes, fails or pauses for an answer."""
    with _user_errors(as_json):
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
            session_id, store = _run_script(script, task, limits, ui, db)
        else:
            session_id, store = _run_models(
                task,
                {"model": model, "pm": pm_model, "developer": developer_model},
                prompts=prompts,
                workdir=workdir,
                max_retries=max_retries,
                settings={k: v for k, v in limits.items() if v is not None},
                ui=ui,
                db=db,
            )
        view = _with_expect(store, session_id)
    _finish(as_json, view, db)


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
    with _user_errors(as_json):
        import agents.scripted  # noqa: F401
        import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)
        from orchestrator.answers import UserReply
        from orchestrator.errors import ConfigError

        _collect_from_here_on()

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
        store, url = _store(db, progress=True, ui=ui)
        _engine(store, url, ui).resume(session_id, reply)
        view = _with_expect(store, session_id)
    _finish(as_json, view, db)


@app.command()
def status(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one session."""
    with _user_errors(as_json):
        store, _ = _store(db)
        store.expire(session_id)  # a deadline that passed while no process ran
        view = store.view(session_id)
    text = session_text(view)
    if view["pending_question"]:
        text += "\n  waiting: " + question_text(view["pending_question"])
    _emit(as_json, view, text)


@app.command("list")
def list_(
    status_: Annotated[
        Status | None, typer.Option("--status", help="Only sessions with this status.")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, newest first."""
    with _user_errors(as_json):
        store, _ = _store(db)
        views = store.list_views(status_.value if status_ else None)
    text = (
        "\n".join(
            f"{v['session_id']}  {v['status']:<9}  {v['created_at']}  {v['task']}" for v in views
        )
        or "no sessions"
    )
    _emit(as_json, views, text)


@app.command()
def log(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's events: agent replies, questions, answers, fallbacks, status."""
    with _user_errors(as_json):
        store, _ = _store(db)
        events = store.events(session_id)
    text = "\n".join(f"{e['time']}  {event_line(e)}" for e in events)
    _emit(as_json, events, text)


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Apply database migrations (they also run automatically before first use)."""
    with _user_errors(as_json):
        from orchestrator.store.db import open_engine, resolve_url, upgrade
        from orchestrator.store.schema import HEAD_REVISION

        url = resolve_url(db)
        upgrade(open_engine(url, migrate=False))
    _emit(
        as_json, {"database": url, "revision": HEAD_REVISION}, f"{url}: at revision {HEAD_REVISION}"
    )


def main() -> None:
    # A CLI process is short-lived and allocates mostly at import time: the collector's
    # passes over those objects cost ~50-80 ms per start and as much again at exit.
    # Collection is switched back on (with import-time objects frozen) before a graph
    # runs; see _collect_from_here_on().
    gc.disable()
    try:
        app()
    finally:
        gc.freeze()


def _collect_from_here_on() -> None:
    """Freeze what imports created, then collect normally (long agent runs need it)."""
    gc.freeze()
    gc.enable()
