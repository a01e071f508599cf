"""Asking the person: `provide_choice` and `ask_user` over the client's elicitation, or over
the web answer page where the client has no form elicitation.

Channels, in order of preference:
1. form elicitation when the client declares it: a titled enum (oneOf const/title) for
   single select, an array of titled enums for multi select, a free-text string for
   ask_user, and an optional free-text note. In the handshake era (up to 2025-11-25) the
   server sends `elicitation/create` while the call waits; in the 2026-07-28 era the form
   goes back in an `InputRequiredResult` and the client calls again (`rounds`);
2. URL elicitation when the client declares only that (handshake era): the one-question
   web page's URL;
3. otherwise the page's URL in a progress notification (and on stderr).
The deadline (`timeout_seconds`) bounds the whole wait; no answer by then is `timeout`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp_types import CallToolRequestParams, ElicitResult, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from orchestrator.api.mcp_questions import Asked, QuestionLog, summary_of
from orchestrator.domain.question import UserReply, to_gate_event
from orchestrator.errors import InvalidAnswer
from orchestrator.mcp_server.envelope import ToolFailure
from orchestrator.mcp_server.inputs import AskUserInput, ProvideChoiceInput
from orchestrator.mcp_server.rounds import Ended, Rounds
from orchestrator.present.printable import printable, quoted
from orchestrator.present.render import resume_hint

__all__ = [
    "page_factory",
    "Asker",
    "AnswerPage",
    "PageFactory",
    "Outcome",
    "channel_for",
    "terminal_hint",
    "keepalive_seconds",
    "KEEPALIVE_ENV",
]

log = logging.getLogger("orchestrator.mcp")

Channel = Literal["form", "rounds", "url", "progress"]
T = TypeVar("T")
KEEP_SECONDS = 0.5  # how soon an answer given at another door reaches the waiting call
NOTE_FIELD = "annotation"


class AnswerPage(Protocol):
    """A one-question web page: its URL, and the person's reply (None: the page closed
    without one, taken as no answer by the deadline)."""

    url: str

    async def wait(self) -> UserReply | None: ...


# Opens the page for a question (the pending-question document) until the context exits;
# the page takes no answer after the deadline (epoch seconds).
PageFactory = Callable[[dict[str, Any], float], AbstractAsyncContextManager[AnswerPage]]


@dataclass(frozen=True)
class Outcome:
    """How the question ended (`reply` None: the deadline passed), or, in the 2026-07-28
    era, the `pending` form the client must fill before calling again."""

    question: dict[str, Any]
    reply: UserReply | None
    pending: InputRequiredResult | None = None
    handed: dict[str, str] | None = None  # returned before the answer: where to answer


def channel_for(ctx: ServerRequestContext[Any], page: PageFactory | None) -> Channel | None:
    """Which way to ask this client (None: no way at all)."""
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    # An empty elicitation capability means form mode (clients from before URL mode).
    form = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        if form:
            return "rounds"
    elif ctx.session.can_send_request and elicitation is not None:
        if form:
            return "form"
        if page is not None:
            return "url"
    return "progress" if page is not None else None


class Asker:
    """Runs one question: record it, ask through the chosen channel, record the outcome."""

    def __init__(self, questions: QuestionLog, page: PageFactory | None) -> None:
        self.questions = questions
        self.page = page
        self.rounds = Rounds(questions)
        # The server's own task group (its lifespan), for questions kept open after their
        # call returned; None outside a running server (such calls then wait).
        self.background: anyio.abc.TaskGroup | None = None

    async def provide_choice(
        self, ctx: ServerRequestContext[Any], args: ProvideChoiceInput, call: CallToolRequestParams
    ) -> dict[str, Any] | InputRequiredResult:
        question: dict[str, Any] = {
            "question": args.prompt,
            "kind": args.type,
            "options": [
                {"label": o.label, **({"description": o.description} if o.description else {})}
                for o in args.options
            ],
            "title": args.title,
            "allow_cancel": args.allow_cancel,
        }
        message = f"{args.title}\n\n{args.prompt}"
        if not args.allow_cancel:
            message += "\n\nA choice is needed to continue."
        outcome = await self._ask(
            ctx,
            call,
            "provide_choice",
            args.title,
            question,
            message,
            choice_schema(args),
            args.timeout_seconds,
            args.wait_for_answer,
        )
        if outcome.pending is not None:
            return outcome.pending
        if outcome.handed is not None:
            return {"action_status": "pending", "selected": [], "selected_indices": [],
                    "annotation": None, **outcome.handed}  # fmt: skip
        labels = [option["label"] for option in outcome.question["options"]]
        reply = outcome.reply
        if reply is None:
            return {"action_status": "timeout", "selected": [], "selected_indices": [],
                    "annotation": None}  # fmt: skip
        if reply.action != "answer":
            return {"action_status": "cancelled", "selected": [], "selected_indices": [],
                    "annotation": reply.note}  # fmt: skip
        selected = list(reply.choices)
        return {
            "action_status": "selected",
            "selected": selected,
            "selected_indices": [labels.index(label) for label in selected],
            "annotation": reply.note,
        }

    async def ask_user(
        self, ctx: ServerRequestContext[Any], args: AskUserInput, call: CallToolRequestParams
    ) -> dict[str, Any] | InputRequiredResult:
        question: dict[str, Any] = {
            "question": args.question,
            "kind": "free_text",
            "urgency": args.urgency,
            **({"context": args.context} if args.context else {}),
        }
        message = args.question
        if args.context:
            message += f"\n\n{args.context}"
        if args.urgency == "high":
            message = f"[urgent] {message}"
        schema = {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "title": "Your answer", "minLength": 1},
            },
            "required": ["answer"],
        }
        outcome = await self._ask(
            ctx,
            call,
            "ask_user",
            args.question,
            question,
            message,
            schema,
            args.timeout_seconds,
            args.wait_for_answer,
        )
        if outcome.pending is not None:
            return outcome.pending
        if outcome.handed is not None:
            return {"action_status": "pending", "answer": None, **outcome.handed}
        reply = outcome.reply
        if reply is None:
            return {"action_status": "timeout", "answer": None}
        status = {"answer": "answered", "decline": "declined", "cancel": "cancelled"}[reply.action]
        return {"action_status": status, "answer": reply.text}

    # -- one question ---------------------------------------------------------------------

    async def _ask(
        self,
        ctx: ServerRequestContext[Any],
        call: CallToolRequestParams,
        tool: str,
        task: str,
        question: dict[str, Any],
        message: str,
        schema: dict[str, Any],
        timeout: float,
        wait: bool | None = None,
    ) -> Outcome:
        if call.request_state is not None:
            return await self._second_round(call.request_state, call.input_responses)
        channel = channel_for(ctx, self.page)
        if channel is None:
            raise ToolFailure(
                "internal",
                "this client offers no form elicitation, and the web answer page is not "
                "available in this installation; use a client with elicitation support",
            )
        asked = await anyio.to_thread.run_sync(self.questions.open, tool, task, question, timeout)
        log.info("%s: asking through %s (session %s)", tool, channel, asked.session_id)
        if channel == "rounds":
            return Outcome(question, None, self.rounds.ask(asked, message, schema, timeout))
        if channel == "progress" and not _waits(ctx, wait) and self.background is not None:
            return Outcome(question, None, handed=await self._hand_over(asked, timeout))
        try:
            reply = await self._held(
                asked,
                timeout,
                lambda: self._through(asked, ctx, channel, question, message, schema),
            )
        except ToolFailure as exc:
            await anyio.to_thread.run_sync(self.questions.failed, asked, exc.message)
            raise
        except anyio.get_cancelled_exc_class():
            # The client withdrew the call (its request timed out, mostly) or went away: the
            # question stays open for every door, and an answer given later is recorded
            # (session_status shows it), unless one came in just now: that one ends it.
            with anyio.CancelScope(shield=True):
                first = await anyio.to_thread.run_sync(self.questions.left_open, asked)
                if first is not None:
                    await self._finish(asked, first)
            raise
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(
                    self.questions.failed, asked, f"{type(exc).__name__}: {exc}"
                )
            raise
        return Outcome(question, await self._finish(asked, reply))

    async def _second_round(self, token: str, responses: Any) -> Outcome:
        """The client's call with the person's response to the form of the first call."""
        got = await anyio.to_thread.run_sync(self.rounds.answered, token, responses)
        if isinstance(got, Ended):  # recorded already: the deadline, a cancel, another door
            return Outcome(got.question, got.reply)
        asked, result = got
        try:
            reply = _from_result(asked.question, result)
        except ToolFailure as exc:
            await anyio.to_thread.run_sync(self.questions.failed, asked, exc.message)
            raise
        return Outcome(asked.question, await self._finish(asked, reply))

    async def _finish(self, asked: Asked, reply: UserReply | None) -> UserReply | None:
        """Record how the question ended; the reply that counts (another door's, when it
        was committed first)."""
        if reply is None:
            first = await anyio.to_thread.run_sync(self.questions.answered_elsewhere, asked)
            if first is not None:  # answered at another door just before the deadline
                return await self._finish(asked, first)
            await anyio.to_thread.run_sync(self.questions.timed_out, asked)
            return None
        summary = summary_of(reply)
        counted: UserReply = await anyio.to_thread.run_sync(
            self.questions.reply, asked, reply, summary
        )
        return counted

    async def _hand_over(self, asked: Asked, timeout: float) -> dict[str, str]:
        """Keep the question open on its page after the call returns (in the server's
        background task group): the page, the other doors, a cancel or the deadline end
        it as they end a waiting call's. Returns where to answer and how to collect it."""
        assert self.background is not None and self.page is not None
        opened: list[str] = []
        ready = anyio.Event()
        self.background.start_soon(self._kept_open, asked, timeout, opened, ready)
        await ready.wait()
        if not opened:
            raise ToolFailure("internal", "the answer page did not open; see the server log")
        sid = asked.session_id
        hint = self._resume_hint(asked)
        log.warning("%s: answer on %s or at a terminal: %s", sid, opened[0], printable(hint))
        return {
            "session_id": sid,
            "answer_url": opened[0],
            "resume_command": hint,
            "collect": (
                f"The person answers at a terminal (resume_command), on answer_url while this "
                f"MCP server runs (a stdio server stops when its client exits), or at any other "
                f"door (the inbox, answer_session), until the deadline. Call session_status "
                f"with session_id {sid} "
                "to collect the answer: once answered its status is completed and "
                "orchestrator_state.user_clarification_response holds it (summary "
                "'answered: ...'); while it is waiting, pending_question is set."
            ),
        }

    async def _kept_open(
        self, asked: Asked, timeout: float, opened: list[str], ready: anyio.Event
    ) -> None:
        assert self.page is not None
        try:
            async with self.page(asked.page_question(), asked.deadline) as page:
                opened.append(page.url)
                ready.set()
                reply = await self._held(asked, timeout, page.wait)
            await self._finish(asked, reply)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # the server stops: as a withdrawn call
                first = await anyio.to_thread.run_sync(self.questions.left_open, asked)
                if first is not None:
                    await self._finish(asked, first)
            raise
        except Exception as exc:  # no call to report it to: the log, and the session
            log.error("session %s: the question's page failed", asked.session_id, exc_info=exc)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(
                    self.questions.failed, asked, f"{type(exc).__name__}: {exc}"
                )
        finally:
            ready.set()

    async def _held(
        self, asked: Asked, timeout: float, wait: Callable[[], Awaitable[UserReply | None]]
    ) -> UserReply | None:
        """Wait for the reply until the deadline (None), renewing the claim meanwhile; a
        cancel requested meanwhile withdraws the question (a cancel reply)."""
        reply: UserReply | None = None
        failed: list[Exception] = []
        waiting = anyio.CancelScope()
        withdrawn: list[UserReply] = []

        async def keep() -> None:
            # Often: an answer at another door ends the wait (and the claim is renewed).
            while True:
                await anyio.sleep(self.questions.keep_every(KEEP_SECONDS))
                try:
                    settled = await anyio.to_thread.run_sync(self.questions.keep, asked)
                except Exception as exc:  # (a storage fault): the call ends with it, not
                    failed.append(exc)  # an ExceptionGroup the tool's error cannot name
                    waiting.cancel()
                    return
                if settled is not None:
                    withdrawn.append(settled)
                    waiting.cancel()
                    return

        async with anyio.create_task_group() as beats:
            beats.start_soon(keep)
            try:
                with waiting, anyio.move_on_after(timeout):
                    reply = _checked(asked.question, await wait())
            except Exception as exc:  # re-raised below, outside the task group's wrapping
                failed.append(exc)
            beats.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return withdrawn[0] if withdrawn else reply

    def _resume_hint(self, asked: Asked) -> str:
        return terminal_hint(self.questions.url, asked.session_id, asked.question)

    async def _through(
        self,
        asked: Asked,
        ctx: ServerRequestContext[Any],
        channel: Channel,
        question: dict[str, Any],
        message: str,
        schema: dict[str, Any],
    ) -> UserReply | None:
        if channel == "form":
            result = await _kept_alive(
                ctx,
                asked,
                "waiting for the person's answer in the client's form",
                lambda: ctx.session.elicit_form(message, schema, ctx.request_id),
            )
            return _from_result(question, result)
        assert self.page is not None
        async with self.page(asked.page_question(), asked.deadline) as page:
            if channel == "url":
                elicitation_id = uuid.uuid4().hex
                result = await ctx.session.elicit_url(
                    f"{quoted(message)}\n\nAnswer on this page: {page.url}",
                    page.url,
                    elicitation_id,
                    ctx.request_id,
                )
                if result.action != "accept":
                    return UserReply(action=result.action)
                note = f"waiting for the person's answer on {page.url}"
                reply = await _kept_alive(ctx, asked, note, page.wait)
                await ctx.session.send_elicit_complete(elicitation_id, ctx.request_id)
                return reply
            note = (
                f"{quoted(message)}\n\nAnswer on this page: {page.url}\n"
                f"or at a terminal: {self._resume_hint(asked)}"
            )
            log.warning("%s", printable(note))  # stderr: some clients show only the log
            return await _kept_alive(ctx, asked, note, page.wait)


