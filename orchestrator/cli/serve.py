"""`orchestrator serve`: the web inbox and HTTP API over the same database (contract §5)."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from orchestrator.cli.options import DbOption, NotifyOption, notify_urls
from orchestrator.cli.output import err, user_errors

__all__ = ["serve"]


def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback unless you say so).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            help="Access token (seen by anyone who lists processes: prefer --token-file or "
            "$ORCHESTRATOR_WEB_TOKEN). Default: $ORCHESTRATOR_WEB_TOKEN, else a new one (printed).",
        ),
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option("--token-file", metavar="FILE", help="Read the access token from FILE."),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Sessions run on at once after answers.")
    ] = 2,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            metavar="URL",
            help="The address people reach this server at (answer links in notifications; "
            "its host is accepted in the Host header).",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", metavar="NAME", help="Another accepted Host name."),
    ] = None,
    notify: NotifyOption = None,
    db: DbOption = None,
) -> None:
    """Serve the web inbox: answer waiting sessions in a browser or over HTTP."""
    with user_errors(False):
        from orchestrator.install_hints import require_extra

        require_extra("web", "orchestrator serve", "fastapi", "uvicorn", "jinja2", "sse_starlette")
        import uvicorn

        from orchestrator.api.database import locate
        from orchestrator.web import WebConfig, create_app

        if token_file is not None:
            from orchestrator.errors import ConfigError
            from orchestrator.web.security import read_token

            if token is not None:
                raise ConfigError("give either --token or --token-file, not both")
            token = read_token(token_file, "--token-file")
        locate(db, create=True)  # checked (and the default folder made) before serving
        config = WebConfig(
            db=db,  # as given (None: $ORCHESTRATOR_DB or the default), so hints leave it out
            host=host,
            port=port,
            token=token,
            workers=workers,
            public_url=public_url,
            allowed_hosts=tuple(allow_host or ()),
            notify=notify_urls(notify),
        )
        sock = _listen(host, port)  # bound before printing: --port 0 takes a free port
        config.port = sock.getsockname()[1]
        web_app = create_app(config)
        server = uvicorn.Server(
            uvicorn.Config(
                web_app, log_level="warning", access_log=False, timeout_graceful_shutdown=3
            )
        )
        err(f"orchestrator inbox: {config.start_url()}")
        if host not in ("127.0.0.1", "localhost", "::1"):
            err("warning: listening beyond this machine; keep the token secret")
        server.run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    from orchestrator.errors import ConfigError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
