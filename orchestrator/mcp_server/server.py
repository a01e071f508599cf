"""The MCP server: the seven tools of contract section 6 over the session API, and after
them `ask_session` (a paused question in the client's form) and `reconcile_session`.

Built on the SDK's low-level `Server` rather than `MCPServer`: MCPServer validates tool
arguments itself and answers a mismatch with a bare text error, while the contract wants
every input checked by our models and every answer, errors included, in one shape.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, ValidationError

from orchestrator import __version__
from orchestrator.api import Reply
from orchestrator.api.mcp_questions import QuestionLog
from orchestrator.mcp_server.asking import (
    Asker,
    PageFactory,
    channel_for,
    page_factory,
    terminal_hint,
)
from orchestrator.mcp_server.envelope import ToolFailure, from_exception, ok
from orchestrator.mcp_server.inputs import (
    AnswerSessionInput,
    AskUserInput,
    ListSessionsInput,
    ProvideChoiceInput,
    SessionIdInput,
    StartSessionInput,
    output_schema,
)
from orchestrator.mcp_server.rounds import form_request, response_of
from orchestrator.mcp_server.session_form import form_of, reply_of

__all__ = ["build_server", "TOOLS", "Tools"]

log = logging.getLogger("orchestrator.mcp")

INSTRUCTIONS = """\
Ask the person a question when a decision is theirs: provide_choice for options, ask_user
for free text (both wait for the answer, up to timeout_seconds). Run and inspect orchestrator
sessions: start_session, session_status, list_sessions, answer_session, session_log;
ask_session shows the person a paused session's question in a form and answers it with theirs.
Every tool answers {"ok": true, "data": ...} or {"ok": false, "error": {"code", "message"}}."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    model: type[BaseModel]
    read_only: bool
    # The spec's hints, told truthfully (with its defaults a tool that is not read-only
    # counts as destructive and open-world, and clients confirm it before every call).
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "provide_choice",
        "Ask the person to choose",
        "Ask the person to choose among options (single or multi select) and wait for the "
        "choice. Put the task's context and why a choice is needed in `prompt`. data: "
        "{action_status: selected|cancelled|timeout, selected: [labels], selected_indices: "
        "[0-based ints], annotation: the person's note or null}. "
        "While it waits the server sends a progress notification every 20 s when the call "
        "carries a progress token; most clients give up on a request after 60 s otherwise "
        "(raise the client's request timeout, docs/mcp.md). A client without forms and "
        "without a progress token gets action_status `pending` at once, with where the "
        "person answers (answer_url, resume_command) and the session_id whose "
        "session_status collects the answer. A call that ends first loses nothing: the "
        "question stays open, every door answers it, session_status shows the answer. ",
        ProvideChoiceInput,
        False,
    ),
    ToolSpec(
        "ask_user",
        "Ask the person a question",
        "Ask the person one free-text question and wait for the answer. data: "
        "{action_status: answered|declined|cancelled|timeout, answer: text or null}. "
        "While it waits the server sends a progress notification every 20 s when the call "
        "carries a progress token; most clients give up on a request after 60 s otherwise "
        "(raise the client's request timeout, docs/mcp.md). A client without forms and "
        "without a progress token gets action_status `pending` at once, with where the "
        "person answers (answer_url, resume_command) and the session_id whose "
        "session_status collects the answer. A call that ends first loses nothing: the "
        "question stays open, every door answers it, session_status shows the answer. ",
        AskUserInput,
        False,
    ),
    ToolSpec(
        "start_session",
        "Start an orchestrator session",
        "Start a session with `task` and `model` (PROVIDER:NAME), or with `scenario` (a "
        "scenario file's YAML text: scripted agents, no model), and run it until it "
        "completes, fails or pauses for an answer. data: the session object. With a "
        "`model` the agents call that model provider (an outside service).",
        StartSessionInput,
        False,
        open_world=True,
    ),
    ToolSpec(
        "session_status",
        "Show a session",
        "data: the session object (status, pending_question when it waits, tasks, summary).",
        SessionIdInput,
        True,
        idempotent=True,
    ),
    ToolSpec(
        "list_sessions",
        "List sessions",
        "data: the session objects, newest first (optionally only one status).",
        ListSessionsInput,
        True,
        idempotent=True,
    ),
    ToolSpec(
        "answer_session",
        "Answer a paused session",
        "Answer the question a paused session waits on (exactly one of `answer`, `choices`, "
        "`action`, or `parts` for a multi-part question), then run the session on until it "
        "ends or pauses. data: the session "
        "object. A session whose question was declined or timed out (its `late_question` "
        "is set) takes the answer as a late answer, reconciled with what the agents "
        "assumed. Refused with not_waiting when the session takes no answer, conflict "
        "when another command is answering it. `action: cancel` ends the session.",
        AnswerSessionInput,
        False,
        destructive=True,  # action cancel ends the session for good
        open_world=True,  # the session runs on: its agents may call a model provider
    ),
    ToolSpec(
        "session_log",
        "Show a session's log",
        "data: the session's events in order (questions, answers, fallbacks, agent replies).",
        SessionIdInput,
        True,
        idempotent=True,
    ),
    ToolSpec(
        "ask_session",
        "Ask the person a paused session's question",
        "Show the person, in this client's form, the question a paused session waits on "
        "(one field per part of a multi-part question; an empty field lets that part's "
        "askers proceed on their default), then answer the session with the form and run "
        "it on until it ends or pauses. Declining the form declines the question; "
        "cancelling it leaves the question open. data: the session object. Needs a client "
        "with form elicitation (otherwise use answer_session); not_waiting when the "
        "session has no open question.",
        SessionIdInput,
        False,
        open_world=True,  # the session runs on: its agents may call a model provider
    ),
    ToolSpec(
        "reconcile_session",
        "Reconcile a late answer",
        "For an ended session whose late answer contradicts what the agents assumed "
        "(`needs_review`: true): run one PM round told the answer and the conflicts, which "
        "re-plans the affected tasks, then the developers and the PM's review. data: the "
        "session object. Refused with not_waiting when there is nothing to reconcile.",
        SessionIdInput,
        False,
        open_world=True,  # the PM and developers may call a model provider
    ),
)


