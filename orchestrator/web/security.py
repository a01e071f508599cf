"""Access rules: the Host header check, the access token, and CSRF for forms.

- Host: a request naming another host is refused (400) — DNS rebinding cannot reach the
  server through a name an attacker controls.
- Token: `Authorization: Bearer TOKEN` (API clients) or the HttpOnly SameSite=Strict
  cookie set when the start URL (`/?token=TOKEN`) is opened.
- CSRF: signed double submit, bound to what it protects. Every page sets a random
  `orchestrator_csrf` cookie and puts in its forms the HMAC, under this server's own
  secret key, of the cookie and of the page's scope (`csrf_scope`: one answer link, one
  session, or the rest); a POST whose form field (or `X-CSRF-Token` header, for the API
  used with the cookie) is not that HMAC for its own scope is refused (403). So a value
  read off one answer link's page (which needs no token) opens no other form. A page on
  another port of the same host can overwrite the cookie (they are not kept apart by
  port) but cannot sign it. And an unsafe request whose `Origin` or
  `Sec-Fetch-Site` says it comes from anywhere but this exact origin, port included, is
  refused before that; `Origin: null` (a sandboxed frame, a `data:` page) too: our pages
  send `Referrer-Policy: same-origin`, under which a browser sends their real origin.
- Before any route runs (`RequestGuard`): the API and its schema need the token, any
  other request with a body (a form) the token too, or, on an answer link `/q/{token}`,
  a link that is open; all before a byte of the body is read. No request body may pass
  `MAX_BODY_BYTES` (413). So a client without the token or a link cannot make the server
  hold, wait for or parse a body (and the connection's clock, `web.protocol`, bounds how
  long anyone may take to send one).
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "read_token",
    "checked_token",
    "MIN_TOKEN_CHARS",
    "HostCheck",
    "RequestGuard",
    "MAX_BODY_BYTES",
    "TOKEN_COOKIE",
    "CSRF_COOKIE",
    "token_ok",
    "bearer_or_cookie",
    "csrf_key",
    "csrf_value",
    "csrf_scope",
    "same_origin",
    "csrf_ok",
    "set_cookies",
]

TOKEN_COOKIE = "orchestrator_token"
CSRF_COOKIE = "orchestrator_csrf"
# An answer and a note are at most 10,000 characters each: as JSON (\uXXXX escapes) or a
# form, well under this.
MAX_BODY_BYTES = 256 * 1024
# An access token from any source (--token, --token-file, the environment), web and MCP:
# a generated one has 32 characters (token_urlsafe(24)).
MIN_TOKEN_CHARS = 16


class HostCheck:
    """ASGI middleware: 400 unless the Host header names this server; every answer but a
    static file's is `Cache-Control: no-store` (they hold questions, answers, tokens)."""

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
        if scope["type"] != "http" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return

        async def no_store(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"cache-control" for name, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, no_store)  # pages and JSON name sessions and answers


