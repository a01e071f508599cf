"""How one web server runs: where it listens, who may use it, what it does on its own."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WebConfig", "ENV_TOKEN", "ENV_NOTIFY", "LOOPBACK_NAMES", "HERE", "answer_url"]

HERE = Path(__file__).resolve().parent  # templates/ and static/

ENV_TOKEN = "ORCHESTRATOR_WEB_TOKEN"
ENV_NOTIFY = "ORCHESTRATOR_NOTIFY"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass
class WebConfig:
    """`token`: the access token (None: $ORCHESTRATOR_WEB_TOKEN, else a new random one).
    `allowed_hosts`: extra names the Host header may carry (the bound address, the
    loopback names and `public_url`'s host are always allowed). `workers`: sessions run on
    at once after answers. `notify`: Apprise URLs told when a question waits."""

    db: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    public_url: str | None = None
    workers: int = 2
    notify: tuple[str, ...] = ()
    run_on: bool = True  # run sessions on after answers (and pick up stranded ones at start)
    page_size: int = 50
    reminder_seconds: float = 60.0  # "deadline near": this long before it
    retry_delays: tuple[float, ...] = (1.0, 4.0, 15.0)
    tls: bool = False  # served over HTTPS (uvicorn holds the certificate)
    token_generated: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not self.token:
            self.token = os.environ.get(ENV_TOKEN) or None
        if not self.token:
            self.token = secrets.token_urlsafe(24)
            self.token_generated = True

    def host_names(self) -> frozenset[str]:
        """Every name a request's Host header may carry (without the port)."""
        names = set(LOOPBACK_NAMES) | {h.lower() for h in self.allowed_hosts}
        names.add(self.host.lower())
        if self.host in ("0.0.0.0", "::", ""):
            hostname = socket.gethostname()
            names |= {hostname.lower(), socket.getfqdn().lower()}
            with contextlib.suppress(OSError):
                names |= {str(info[4][0]) for info in socket.getaddrinfo(hostname, None)}
        if self.public_url:
            from urllib.parse import urlsplit

            public = urlsplit(self.public_url).hostname
            if public:
                names.add(public.lower())
        return frozenset(names)

    def base_url(self) -> str:
        """Where the server is reached: `public_url`, else the bound address."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def start_url(self) -> str:
        """The URL printed at start. It carries a generated token (printed this once; the
        browser keeps a cookie); one the user gave (--token, --token-file, the
        environment) is theirs to add, and is never printed."""
        if self.token_generated:
            return f"{self.base_url()}/?token={self.token}"
        return f"{self.base_url()}/?token=YOUR_TOKEN"


def answer_url(base_url: str, token: str) -> str:
    """The address of a question's answer link."""
    return f"{base_url.rstrip('/')}/q/{token}"
