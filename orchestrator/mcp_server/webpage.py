"""The one-question web page for clients without form elicitation: the web answer page's
`orchestrator.web.oneshot.serve_question` (the `web` extra), behind the `AnswerPage` the
asker waits on. No second web server: this only adapts that one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread

from orchestrator.domain.question import UserReply
from orchestrator.mcp_server.asking import PageFactory

__all__ = ["page_factory"]


class _OneShotPage:
    def __init__(self, url: str, wait_for_reply: Callable[..., UserReply | None]) -> None:
        self.url = url
        self._wait_for_reply = wait_for_reply

    async def wait(self) -> UserReply | None:
        # The page's own server stops at the deadline (or the answer); if the call is
        # withdrawn first, its thread is left to stop by itself at the deadline.
        return await anyio.to_thread.run_sync(self._wait_for_reply, abandon_on_cancel=True)


def page_factory() -> PageFactory:
    """The factory over the web answer page (ImportError without the `web` extra)."""
    from orchestrator.web.oneshot import serve_question

    @asynccontextmanager
    async def open_page(question: dict[str, Any], deadline: float) -> AsyncIterator[_OneShotPage]:
        url, wait_for_reply = serve_question(
            question,
            deadline,
            allow_cancel=bool(question.get("allow_cancel", True)),
            title=question.get("title"),
        )
        yield _OneShotPage(url, wait_for_reply)

    return open_page
