"""The session API: the one front door to the core that every edge calls.

The CLI, the web inbox, the MCP server and the scenario-suite runner are thin edges over
`Sessions`; so is a Python program that drives sessions itself:

    from orchestrator import Reply, Sessions

    sessions = Sessions("sqlite:///work.db")
    doc = sessions.start_scenario("examples/pause-and-resume.yaml")
    if doc["status"] == "paused":
        doc = sessions.resume(doc["session_id"], Reply(text="Weekly, on Monday mornings"))

Every method returns the contract's JSON documents (plain dicts, see
`orchestrator.documents`). Mistakes raise `orchestrator.errors.UserError` subclasses with
nothing changed; a failed run ends its session `failed` and is reported in the document.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.api.storage_errors import (
    go_on_with,
    needs,
    raise_storage_failed,
    storage_faults,
)
from orchestrator.documents import STATUS_FILTERS, EventDoc, SessionDoc, filtered_status
from orchestrator.domain.expect import ENDED, check_expect
from orchestrator.domain.question import UserReply, check_reply
from orchestrator.errors import ClaimLost, ConfigError, StorageFailed

if TYPE_CHECKING:
    from orchestrator.api.inbox import Inbox
    from orchestrator.model_options import ModelOptions
    from orchestrator.runtime.agent import AgentBackend
    from orchestrator.scenario import Scenario
    from orchestrator.settings import Settings
    from orchestrator.store import Owner, Store

__all__ = ["Sessions", "Reply", "AskUser", "EventListener"]

Reply = UserReply

# Given the open question, return the user's reply, or None to leave the session paused.
AskUser = Callable[[Mapping[str, Any]], UserReply | None]
# Told of every event as it is committed: (session id, event document).
EventListener = Callable[[str, dict[str, Any]], None]


@storage_faults
class Sessions:
    """Start, answer, run on, cancel and read sessions in one database.

    `db` is a SQLAlchemy URL or a SQLite file path (default: $ORCHESTRATOR_DB, else the
    user data directory). `ask` is how to ask the user when a question is surfaced and no
    scripted answer is left (None: the session pauses). `activity` is told when each agent
    call starts and stops (a progress line).
    """

    def __init__(
        self,
        db: str | None = None,
        *,
        ask: AskUser | None = None,
        on_event: EventListener | None = None,
        activity: Any = None,
        owner: Owner | None = None,
    ) -> None:
        from orchestrator.store.connect import resolve_url

        self.url = resolve_url(db)
        self.ask = ask
        self.on_event = on_event
        self.activity = activity
        self._owner = owner
        self._store: Store | None = None

    @property
    def _opened(self) -> Store:
        """The store, opened (and migrated) on first use."""
        if self._store is None:
            from orchestrator.store import Store

            self._store = Store.open(self.url, listener=self.on_event)
        return self._store

    def open(self) -> Sessions:
        """Open (and migrate) the database now rather than at first use: a server checks
        it before it serves. ConfigError or StorageFailed when it cannot be used."""
        _ = self._opened
        return self

    @property
    def inbox(self) -> Inbox:
        """The inbox's reads and writes (web inbox, answer links, notifications)."""
        from orchestrator.api.inbox import Inbox

        return Inbox(self._opened)

    @property
    def owner(self) -> Owner:
        """Who this process is when it claims a session."""
        if self._owner is None:
            from orchestrator.store import Owner

            self._owner = Owner()
        return self._owner

    def _engine(self) -> Any:
        from orchestrator.runtime.engine import Engine

        return Engine(
            self._opened, self.url, ask_user=self.ask, owner=self.owner, activity=self.activity
        )

    # -- starting -------------------------------------------------------------------------

    def start(
        self,
        task: str,
        *,
        models: Mapping[str, Any] | str | None = None,
        backend: AgentBackend | None = None,
        settings: Settings | Mapping[str, Any] | None = None,
        prompts: Path | None = None,
        workdir: Path | None = None,
        max_retries: int | None = None,
        model_options: ModelOptions | Mapping[str, Any] | None = None,
        fixture: Path | None = None,
    ) -> SessionDoc:
        """Start a session on `task` with chat-model agents (`models`: one PROVIDER:NAME for
        every agent, or {"pm": ..., "developer": ...}, each a spec or a LangChain chat model
        object such as orchestrator.testing's fakes) or a ready `backend`, and run it until
        it ends or pauses. `model_options` (orchestrator.model_options.ModelOptions): the
        server's base URL, the reply mode and the budgets of the agents' model calls.
        `fixture`: a folder copied into a new git repository of the session's own, as a
        scenario's `repo:` (an eval case's repository). Models are checked before anything
        is written."""
        from orchestrator.settings import Settings

        if not task or not task.strip():
            raise ConfigError(
                'give the TASK for the agents, e.g. "Add a CSV export to the reports page"'
            )
        from orchestrator.limits import MAX_TASK_CHARS, check_length

        check_length("the task", task, MAX_TASK_CHARS)
        chosen = _settings(settings)
        if backend is None:
            if models is None:
                raise ConfigError("give the agents' models (PROVIDER:NAME) or a backend")
            backend = _llm_backend(models, prompts, workdir, max_retries, model_options)
        elif models is not None:
            raise ConfigError("give either models or a backend, not both")
        assert isinstance(chosen, Settings)
        return self._started(task, backend, chosen.model_dump(), workdir=workdir, fixture=fixture)

    def start_scenario(
        self,
        scenario: Scenario | Path | str,
        *,
        task: str | None = None,
        settings: Mapping[str, Any] | None = None,
        source: str | None = None,
        workdir: Path | None = None,
    ) -> SessionDoc:
        """Start a scripted session (contract section 4) and run it until it ends or pauses.

        `scenario`: a loaded Scenario, a file path, or the YAML/JSON text itself (a string of
        one line is a path). `settings`
        override the scenario's own (None values are ignored); `source` names the file (a
        `repo:` folder is relative to it); `workdir`, a folder in a git repository, gives
        the developers worktrees of that repository (contract section 9)."""
        from orchestrator.agents.scripted import ScriptedBackend
        from orchestrator.scenario import Scenario, load_scenario, parse_scenario

        if isinstance(scenario, str) and "\n" not in scenario:
            scenario = Path(scenario)  # one line: a file name (a scenario's text has several)
        if isinstance(scenario, Path):
            source = source or str(scenario)
            scenario = load_scenario(scenario)
        elif isinstance(scenario, str):
            scenario = parse_scenario(scenario)
        assert isinstance(scenario, Scenario)
        stored = scenario.session_settings(source=source, **dict(settings or {}))
        backend = ScriptedBackend(scenario.agents, replies_so_far={})
        fixture = None
        if scenario.repo is not None:  # relative to the scenario file
            fixture = Path(source).parent / scenario.repo if source else Path(scenario.repo)
        return self._started(
            task or scenario.task, backend, stored, workdir=workdir, fixture=fixture
        )

    def _started(
        self,
        task: str,
        backend: AgentBackend,
        settings: Mapping[str, Any],
        *,
        workdir: Path | None = None,
        fixture: Path | None = None,
    ) -> SessionDoc:
        engine = self._engine()
        try:  # once the session exists, a fault names it and `resume`, never "try again"
            return self.status(
                engine.start(task, backend, settings, workdir=workdir, fixture=fixture)
            )
        except (Exception, ClaimLost) as exc:
            if engine.started is None:
                raise
            raise_storage_failed(exc, self.url, engine.started, answered=None)

    # -- answering and running on ---------------------------------------------------------

    def answer(self, session_id: str, reply: UserReply) -> SessionDoc:
        """Commit the user's reply to the open question and run nothing (what `orchestrator
        resume ID --answer TEXT --no-run` does). The reply is validated first (InvalidAnswer,
        nothing written) and durable when this returns.

        The session is then left to a driver: `run_on` here, or `orchestrator worker`,
        `orchestrator serve` or `orchestrator resume ID` anywhere. Until one takes it, its
        document says `"status": "running"` with `"waiting_for_driver": true` (not
        `stalled`). A `cancel` reply ends the session at once."""
        reply = check_reply(reply)
        try:
            self._opened.answer(session_id, self.owner, reply, hand_off=True)
        except (Exception, ClaimLost) as exc:
            raise_storage_failed(exc, self.url, session_id, answered=False)
        try:
            return self.status(session_id)
        except Exception as exc:
            raise_storage_failed(exc, self.url, session_id, answered=True)

    def run_on(self, session_id: str) -> SessionDoc:
        """Drive a session whose answer is committed, or whose driver is gone, until it ends
        or pauses. A session still waiting for an answer is asked through `ask` again."""
        try:
            return self._ended_on(session_id, self._engine().resume(session_id))
        except (Exception, ClaimLost) as exc:
            raise_storage_failed(exc, self.url, session_id, answered=None)

    def resume(self, session_id: str, reply: UserReply | None = None) -> SessionDoc:
        """Answer (when `reply` is given) and run on: what `orchestrator resume` does."""
        reply = None if reply is None else check_reply(reply)
        engine = self._engine()
        try:  # (reading back what it ended on too: a fault then still says it was kept)
            return self._ended_on(session_id, engine.resume(session_id, reply))
        except (Exception, ClaimLost) as exc:
            answered = None if reply is None else engine.answered == session_id
            raise_storage_failed(exc, self.url, session_id, answered=answered)

    def reconcile(self, session_id: str, *, run: bool = True) -> SessionDoc:
        """Reconcile an ended session with its late answer (`resume ID --reconcile`): one
        PM round told the answer and the assumptions it contradicts re-plans the affected
        tasks, whose developers then run. With `run=False` the session is only reopened,
        for a driver (a worker, `serve`, `resume`), as `answer` leaves an answer.
        SessionNotWaiting when there is nothing to reconcile (docs/late-answers.md)."""
        engine = self._engine()
        try:
            view = engine.reconcile(session_id, hand_off=not run)
            return self._ended_on(session_id, view) if run else self.status(session_id)
        except (Exception, ClaimLost) as exc:
            # Once the reopening committed the session runs: a plain `resume` goes on.
            again = () if engine.reopened == session_id else ("--reconcile",)
            raise_storage_failed(exc, self.url, session_id, answered=None, again=again)

    def _ended_on(self, session_id: str, view: Mapping[str, Any]) -> SessionDoc:
        """The document the command ended on. Not a fresh read: another process may have
        moved the session on meanwhile (a plain resume that saw the question still open
        reports `paused`, not the `running` of the answer that just landed elsewhere)."""
        doc = cast(SessionDoc, dict(view))
        expect = self._opened.session(session_id).settings.get("expect")
        if expect and doc["status"] in ENDED:
            doc["expect"] = check_expect(expect, doc, lambda: self.log(session_id))
        return doc

    def cancel(self, session_id: str) -> SessionDoc:
        """Stop a session that has not ended: at once when it waits or its process is gone;
        a live driver stops before its next agent call (the document then still says
        `running`, with `cancel_requested`). Ended sessions raise SessionNotWaiting."""
        self._opened.cancel(session_id)
        try:
            return self.status(session_id)
        except StorageFailed as exc:  # committed: cancelling again would say "not waiting"
            raise StorageFailed(
                f"{needs(exc.message)}. The cancel was recorded: "
                f"{go_on_with(self.url, 'status', session_id)} shows the session once the "
                "database works again",
                session_id=session_id,
            ) from exc

    def clean(self, session_id: str, *, branches: bool = False) -> dict[str, Any]:
        """Remove what an ended session left in its repository: its worktrees, and with
        `branches` its branches (the session branch `orchestrator/ID`, the result, too).
        A session that has not ended is refused (SessionBusy, nothing removed); so is a
        session without a repository (ConfigError)."""
        from orchestrator.errors import SessionBusy
        from orchestrator.runtime.worktrees import Workbench

        doc = self.status(session_id)
        settings = self._opened.session(session_id).settings or {}
        stored = settings.get("workbench")
        if not stored:
            raise ConfigError(
                f"session {session_id} worked in no git repository: it has no worktrees or "
                "branches to clean"
            )
        if doc["status"] not in ("completed", "failed", "cancelled"):
            raise SessionBusy(
                f"session {session_id} is {doc['status']}: its worktrees are in use. Let it "
                f"finish, or stop it first (`orchestrator cancel {session_id}`)"
            )
        bench = Workbench.from_settings(session_id, stored)
        gone = bench.reachable()
        if gone is not None:
            raise ConfigError(f"{gone}: clean it on the machine that has it")
        removed = bench.remove_worktrees()
        deleted = bench.delete_branches() if branches else []
        return {
            "session_id": session_id,
            "repository": str(bench.repository),
            "worktrees_removed": removed,
            "branches_deleted": deleted,
            "branches_kept": [] if branches else bench.branches(),
        }

    # -- reading --------------------------------------------------------------------------

    def status(self, session_id: str) -> SessionDoc:
        """The session object; a deadline that passed while nothing ran is applied first."""
        found, settings = self._opened.status(session_id)
        doc = cast(SessionDoc, found)
        expect = settings.get("expect")
        if expect and doc["status"] in ENDED:
            doc["expect"] = check_expect(expect, doc, lambda: self.log(session_id))
        return doc

    def settings(self, session_id: str) -> dict[str, Any]:
        """The session's stored settings (its on-timeout policy, its limits, ...)."""
        return dict(self._opened.session(session_id).settings or {})

    def list(
        self, status: str | None = None, *, limit: int | None = None, after: str | None = None
    ) -> builtins.list[SessionDoc]:
        """Sessions, newest first (optionally only those with `status`, one of
        `STATUS_FILTERS`: "waiting" is every session with an open question): at most
        `limit` (None: all), starting after the session with id `after` (the last of the
        previous page; an unknown id raises SessionNotFound). Another status raises
        ConfigError."""
        if status is not None and status not in STATUS_FILTERS:
            raise ConfigError(
                f"status: {str(status)[:40]!r} is not a session status; use one of "
                f"{', '.join(STATUS_FILTERS)} ('waiting' = a question is open)"
            )
        return self._opened.list_views(filtered_status(status), limit=limit, after=after)  # type: ignore[return-value]

    def log(self, session_id: str) -> builtins.list[EventDoc]:
        """The session's events in order."""
        return self._opened.events(session_id)  # type: ignore[return-value]

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settings(given: Settings | Mapping[str, Any] | None) -> Settings:
    from orchestrator.settings import Settings

    if given is None:
        return Settings()
    if isinstance(given, Settings):
        return given
    return Settings().merged(**given)


