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

__all__ = ["serve_question", "ask_in_browser", "browser_available"]

WaitForReply = Callable[..., UserReply | None]


def serve_question(
    question: Mapping[str, Any],
    deadline: float | None = None,
    *,
    allow_cancel: bool = False,
    title: str | None = None,
) -> tuple[str, WaitForReply]:
    """Serve `question` on a free loopback port; return its URL and the wait function."""
    import uvicorn

    from orchestrator.web.protocol import listening_socket, server_config

    page_id = secrets.token_urlsafe(24)
    done = threading.Event()
    result: list[UserReply] = []
    app = _app(question, page_id, result, done, allow_cancel=allow_cancel, title=title)
    sock = listening_socket("127.0.0.1", 0, backlog=16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        server_config(app, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="oneshot", daemon=True
    )
    thread.start()

    def wait_for_reply(timeout: float | None = None) -> UserReply | None:
        ends = [t for t in (deadline, time.time() + timeout if timeout else None) if t]
        until = min(ends) if ends else None
        try:
            while not done.is_set():
                left = None if until is None else until - time.time()
                if left is not None and left <= 0:
                    break
                done.wait(0.25 if left is None else min(0.25, left))
        except KeyboardInterrupt:
            pass  # Ctrl+C leaves the question open
        finally:
            time.sleep(0.2 if done.is_set() else 0)  # let the "thank you" page go out
            server.should_exit = True
            thread.join(timeout=5)
            sock.close()
        return result[0] if result else None

    return f"http://127.0.0.1:{port}/choice/{page_id}", wait_for_reply


def _app(
    question: Mapping[str, Any],
    page_id: str,
    result: list[UserReply],
    done: threading.Event,
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