class Tools:
    """The tools' bodies. Session tools run the (synchronous) session API on a worker thread,
    each call with its own `Sessions` and claim owner, so calls never share a claim."""

    def __init__(self, db: str | None, page: PageFactory | None = None) -> None:
        questions = QuestionLog.connect(db)  # migrated here, before any call
        self.questions = questions
        self.url = questions.url
        for session_id in questions.reap():
            log.warning("session %s: its MCP server stopped before the answer; failed", session_id)
        self.asker = Asker(questions, page)

    def close(self) -> None:
        self.questions.close()

    async def _in_thread(self, work: Callable[[Any], Any], ctx: Any = None) -> Any:
        """Run `work(sessions)` on a worker thread. With `ctx`, each event the run commits
        is reported to the client as a progress notification (when it asked for progress)."""
        from orchestrator.api import Sessions

        on_event = _progress_reporter(ctx) if ctx is not None else None

        def run() -> Any:
            with Sessions(self.url, on_event=on_event) as sessions:
                return work(sessions)

        return await anyio.to_thread.run_sync(run)

    async def provide_choice(self, ctx: Any, args: ProvideChoiceInput, call: Any) -> Any:
        return await self.asker.provide_choice(ctx, args, call)

    async def ask_user(self, ctx: Any, args: AskUserInput, call: Any) -> Any:
        return await self.asker.ask_user(ctx, args, call)

    async def start_session(self, ctx: Any, args: StartSessionInput, call: Any) -> Any:
        settings = {"max_parallel": args.max_parallel}  # None: the scenario's, or the default
        if args.scenario is not None:
            text = args.scenario
            return await self._in_thread(
                lambda s: s.start_scenario(text, task=args.task, settings=settings), ctx
            )
        chosen = {k: v for k, v in settings.items() if v is not None}
        return await self._in_thread(
            lambda s: s.start(args.task, models=args.model, settings=chosen), ctx
        )

    async def session_status(self, ctx: Any, args: SessionIdInput, call: Any) -> Any:
        return await self._in_thread(lambda s: s.status(args.session_id))

    async def list_sessions(self, ctx: Any, args: ListSessionsInput, call: Any) -> Any:
        return await self._in_thread(lambda s: s.list(args.status))

    async def answer_session(self, ctx: Any, args: AnswerSessionInput, call: Any) -> Any:
        reply = args.reply()
        return await self._in_thread(lambda s: s.resume(args.session_id, reply), ctx)

    async def ask_session(self, ctx: Any, args: SessionIdInput, call: Any) -> Any:
        """The paused question as one form (docs/mcp.md, "ask_session"): sent while the call
        waits (handshake era) or returned for the client's second call (2026-07-28)."""
        session_id = args.session_id
        doc = await self._in_thread(lambda s: s.status(session_id))
        question = doc.get("pending_question")
        if call.request_state is not None:  # the second call, with the person's form
            # The deadline may have passed meanwhile: with on_timeout proceed the answer
            # is then taken as a late answer (docs/late-answers.md), as at every door.
            question = question or doc.get("late_question")
            if question is None:
                raise ToolFailure(
                    "not_waiting",
                    f"session {session_id} takes no answer any more (it is {doc.get('status')}; "
                    "answered at another door meanwhile?)",
                )
            if call.request_state != _form_state(session_id, question):
                raise ToolFailure(
                    "invalid_input",
                    "request_state is not this session's open question; call ask_session again",
                )
            response = response_of(call.input_responses)
            return await self._answer_form(ctx, session_id, question, response)
        if doc.get("status") != "paused" or not question:
            raise ToolFailure(
                "not_waiting",
                f"session {session_id} has no open question (it is {doc.get('status')})",
            )
        message, schema = form_of(session_id, doc.get("task") or "", question)
        channel = channel_for(ctx, None)
        if channel == "rounds":
            return form_request(message, schema, _form_state(session_id, question))
        if channel != "form":
            raise ToolFailure(
                "invalid_input",
                "this client cannot show a form (it declares no form elicitation); answer "
                "with answer_session, or at a terminal: "
                + terminal_hint(self.url, session_id, question),
            )
        result = await ctx.session.elicit_form(message, schema, ctx.request_id)
        return await self._answer_form(ctx, session_id, question, result)

    async def _answer_form(
        self, ctx: Any, session_id: str, question: dict[str, Any], result: ElicitResult
    ) -> Any:
        if result.action == "cancel":  # dismissed: the question stays open
            return await self._in_thread(lambda s: s.status(session_id))
        if result.action == "decline":
            reply = Reply(action="decline")
        else:
            reply = reply_of(question, result.content or {})
        return await self._in_thread(lambda s: s.resume(session_id, reply), ctx)

    async def reconcile_session(self, ctx: Any, args: SessionIdInput, call: Any) -> Any:
        return await self._in_thread(lambda s: s.reconcile(args.session_id), ctx)

    async def session_log(self, ctx: Any, args: SessionIdInput, call: Any) -> Any:
        return await self._in_thread(lambda s: s.log(args.session_id))


