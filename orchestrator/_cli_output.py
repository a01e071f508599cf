"""How the CLI speaks: stdout carries the result (one JSON document under --json), stderr
everything human; our errors become exit codes here, at the edge, and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

from orchestrator.errors import OrchestratorError, UserError
from orchestrator.render import question_text, resume_hint, session_text

__all__ = ["EXIT_CODES", "EXIT_BAD_INPUT", "err", "emit", "user_errors", "finish", "with_expect"]

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
    expect = view.pop("_expect", None)
    # A scenario's expect describes how the run ends; a pause is not an end, and a user's
    # cancel is the user's call (exit 4), not the script's result.
    if expect and view["status"] in ("completed", "failed"):
        differences = _expect_differences(expect, view)
        if differences:
            err("the scenario's expect did not hold:")
            for line in differences:
                err(f"  {line}")
            code = 1
    emit(as_json, view, text)
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


def with_expect(store: Any, session_id: str) -> dict[str, Any]:
    view: dict[str, Any] = store.view(session_id)
    expect = store.session(session_id).settings.get("expect")
    if expect:
        view["_expect"] = expect
    return view


# -- commands ---------------------------------------------------------------------------
