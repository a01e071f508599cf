"""Resumable streams for MCP over HTTP: the SDK's `EventStore`, kept in memory, so that a
client whose SSE stream dropped while a tool call waited (a proxy's idle timeout, a laptop
that slept) reconnects with `Last-Event-ID` and gets what it missed, the call's result
included (streamable HTTP in the handshake era, protocol 2025-11-25; docs/mcp.md).

The SDK names a stream by its JSON-RPC request id, which every client numbers from 0 or 1:
two clients' requests share stream ids. So each stream is kept under the client session
that sent it (`opening` tells the store which one that is) and under an unguessable id of
its own; an event id names its stream and its place in it, and a replay only ever sends
that one stream's later events.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque
from contextvars import ContextVar
from dataclasses import dataclass, field

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ReplayBuffer", "opening", "MAX_STREAMS", "MAX_EVENTS"]

# Bounds on memory: the newest streams, the newest events of each (a call's result is its
# stream's last event; the keep-alive's progress notes before it may be dropped).
MAX_STREAMS = 256
MAX_EVENTS = 64

SESSION_HEADER = b"mcp-session-id"


@dataclass
class _Client:
    """The client session a request belongs to: its `Mcp-Session-Id`, known from the
    request's header, or, for the request that opens the session, from its answer's."""

    session_id: str | None = None

    def key(self) -> str:
        return self.session_id or f"opening-{id(self)}"


_client: ContextVar[_Client | None] = ContextVar("orchestrator_mcp_client", default=None)


def opening(app: ASGIApp) -> ASGIApp:
    """ASGI middleware: each request runs knowing its client session. The SDK starts a
    session's tasks (those that store its events) from the request that opens it, so they
    share that request's `_Client`, whose session id is filled in as its answer starts."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        named = [value for name, value in scope.get("headers", ()) if name == SESSION_HEADER]
        client = _Client(named[0].decode("latin-1") if named else None)
        _client.set(client)
        if named:
            await app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and client.session_id is None:
                for name, value in message.get("headers", ()):
                    if name.lower() == SESSION_HEADER:
                        client.session_id = value.decode("latin-1")
            await send(message)

        await app(scope, receive, sending)

    return guarded


@dataclass
class _Stream:
    stream_id: str
    events: deque[tuple[int, JSONRPCMessage | None]] = field(
        default_factory=lambda: deque(maxlen=MAX_EVENTS)
    )
    count: int = 0


class ReplayBuffer(EventStore):
    """The events of the newest `MAX_STREAMS` streams, at most `MAX_EVENTS` each; lost
    when the server stops (then `session_status` still finds the answer: docs/mcp.md)."""

    def __init__(self) -> None:
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._open: dict[tuple[str, str], str] = {}  # (client session, stream id) -> key

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        client = _client.get()
        owner = (client.key() if client is not None else "", stream_id)
        key = self._open.get(owner)
        if message is None or key is None or key not in self._streams:
            # A priming event starts a stream (a request's, or a GET's); so does a message
            # for a stream of a client from before priming events.
            key = secrets.token_hex(12)
            self._streams[key] = _Stream(stream_id)
            self._open[owner] = key
            while len(self._streams) > MAX_STREAMS:
                gone, _ = self._streams.popitem(last=False)
                self._open = {k: v for k, v in self._open.items() if v != gone}
        stream = self._streams[key]
        stream.count += 1
        stream.events.append((stream.count, message))
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._open.pop(owner, None)  # answered: that request id may be used again
        return f"{key}.{stream.count}"

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        key, _, number = last_event_id.partition(".")
        stream = self._streams.get(key)
        if stream is None or not number.isdigit():
            return None
        after = int(number)
        for seq, message in list(stream.events):
            if seq > after and message is not None:
                await send_callback(EventMessage(message, f"{key}.{seq}"))
        return stream.stream_id
