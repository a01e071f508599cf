"""`orchestrator mcp`: serve the MCP server (contract section 6) over stdio or HTTP."""

from __future__ import annotations

import gc
from typing import Annotated

import typer

from orchestrator.cli.options import DbOption
from orchestrator.cli.output import user_errors

__all__ = ["mcp", "ENV_MCP_TOKEN"]

ENV_MCP_TOKEN = "ORCHESTRATOR_MCP_TOKEN"


def mcp(
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Serve streamable HTTP on 127.0.0.1 (at /mcp) instead of stdio.",
        ),
    ] = False,
    port: Annotated[
        int,
        typer.Option("--port", min=1, max=65535, help="The port for --http."),
    ] = 8766,
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="With --http: the bearer token clients must send, read from FILE. "
            f"Default: ${ENV_MCP_TOKEN}, else a new one, printed once.",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Serve the MCP tools (provide_choice, ask_user and the session tools) to an MCP client."""
    with user_errors(False):
        from orchestrator.errors import ConfigError

        try:
            from orchestrator.mcp_server import serve_http, serve_stdio
            from orchestrator.mcp_server.transports import log_to_stderr
        except ImportError as exc:
            if exc.name is None or not exc.name.startswith("mcp"):
                raise
            from orchestrator.install_hints import install_extra

            raise ConfigError(f"the MCP server needs the MCP SDK: {install_extra('mcp')}") from None
        from orchestrator.api.running import freeze_at_first_drive

        gc.enable()  # a long-lived server, unlike the one-shot commands main() tunes for
        freeze_at_first_drive()  # its first session's provider: out of the collector's sight
        log_to_stderr()
        if http:
            token = _token(token_file)
            serve_http(db, port=port, token=token)
        else:
            serve_stdio(db)


def _token(token_file: str | None) -> str:
    """--token-file, else $ORCHESTRATOR_MCP_TOKEN, else a new token printed once on stderr."""
    import os
    import secrets

    from orchestrator.cli.output import err
    from orchestrator.web.security import checked_token, read_token

    if token_file is not None:
        return read_token(token_file, "--token-file")
    if os.environ.get(ENV_MCP_TOKEN):
        return checked_token(os.environ[ENV_MCP_TOKEN], f"${ENV_MCP_TOKEN}")
    token = secrets.token_urlsafe(24)
    err(f"orchestrator mcp: clients send the header  Authorization: Bearer {token}")
    return token
