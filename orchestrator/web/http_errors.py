"""HTTP errors: the contract's `{"error": message}` with its status, for our errors too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from orchestrator.errors import (
    ClaimLost,
    EnvironmentFailure,
    InvalidAnswer,
    OrchestratorError,
    SessionBusy,
    SessionNotFound,
    SessionNotWaiting,
    UserError,
)

__all__ = ["ApiError", "status_of", "conflict_if_lost"]


class ApiError(Exception):
    """An HTTP error with the contract's body `{"error": message}` (HTML pages render it)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_of(exc: OrchestratorError | ClaimLost) -> int:
    """The contract's HTTP status for one of our errors."""
    if isinstance(exc, SessionNotFound):
        return 404
    if isinstance(exc, SessionNotWaiting | SessionBusy | ClaimLost):
        return 409
    if isinstance(exc, InvalidAnswer):
        return 422
    if isinstance(exc, EnvironmentFailure):
        return 503  # the server's storage, not the request: the same request works later
    if isinstance(exc, UserError):
        return 400
    return 500


@contextmanager
def conflict_if_lost() -> Iterator[None]:
    """A lost claim as the 409 it is. ClaimLost is no Exception (errors.py), so the app's
    exception handlers, which Starlette calls for Exceptions only, never see it."""
    try:
        yield
    except ClaimLost as exc:
        raise ApiError(status_of(exc), exc.message) from exc