class RequestGuard:
    """ASGI middleware: the token for `/api/` and `/openapi.json` (with `everything`, for
    every path) and for any other request with a body, except an answer link's, which
    `check_link(token)` vets instead (None when open, else (status, message)); all before
    the body is read (401, shown with `error_page(request, status, message)`). At most
    `max_body` bytes of body for any request (413). Refusals close the connection: the
    rest of a body is never read."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        max_body: int = MAX_BODY_BYTES,
        everything: bool = False,
        check_link: Callable[[str], tuple[int, str] | None] | None = None,
        error_page: Callable[[Request, int, str], Any] | None = None,
    ) -> None:
        self.app = app
        self.error_page = error_page or _plain_error
        self.token = token
        self.max_body = max_body
        self.everything = everything
        self.check_link = check_link

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)  # headers and cookies only: the body is not touched
        path = scope["path"]
        protected = self.everything or path.startswith("/api/") or path == "/openapi.json"
        how = bearer_or_cookie(request, self.token)
        if protected and (how is None or (self.everything and how != "bearer")):
            # `everything` (MCP over HTTP): the bearer header only; the web inbox's cookie
            # is the inbox's, and a browser would send it along with any request.
            refused = "missing or wrong access token: send Authorization: Bearer TOKEN"
            challenge = {"WWW-Authenticate": 'Bearer realm="orchestrator"'}  # RFC 6750
            refusal = JSONResponse({"error": refused}, status_code=401, headers=challenge)
            await _closing(refusal)(scope, receive, send)
            return
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._too_large(scope, receive, send)
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if not protected:
            refusal = await self._before_body(request, path)
            if refusal is not None:
                await _closing(refusal)(scope, receive, send)
                return
        body, more = b"", True
        while more:  # read at most max_body + 1 bytes, then hand them on
            part = await receive()
            if part["type"] != "http.request":  # the client went away (or was cut off)
                return  # nothing to answer, and nothing for the log
            body += part.get("body", b"")
            more = part.get("more_body", False)
            if len(body) > self.max_body:
                await self._too_large(scope, receive, send)
                return
        await self.app(scope, _replay([{"type": "http.request", "body": body}], receive), send)

    async def _before_body(self, request: Request, path: str) -> Any:
        """The response refusing a form before its body is read, or None to read it."""
        parts = path.split("/")
        if self.check_link is not None and len(parts) == 3 and parts[1] == "q":
            refused = await run_in_threadpool(self.check_link, parts[2])
            return None if refused is None else self.error_page(request, *refused)
        if bearer_or_cookie(request, self.token) is None and not token_ok(
            request.query_params.get("token"), self.token
        ):
            return self.error_page(
                request,
                401,
                "this page needs the access token: open the URL the server printed at start "
                "(it ends in ?token=…)",
            )
        return None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body is larger than {self.max_body:,} bytes"
        if self.everything or scope["path"].startswith("/api/"):
            response: Any = JSONResponse({"error": message}, status_code=413)
        else:
            response = PlainTextResponse(f"413: {message}", status_code=413)
        await _closing(response)(scope, receive, send)


def _closing(response: Any) -> Any:
    """`response`, closing the connection after it (a body left unread is never read)."""
    response.headers["connection"] = "close"
    return response


def _plain_error(_request: Request, status: int, message: str) -> Any:
    return PlainTextResponse(f"{status}: {message}", status_code=status)


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
    return checked_token(token, f"{what} {path}")


def checked_token(token: str, source: str) -> str:
    """`token` if it is long enough to be a secret; ConfigError naming `source` (never the
    token) otherwise. One rule for every source of every server's token."""
    from orchestrator.errors import ConfigError

    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"{source}: expected a token of at least {MIN_TOKEN_CHARS} characters (got "
            f"{len(token)}); make one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(24))'"
        )
    return token


def _host_header(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"host":
            return str(value.decode("latin-1")).strip().lower()
    return None


# A Host header: a name or IPv4 address, or an IPv6 address in brackets, then an optional
# port. Anything else (`[::1]evil.com`, `127.0.0.1:8765, evil.com`) names no host of ours.
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::[0-9]{1,5})?")


def _strip_port(host: str) -> str:
    """The name in a Host header, without its port; '' when the header is malformed."""
    match = _HOST.fullmatch(host)
    return match.group(1) if match else ""


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


def csrf_scope(path: str) -> str:
    """What a CSRF value for a page at `path` (or a form posted there) protects: one answer
    link (`/q/TOKEN`), one session (`/sessions/ID…`, and its API `/api/sessions/ID/…`),
    or the rest (`/`)."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[1] == "q":
        return f"/q/{parts[2]}"
    if len(parts) >= 3 and parts[1] == "sessions":
        return f"/sessions/{parts[2]}"
    if len(parts) >= 4 and parts[1] == "api" and parts[2] == "sessions":
        return f"/sessions/{parts[3]}"
    return "/"


def _signed(request: Request, cookie: str, scope: str | None) -> str:
    key: bytes = request.app.state.csrf_key
    bound = csrf_scope(request.url.path) if scope is None else scope
    return hmac.new(key, f"{bound}\0{cookie}".encode(), "sha256").hexdigest()


def csrf_value(request: Request, scope: str | None = None) -> str:
    """The CSRF value this browser's forms carry on this page: the HMAC of its cookie (a
    new cookie, which the response must set, when it has none) and of `scope` (default:
    the scope of the request's path)."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie:
        cookie = getattr(request.state, "new_csrf", None) or secrets.token_urlsafe(24)
        request.state.new_csrf = cookie
    return _signed(request, cookie, scope)


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another origin (another port of
    this host included, or an opaque one: `Origin: null`); True when it says nothing (an
    API client) or names ours."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:  # the browser's own word (Chromium, Firefox, Safari)
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin.lower() in (f"http://{host}".lower(), f"https://{host}".lower())


def csrf_ok(request: Request, submitted: str | None, scope: str | None = None) -> bool:
    """An unsafe request from a page of ours: this origin, and the cookie's signature for
    `scope` (default: the scope of the request's path)."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted or not same_origin(request):
        return False
    return hmac.compare_digest(_signed(request, cookie, scope).encode(), str(submitted).encode())


def set_cookies(request: Request, response: Any, *, secure: bool) -> None:
    """Set the CSRF cookie when this request made a new one."""
    new = getattr(request.state, "new_csrf", None)
    if new:
        response.set_cookie(
            CSRF_COOKIE, new, httponly=True, samesite="strict", secure=secure, path="/"
        )