KEEPALIVE_ENV = "ORCHESTRATOR_MCP_KEEPALIVE_SECONDS"
DEFAULT_KEEPALIVE_SECONDS = 20.0  # under every common client's 60 s request timeout


def keepalive_seconds() -> float:
    """How often a waiting call sends a progress notification: 20 s, or
    $ORCHESTRATOR_MCP_KEEPALIVE_SECONDS (more than 0, at most 30; anything else is ignored)."""
    try:
        seconds = float(os.environ.get(KEEPALIVE_ENV, ""))
    except ValueError:
        return DEFAULT_KEEPALIVE_SECONDS
    return seconds if 0 < seconds <= 30 else DEFAULT_KEEPALIVE_SECONDS


async def _kept_alive(
    ctx: ServerRequestContext[Any], asked: Asked, note: str, wait: Callable[[], Awaitable[T]]
) -> T:
    """`wait()`'s result; meanwhile, for a client that sent a progress token, a progress
    notification at once and then every `keepalive_seconds()`, with `note` and the time
    left: clients that reset their request timeout on progress keep waiting, and one that
    shows only the latest message still shows where to answer."""
    every = keepalive_seconds()
    started = time.monotonic()
    got: list[T] = []
    failed: list[BaseException] = []

    async def report() -> None:
        left = max(0.0, asked.deadline - time.time())
        elapsed = round(time.monotonic() - started, 3)  # increases, as the spec asks
        text = f"{note}\n\n{_duration(left)} left to answer"
        try:
            await ctx.session.report_progress(elapsed, round(elapsed + left, 3), text)
        except Exception:  # a client that went away never ends the wait by itself
            log.debug("progress not delivered", exc_info=True)

    async def beat() -> None:
        while True:
            await anyio.sleep(every)
            await report()

    await report()  # before the wait: where to answer is known before anyone can answer
    async with anyio.create_task_group() as beats:
        beats.start_soon(beat)
        try:
            got.append(await wait())
        except Exception as exc:  # re-raised below, outside the task group's wrapping
            failed.append(exc)
        beats.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return got[0]


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole >= 3600:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    if whole >= 60:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole} s"


