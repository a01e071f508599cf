"""Access rules: the Host header check, the access token, and CSRF for forms.

- Host: a request naming another host is refused (400) — DNS rebinding cannot reach the
  server through a name an attacker controls.
- Token: `Authorization: Bearer TOKEN` (API clients) or the HttpOnly SameSite=Strict
  cookie set when the start URL (`/?token=TOKEN`) is opened.
- CSRF: signed double submit. Every page sets a random `orchestrator_csrf` cookie and puts
  its HMAC under this server's own secret key in its forms; a POST whose form field (or
  `X-CSRF-Token` header, for the API used with the cookie) is not the HMAC of the cookie
  is refused (403). A page on another port of the same host can overwrite the cookie (they
  are not kept apart by port) but cannot sign it. And an unsafe request whose `Origin` or
  `Sec-Fetch-Site` says it comes from anywhere but this exact origin, port included, is
  refused before that.
- Before any route runs (`RequestGuard`): the API and its schema need the token before a
  byte of the body is read, and no request body may pass `MAX_BODY_BYTES` (413), so an
  unauthenticated client cannot make the server hold or parse a large body.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "read_token",
    "HostCheck",
    "RequestGuard",
    "MAX_BODY_BYTES",
    "TOKEN_COOKIE",
    "CSRF_COOKIE",
    "token_ok",
    "bearer_or_cookie",
    "csrf_key",
    "csrf_value",
    "same_origin",
    "csrf_ok",
    "set_cookies",
]

TOKEN_COOKIE = "orchestrator_token"
CSRF_COOKIE = "orchestrator_csrf"
# An answer and a note are at most 10,000 characters each: as JSON (\uXXXX escapes) or a
# form, well under this.
MAX_BODY_BYTES = 256 * 1024


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


class RequestGuard:
    """ASGI middleware: the token for `/api/` and `/openapi.json` (with `everything`, for
    every path) before the body is read (401), and at most `max_body` bytes of body for
    any request (413)."""

    def __init__(
        self, app: ASGIApp, token: str, max_body: int = MAX_BODY_BYTES, everything: bool = False
    ) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body
        self.everything = everything

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)  # headers and cookies only: the body is not touched
        path = scope["path"]
        protected = self.everything or path.startswith("/api/") or path == "/openapi.json"
        if protected and bearer_or_cookie(request, self.token) is None:
            refused = "missing or wrong access token: send Authorization: Bearer TOKEN"
            challenge = {"WWW-Authenticate": 'Bearer realm="orchestrator"'}  # RFC 6750
            await JSONResponse({"error": refused}, status_code=401, headers=challenge)(
                scope, receive, send
            )
            return
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._too_large(scope, receive, send)
            return
        body, more = b"", True
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            while more:  # read at most max_body + 1 bytes, then hand them on
                part = await receive()
                if part["type"] != "http.request":  # the client went away
                    await self.app(scope, _replay([part], receive), send)
                    return
                body += part.get("body", b"")
                more = part.get("more_body", False)
                if len(body) > self.max_body:
                    await self._too_large(scope, receive, send)
                    return
            receive = _replay([{"type": "http.request", "body": body}], receive)
        await self.app(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body is larger than {self.max_body:,} bytes"
        if self.everything or scope["path"].startswith("/api/"):
            response: Any = JSONResponse({"error": message}, status_code=413)
        else:
            response = PlainTextResponse(f"413: {message}", status_code=413)
        await response(scope, receive, send)


def _replay(messages: list[Any], receive: Receive) -> Receive:
    """`receive` that first hands out `messages` (a body already read), then the real one."""
    queue = list(messages)

    async def replay() -> Any:
        if queue:
            return queue.pop(0)
        return await receive()

    return replay


def read_token(path: str, what: str) -> str:
    """The token in a file (its first line; a file only its owner should read), named
    `what` in errors. Keeps the token out of the process list, unlike --token."""
    from pathlib import Path

    from orchestrator.errors import ConfigError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path}: cannot read it ({exc})") from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16:
        raise ConfigError(f"{what} {path}: expected a token of at least 16 characters")
    return token


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


def csrf_key() -> bytes:
    """A new secret key for a server's CSRF values (kept in `app.state.csrf_key`)."""
    return secrets.token_bytes(32)


def _signed(request: Request, cookie: str) -> str:
    key: bytes = request.app.state.csrf_key
    return hmac.new(key, cookie.encode(), "sha256").hexdigest()


def csrf_value(request: Request) -> str:
    """The CSRF value this browser's forms carry: the HMAC of its cookie (a new cookie,
    which the response must set, when it has none)."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie:
        cookie = getattr(request.state, "new_csrf", None) or secrets.token_urlsafe(24)
        request.state.new_csrf = cookie
    return _signed(request, cookie)


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another origin (another port of
    this host included); True when it says nothing (an API client) or names ours."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:  # the browser's own word (Chromium, Firefox, Safari)
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":  # our pages send no referrer: Origin is "null"
        return True
    host = request.headers.get("host", "")
    return origin.lower() in (f"http://{host}".lower(), f"https://{host}".lower())


def csrf_ok(request: Request, submitted: str | None) -> bool:
    """An unsafe request from a page of ours: this origin, and the cookie's signature."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted or not same_origin(request):
        return False
    return hmac.compare_digest(_signed(request, cookie).encode(), str(submitted).encode())


def set_cookies(request: Request, response: Any, *, secure: bool) -> None:
    """Set the CSRF cookie when this request made a new one."""
    new = getattr(request.state, "new_csrf", None)
    if new:
        response.set_cookie(
            CSRF_COOKIE, new, httponly=True, samesite="strict", secure=secure, path="/"
        )
