"""The web server: `create_app(config)` builds the FastAPI app that `orchestrator serve` runs.

Routes: the JSON API (`api_routes`, contract section 5), the HTML inbox and session pages
(`pages`), answer links `/q/{token}` (`links`), live progress over SSE (`live`). The app
owns a `Runner` (sessions run on after answers) and, with `notify`, a `Notifier`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from orchestrator.api import Inbox
from orchestrator.errors import (
    DatabaseUnavailable,
    OrchestratorError,
    StorageFailed,
    validation_text,
)
from orchestrator.outages import OutageLog
from orchestrator.web.config import HERE, WebConfig
from orchestrator.web.driver import Runner
from orchestrator.web.http_errors import ApiError, status_of
from orchestrator.web.security import HostCheck, RequestGuard, csrf_key

__all__ = ["create_app", "Web"]

log = logging.getLogger("orchestrator.web")


class Web:
    """What every route needs: the settings, the session API, the runner, the templates."""

    def __init__(self, config: WebConfig, sessions: Any = None) -> None:
        from orchestrator.api import Sessions

        self.config = config
        self.notifier: Any = None
        if config.notify:
            from orchestrator.web.notify import Notifier

            self.notifier = Notifier(
                config.notify,
                public_url=config.public_url,
                db=config.db,
                retry_delays=config.retry_delays,
                reminder_seconds=config.reminder_seconds,
            )
        on_event = self.notifier.on_event if self.notifier is not None else None
        self.sessions = sessions or Sessions(config.db, on_event=on_event)
        if config.run_on:  # a server: a bad or unreachable database is an error now, at
            self.sessions.open()  # the start (exit 2), not a failed start-up or a request
        if self.notifier is not None:
            self.notifier.bind(self.sessions)
        self.runner = Runner(self.sessions, config.workers)
        # Every poll of the database that meets an outage tells this one log (OutageLog).
        self.outage = OutageLog(log, "the server")
        if self.notifier is not None:
            self.notifier.outage = self.outage
        self.started_at = time.time()
        from orchestrator.web.pages import page_templates

        self.templates = page_templates()

    @property
    def inbox(self) -> Inbox:
        return self.sessions.inbox


PICK_UP_SECONDS = 1.0  # how often the server looks for answers left to a driver


def _pick_up_handed_off(web: Web, stop: threading.Event) -> None:
    while not stop.wait(PICK_UP_SECONDS):
        try:
            found = web.runner.recover(handed_off_only=True)
        except (StorageFailed, DatabaseUnavailable) as exc:  # the database away: the next
            web.outage.failed(exc.message)  # poll tries again; said once, not per second
            continue
        except Exception as exc:
            from orchestrator.api.storage_errors import fault_message

            said = fault_message(exc)
            if said is None:  # a bug: its traceback is kept
                log.warning("cannot look for answered sessions to run on", exc_info=True)
            else:
                web.outage.failed(said)
            continue
        web.outage.answered()
        if found:
            log.info("picked up %d answered session(s) waiting for a driver", len(found))


def create_app(config: WebConfig | None = None, *, sessions: Any = None) -> FastAPI:
    """The web inbox and HTTP API over `config.db` (or the given session API)."""
    config = config or WebConfig()
    web = Web(config, sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        if config.run_on:
            web.runner.start()
            found = web.runner.recover()
            if found:
                log.warning("picked up %d answered session(s) not run on", len(found))
            # Answers committed elsewhere with nobody to run them on (`resume --no-run`):
            # picked up as a worker would, at its poll.
            threading.Thread(
                target=_pick_up_handed_off, args=(web, stop), name="pick-up", daemon=True
            ).start()
        if web.notifier is not None:
            web.notifier.start_watching(since=web.started_at)
        try:
            yield
        finally:
            stop.set()
            if web.notifier is not None:
                web.notifier.close()
            web.runner.shutdown(wait=False)

    app = FastAPI(
        title="orchestrator",
        summary="Sessions of agents that ask at most one question; answer them here.",
        version=_version(),
        docs_url=None,  # the stock pages load assets from a CDN; /api/docs is ours
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )
    app.state.web = web
    app.state.csrf_key = csrf_key()
    # Last added runs first: the Host check, then the token and body guard, then routes.
    assert config.token is not None
    from orchestrator.web.links import link_refusal
    from orchestrator.web.pages import error_page

    app.add_middleware(
        RequestGuard,
        token=config.token,
        check_link=lambda token: link_refusal(web, token),
        error_page=error_page,
    )
    app.add_middleware(HostCheck, names=config.host_names())
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    from orchestrator.web import api_routes, links, live, pages

    app.include_router(api_routes.router)
    app.include_router(live.router)
    app.include_router(links.router)
    app.include_router(pages.router)
    _handlers(app)
    return app


def _handlers(app: FastAPI) -> None:
    from orchestrator.web.pages import _Redirect, error_page

    @app.exception_handler(_Redirect)
    async def _redirect(_request: Request, exc: _Redirect) -> Any:
        return exc.response

    def respond(request: Request, status: int, message: str) -> Any:
        if request.url.path.startswith("/api/") or request.url.path == "/openapi.json":
            return JSONResponse({"error": message}, status_code=status)
        return error_page(request, status, message)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Any:
        return respond(request, exc.status, exc.message)

    @app.exception_handler(OrchestratorError)
    async def _ours(request: Request, exc: OrchestratorError) -> Any:
        """Our errors, with the contract's status. A storage fault (`Sessions` raises every
        one as StorageFailed: a full disk, a damaged file, a server gone) is a 503 and one
        log line naming the route, not the path (an answer link's path is its token, which
        the server's log never shows)."""
        status = status_of(exc)
        if status == 503:
            route = getattr(request.scope.get("route"), "path", "(a route)")
            log.warning("%s %s: %s", request.method, route, exc.message)
        return respond(request, status, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Any:
        return respond(request, 422, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Any:
        return respond(request, exc.status_code, str(exc.detail))


def _validation_message(exc: RequestValidationError) -> str:
    return validation_text(exc.errors(), skip=("body",), root="body") or "invalid request"


def _version() -> str:
    from orchestrator import __version__

    return __version__
