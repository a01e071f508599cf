"""One question in the browser, then gone: `--ui web`, and a fallback for other edges.

    url, wait_for_reply = serve_question(question_doc, deadline)
    print(url)                      # http://127.0.0.1:<free port>/choice/<unguessable id>
    reply = wait_for_reply()        # a Reply, or None when the deadline passed

`serve_question` starts a small server on 127.0.0.1 and a free port, in a background
thread, serving only that question (the same form as the inbox: every kind, options with
descriptions, the recommended one preselected, "other", decline; `allow_cancel` adds a
cancel button that replies `Reply(action="cancel")`). Answers are validated against the
question before they are accepted (`orchestrator.domain.question.to_gate_event`); an invalid one
shows the page again with what was wrong. `wait_for_reply(timeout=None)` blocks until
the answer, the deadline (epoch seconds, None: no deadline) or the timeout, then stops
the server; it returns None on deadline/timeout and on Ctrl+C. The question document is
the session API's pending question (contract section 2, plus `asked_by`, `deadline`).

`open_page(...)` is the same page as an object (`url`, `wait`, `close`): an edge that learns
the question was settled elsewhere (another door answered it, a cancel, its deadline)
calls `close()`; the page then says so and takes no answer, and its server, thread and port
are gone before `close` returns.

`ask_in_browser(question)` is an `ask=` callable for the session API: it prints the URL on
stderr, opens a browser when one is available, and waits.
"""

from __future__ import annotations

import hmac
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, cast

from fastapi import Request
from fastapi.responses import HTMLResponse

from orchestrator.domain.question import UserReply, to_gate_event
from orchestrator.errors import InvalidAnswer

__all__ = ["serve_question", "open_page", "QuestionPage", "ask_in_browser", "browser_available"]

WaitForReply = Callable[..., UserReply | None]


def serve_question(
    question: Mapping[str, Any],
    deadline: float | None = None,
    *,
    allow_cancel: bool = False,
    title: str | None = None,
) -> tuple[str, WaitForReply]:
    """Serve `question` on a free loopback port; return its URL and the wait function."""
    page = open_page(question, deadline, allow_cancel=allow_cancel, title=title)
    return page.url, page.wait


CLOSED_ELSEWHERE = (
    "It was answered at another door (the terminal, the inbox, an answer link, the MCP "
    "client), withdrawn, or its time ran out; this page takes no answer any more."
)


