"""Serving the MCP server: stdio (what MCP clients launch) or streamable HTTP on loopback."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import anyio

from orchestrator.mcp_server.server import build_server

__all__ = ["serve_stdio", "serve_http", "log_to_stderr"]


def log_to_stderr(level: int = logging.INFO) -> None:
    """Our log (and tracebacks of failed tools) on stderr: stdout carries the protocol."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("orchestrator mcp: %(levelname)s %(message)s"))
    logger = logging.getLogger("orchestrator.mcp")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def serve_stdio(db: str | None) -> None:
    """Serve one client over stdin/stdout until it closes them.

    Handshake era only (`initialize`, protocol 2025-11-25 and earlier), the era of today's
    MCP clients: there a tool call can wait while the server asks the person
    (`elicitation/create`). The 2026-07-28 era forbids server-initiated requests; a client
    that probes for it with `server/discover` is refused and falls back to `initialize`.
    """
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    server = build_server(db)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream), server.lifespan(server) as state:
            await serve_loop(
                server,
                read_stream,
                write_stream,
                lifespan_state=state,
                init_options=server.create_initialization_options(),
            )

    anyio.run(main)


def serve_http(db: str | None, *, host: str = "127.0.0.1", port: int = 8766) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp (DNS-rebinding protection on loopback),
    in the handshake era as over stdio."""
    import uvicorn

    app = handshake_only(build_server(db).streamable_http_app(host=host))
    print(f"orchestrator mcp: serving http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


def handshake_only(app: Any) -> Any:
    """Refuse requests of the 2026-07-28 era (their protocol header names it) with a 400, so
    that clients probing for it fall back to `initialize`: in that era the server could not
    ask the person while a tool waits."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    header = b"mcp-protocol-version"
    refusal = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "this server speaks the initialize handshake era "
                f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
            },
        }
    ).encode()

    async def handshake_era(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            version = dict(scope["headers"]).get(header)
            if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": refusal})
                return
        await app(scope, receive, send)

    return handshake_era
