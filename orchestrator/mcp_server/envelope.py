"""The one result shape: `{"ok": true, "data": ...}`, or with isError
`{"ok": false, "error": {"code", "message"}}`, for every tool and every failure."""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from orchestrator.errors import (
    ClaimLost,
    ConfigError,
    EnvironmentFailure,
    InvalidAnswer,
    OrchestratorError,
    ScenarioError,
    SessionBusy,
    SessionNotFound,
    SessionNotWaiting,
    validation_text,
)

__all__ = ["ok", "fail", "from_exception", "validation_message", "ToolFailure"]

log = logging.getLogger("orchestrator.mcp")


class ToolFailure(Exception):
    """A tool's own refusal, with the contract's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _result(document: dict[str, Any], *, is_error: bool) -> CallToolResult:
    # The JSON also goes in a text block, for clients that show only text content.
    text = json.dumps(document, ensure_ascii=False, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=json.loads(text),  # plain JSON types only (datetimes as text)
        is_error=is_error,
    )


def ok(data: Any) -> CallToolResult:
    return _result({"ok": True, "data": data}, is_error=False)


def fail(code: str, message: str) -> CallToolResult:
    return _result({"ok": False, "error": {"code": code, "message": message}}, is_error=True)


# The contract's codes (section 6), which our own `code`s (errors.py) map onto.
_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (SessionNotFound, "not_found"),
    (SessionNotWaiting, "not_waiting"),
    (SessionBusy, "conflict"),
    (ClaimLost, "conflict"),
    (InvalidAnswer, "invalid_input"),
    (ScenarioError, "invalid_input"),
    (ConfigError, "invalid_input"),
)


def from_exception(tool: str, exc: BaseException) -> CallToolResult:
    """Our errors keep their message and get their code; anything else is `internal`, with
    its traceback logged on stderr (stdout carries the protocol)."""
    if isinstance(exc, ToolFailure):
        return fail(exc.code, exc.message)
    if isinstance(exc, ValidationError):
        return fail("invalid_input", validation_message(exc))
    if isinstance(exc, EnvironmentFailure):
        # The server's storage, not the caller's input: the same call works later.
        log.warning("tool %s: %s", tool, exc.message)
        return fail("internal", exc.message)
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return fail(code, exc.message)  # type: ignore[attr-defined]
    if isinstance(exc, OrchestratorError):
        # A run failure (e.g. a model provider that cannot be reached): not the caller's input.
        log.warning("tool %s: %s", tool, exc.message)
        return fail("internal", exc.message)
    log.error("tool %s failed", tool, exc_info=exc)
    return fail(
        "internal", f"{tool} failed unexpectedly ({type(exc).__name__}); see the server log"
    )


def validation_message(exc: ValidationError) -> str:
    """One line per problem: where in the input, and what was expected."""
    return validation_text(exc.errors(include_url=False))
