"""How our servers listen and speak HTTP/1.1: uvicorn's h11 protocol, each connection on a
clock for reading its request and the number of connections capped, on a socket whose
connections send without delay.

uvicorn bounds how long a kept-alive connection may sit idle, but not how long a client
may take to send a request: one that trickles its headers or its body a byte at a time
holds its connection (a file descriptor) for ever, and enough of them exhaust the server.
Here:

- every connection must deliver a whole request, headers and body, within
  REQUEST_SECONDS of connecting or of its previous response, or it is closed. A request
  that has been read runs as long as it needs (a waiting tool call, a live page);
- at most `max_connections()` connections are open at once: one past it is answered 503
  and closed before a byte of it is read (uvicorn's own `limit_concurrency` answers 503
  only once a request's headers are in, too late for a client that never sends them; it
  is set one above, since it counts the asking connection, and still caps the tasks);
- a client that goes away (or is cut off) mid-request costs one debug line, not a
  traceback in the log.

This is composition, not a subclass: `DeadlineProtocol` is an `asyncio.Protocol` that
builds uvicorn's `H11Protocol` exactly as uvicorn does (`Config(http=...)` takes the class)
and forwards the five `asyncio.Protocol` calls to it, so nothing of uvicorn's internals is
overridden. The app tells the clock when a request has been read (`RequestClock`, the
outermost ASGI layer `server_config` adds): the connection is handed to the request's task
in a ContextVar set around `data_received`, the call in which uvicorn creates that task
(asyncio copies the context into a task when it is created).

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
import contextvars
import logging
import socket
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DeadlineProtocol",
    "RequestClock",
    "REQUEST_SECONDS",
    "max_connections",
    "server_config",
    "listening_socket",
]

REQUEST_SECONDS = 10.0
log = logging.getLogger("orchestrator.web")

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 45\r\n\r\n"
    b"503: too many connections at once; try again\n"
)
_CONNECTION: contextvars.ContextVar[DeadlineProtocol | None] = contextvars.ContextVar(
    "orchestrator_connection", default=None
)


class DeadlineProtocol(asyncio.Protocol):
    """One HTTP connection: uvicorn's h11 protocol, on a clock for reading each request,
    refused (503) past `limit_concurrency` open connections. See the module's note."""

    request_seconds = REQUEST_SECONDS
    # Set per server by server_config: its open connections, and how many may be.
    _open: set[DeadlineProtocol]
    _max_open: int

    def __init__(self, config: Any, server_state: Any, app_state: Any, _loop: Any = None) -> None:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        self._http = H11Protocol(
            config=config, server_state=server_state, app_state=app_state, _loop=_loop
        )
        self._loop = _loop or asyncio.get_event_loop()
        self._transport: asyncio.BaseTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._refused = False

    # asyncio.Protocol, forwarded
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        if len(self._open) >= self._max_open:
            self._refused = True
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(_BUSY)
            transport.close()
            return
        self._open.add(self)
        self._http.connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        token = _CONNECTION.set(self)  # a request's task created in here carries it
        try:
            self._http.data_received(data)
        finally:
            _CONNECTION.reset(token)

    def eof_received(self) -> bool | None:
        if not self._refused:
            self._http.eof_received()
        return None  # close the transport (uvicorn's h11 protocol returns None too)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._open.discard(self)
        if not self._refused:
            self._http.connection_lost(exc)

    def pause_writing(self) -> None:
        if not self._refused:
            self._http.pause_writing()

    def resume_writing(self) -> None:
        if not self._refused:
            self._http.resume_writing()

    # the clock (RequestClock calls these from the request's task, on the same loop)
    def request_read(self) -> None:
        """The request's headers and body are in: it runs as long as it needs."""
        self._disarm()

    def response_sent(self) -> None:
        """The response is complete: the next request must be read in time too."""
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._timer = self._loop.call_later(self.request_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


class RequestClock:
    """ASGI middleware: tells the connection's clock when a request has been read (at once
    when it has no body, else when its last body chunk is received) and when its response
    is sent; a client gone mid-request ends it quietly."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _CONNECTION.get()
        if scope["type"] != "http" or connection is None:
            await self.app(scope, receive, send)
            return
        if not _has_body(scope):
            connection.request_read()

        async def clocked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                connection.request_read()
            return message

        async def clocked_send(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                connection.response_sent()

        try:
            await self.app(scope, clocked_receive, clocked_send)
        except ClientDisconnect:  # gone (or cut off by the clock) before its body was in
            log.debug("a client went away before sending its whole request")


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def max_connections() -> int:
    """How many connections a server of ours keeps open at once: 1,000, or fewer when the
    process may open fewer files (half its limit, keeping some for the database)."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1000
    if soft == resource.RLIM_INFINITY:
        return 1000
    return max(16, min(1000, (soft - 64) // 2))


def server_config(app: Any, *, connections: int | None = None, **options: Any) -> Any:
    """A uvicorn.Config for `app` on the deadline protocol (h11), at most `connections`
    (default `max_connections()`) open at once."""
    import uvicorn

    limit = connections or max_connections()
    protocol = type("DeadlineProtocol", (DeadlineProtocol,), {"_open": set(), "_max_open": limit})
    return uvicorn.Config(RequestClock(app), http=protocol, limit_concurrency=limit + 1, **options)


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
