"""Answer links `/q/{token}`: one question, one answer, no access token needed.

The token (256 random bits, table `question_links`) opens only its session's question and
accepts one answer while the question is open; after that, or once the session ended, the
link answers 410 Gone. Nothing else of the session (log, task details) is shown.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from orchestrator.errors import ClaimLost, OrchestratorError, StorageFailed
from orchestrator.web.http_errors import ApiError, status_of

__all__ = ["router", "link_refusal"]

router = APIRouter(include_in_schema=False)
log = logging.getLogger("orchestrator.web")


def _open_question(request: Request, token: str) -> tuple[str, dict[str, Any]]:
    """The session id and its open question, or an ApiError (404 unknown, 410 closed)."""

    web = request.app.state.web
    found = web.inbox.session_of_link(token)
    if found is None:
        raise ApiError(404, "this answer link is unknown")
    session_id, used = found
    doc = web.sessions.status(session_id)
    if used or doc["pending_question"] is None:
        raise ApiError(410, "this question is no longer open: it was answered or its session ended")
    return session_id, doc


def link_refusal(web: Any, token: str) -> tuple[int, str] | None:
    """Why a form posted to this link is refused before its body is read ((status,
    message): unknown, used, or the database unreachable), or None when the link is open.
    The route checks again, with the session, once the body is in."""
    try:
        found = web.inbox.session_of_link(token)
    except OrchestratorError as exc:
        log.warning("POST /q/{token}: %s", exc.message)
        return status_of(exc), exc.message
    if found is None:
        return 404, "this answer link is unknown"
    if found[1]:
        return 410, "this question is no longer open: it was answered or its session ended"
    return None


@router.get("/q/{token}")
def question_page(request: Request, token: str) -> Any:
    from orchestrator.web.pages import render

    _session_id, doc = _open_question(request, token)
    return render(
        request, "link.html", s=doc, q=doc["pending_question"], action=f"/q/{token}", error=None
    )


@router.post("/q/{token}")
async def answer_by_link(request: Request, token: str) -> HTMLResponse:
    from orchestrator.web.api_routes import after_answer
    from orchestrator.web.forms import reply_from_form
    from orchestrator.web.pages import _check_csrf, render

    web = request.app.state.web
    form = await request.form()
    _check_csrf(request, form)

    def commit() -> dict[str, Any]:
        session_id, doc = _open_question(request, token)
        answered = web.sessions.answer(session_id, reply_from_form(doc["pending_question"], form))
        try:
            web.inbox.mark_link_used(token)
        except StorageFailed as exc:  # the answer is kept, and its question closed with it
            log.warning("session %s: the answer link was not marked used: %s", session_id, exc)
        return answered  # type: ignore[no-any-return]

    try:
        doc = await run_in_threadpool(commit)
    except ApiError:
        raise
    except (OrchestratorError, ClaimLost) as exc:
        status = status_of(exc)
        if status == 422:  # show the question again with what was wrong
            _sid, current = await run_in_threadpool(_open_question, request, token)
            return render(
                request,
                "link.html",
                status=422,
                s=current,
                q=current["pending_question"],
                action=f"/q/{token}",
                error=exc.message,
            )
        raise
    response = render(request, "answered.html", s=doc)
    response.background = after_answer(request, doc)
    return response
