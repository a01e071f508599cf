"""The JSON API (contract section 5): the same documents as the CLI's --json.

Errors are `{"error": "…"}`: 401 no or wrong token, 404 unknown session, 409 not waiting
(already answered, answered elsewhere first, ended), 422 an invalid answer (not one of
the options, empty, several kinds at once).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from orchestrator.api.part_answers import AnswerFields
from orchestrator.documents import StatusFilter
from orchestrator.web.http_errors import ApiError, conflict_if_lost
from orchestrator.web.security import bearer_or_cookie, csrf_ok

__all__ = ["router", "AnswerBody", "after_answer"]


def api_auth(request: Request) -> None:
    web = request.app.state.web
    how = bearer_or_cookie(request, web.config.token)
    if how is None:
        raise ApiError(401, "missing or wrong access token: send Authorization: Bearer TOKEN")
    unsafe = request.method not in ("GET", "HEAD", "OPTIONS")
    if how == "cookie" and unsafe and not csrf_ok(request, request.headers.get("x-csrf-token")):
        raise ApiError(403, "a POST with the browser's cookie needs the X-CSRF-Token header")


router = APIRouter(prefix="/api", dependencies=[Depends(api_auth)], tags=["sessions"])


class AnswerBody(AnswerFields):
    """Exactly one of `answer`, `choices`, `action`, `parts` (a multi-part question's
    answers, one per part in part order); `note` is kept with it."""


def after_answer(request: Request, doc: dict[str, Any]) -> BackgroundTask | None:
    """Run the session on once the response is sent (when it is ours to run)."""
    web = request.app.state.web
    if web.config.run_on and doc["status"] == "running":
        return BackgroundTask(web.runner.submit, doc["session_id"])
    return None


# A page of `GET /api/sessions`: `limit` sessions at most (as `list --limit`).
API_PAGE = 100
MAX_API_PAGE = 1000


@router.get(
    "/sessions",
    summary="List sessions, newest first (as `list --json`), a page at a time",
    description=f"At most `limit` sessions ({API_PAGE} unless given, at most {MAX_API_PAGE}),"
    " starting after the session `after` (the last of the previous page). When more follow,"
    ' the `Link` header gives the next page (`rel="next"`).',
)
def list_sessions(
    request: Request,
    response: Response,
    status: StatusFilter | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_API_PAGE)] = API_PAGE,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> Any:
    views = request.app.state.web.sessions.list(status, limit=limit + 1, after=after)
    if len(views) > limit:
        views = views[:limit]
        query = {"limit": limit, "after": views[-1]["session_id"]}
        if status:
            query["status"] = status
        response.headers["Link"] = f'</api/sessions?{urlencode(query)}>; rel="next"'
    return views


@router.get("/sessions/{session_id}", summary="The session object (as `status --json`)")
def get_session(request: Request, session_id: str) -> Any:
    return request.app.state.web.sessions.status(session_id)


@router.get("/sessions/{session_id}/events", summary="The session's log (as `log --json`)")
def get_events(request: Request, session_id: str) -> Any:
    return request.app.state.web.sessions.log(session_id)


@router.post(
    "/sessions/{session_id}/answer",
    summary="Answer, decline or cancel the open question (or give a late answer to one "
    "declined or timed out); the server then runs the session on",
)
def answer(request: Request, session_id: str, body: AnswerBody) -> Any:
    web = request.app.state.web
    with conflict_if_lost():
        doc = web.sessions.answer(session_id, body.reply())
    return JSONResponse(doc, background=after_answer(request, doc))


@router.post(
    "/sessions/{session_id}/reconcile",
    summary="Reconcile an ended session with its late answer (as `resume --reconcile`); "
    "the server runs the PM's round",
)
def reconcile(request: Request, session_id: str) -> Any:
    web = request.app.state.web
    with conflict_if_lost():
        doc = web.sessions.reconcile(session_id, run=False)
    return JSONResponse(doc, background=after_answer(request, doc))


@router.post("/sessions/{session_id}/cancel", summary="Stop the session (as `orchestrator cancel`)")
def cancel(request: Request, session_id: str) -> Any:
    with conflict_if_lost():
        return request.app.state.web.sessions.cancel(session_id)
