"""How the CLI speaks: stdout carries the result (one JSON document under --json), stderr
everything human; our errors become exit codes here, at the edge, and nowhere else.

A reader that goes away (`orchestrator run ... | head -2`) never stops a session: once a
write to stdout or stderr fails with a broken pipe, that stream is pointed at /dev/null and
the session runs to its end with the exit code it earns.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO

import typer

from orchestrator import limits
from orchestrator.documents import TO_MCP_CLIENT
from orchestrator.errors import (
    ClaimLost,
    EnvironmentFailure,
    OrchestratorError,
    SessionBusy,
    StorageFailed,
    UserError,
)
from orchestrator.limits import clip_message
from orchestrator.present.printable import printable, printable_json
from orchestrator.present.render import answer_hint, session_text
from orchestrator.redact import mask_url

__all__ = [
    "EXIT_CODES",
    "EXIT_BAD_INPUT",
    "err",
    "emit",
    "user_errors",
    "finish",
    "fail",
    "error_document",
    "pipe_safe",
    "MAX_MESSAGE_CHARS",
]

EXIT_CODES = {"completed": 0, "failed": 1, "paused": 3, "cancelled": 4, "running": 1}
EXIT_BAD_INPUT = 2
MAX_MESSAGE_CHARS = limits.MAX_MESSAGE_CHARS  # an error message, whatever it quotes


class _PipeSafe:
    """A text stream whose writes never raise for a reader that has gone away."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._gone(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._gone(exc)

    def _gone(self, exc: OSError) -> None:
        if exc.errno not in (errno.EPIPE, errno.EINVAL):
            raise exc
        # Everything written from here on (by us, rich, prompt_toolkit) lands in /dev/null,
        # including what the stream still buffers; the run itself goes on.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def pipe_safe() -> None:
    """Make sys.stdout and sys.stderr survive a closed pipe (call once, at start)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _PipeSafe):
            try:
                stream.fileno()
            except (OSError, ValueError, AttributeError):
                continue  # not a real file (a test runner's capture): nothing to guard
            setattr(sys, name, _PipeSafe(stream))


def err(text: str) -> None:
    """A line for people on stderr; what others wrote in it cannot drive the terminal."""
    typer.echo(printable(text), err=True)


def emit(as_json: bool, document: Any, text: str) -> None:
    """The result on stdout: the JSON document (control characters escaped by JSON), or
    the text for people (made printable)."""
    if as_json:
        typer.echo(printable_json(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        typer.echo(printable(text))


def error_document(message: str, exit_code: int, /, **more: Any) -> str:
    """`{"error", "exit_code"}` (the contract's), then what more is known: the session it
    concerns, whether the answer is kept, the error's `code` (errors.py)."""
    document = {"error": message, "exit_code": exit_code}
    document.update({name: value for name, value in more.items() if value is not None})
    return printable_json(json.dumps(document, indent=2, ensure_ascii=False))


@contextmanager
def user_errors(as_json: bool, session_id: str | None = None) -> Iterator[None]:
    """Turn our errors into exit codes; bugs keep their traceback. An error about a session
    (the one the error names, or the command's `session_id`) says which in its document
    (`_concerned`); one about an unknown session does not (as the fast read path prints it)."""
    try:
        yield
    except (UserError, EnvironmentFailure, ClaimLost) as exc:
        # bad input, a database away or full, a session another command drives: exit 2
        fail(
            as_json,
            exc.message,
            EXIT_BAD_INPUT,
            session_id=_concerned(exc, session_id),
            answer_kept=getattr(exc, "answer_kept", None),
            code=exc.code,
        )
    except OrchestratorError as exc:
        fail(as_json, exc.message, 1, session_id=_concerned(exc, session_id), code=exc.code)
    except Exception as exc:
        # A storage fault outside `Sessions` (the fast read path, `db` commands).
        from orchestrator.api.storage_errors import fault_message

        message = fault_message(exc)
        if message is None:
            raise
        fail(as_json, message, EXIT_BAD_INPUT, code=StorageFailed.code)


def _concerned(exc: OrchestratorError | ClaimLost, session_id: str | None) -> str | None:
    """The session an error is about: the one it names, else the command's, but never an
    unknown one, nor the command's for a ConfigError or DatabaseUnavailable (the database,
    the options: nothing about the session was read, and the id may be anything the user
    typed)."""
    from orchestrator.errors import ConfigError, DatabaseUnavailable, SessionNotFound

    if isinstance(exc, SessionNotFound):
        return None
    named: str | None = getattr(exc, "session_id", None)
    return named or (None if isinstance(exc, ConfigError | DatabaseUnavailable) else session_id)


def fail(as_json: bool, message: str, exit_code: int, /, **more: Any) -> NoReturn:
    message = clip_message(mask_url(message))  # it may quote what the user gave
    err(f"error: {message}")
    if as_json:
        typer.echo(error_document(message, exit_code, **more))
    raise typer.Exit(exit_code)


def finish(
    as_json: bool,
    view: dict[str, Any],
    db: str | None,
    *,
    question_shown: bool = False,
    answered: bool = False,
) -> NoReturn:
    """Print the session and exit with the code its status (and `expect`) calls for.

    `question_shown`: the progress lines already printed the question in full, so the
    closing lines only point at it and give the command that answers it."""
    if view.get(TO_MCP_CLIENT):
        # Committed for a question an MCP client's tool call waits on: its server returns
        # the answer to that call and ends the session (at once when it is `completed`).
        err("answered; the MCP client that asked receives it")
        if view["status"] == "running":
            emit(as_json, view, session_text(view, db))
            raise typer.Exit(0)
    if answered and view["status"] == "running" and not view.get("stalled"):
        # `answered`: this command's answer is committed. A session it then found running
        # is another live process's (an answer the command runs on itself is claimed
        # first; that claim refused says so, with the answer kept): a late answer that
        # its live driver's PM gets, or one whose reconciliation round began meanwhile.
        err(
            f"answer recorded; session {view['session_id']} is being run on by another "
            f"process, which takes it: see orchestrator status {view['session_id']}"
        )
        emit(as_json, view, session_text(view, db))
        raise typer.Exit(0)
    if view["status"] == "running" and not view.get("stalled"):
        # Another live process took the session on meanwhile (it was answered elsewhere):
        # nothing of ours ran, as when the claim is refused.
        fail(
            as_json,
            f"session {view['session_id']} is being run on by another process; "
            f"see orchestrator status {view['session_id']}",
            EXIT_BAD_INPUT,
            code=SessionBusy.code,
        )
    code = EXIT_CODES.get(view["status"], 1)
    text = session_text(view, db)
    if view["status"] == "paused" and view["pending_question"]:
        hint = answer_hint(view, db, question_shown=question_shown)
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