def _form_state(session_id: str, question: dict[str, Any]) -> str:
    """ask_session's request_state: the session and its question, so that a second call
    answers only the question its form showed."""
    # What the question asks, not how it stands: its clock (`deadline`, `timed_out`) and
    # its parts' outcomes (`response`, `declined`: a deadline that proceeds declines every
    # part) change while the person fills the form.
    asked = {k: v for k, v in question.items() if k not in ("deadline", "timed_out")}
    if question.get("parts"):
        outcome = ("response", "declined")
        asked["parts"] = [
            {k: v for k, v in p.items() if k not in outcome} for p in question["parts"]
        ]
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]
    return f"{session_id}:{digest}"


def _progress_reporter(ctx: Any) -> Callable[[str, dict[str, Any]], None]:
    """A session-API event listener (called on the worker thread) that reports each event
    as progress. A client that went away never stops the session's run."""
    from orchestrator.present.render import event_line

    count = itertools.count(1)
    # Events also come from LangGraph's own threads (parallel developers), not only from
    # the worker thread anyio started: address the event loop explicitly.
    loop = anyio.lowlevel.current_token()

    def report(session_id: str, event: dict[str, Any]) -> None:
        message = f"{session_id}: {event_line(event)}"
        try:
            anyio.from_thread.run(
                ctx.session.report_progress, next(count), None, message, token=loop
            )
        except Exception:
            log.debug("progress not delivered", exc_info=True)

    return report


def tool_list() -> list[Tool]:
    return [
        Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.model.model_json_schema(),
            output_schema=output_schema(spec.name),
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=spec.destructive,
                idempotent_hint=spec.idempotent,
                open_world_hint=spec.open_world,
            ),
        )
        for spec in TOOLS
    ]


def build_server(db: str | None = None, *, page: PageFactory | None = None) -> Server[Any]:
    """The MCP server over the database `db` (a URL or SQLite path; None: the default).

    `page` opens the one-question web page for clients without form elicitation (None: the
    web answer page, when this installation has it)."""
    tools = Tools(db, page if page is not None else default_page())
    specs = {spec.name: spec for spec in TOOLS}
    listed = tool_list()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        spec = specs.get(params.name)
        if spec is None:  # not a tool's input error but a request for no tool: JSON-RPC's
            known = ", ".join(specs)
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name!r}; the tools are: {known}")
        try:
            args = spec.model.model_validate(params.arguments or {})
        except ValidationError as exc:
            return from_exception(spec.name, exc)  # invalid_input; nothing has happened
        body: Callable[[Any, Any, CallToolRequestParams], Awaitable[Any]]
        body = getattr(tools, spec.name)
        try:
            data = await body(ctx, args, params)
        except Exception as exc:
            return from_exception(spec.name, exc)
        if isinstance(data, InputRequiredResult):
            return data  # 2026-07-28 era: the client asks the person and calls again
        return ok(data)

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        # Questions whose call returned before the answer stay open on their page in this
        # task group; when the server stops they are left open for the other doors.
        async with anyio.create_task_group() as background:
            tools.asker.background = background
            try:
                yield {}
            finally:
                tools.asker.background = None
                background.cancel_scope.cancel()

    server: Server[Any] = Server(
        "orchestrator",
        lifespan=lifespan,
        version=__version__,
        title="Orchestrator",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )

    return server


def default_page() -> PageFactory | None:
    """The web answer page's one-question server, when this installation has it (the
    `web` extra); None otherwise."""
    try:
        return page_factory()
    except ImportError as exc:
        log.debug("no web answer page: %s", exc)
        return None
