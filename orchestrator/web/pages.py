"""The HTML pages: the inbox, a session's page, the cancel confirmation, the API page.

Server-rendered (Jinja2, autoescaped: whatever an agent wrote shows as text); answering
works without JavaScript. Every form carries the CSRF value (double submit).
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool

from orchestrator.documents import FINAL_STATUSES
from orchestrator.errors import ClaimLost, OrchestratorError
from orchestrator.present import words
from orchestrator.web.config import HERE
from orchestrator.web.http_errors import ApiError, status_of
from orchestrator.web.security import (
    TOKEN_COOKIE,
    bearer_or_cookie,
    csrf_ok,
    csrf_value,
    set_cookies,
    token_ok,
)

__all__ = ["router", "render", "error_page", "page_templates", "page_auth", "time_left", "FILTERS"]


class _Redirect(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def page_auth(request: Request) -> None:
    """The cookie (or a Bearer header); `?token=` on any page sets the cookie once."""

    web = request.app.state.web
    given = request.query_params.get("token")
    if given is not None and token_ok(given, web.config.token):
        rest = {k: v for k, v in request.query_params.items() if k != "token"}
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            TOKEN_COOKIE,
            web.config.token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        raise _Redirect(response)
    if bearer_or_cookie(request, web.config.token) is None:
        raise ApiError(
            401,
            "this page needs the access token: open the URL the server printed at start "
            "(it ends in ?token=…)",
        )


router = APIRouter(dependencies=[Depends(page_auth)], include_in_schema=False)


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    web = request.app.state.web
    template = web.templates.get_template(name)
    html = template.render(request=request, csrf=csrf_value(request), now=time.time(), **context)
    response = HTMLResponse(html, status_code=status)
    set_cookies(request, response, secure=request.url.scheme == "https")
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    # Not no-referrer: under it a browser sends `Origin: null` with our own forms, which
    # then could not be told from a sandboxed frame's (security.same_origin refuses null).
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return render(request, "error.html", status=status, status_code=status, message=message)


def time_left(deadline: str | None, now: float | None = None) -> str:
    """'4 min 10 s', 'passed', or '' for no deadline."""
    if not deadline:
        return ""
    seconds = _epoch(deadline) - (now if now is not None else time.time())
    if seconds <= 0:
        return "passed"
    seconds = math.ceil(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _event_text(event: dict[str, Any]) -> str:
    from orchestrator.present.render import event_line

    if event["kind"] in ("notification_sent", "notification_failed"):
        what = "sent" if event["kind"] == "notification_sent" else "FAILED"
        detail = f": {event['error']}" if event.get("error") else ""
        return (
            f"notification ({event.get('about', '')}) to {event.get('target', '')} {what}{detail}"
        )
    return event_line(event)


def _when(iso_time: str | None) -> Markup:
    """A time as people read it: '4 min ago' (the page's script keeps it current), the
    moment to the second in its title; the ISO time stays machine-readable (datetime)."""
    if not iso_time:
        return Markup("")
    return Markup('<time class="ago" datetime="{}" title="{}">{}</time>').format(
        iso_time, words.moment(iso_time), words.ago(iso_time)
    )


def _clock(iso_time: str | None) -> Markup:
    """A log line's time of day (UTC; the script shows it in the reader's zone), the
    moment in its title."""
    if not iso_time:
        return Markup("")
    return Markup('<time class="clock" datetime="{}" title="{}">{}</time>').format(
        iso_time, words.moment(iso_time), words.clock_time(iso_time)
    )


def _short(text: str | None, size: int = 140) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _driver_note(view: dict[str, Any]) -> str:
    from orchestrator.present.render import driver_note

    return driver_note(view)


def _usage_text(usage: dict[str, Any]) -> str:
    from orchestrator.present.render import usage_text

    return usage_text(usage)


# `?page=N` (the inbox's pages before cursors) is still taken from bookmarks, 1 to this,
# and sent to the first page; a number outside is refused (400), as it always was.
MAX_PAGE = 1_000_000_000
# The number of sessions waiting for an answer is shown up to this ("100+" past it): a
# count of all sessions on every page cost more than the page itself.
WAITING_CAP = 100

FILTERS = {
    "time_left": time_left,
    "when": _when,
    "clock": _clock,
    "moment": words.moment,
    "turn_name": words.turn_name,
    "verdict_word": words.verdict_word,
    "source_word": words.source_word,
    "event_text": _event_text,
    "short": _short,
    "driver_note": _driver_note,
    "usage_text": _usage_text,
}
_DICT_NAMES = frozenset(dir(dict))


class _Templates(Environment):
    """Jinja reads `s.status` as an attribute first, then as a key; the pages are given
    plain dicts, so every such read raised and caught an AttributeError (half the inbox's
    rendering). Here a dict's key comes first, where no dict method has that name (the
    result is Jinja's either way)."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_NAMES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(value: Any) -> Any:
    """Every value a page shows: bidirectional controls (U+202E and the rest) as visible
    escapes, as at the terminal: they reordered what the inbox showed (an option label
    reading backwards, a file name's extension moved). Escaped for HTML after this. A
    value already escaped (`|form_value`: an option's label posted back as it is) is
    left alone."""
    if isinstance(value, str) and not isinstance(value, Markup) and _BIDI.search(value):
        return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    return value


