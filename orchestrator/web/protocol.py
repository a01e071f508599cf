"""uvicorn's HTTP/1.1 protocol with a deadline on each request's headers.

uvicorn limits how long a kept-alive connection may sit idle, but not how long a client
may take to send a request line and its headers: a client that trickles them a byte at a
time (or sends nothing) holds its connection open for ever, and enough of them exhaust the
server's sockets. Here every connection must deliver a request's headers within
HEADER_SECONDS of connecting, or of the previous response; otherwise it is closed. A
request whose headers are in runs as long as it needs (a waiting tool call, a live page).

Used by every server of ours: `serve`, `mcp --http`, the `--ui web` page.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeaderDeadlineProtocol", "HEADER_SECONDS", "server_config"]

HEADER_SECONDS = 10.0


class HeaderDeadlineProtocol(H11Protocol):
    header_seconds = HEADER_SECONDS

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()  # a request's headers are in: it runs as long as it needs

    def on_response_complete(self) -> None:
        self._arm()  # before: a pipelined request started by the call below disarms it
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def server_config(app: Any, **options: Any) -> Any:
    """A uvicorn.Config for `app` on the header-deadline protocol (h11)."""
    import uvicorn

    return uvicorn.Config(app, http=HeaderDeadlineProtocol, **options)
