"""The session API as run/resume use it: how to ask (the UI), what to show while agents work."""

from __future__ import annotations

import atexit
import gc
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from orchestrator.cli.output import err
from orchestrator.documents import STATUS_FILTERS
from orchestrator.present.render import command_line, event_line

__all__ = [
    "Ui",
    "OnTimeout",
    "OnLateAnswer",
    "Sandbox",
    "Status",
    "sessions_for",
    "read_sessions",
    "question_shown",
    "collect_from_here_on",
    "NO_AGENTS",
    "EXIT_INTERRUPTED",
    "ctrl_c_said",
]


class Ui(StrEnum):
    terminal = "terminal"
    none = "none"
    web = "web"


class OnLateAnswer(StrEnum):
    reconcile = "reconcile"
    record = "record"


class Sandbox(StrEnum):
    auto = "auto"
    bwrap = "bwrap"
    none = "none"


class OnTimeout(StrEnum):
    wait = "wait"
    proceed = "proceed"
    cancel = "cancel"


# --status values (documents.STATUS_FILTERS, which the fast read path reads too); "waiting" is a
# synonym for paused.
Status = StrEnum("Status", {value: value for value in STATUS_FILTERS})  # type: ignore[misc]


# Sessions whose question this command printed in full (so the closing lines need not).
_SHOWN: set[str] = set()


def question_shown(session_id: str) -> bool:
    return session_id in _SHOWN


# The session this command runs (named by its events as they come): what Ctrl+C stopped.
_RUNNING: dict[str, str | None] = {"id": None}

EXIT_INTERRUPTED = 130  # Ctrl+C (128 + SIGINT, as shells report it); README, reference.md


@contextmanager
def ctrl_c_said(as_json: bool, db: str | None, session_id: str | None = None) -> Iterator[None]:
    """Ctrl+C while the agents work: say which session it stopped, the state it is left
    in and the command that goes on; exit 130 (the question itself, at the terminal
    prompt, stays open with exit 3: cli.terminal)."""
    _RUNNING["id"] = session_id
    try:
        yield
    except KeyboardInterrupt:
        from orchestrator.cli.output import fail
        from orchestrator.present.render import command_line

        found = _RUNNING["id"]
        if found is None:
            fail(as_json, "interrupted (Ctrl+C) before a session was started; nothing was "
                 "created", EXIT_INTERRUPTED)  # fmt: skip
        state = _state_of(db, found)
        go_on = command_line("resume", found, db)
        fail(
            as_json,
            f"interrupted (Ctrl+C): session {found} is {state}. Go on with: {go_on}   "
            f"(or stop it: {command_line('cancel', found, db)})",
            EXIT_INTERRUPTED,
            session_id=found,
        )


def _state_of(db: str | None, session_id: str) -> str:
    """The session's state in a few words, as `status` reads it (or why it cannot)."""
    try:
        view = read_sessions(db, session_id).status(session_id)
    except Exception as exc:  # the database itself may be what is gone
        from orchestrator.api.storage_errors import fault_message

        return f"in a state that could not be read ({fault_message(exc) or type(exc).__name__})"
    if view.get("stalled"):
        return f"{view['status']}, stalled: no process drives it now"
    return str(view["status"])


def _checked_url(db: str | None, *, create: bool) -> tuple[str, bool]:
    from orchestrator.api.database import locate

    found = locate(db, create=create)
    return found.url, found.exists


def read_sessions(db: str | None, session_id: str | None = None) -> Any:
    """The session API for a command that only reads (or answers): a database file that
    does not exist is not created; it holds no sessions (None, or unknown `session_id`)."""
    from orchestrator.api import Sessions
    from orchestrator.errors import SessionNotFound

    url, exists = _checked_url(db, create=False)
    if not exists:
        if session_id is not None:
            raise SessionNotFound(session_id)
        return None
    return Sessions(url)


