"""The options that several commands share, declared once (Typer's Annotated aliases).

The session settings' defaults shown in the help are literals checked against `Settings`
by a test; the defaults themselves live in orchestrator/settings.py. The chat-model
options that `run` and `eval` share show theirs from `ModelOptions`.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from orchestrator.cli.runs import Ui
from orchestrator.model_options import ModelOptions

__all__ = [
    "DEFAULTS",
    "DbOption",
    "JsonOption",
    "UiOption",
    "NoBrowserOption",
    "NotifyOption",
    "PublicUrlOption",
    "shown_default",
    "notify_urls",
    "asking",
    "MODELS",
    "model_default",
    "ReplyModeOption",
    "ToolChoiceOption",
    "CallTimeoutOption",
    "TurnTimeoutOption",
    "MaxOutputTokensOption",
]

DEFAULTS = {
    "max_rounds": 5,
    "max_fallbacks": 2,
    "uncertainty_threshold": 70,
    "max_question_parts": 4,
    "max_parallel": 8,
    "timeout": 300.0,
    "on_timeout": "wait",
    "on_late_answer": "reconcile",
    "sandbox": "auto",
    "allow_network": False,
    "command_timeout": 120.0,
    "checks": [],
    "max_check_attempts": 2,
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


def shown_default(field: str) -> str:
    """A default from Settings, shown in `--help` as Click shows its own: [default: 5].
    (The options themselves default to None, so that a scenario's settings apply.)"""
    return default_text(DEFAULTS[field])


def default_text(value: object) -> str:
    """` [default: VALUE]` for a help text (floats without a needless `.0`)."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f" \\[default: {shown}]"  # escaped: the help is rich markup


def notify_urls(given: list[str] | None) -> tuple[str, ...]:
    """--notify, else $ORCHESTRATOR_NOTIFY (URLs separated by spaces or commas)."""
    if given:
        return tuple(given)
    env = os.environ.get("ORCHESTRATOR_NOTIFY", "")
    return tuple(u for u in env.replace(",", " ").split() if u)


def asking(no_browser: bool, notify: list[str] | None, public_url: str | None) -> dict[str, Any]:
    """--no-browser, --notify (else $ORCHESTRATOR_NOTIFY) and --public-url, for sessions_for."""
    return {"no_browser": no_browser, "notify": notify_urls(notify), "public_url": public_url}


# -- the chat-model options (`run`, `eval`) ------------------------------------------------

MODELS = "Chat models"


def model_default(name: str) -> str:
    """A chat-model option's default, shown as Click shows its own: [default: 180]."""
    return default_text(ModelOptions.model_fields[name].default)


ReplyModeOption = Annotated[
    str | None,
    typer.Option(
        "--reply-mode",
        metavar="tools|json_schema|text",
        help="How the agents give their replies: a submit_reply tool call, the "
        "provider's structured output (openai, ollama), or one JSON object in text."
        + model_default("reply_mode"),
        rich_help_panel=MODELS,
    ),
]
ToolChoiceOption = Annotated[
    str | None,
    typer.Option(
        "--tool-choice",
        metavar="auto|required",
        help="With --reply-mode tools: required makes every answer a tool call."
        + model_default("tool_choice"),
        rich_help_panel=MODELS,
    ),
]
CallTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--call-timeout",
        metavar="SECONDS",
        help="Seconds one model call may take." + model_default("call_timeout"),
        rich_help_panel=MODELS,
    ),
]
TurnTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--turn-timeout",
        metavar="SECONDS",
        help="Seconds one agent turn may take in all." + model_default("turn_timeout"),
        rich_help_panel=MODELS,
    ),
]
MaxOutputTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens",
        help="Output tokens per model call." + model_default("max_output_tokens"),
        rich_help_panel=MODELS,
    ),
]