def page_templates() -> Environment:
    """The pages' templates (autoescaped), with their filters."""
    templates = _Templates(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        auto_reload=False,  # they ship with the package: no stat of each file per page
        finalize=_shown,
    )
    templates.filters.update(FILTERS)
    templates.filters["form_value"] = escape  # Markup: posted back exactly (see _shown)
    return templates


@router.get("/")
def inbox(request: Request, after: str | None = None, page: int | None = None) -> Any:
    if page is not None:
        if not 1 <= page <= MAX_PAGE:
            raise ApiError(
                400, f"page {page} does not exist; expected a number from 1 to {MAX_PAGE:,}"
            )
        return RedirectResponse("/", status_code=303)  # an old bookmark: the first page
    web = request.app.state.web
    # A cursor that is not one (hand-edited, cut short) is a UserError: 400, as a storage
    # fault is a 503 (StorageFailed), by the app's handler of our errors.
    number = web.inbox.page_number(after)
    rows, following = web.inbox.page(limit=web.config.page_size, after=after)
    waiting = web.inbox.waiting_count(cap=WAITING_CAP + 1)
    return render(
        request,
        "inbox.html",
        sessions=rows,
        page=number,
        next_url=None if following is None else f"/?{urlencode({'after': following})}",
        waiting=f"{WAITING_CAP:,}+" if waiting > WAITING_CAP else f"{waiting:,}",
    )


@router.get("/sessions/{session_id}")
def session_page(request: Request, session_id: str) -> Any:
    return _session_page(request, session_id)


def _session_page(
    request: Request,
    session_id: str,
    *,
    status: int = 200,
    error: str | None = None,
    make_link: bool = False,
) -> Any:

    web = request.app.state.web
    doc = web.sessions.status(session_id)
    events = web.inbox.events_after(session_id, 0)
    share = None
    if doc["pending_question"] is not None and make_link:
        from orchestrator.web.config import answer_url

        share = answer_url(web.config.base_url(), web.inbox.new_link(session_id))
    return render(
        request,
        "session.html",
        status=status,
        s=doc,
        q=doc["pending_question"],
        late_q=doc.get("late_question"),
        events=events,
        last_event=events[-1][0] if events else 0,
        error=error,
        action=f"/sessions/{session_id}/answer",
        ended=doc["status"] in FINAL_STATUSES,
        share=share,
    )


@router.post("/sessions/{session_id}/answer")
async def answer_form(request: Request, session_id: str) -> Any:
    from orchestrator.web.forms import reply_from_form

    web = request.app.state.web
    form = await request.form()
    _check_csrf(request, form)

    def commit() -> dict[str, Any]:
        doc = web.sessions.status(session_id)
        question = doc["pending_question"] or doc.get("late_question") or {}
        return web.sessions.answer(session_id, reply_from_form(question, form))  # type: ignore[no-any-return]

    return await _then_back(request, session_id, commit)


@router.post("/sessions/{session_id}/reconcile")
async def reconcile_form(request: Request, session_id: str) -> Any:
    """Reopen an ended session to reconcile its late answer; the server runs the round."""
    web = request.app.state.web
    form = await request.form()
    _check_csrf(request, form)
    return await _then_back(
        request, session_id, lambda: web.sessions.reconcile(session_id, run=False)
    )


async def _then_back(request: Request, session_id: str, work: Any) -> Any:
    """Run `work` (a write through the session API), then back to the session's page (the
    server runs the session on); a refusal shows the page with the message."""
    try:
        doc = await run_in_threadpool(work)
    except (OrchestratorError, ClaimLost) as exc:
        if status_of(exc) == 404:
            raise
        return await run_in_threadpool(
            _session_page, request, session_id, status=status_of(exc), error=exc.message
        )
    from orchestrator.web.api_routes import after_answer

    return RedirectResponse(
        f"/sessions/{session_id}", status_code=303, background=after_answer(request, doc)
    )


@router.get("/sessions/{session_id}/cancel")
def cancel_confirm(request: Request, session_id: str) -> Any:
    doc = request.app.state.web.sessions.status(session_id)
    return render(request, "cancel.html", s=doc, ended=doc["status"] in FINAL_STATUSES)


@router.post("/sessions/{session_id}/link")
async def link_form(request: Request, session_id: str) -> Any:
    """Make an answer link for the open question and show it (once: only its hash is
    kept); the page without a question open shows no link."""
    form = await request.form()
    _check_csrf(request, form)
    return await run_in_threadpool(_session_page, request, session_id, make_link=True)


@router.post("/sessions/{session_id}/cancel")
async def cancel_form(request: Request, session_id: str) -> Any:
    web = request.app.state.web
    form = await request.form()
    _check_csrf(request, form)
    if form.get("confirm") != "yes":
        return RedirectResponse(f"/sessions/{session_id}", status_code=303)
    try:
        await run_in_threadpool(web.sessions.cancel, session_id)
    except (OrchestratorError, ClaimLost) as exc:
        if status_of(exc) == 404:
            raise
        return await run_in_threadpool(
            _session_page, request, session_id, status=status_of(exc), error=exc.message
        )
    return RedirectResponse(f"/sessions/{session_id}", status_code=303)


@router.get("/api/docs")
def api_docs(request: Request) -> Any:
    return render(request, "apidocs.html", spec=request.app.openapi())


def _check_csrf(request: Request, form: Any) -> None:

    if not csrf_ok(request, form.get("csrf")):
        raise ApiError(403, "the form's CSRF value is missing or stale: reload the page and retry")
