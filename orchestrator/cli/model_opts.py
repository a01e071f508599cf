"""The chat-model options that `run` and `eval` share, declared once (Typer's Annotated
aliases), with their defaults shown from ModelOptions."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.options import default_text
from orchestrator.model_options import ModelOptions

__all__ = [
    "MODELS",
    "model_default",
    "ReplyModeOption",
    "ToolChoiceOption",
    "CallTimeoutOption",
    "TurnTimeoutOption",
    "MaxOutputTokensOption",
]

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
