"""The one-question web page for clients without form elicitation: the web answer page's
`orchestrator.web.oneshot.open_page` (the `web` extra), behind the `AnswerPage` the asker
waits on. No second web server: this only adapts that one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from orchestrator.domain.question import UserReply
from orchestrator.mcp_server.asking import PageFactory

__all__ = ["page_factory"]


class _OneShotPage:
    def __init__(self, page: Any) -> None:
        self.url: str = page.url
        self._page = page

    async def wait(self) -> UserReply | None:
        # A wait abandoned by a cancel (the question settled elsewhere) ends when the page
        # is closed on the way out of `open_page` below.
        reply: UserReply | None = await anyio.to_thread.run_sync(
            self._page.wait, abandon_on_cancel=True
        )
        return reply


def page_factory() -> PageFactory:
    """The factory over the web answer page (ImportError without the `web` extra)."""
    from orchestrator.web.oneshot import open_page

    @asynccontextmanager
    async def opened(question: dict[str, Any], deadline: float) -> AsyncIterator[_OneShotPage]:
        page = open_page(
            question,
            deadline,
            allow_cancel=bool(question.get("allow_cancel", True)),
            title=question.get("title"),
        )
        try:
            yield _OneShotPage(page)
        finally:
            # However the wait ended (an answer here or elsewhere, a cancel, the deadline,
            # the client gone): no answer is taken any more, and server, thread and port
            # are gone before the tool call returns.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(page.close)

    return opened
