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
            "$ORCHESTRATOR_WEB_TOKEN); at least 16 characters. Default: $ORCHESTRATOR_WEB_TOKEN, "
            "else a new one (printed once).",
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
    certfile: Annotated[
        str | None,
        typer.Option("--certfile", metavar="FILE", help="Serve HTTPS with this certificate (PEM)."),
    ] = None,
    keyfile: Annotated[
        str | None,
        typer.Option("--keyfile", metavar="FILE", help="The certificate's private key (PEM)."),
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Allow plain HTTP on an address beyond this machine (the token and answers "
            "then cross the network in clear).",
        ),
    ] = False,
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
        from orchestrator.web.protocol import server_config

        token = _given_token(token, token_file)
        tls = _check_tls(host, certfile, keyfile, insecure)
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
            tls=tls,
        )
        sock = _listen(host, port)  # bound before printing: --port 0 takes a free port
        config.port = sock.getsockname()[1]
        web_app = create_app(config)
        server = uvicorn.Server(
            server_config(
                web_app,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=3,
                ssl_certfile=certfile,
                ssl_keyfile=keyfile,
            )
        )
        if host not in LOOPBACK and not tls:
            err("warning: plain HTTP beyond this machine (--insecure): the token crosses in clear")
        # A server runs for weeks: the collector the one-shot commands leave off (cli.entry)
        # goes back on, or every answered session's cyclic garbage stays (~47 KiB each).
        from orchestrator.api.running import load_runtime
        from orchestrator.cli.runs import collect_from_here_on

        load_runtime()  # LangGraph's import-time objects: frozen with the rest
        collect_from_here_on()
        if config.token_generated:
            err(f"orchestrator inbox: {config.start_url()}")
        else:  # the user's own token is never printed (it may be in a shared terminal log)
            err(
                f"orchestrator inbox: {config.start_url()}  (open it once with your token "
                "in place of YOUR_TOKEN; the browser keeps it in a cookie)"
            )
        server.run(sockets=[sock])


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _given_token(token: str | None, token_file: str | None) -> str | None:
    """The access token the user gave (--token, --token-file or the environment), held to
    one rule whatever its source; None: generate one."""
    import os

    from orchestrator.errors import ConfigError
    from orchestrator.web.config import ENV_TOKEN
    from orchestrator.web.security import checked_token, read_token

    if token_file is not None:
        if token is not None:
            raise ConfigError("give either --token or --token-file, not both")
        return read_token(token_file, "--token-file")
    if token is not None:
        return checked_token(token, "--token")
    if os.environ.get(ENV_TOKEN):
        return checked_token(os.environ[ENV_TOKEN], f"${ENV_TOKEN}")
    return None


def _check_tls(host: str, certfile: str | None, keyfile: str | None, insecure: bool) -> bool:
    """Whether to serve HTTPS; a non-loopback address needs it unless --insecure says not."""
    import ssl

    from orchestrator.errors import ConfigError

    if (certfile is None) != (keyfile is None):
        raise ConfigError("give --certfile and --keyfile together (the certificate and its key)")
    if certfile is not None and keyfile is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--certfile/--keyfile: cannot load them ({exc})") from None
        return True
    if host not in LOOPBACK and not insecure:
        raise ConfigError(
            f"--host {host} reaches beyond this machine: serve HTTPS (--certfile FILE "
            "--keyfile FILE), put a TLS reverse proxy in front and keep --host 127.0.0.1, "
            "or say --insecure to send the token and answers in clear"
        )
    return False


def _listen(host: str, port: int) -> socket.socket:
    from orchestrator.errors import ConfigError
    from orchestrator.web.protocol import listening_socket

    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock
