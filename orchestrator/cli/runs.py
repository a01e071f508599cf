"""The session API as run/resume use it: how to ask (the UI), what to show while agents work."""

from __future__ import annotations

import atexit
import gc
import sys
from enum import StrEnum
from typing import Any

from orchestrator.cli.output import err
from orchestrator.cli.render import event_line

__all__ = ["Ui", "OnTimeout", "Status", "sessions_for", "collect_from_here_on", "NO_AGENTS"]


class Ui(StrEnum):
    terminal = "terminal"
    none = "none"
    web = "web"


class OnTimeout(StrEnum):
    wait = "wait"
    proceed = "proceed"
    cancel = "cancel"


class Status(StrEnum):
    running = "running"
    paused = "paused"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


def sessions_for(
    db: str | None,
    *,
    progress: bool = False,
    ui: Ui | None = None,
    scripted: bool = False,
    no_browser: bool = False,
    notify: tuple[str, ...] = (),
    public_url: str | None = None,
) -> Any:
    """The session API for one command. With `progress`, events go to stderr as they
    happen and a spinner runs on a terminal; `ui` decides how the user is asked; `notify`
    (Apprise URLs) tells people when a question is surfaced."""
    from orchestrator.api import Sessions

    # When the interactive prompt will draw the question, it is not logged above it too.
    quiet = {"question_surfaced"} if _interactive(ui) and not scripted else set()

    notifier = _notifier(db, notify, public_url)

    def show(session_id: str, event: dict[str, Any]) -> None:
        if event["kind"] not in quiet:
            err(event_line(event))
        if notifier is not None:
            notifier.on_event(session_id, event)

    activity = None
    if progress and sys.stderr.isatty():
        from orchestrator.cli.progress import Activity

        activity = Activity()
        atexit.register(activity.close)
    sessions = Sessions(
        db,
        ask=_ask_user(ui, no_browser=no_browser) if progress else None,
        on_event=show if progress else None,
        activity=activity,
    )
    return sessions if notifier is None else _Notifying(sessions, notifier)


class _Notifying:
    """The session API, and once a command's run returns, its notifications delivered.

    They go out from a background thread while the session runs; a process that is about
    to exit waits for them here (bounded by the retry schedule), because once the
    interpreter shuts down no new HTTP work can start."""

    def __init__(self, sessions: Any, notifier: Any) -> None:
        self._sessions = sessions
        self._notifier = notifier

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._sessions, name)
        if name not in ("start", "start_scenario", "resume", "run_on"):
            return method

        def then_flush(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            finally:
                self._notifier.close()

        return then_flush


def _chosen(ui: Ui | None) -> Ui:
    """--ui, or its default: terminal when stdin is a terminal, else none (CI, pipes)."""
    return ui or (Ui.terminal if sys.stdin.isatty() else Ui.none)


def _interactive(ui: Ui | None) -> bool:
    return _chosen(ui) is Ui.terminal and sys.stdin.isatty() and sys.stderr.isatty()


def _notifier(db: str | None, urls: tuple[str, ...], public_url: str | None) -> Any:
    """Apprise notifications for surfaced questions (delivered before the process exits)."""
    if not urls:
        return None
    from orchestrator.web.notify import Notifier

    return Notifier(urls, public_url=public_url, db=db)


def _ask_user(ui: Ui | None, *, no_browser: bool = False) -> Any:
    if _chosen(ui) is Ui.web:
        from functools import partial

        from orchestrator.web.oneshot import ask_in_browser  # FastAPI only when asked

        return partial(ask_in_browser, open_browser=not no_browser)
    if _chosen(ui) is not Ui.terminal:
        return None
    from orchestrator.cli.terminal import ask  # questionary and rich only when asking

    return ask


NO_AGENTS = """nothing to run the agents with. Either:
  1. --script FILE             a scenario: scripted agents and answers, no model (see examples/)
  2. --model PROVIDER:NAME     a chat model, e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
                               ollama:llama3.1 (per agent: --pm-model, --developer-model)
  3. ORCHESTRATOR_MODEL=PROVIDER:NAME in the environment, the default model"""


def collect_from_here_on() -> None:
    """Freeze what imports created, then collect normally (long agent runs need it).

    Import LangGraph before this (`import orchestrator.graph`): its import-time objects
    are then frozen too."""
    gc.freeze()
    gc.enable()