def _llm_backend(
    models: Mapping[str, Any] | str,
    prompts: Path | None,
    workdir: Path | None,
    max_retries: int | None,
    given: ModelOptions | Mapping[str, Any] | None,
) -> AgentBackend:
    from orchestrator.agents.llm import LLMBackend
    from orchestrator.agents.models import check_models
    from orchestrator.agents.prompts import check_prompts

    chosen = {"pm": models, "developer": models} if isinstance(models, str) else dict(models)
    if prompts is not None:
        check_prompts(prompts)
    if workdir is not None and workdir.exists() and not workdir.is_dir():
        raise ConfigError(f"--workdir {workdir}: exists and is not a folder")
    options = _model_options(given, max_retries)
    check_models(chosen, options)  # a missing package or key fails here, before any write
    backend: AgentBackend = LLMBackend(
        chosen,
        prompts=str(prompts.resolve()) if prompts else None,
        workdir=str(workdir.resolve()) if workdir else None,
        options=options,
    )
    return backend


def _model_options(
    given: ModelOptions | Mapping[str, Any] | None, max_retries: int | None
) -> ModelOptions:
    """The options, validated: a bad one is a ConfigError naming it and what it takes."""
    from orchestrator.model_options import ModelOptions

    values = given.model_dump() if isinstance(given, ModelOptions) else dict(given or {})
    if max_retries is not None:
        values["max_retries"] = max_retries
    return ModelOptions.checked(values)