def _waits(ctx: ServerRequestContext[Any], wait: bool | None) -> bool:
    """Does a call of a client without forms wait for the answer? As asked (`wait_for_answer`),
    else when the client sent a progress token: the keep-alive holds such a call open, while
    a call without one times out in most clients after 60 s (docs/mcp.md)."""
    if wait is not None:
        return wait
    meta: Any = ctx.meta or {}
    return meta.get("progress_token") is not None or meta.get("progressToken") is not None


def terminal_hint(url: str | None, session_id: str, question: dict[str, Any]) -> str:
    """The command that answers a question from a terminal (any door answers it); `--db`
    only when the database is not the default one."""
    from orchestrator.api.database import is_default

    return resume_hint(session_id, question, None if is_default(url) else url)


def choice_schema(args: ProvideChoiceInput) -> dict[str, Any]:
    """The form for provide_choice: titled enum(s) and an optional note."""
    titled = [
        {"const": o.label, "title": f"{o.label} — {o.description}" if o.description else o.label}
        for o in args.options
    ]
    if args.type == "single_select":
        field: dict[str, Any] = {"type": "string", "title": args.title, "oneOf": titled}
    else:
        field = {
            "type": "array",
            "title": args.title,
            "minItems": 1,
            "items": {"anyOf": titled},
        }
    return {
        "type": "object",
        "properties": {
            "choice": field,
            NOTE_FIELD: {
                "type": "string",
                "title": "Note (optional)",
                "description": "Anything the agent should know about your choice.",
            },
        },
        "required": ["choice"],
    }