def sessions_for(
    db: str | None,
    *,
    progress: bool = False,
    ui: Ui | None = None,
    scripted: bool = False,
    create: bool = False,
    session_id: str | None = None,
    no_browser: bool = False,
    notify: tuple[str, ...] = (),
    public_url: str | None = None,
) -> Any:
    """The session API for one command. With `progress`, events go to stderr as they
    happen and a spinner runs on a terminal; `ui` decides how the user is asked; `notify`
    (Apprise URLs) tells people when a question is surfaced. Only `create` (run) makes a
    new database file; otherwise `session_id` is unknown in one that does not exist."""
    _SHOWN.clear()  # one command at a time: what an earlier one printed is not on screen
    from orchestrator.api import Sessions
    from orchestrator.errors import SessionNotFound

    url, exists = _checked_url(db, create=create)
    if not exists and not create:
        raise SessionNotFound(session_id or "?")

    # When the interactive prompt will draw the question, it is not logged above it too.
    # (Line by line, without a terminal, the prompt prints it too.)
    quiet = {"question_surfaced"} if _chosen(ui) is Ui.terminal and not scripted else set()

    current = _RUNNING  # the session being run: every event names it
    current["id"] = session_id
    notifier = _notifier(db, notify, public_url)

    def show(session_id: str, event: dict[str, Any]) -> None:
        current["id"] = session_id
        if notifier is not None:
            notifier.on_event(session_id, event)
        if event["kind"] == "question_surfaced" and event["kind"] not in quiet:
            _SHOWN.add(session_id)
        if event["kind"] not in quiet:
            err(event_line(event, session_id))

    activity = None
    if progress and sys.stderr.isatty():
        from orchestrator.cli.progress import Activity

        activity = Activity()
        atexit.register(activity.close)
    sessions = Sessions(url, on_event=show if progress else None, activity=activity)
    if progress:
        sessions.ask = _ask_user(
            ui,
            lambda: _keeps_waiting(sessions, current["id"]),
            no_browser=no_browser,
            draft=lambda args: command_line("resume", current["id"] or "ID", db, *args),
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
                self._deliver()

        return then_flush

    def _deliver(self) -> None:
        """Wait for the notifications still going out, saying so (never silently), at most
        NOTIFY_WAIT seconds; what failed is in the session's log with its reason."""
        if not self._notifier.flush(0.2):
            err(f"sending notifications (waiting at most {NOTIFY_WAIT:.0f} s)")
            if not self._notifier.flush(NOTIFY_WAIT):
                err("notifications still unsent: given up (the session's log says which)")
        self._notifier.close(timeout=0)


def _notifier(db: str | None, urls: tuple[str, ...], public_url: str | None) -> Any:
    """Apprise notifications for surfaced questions (delivered before the process exits)."""
    if not urls:
        return None
    from orchestrator.install_hints import require_extra

    require_extra("web", "--notify", "apprise")
    from orchestrator.web.notify import Notifier

    return Notifier(urls, public_url=public_url, db=db, retry_delays=CLI_RETRY_DELAYS)


# A command waits for its notifications before it exits: two quick retries (a server's
# are 1, 4 and 15 s: it outlives a receiver's restart), and a bound on the whole wait.
CLI_RETRY_DELAYS = (1.0, 2.0)
NOTIFY_WAIT = 10.0


def _keeps_waiting(sessions: Any, session_id: str | None) -> bool:
    """Whether the session's question stays answerable after its deadline (on-timeout
    wait, the default): then the prompt stays open too."""
    if session_id is None:
        return True
    # The policy is a stored setting; the session object does not carry it.
    settings = sessions.settings(session_id)
    return bool(settings.get("on_timeout", "wait") == "wait")


def _chosen(ui: Ui | None) -> Ui:
    """--ui, or its default: terminal when stdin is a terminal, else none (CI, pipes)."""
    return ui or (Ui.terminal if sys.stdin.isatty() else Ui.none)


def _ask_user(
    ui: Ui | None,
    keep_open: Callable[[], bool],
    *,
    no_browser: bool = False,
    draft: Callable[[list[str]], str] | None = None,
) -> Any:
    if _chosen(ui) is Ui.web:
        from functools import partial

        from orchestrator.install_hints import require_extra

        require_extra("web", "--ui web", "fastapi", "uvicorn", "jinja2")
        from orchestrator.web.oneshot import ask_in_browser  # FastAPI only when asked

        return partial(ask_in_browser, open_browser=not no_browser)
    if _chosen(ui) is not Ui.terminal:
        return None

    def ask_at_terminal(question: Mapping[str, Any]) -> Any:
        from orchestrator.cli.terminal import ask  # questionary and rich only when asking

        return ask(question, keep_open=keep_open(), draft=draft)

    return ask_at_terminal


NO_AGENTS = """nothing to run the agents with. Either:
  1. --script FILE             a scenario: scripted agents and answers, no model (see examples/)
  2. --model PROVIDER:NAME     a chat model, e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5,
                               ollama:llama3.1 (per agent: --pm-model, --developer-model)
  3. ORCHESTRATOR_MODEL=PROVIDER:NAME in the environment, the default model"""


def collect_from_here_on() -> None:
    """Freeze what imports created, then collect normally (long agent runs need it).

    Import LangGraph before this (`import orchestrator.runtime.graph`): its import-time objects
    are then frozen too. What the first session loads (its agents' provider) is frozen when
    its drive starts (orchestrator.runtime.heap)."""
    from orchestrator.api.running import freeze_at_first_drive

    gc.freeze()
    freeze_at_first_drive()
    gc.enable()
