"""Starting and continuing sessions from the CLI: stores, engines, backends, the UI."""

from __future__ import annotations

import atexit
import gc
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator._cli_output import err
from orchestrator.render import event_line

__all__ = [
    "Ui",
    "OnTimeout",
    "Status",
    "store_for",
    "engine_for",
    "run_script",
    "run_models",
    "collect_from_here_on",
    "NO_AGENTS",
]


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


def store_for(
    db: str | None, *, progress: bool = False, ui: Ui | None = None, scripted: bool = False
) -> tuple[Any, str]:
    from orchestrator.store import Store, open_engine, resolve_url

    url = resolve_url(db)
    # When the interactive prompt will draw the question, it is not logged above it too.
    quiet = {"question_surfaced"} if _interactive(ui) and not scripted else set()

    def show(_session_id: str, event: dict[str, Any]) -> None:
        if event["kind"] not in quiet:
            err(event_line(event))

    return Store(open_engine(url), listener=show if progress else None), url


def _chosen(ui: Ui | None) -> Ui:
    """--ui, or its default: terminal when stdin is a terminal, else none (CI, pipes)."""
    return ui or (Ui.terminal if sys.stdin.isatty() else Ui.none)


def _interactive(ui: Ui | None) -> bool:
    return _chosen(ui) is Ui.terminal and sys.stdin.isatty() and sys.stderr.isatty()


def engine_for(store: Any, url: str, ui: Ui | None) -> Any:
    """The engine for run/resume: the UI's way of asking, and a progress line on a tty."""
    from orchestrator.engine import Engine

    activity = None
    if sys.stderr.isatty():
        from orchestrator.progress import Activity

        activity = Activity()
        atexit.register(activity.close)
    return Engine(store, url, ask_user=_ask_user(ui), activity=activity)


def _ask_user(ui: Ui | None) -> Any:
    chosen = _chosen(ui)
    if chosen is not Ui.terminal:
        return None
    from orchestrator.terminal import ask  # questionary and rich only when asking

    return ask


NO_AGENTS = """nothing to run the agents with. Either:
  1. --script FILE             a scenario: scripted agents and answers, no model (see examples/)
  2. --model PROVIDER:NAME     a chat model, e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
                               ollama:llama3.1 (per agent: --pm-model, --developer-model)
  3. ORCHESTRATOR_MODEL=PROVIDER:NAME in the environment, the default model"""


def run_script(
    script: Path, task: str | None, limits: dict[str, Any], ui: Ui | None, db: str | None
) -> tuple[str, Any]:
    import orchestrator.graph  # noqa: F401  (LangGraph: import before unfreezing gc)
    from agents.scripted import ScriptedBackend
    from orchestrator.scenario import load_scenario

    collect_from_here_on()
    scenario = load_scenario(script)  # before the database is touched
    settings = scenario.session_settings(source=str(script), **limits)
    store, url = store_for(db, progress=True, ui=ui, scripted=bool(scenario.answers))
    backend = ScriptedBackend(scenario.agents, replies_so_far={})
    return engine_for(store, url, ui).start(task or scenario.task, backend, settings), store


def run_models(
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

    collect_from_here_on()
    if prompts is not None:
        check_prompts(prompts)
    if workdir is not None and workdir.exists() and not workdir.is_dir():
        raise ConfigError(f"--workdir {workdir}: exists and is not a folder")
    check_models(models)  # a missing package or key fails here, before any write
    backend = LLMBackend(
        models,
        prompts=str(prompts.resolve()) if prompts else None,
        workdir=str(workdir.resolve()) if workdir else None,
        max_retries=max_retries,
    )
    store, url = store_for(db, progress=True, ui=ui)
    return engine_for(store, url, ui).start(task, backend, settings), store


def collect_from_here_on() -> None:
    """Freeze what imports created, then collect normally (long agent runs need it)."""
    gc.freeze()
    gc.enable()
