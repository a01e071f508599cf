"""How our servers listen and speak HTTP/1.1: uvicorn's protocol with a deadline on each
request's headers, on a socket whose connections send without delay.

uvicorn limits how long a kept-alive connection may sit idle, but not how long a client
may take to send a request line and its headers: a client that trickles them a byte at a
time (or sends nothing) holds its connection open for ever, and enough of them exhaust the
server's sockets. Here every connection must deliver a request's headers within
HEADER_SECONDS of connecting, or of the previous response; otherwise it is closed. A
request whose headers are in runs as long as it needs (a waiting tool call, a live page).

Used by every server of ours: `serve`, `mcp --http`, the `--ui web` page.

They bind their socket first (`listening_socket`, so a taken port is a clear error and
`--port 0` is known before the server starts) and hand it to uvicorn. asyncio turns
Nagle's algorithm off (TCP_NODELAY) only on connections accepted from a socket made with
protocol IPPROTO_TCP; on one made with protocol 0, every response after the first on a
kept-alive connection (a browser's next page, an MCP client's next call) waited about
40 ms for the client's delayed acknowledgement.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeaderDeadlineProtocol", "HEADER_SECONDS", "server_config", "listening_socket"]

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


def listening_socket(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to (`host`, `port`) and listening, for `uvicorn.Server.run(
    sockets=[...])` (port 0: a free one, read back with `getsockname()`). OSError when it
    cannot bind; the caller words it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # see above
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart right after a stop
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock
