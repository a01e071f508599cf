"""Access rules: the Host header check, the access token, and CSRF for forms.

- Host: a request naming another host is refused (400) — DNS rebinding cannot reach the
  server through a name an attacker controls.
- Token: `Authorization: Bearer TOKEN` (API clients) or the HttpOnly SameSite=Strict
  cookie set when the start URL (`/?token=TOKEN`) is opened.
- CSRF: double submit. Every page sets a random `orchestrator_csrf` cookie and puts the
  same value in its forms; a POST whose form field (or `X-CSRF-Token` header, for the
  API used with the cookie) differs from the cookie is refused (403).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "HostCheck",
    "TOKEN_COOKIE",
    "CSRF_COOKIE",
    "token_ok",
    "bearer_or_cookie",
    "csrf_value",
    "csrf_ok",
    "set_cookies",
]

TOKEN_COOKIE = "orchestrator_token"
CSRF_COOKIE = "orchestrator_csrf"


class HostCheck:
    """ASGI middleware: 400 unless the Host header names this server."""

    def __init__(self, app: ASGIApp, names: frozenset[str]) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = _host_header(scope)
            if host is None or _strip_port(host) not in self.names:
                response: Any
                if scope["path"].startswith("/api/"):
                    response = JSONResponse(
                        {"error": f"the Host header {host!r} does not name this server"},
                        status_code=400,
                    )
                else:
                    response = PlainTextResponse(
                        "400: the Host header does not name this server", status_code=400
                    )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _host_header(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"host":
            return str(value.decode("latin-1")).strip().lower()
    return None


def _strip_port(host: str) -> str:
    if host.startswith("["):  # [::1]:8765
        return host.split("]", 1)[0] + "]"
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def token_ok(given: str | None, token: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), token.encode())


def bearer_or_cookie(request: Request, token: str) -> str | None:
    """How the request proved it holds the token: 'bearer', 'cookie', or None."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and token_ok(value.strip(), token):
        return "bearer"
    if token_ok(request.cookies.get(TOKEN_COOKIE), token):
        return "cookie"
    return None


def csrf_value(request: Request) -> str:
    """This browser's CSRF value (the cookie's, or a new one the response must set)."""
    value = request.cookies.get(CSRF_COOKIE)
    if not value:
        value = getattr(request.state, "new_csrf", None) or secrets.token_urlsafe(24)
        request.state.new_csrf = value
    return value


def csrf_ok(request: Request, submitted: str | None) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted:
        return False
    return hmac.compare_digest(cookie.encode(), str(submitted).encode())


def set_cookies(request: Request, response: Any, *, secure: bool) -> None:
    """Set the CSRF cookie when this request made a new one."""
    new = getattr(request.state, "new_csrf", None)
    if new:
        response.set_cookie(
            CSRF_COOKIE, new, httponly=True, samesite="strict", secure=secure, path="/"
        )
