"""The web edge: an inbox of sessions and their questions, an HTTP API, answer links.

`orchestrator serve` runs `create_app` under uvicorn; `oneshot` serves one question for
`--ui web`; `notify` tells people when a question waits. Everything here is an edge over
the session API (`orchestrator.api.Sessions`); FastAPI is imported only by these modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["create_app", "WebConfig"]

if TYPE_CHECKING:
    from orchestrator.web.app import create_app
    from orchestrator.web.config import WebConfig


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from orchestrator.web.app import create_app

        return create_app
    if name == "WebConfig":
        from orchestrator.web.config import WebConfig

        return WebConfig
    raise AttributeError(name)