def _from_result(question: dict[str, Any], result: ElicitResult) -> UserReply:
    """The person's reply from the client's elicitation result (checked against the
    question: the client's form could return anything)."""
    if result.action != "accept":
        return UserReply(action=result.action)
    reply = _checked(question, _from_form(question, result.content or {}))
    assert reply is not None
    return reply


def _from_form(question: dict[str, Any], content: dict[str, Any]) -> UserReply:
    note = content.get(NOTE_FIELD)
    note = note.strip() or None if isinstance(note, str) else None
    if question["kind"] == "free_text":
        answer = content.get("answer")
        if not isinstance(answer, str):
            raise ToolFailure("internal", "the client accepted the form without an answer")
        return UserReply(text=answer, note=note)
    choice = content.get("choice")
    picks = [choice] if isinstance(choice, str) else choice
    if not isinstance(picks, list) or not all(isinstance(p, str) for p in picks):
        raise ToolFailure("internal", f"the client answered the form with {choice!r}, not a choice")
    return UserReply(choices=tuple(picks), note=note)


def _checked(question: dict[str, Any], reply: UserReply | None) -> UserReply | None:
    """An accepted reply must fit the question (the client's form could be anything)."""
    if reply is None or reply.action != "answer":
        return reply
    try:
        pending: Any = question  # the question object; to_gate_event reads kind and options
        _, choices = to_gate_event(pending, reply)
    except InvalidAnswer as exc:
        raise ToolFailure("internal", f"the client's answer does not fit: {exc.message}") from exc
    if choices is not None:  # labels as the options spell them
        return UserReply(choices=tuple(choices), note=reply.note)
    return UserReply(text=(reply.text or "").strip(), note=reply.note)