class QuestionPage:
    """One question served on a free loopback port until it is answered there, its
    deadline passes, or `close` (the question was settled elsewhere): then its server,
    thread and port are gone."""

    def __init__(
        self,
        question: Mapping[str, Any],
        deadline: float | None,
        *,
        allow_cancel: bool,
        title: str | None,
    ) -> None:
        import uvicorn

        from orchestrator.web.protocol import listening_socket, server_config

        self.deadline = deadline
        self._done = threading.Event()
        self._result: list[UserReply] = []
        self._closed: list[str] = []  # why it closed without an answer here
        self._stopped = threading.Lock()
        page_id = secrets.token_urlsafe(24)
        app = _app(
            question,
            page_id,
            self._result,
            self._done,
            self._closed,
            allow_cancel=allow_cancel,
            title=title,
        )
        self._sock = listening_socket("127.0.0.1", 0, backlog=16)
        port = self._sock.getsockname()[1]
        self._server = uvicorn.Server(
            server_config(app, log_level="warning", access_log=False, lifespan="off")
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="oneshot", daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{port}/choice/{page_id}"

    def wait(self, timeout: float | None = None) -> UserReply | None:
        """The reply given on the page; None at the deadline, the timeout, a `close`, or
        Ctrl+C (which leaves the question open). The server is stopped on the way out."""
        ends = [t for t in (self.deadline, time.time() + timeout if timeout else None) if t]
        until = min(ends) if ends else None
        try:
            while not self._done.is_set():
                left = None if until is None else until - time.time()
                if left is not None and left <= 0:
                    break
                self._done.wait(0.25 if left is None else min(0.25, left))
        except KeyboardInterrupt:
            pass  # Ctrl+C leaves the question open
        finally:
            if self._result:
                time.sleep(0.2)  # let the "thank you" page go out
            self.close()
        return self._result[0] if self._result else None

    def close(self, reason: str = CLOSED_ELSEWHERE) -> None:
        """Take no answer any more (`reason` for whoever loads the page meanwhile), stop
        the server and wait for its thread; a wait in progress returns None. Idempotent."""
        with self._stopped:
            if not self._done.is_set():
                self._closed.append(reason)
                self._done.set()
            self._server.should_exit = True
            if self._thread.is_alive() and self._thread is not threading.current_thread():
                self._thread.join(timeout=5)
            self._sock.close()


def open_page(
    question: Mapping[str, Any],
    deadline: float | None = None,
    *,
    allow_cancel: bool = False,
    title: str | None = None,
) -> QuestionPage:
    """Serve `question` on a free loopback port until answered, the deadline, or close."""
    return QuestionPage(question, deadline, allow_cancel=allow_cancel, title=title)


def _app(
    question: Mapping[str, Any],
    page_id: str,
    result: list[UserReply],
    done: threading.Event,
    closed: list[str],
    *,
    allow_cancel: bool,
    title: str | None,
) -> Any:
    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles

    from orchestrator.web.config import HERE, LOOPBACK_NAMES
    from orchestrator.web.forms import reply_from_form
    from orchestrator.web.pages import page_templates
    from orchestrator.web.security import HostCheck, csrf_key, csrf_ok, csrf_value, set_cookies

    templates = page_templates()
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.csrf_key = csrf_key()
    app.add_middleware(HostCheck, names=LOOPBACK_NAMES)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    lock = threading.Lock()

    def page(request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template("oneshot.html").render(
            q=question,
            action=f"/choice/{page_id}",
            csrf=csrf_value(request),
            allow_cancel=allow_cancel,
            title=title,
            closed_reason=closed[0] if closed else None,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        set_cookies(request, response, secure=False)
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'"
        )
        return response

    @app.get("/choice/{given}")
    def show(request: Request, given: str) -> HTMLResponse:
        if not hmac.compare_digest(given.encode(), page_id.encode()):
            return HTMLResponse("404: no such question", status_code=404)
        if done.is_set():
            return page(request, status=410, closed=True)
        return page(request, error=None)

    @app.post("/choice/{given}")
    async def answer(request: Request, given: str) -> HTMLResponse:
        if not hmac.compare_digest(given.encode(), page_id.encode()):
            return HTMLResponse("404: no such question", status_code=404)
        form = await request.form()
        if not csrf_ok(request, form.get("csrf")):  # type: ignore[arg-type]
            return HTMLResponse("403: stale form; reload the page", status_code=403)
        try:
            if form.get("action") == "cancel" and allow_cancel:
                reply = UserReply(action="cancel")
            else:
                reply = reply_from_form(question, form)
                to_gate_event(cast(Any, question), reply)  # the same validation as `resume`
        except InvalidAnswer as exc:
            return page(request, status=422, error=exc.message)
        with lock:
            if done.is_set():
                return page(request, status=410, closed=True)
            result.append(reply)
            done.set()
        return page(request, answered=reply)

    return app


def browser_available() -> bool:
    """Is there a graphical browser to open (not a text one that would take the terminal)?"""
    if os.environ.get("BROWSER"):
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def ask_in_browser(
    question: Mapping[str, Any], *, open_browser: bool = True, out: Any = None
) -> UserReply | None:
    """Ask `question` on a one-question page; the session API's `ask=` callable."""
    out = out or sys.stderr
    # A deadline that passed under on-timeout "wait" left the question answerable: whoever
    # resumes it now is there to answer, so the page waits (Ctrl+C leaves it open).
    deadline = None if question.get("timed_out") else _epoch(question.get("deadline"))
    url, wait_for_reply = serve_question(question, deadline)
    print(f"answer in your browser: {url}", file=out, flush=True)
    if deadline is not None:
        when = datetime.fromtimestamp(deadline).strftime("%H:%M:%S")
        print(f"waiting until {when} (Ctrl+C leaves the question open)", file=out, flush=True)
    if open_browser and browser_available():
        import contextlib
        import webbrowser

        with contextlib.suppress(webbrowser.Error):  # the URL is printed; the user opens it
            webbrowser.open(url)
    return wait_for_reply()


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
