"""How the CLI speaks: stdout carries the result (one JSON document under --json), stderr
everything human; our errors become exit codes here, at the edge, and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

from orchestrator.cli.render import question_text, resume_hint, session_text
from orchestrator.errors import OrchestratorError, UserError

__all__ = ["EXIT_CODES", "EXIT_BAD_INPUT", "err", "emit", "user_errors", "finish"]

EXIT_CODES = {"completed": 0, "failed": 1, "paused": 3, "cancelled": 4, "running": 1}
EXIT_BAD_INPUT = 2


def err(text: str) -> None:
    typer.echo(text, err=True)


def emit(as_json: bool, document: Any, text: str) -> None:
    if as_json:
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        typer.echo(text)


@contextmanager
def user_errors(as_json: bool) -> Iterator[None]:
    """Turn our errors into exit codes; bugs keep their traceback."""
    try:
        yield
    except UserError as exc:
        _fail(as_json, exc.message, EXIT_BAD_INPUT)
    except OrchestratorError as exc:
        _fail(as_json, exc.message, 1)


def _fail(as_json: bool, message: str, code: int) -> NoReturn:
    err(f"error: {message}")
    if as_json:
        typer.echo(json.dumps({"error": message, "exit_code": code}, indent=2))
    raise typer.Exit(code)


def finish(as_json: bool, view: dict[str, Any], db: str | None) -> NoReturn:
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
            err(hint)
        else:
            text += "\n" + hint
    outcome = view.get("expect")
    if outcome is not None and not outcome["held"]:
        err("the scenario's expect did not hold:")
        for line in outcome["unmet"]:
            err(f"  {line}")
        code = 1
    emit(as_json, view, text)
    raise typer.Exit(code)
