"""`orchestrator run`: start a session (from a task or a scenario file)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli.options import (
    MODELS,
    CallTimeoutOption,
    DbOption,
    JsonOption,
    MaxOutputTokensOption,
    NoBrowserOption,
    NotifyOption,
    PublicUrlOption,
    ReplyModeOption,
    ToolChoiceOption,
    TurnTimeoutOption,
    UiOption,
    asking,
    model_default,
    shown_default,
)
from orchestrator.cli.output import finish, user_errors
from orchestrator.cli.runs import (
    NO_AGENTS,
    OnLateAnswer,
    OnTimeout,
    Sandbox,
    Ui,
    collect_from_here_on,
    ctrl_c_said,
    question_shown,
    sessions_for,
)
from orchestrator.model_options import ENV_BASE_URL

DEVELOPERS = "Developers that run code"


__all__ = ["run", "checked_settings"]


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
            help="The developers' folder. In a git repository, each developer works in a "
            "worktree of its own on a branch from HEAD, and can run commands (see "
            "docs/sandbox.md); elsewhere they share the folder. Default: "
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
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="Base URL of an OpenAI-compatible server (llama.cpp, vLLM, LM Studio, "
            "Ollama's /v1) for --model openai:NAME, or an Ollama server for ollama:NAME "
            f"(or ${ENV_BASE_URL}).",
            rich_help_panel=MODELS,
        ),
    ] = None,
    reply_mode: ReplyModeOption = None,
    tool_choice: ToolChoiceOption = None,
    call_timeout: CallTimeoutOption = None,
    max_output_tokens: MaxOutputTokensOption = None,
    max_model_calls: Annotated[
        int | None,
        typer.Option(
            "--max-model-calls",
            help="Model calls in one agent turn." + model_default("max_model_calls"),
            rich_help_panel=MODELS,
        ),
    ] = None,
    max_tool_calls: Annotated[
        int | None,
        typer.Option(
            "--max-tool-calls",
            help="Workspace tool calls in one agent turn." + model_default("max_tool_calls"),
            rich_help_panel=MODELS,
        ),
    ] = None,
    turn_timeout: TurnTimeoutOption = None,
    max_session_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-session-tokens",
            help="Tokens the whole session may use; past it the session fails. "
            "\\[default: no budget]",
            rich_help_panel=MODELS,
        ),
    ] = None,
    max_rounds: Annotated[
        int | None,
        typer.Option(
            "--max-rounds",
            help="Planning rounds allowed, 1-100." + shown_default("max_rounds"),
        ),
    ] = None,
    max_fallbacks: Annotated[
        int | None,
        typer.Option(
            "--max-fallbacks",
            help="Fallbacks an agent may ignore, 0-100." + shown_default("max_fallbacks"),
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS|none",
            help="How long the question waits for an answer: seconds (at most 30 days) or "
            "'none' for no deadline." + shown_default("timeout"),
        ),
    ] = None,
    on_timeout: Annotated[
        OnTimeout | None,
        typer.Option(
            "--on-timeout",
            help="When the deadline passes: wait (stay paused and "
            "answerable), proceed (the asker takes its default), cancel."
            + shown_default("on_timeout"),
        ),
    ] = None,
    on_late_answer: Annotated[
        OnLateAnswer | None,
        typer.Option(
            "--on-late-answer",
            help="An answer given after the question was declined or timed out: reconcile "
            "(the PM re-plans what it contradicts), record (only recorded and compared)."
            + shown_default("on_late_answer"),
        ),
    ] = None,
    max_question_parts: Annotated[
        int | None,
        typer.Option(
            "--max-question-parts",
            metavar="1-12",
            help="Asks raised in the same round merged into one multi-part question."
            + shown_default("max_question_parts"),
        ),
    ] = None,
    uncertainty_threshold: Annotated[
        int | None,
        typer.Option(
            "--uncertainty-threshold",
            metavar="0-100",
            help="Questions from agents less uncertain than this are not asked; "
            "the agent proceeds with its default." + shown_default("uncertainty_threshold"),
        ),
    ] = None,
    sandbox: Annotated[
        Sandbox | None,
        typer.Option(
            "--sandbox",
            help="Where developers' commands and checks run: auto (bubblewrap where it "
            "runs, else commands are refused saying why), bwrap, none (unconfined; shown "
            "as a warning)." + shown_default("sandbox"),
            rich_help_panel=DEVELOPERS,
        ),
    ] = None,
    allow_network: Annotated[
        bool | None,
        typer.Option(
            "--allow-network/--no-network",
            help="Let commands and checks reach the network. \\[default: no network]",
            show_default=False,
            rich_help_panel=DEVELOPERS,
        ),
    ] = None,
    command_timeout: Annotated[
        float | None,
        typer.Option(
            "--command-timeout",
            metavar="SECONDS",
            help="Seconds one command or check may run before its process group is killed."
            + shown_default("command_timeout"),
            rich_help_panel=DEVELOPERS,
        ),
    ] = None,
    check: Annotated[
        list[str] | None,
        typer.Option(
            "--check",
            metavar="CMD",
            help="A shell command that decides when a developer is done (repeatable): run "
            "in the sandbox after each DONE; failing, it goes back to the developer. Needs "
            "--workdir in a git repository (or a scenario's repo:).",
            rich_help_panel=DEVELOPERS,
        ),
    ] = None,
    max_check_attempts: Annotated[
        int | None,
        typer.Option(
            "--max-check-attempts",
            metavar="1-10",
            help="Times a developer's work is checked before a still-failing task is "
            "BLOCKED." + shown_default("max_check_attempts"),
            rich_help_panel=DEVELOPERS,
        ),
    ] = None,
    max_parallel: Annotated[
        int | None,
        typer.Option(
            "--max-parallel",
            metavar="1-1000",
            help="Agents of one round that run at once; not limited by the CPU count "
            "(agents wait on their models). Lower it when a provider rate-limits you."
            + shown_default("max_parallel"),
            rich_help_panel=DEVELOPERS,
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
    with user_errors(as_json), ctrl_c_said(as_json, db):
        from orchestrator.errors import ConfigError
        from orchestrator.limits import MAX_TASK_CHARS, check_length

        limits = checked_settings(
            {
                "max_rounds": max_rounds,
                "max_fallbacks": max_fallbacks,
                "timeout": timeout,
                "on_timeout": on_timeout.value if on_timeout else None,
                "on_late_answer": on_late_answer.value if on_late_answer else None,
                "max_question_parts": max_question_parts,
                "uncertainty_threshold": uncertainty_threshold,
                "sandbox": sandbox.value if sandbox else None,
                "allow_network": allow_network,
                "command_timeout": command_timeout,
                "checks": list(check) if check else None,
                "max_check_attempts": max_check_attempts,
                "max_parallel": max_parallel,
            }
        )
        check_length("the TASK", task, MAX_TASK_CHARS)
        model_options = checked_model_options(
            {
                "base_url": base_url,
                "reply_mode": reply_mode,
                "tool_choice": tool_choice,
                "call_timeout": call_timeout,
                "max_output_tokens": max_output_tokens,
                "max_model_calls": max_model_calls,
                "max_tool_calls": max_tool_calls,
                "turn_timeout": turn_timeout,
                "max_session_tokens": max_session_tokens,
                "max_retries": max_retries,
            }
        )
        if script is not None:
            if model or pm_model or developer_model:
                raise ConfigError("give either --script or a model, not both")
            given = [k for k, v in model_options.items() if v is not None and k != "max_retries"]
            if given:
                raise ConfigError(
                    f"--{given[0].replace('_', '-')} is for chat-model agents (--model); "
                    "a scenario's agents are scripted and call no model"
                )
            if task is not None:
                raise ConfigError(
                    f"give either a TASK or --script, not both: the scenario {script} "
                    "has its own task"
                )
            view = _run_script(
                script, limits, ui, db, asking(no_browser, notify, public_url), workdir
            )
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
            from orchestrator.api.running import load_runtime

            load_runtime()  # LangGraph, before unfreezing gc

            collect_from_here_on()
            how = asking(no_browser, notify, public_url)
            view = sessions_for(db, progress=True, ui=ui, create=True, **how).start(
                task,
                models=models,
                settings=limits,
                prompts=prompts,
                workdir=workdir,
                model_options=model_options,
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


def checked_model_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-model options given, checked by ModelOptions: exit 2 naming the option."""
    from pydantic import ValidationError

    from orchestrator.errors import ConfigError
    from orchestrator.model_options import ModelOptions, options_error

    chosen = {k: v for k, v in given.items() if v is not None}
    try:
        ModelOptions.model_validate(chosen)
    except ValidationError as exc:
        raise ConfigError(options_error(exc, chosen)) from None
    return dict(given)


def _run_script(
    script: Path,
    limits: Mapping[str, object],
    ui: Ui | None,
    db: str | None,
    how: dict[str, Any],
    workdir: Path | None = None,
) -> dict[str, object]:
    from orchestrator.scenario import load_scenario

    scenario = load_scenario(script)  # before the database is touched, or LangGraph loaded
    from orchestrator.api.running import load_runtime

    load_runtime()  # LangGraph, before unfreezing gc

    collect_from_here_on()
    sessions = sessions_for(
        db, progress=True, ui=ui, scripted=bool(scenario.answers), create=True, **how
    )
    return dict(
        sessions.start_scenario(scenario, settings=limits, source=str(script), workdir=workdir)
    )