# -- the one-question web page, for clients without form elicitation: the web answer page's
# orchestrator.web.oneshot.open_page (the `web` extra) behind the `AnswerPage` the asker
# waits on. No second web server: this only adapts that one. ---------------------------


class _OneShotPage:
    def __init__(self, page: Any) -> None:
        self.url: str = page.url
        self._page = page

    async def wait(self) -> UserReply | None:
        # A wait abandoned by a cancel (the question settled elsewhere) ends when the page
        # is closed on the way out of `open_page` below.
        reply: UserReply | None = await anyio.to_thread.run_sync(
            self._page.wait, abandon_on_cancel=True
        )
        return reply


def page_factory() -> PageFactory:
    """The factory over the web answer page (ImportError without the `web` extra)."""
    from orchestrator.web.oneshot import open_page

    @asynccontextmanager
    async def opened(question: dict[str, Any], deadline: float) -> AsyncIterator[_OneShotPage]:
        page = open_page(
            question,
            deadline,
            allow_cancel=bool(question.get("allow_cancel", True)),
            title=question.get("title"),
        )
        try:
            yield _OneShotPage(page)
        finally:
            # However the wait ended (an answer here or elsewhere, a cancel, the deadline,
            # the client gone): no answer is taken any more, and server, thread and port
            # are gone before the tool call returns.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(page.close)

    return opened
