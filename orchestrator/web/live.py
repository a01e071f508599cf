"""Live progress of one session over Server-Sent Events.

`GET /sessions/{id}/live?after=N` streams `log` events (each new log entry, rendered)
and `status` events, and ends with `end` once the session pauses, completes, fails or is
cancelled. It reads the database every half second, so it follows runs driven by any
process (this server's runner, a CLI `resume`, another server).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from orchestrator.documents import FINAL_STATUSES
from orchestrator.web.http_errors import ApiError
from orchestrator.web.pages import page_auth

__all__ = ["router", "POLL_SECONDS"]

POLL_SECONDS = 0.5
MAX_EVENT_ID = 2**63 - 1  # the database's largest integer
STOPPED = frozenset({"paused", *FINAL_STATUSES})  # the live page stops following

router = APIRouter(dependencies=[Depends(page_auth)], include_in_schema=False)


@router.get("/sessions/{session_id}/live")
async def live(request: Request, session_id: str, after: int = 0) -> Any:
    if not 0 <= after <= MAX_EVENT_ID:
        raise ApiError(400, f"after={after}: expected an event id from 0 to {MAX_EVENT_ID}")
    web = request.app.state.web
    await run_in_threadpool(web.inbox.status_of, session_id)  # 404 before streaming

    async def stream() -> AsyncIterator[dict[str, Any]]:
        from orchestrator.web.pages import FILTERS

        last, status = after, None
        while not await request.is_disconnected():
            # The row first: every event up to the status it shows is read after it, so the
            # stream never ends before the events that led to the end.
            now = await run_in_threadpool(web.inbox.status_of, session_id)
            rows = await run_in_threadpool(web.inbox.events_after, session_id, last)
            for event_id, event in rows:
                last = event_id
                text: Any = FILTERS["event_text"]
                data = {"id": event_id, "time": event["time"], "kind": event["kind"]}
                data["text"] = text(event)
                yield {"event": "log", "id": str(event_id), "data": json.dumps(data)}
            if now != status:
                status = now
                yield {"event": "status", "data": json.dumps({"status": status})}
            if status in STOPPED:
                yield {"event": "end", "data": json.dumps({"status": status})}
                return
            await asyncio.sleep(POLL_SECONDS)

    return EventSourceResponse(stream(), ping=15)
