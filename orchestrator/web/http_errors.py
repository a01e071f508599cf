"""HTTP errors: the contract's `{"error": message}` with its status, for our errors too."""

from __future__ import annotations

from orchestrator.errors import (
    DatabaseUnavailable,
    InvalidAnswer,
    OrchestratorError,
    SessionBusy,
    SessionNotFound,
    SessionNotWaiting,
    StorageFailed,
    UserError,
)

__all__ = ["ApiError", "status_of"]


class ApiError(Exception):
    """An HTTP error with the contract's body `{"error": message}` (HTML pages render it)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_of(exc: OrchestratorError) -> int:
    """The contract's HTTP status for one of our errors."""
    if isinstance(exc, SessionNotFound):
        return 404
    if isinstance(exc, SessionNotWaiting | SessionBusy):
        return 409
    if isinstance(exc, InvalidAnswer):
        return 422
    if isinstance(exc, StorageFailed | DatabaseUnavailable):
        return 503  # the server's storage, not the request: the same request works later
    if isinstance(exc, UserError):
        return 400
    return 500
