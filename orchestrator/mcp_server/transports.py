"""Serving the MCP server: stdio (what MCP clients launch) or streamable HTTP on loopback."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.mcp_server.server import build_server

if TYPE_CHECKING:
    from mcp.server import Server
    from starlette.types import ASGIApp

__all__ = ["serve_stdio", "serve_http", "http_app", "log_to_stderr"]

log = logging.getLogger("orchestrator.mcp")


def log_to_stderr(level: int = logging.INFO) -> None:
    """Our log (and tracebacks of failed tools) on stderr: stdout carries the protocol."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("orchestrator mcp: %(levelname)s %(message)s"))
    logger = logging.getLogger("orchestrator.mcp")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def serve_stdio(db: str | None) -> None:
    """Serve one client over stdin/stdout until it closes them, in the protocol era the
    client opens with (the `initialize` handshake, or 2026-07-28 per-request envelopes)."""
    from mcp.server.stdio import stdio_server

    server = build_server(db)
    log.info("serving stdio (pid %d)", os.getpid())

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


# How long a client whose stream dropped waits before it reconnects (SSE `retry`).
RETRY_MS = 1000
# A tool call's arguments: a scenario is at most 1 MB, as JSON perhaps twice that.
MAX_BODY_BYTES = 4 * 1024 * 1024


def http_app(server: Server[Any], host: str = "127.0.0.1") -> ASGIApp:
    """`server` as streamable HTTP at /mcp, before the bearer token's check: DNS-rebinding
    protection on loopback, and resumable streams (a client whose stream dropped gets the
    call's result by reconnecting with Last-Event-ID, a second later: replay.py)."""
    from orchestrator.mcp_server.replay import ReplayBuffer, opening

    app = server.streamable_http_app(host=host, event_store=ReplayBuffer(), retry_interval=RETRY_MS)
    return opening(app)


def serve_http(db: str | None, *, token: str, host: str = "127.0.0.1", port: int = 8766) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp (DNS-rebinding protection on loopback),
    in both protocol eras as over stdio, with resumable streams. Every request needs
    `Authorization: Bearer TOKEN`, checked before its body is read."""
    import uvicorn

    from orchestrator.errors import ConfigError
    from orchestrator.web.protocol import listening_socket, server_config
    from orchestrator.web.security import RequestGuard

    app = RequestGuard(
        http_app(build_server(db), host),
        token=token,
        max_body=MAX_BODY_BYTES,
        everything=True,
    )
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ConfigError(f"--port {port}: cannot listen on {host}:{port} ({why})") from None
    served = f"http://{host}:{port}/mcp"
    print(f"orchestrator mcp: serving {served} (pid {os.getpid()})", file=sys.stderr, flush=True)
    uvicorn.Server(server_config(app, log_level="warning")).run(sockets=[sock])
