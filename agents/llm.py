"""Chat-model agents: any LangChain chat model, replies read into the contract's models.

One loop serves every model. How the model gives its reply is the reply mode
(orchestrator.model_options): a `submit_reply` tool call (default, where the model has
tool calling), the provider's structured output (a JSON schema), or one JSON object in
text. A model that answers in text while tools are bound is read as text. Either way the
reply is read by orchestrator.agents.replies (the one statement of the reply contract);
an invalid one is sent back with feedback for the model, at most `max_retries` times, and
then the session fails.

Every call and turn runs under budgets (a timeout and an output length per call; model
calls, tool calls and wall time per turn; tokens per session). Past one, the turn is
dropped unrecorded and the session is stalled, resumable (BudgetExceeded); past the
session's token budget it fails (TokenBudgetExceeded).
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from orchestrator.errors import (
    AgentCallError,
    AgentReplyError,
    BudgetExceeded,
    TokenBudgetExceeded,
)
from orchestrator.limits import clip
from orchestrator.model_options import ModelOptions
from orchestrator.redact import mask_secrets, mask_url
from orchestrator.runtime.agent import AgentRequest, AgentTurn

from . import models as _models
from .prompts import system_prompt, turn_message
from .replies import (
    SUBMIT,
    DeveloperSubmit,
    PmSubmit,
    Reading,
    contract_summary,
    feedback,
    read_arguments,
    read_text,
    shown_schema,
    submit_schema,
)

__all__ = ["LLMBackend", "PmSubmit", "DeveloperSubmit", "forget_servers"]

Mode = Literal["tool", "text"]
# How long a provider error may be in a message (the resume hint after it is never cut).
_ERROR_CHARS = 600
# How much of a failed turn's last reply its error quotes.
_REPLY_CHARS = 400
# Servers (base URLs) that refused a json_schema response format: asked once per server
# and process, so that every later session (an eval runs many) sends json_object at once.
_JSON_OBJECT_SERVERS: set[str | None] = set()
_SERVERS_LOCK = threading.Lock()
# The longest wait between two calls refused for a rate limit without a Retry-After.
MAX_BACKOFF = 30.0
log = logging.getLogger("orchestrator.agents")
# finish reasons that say the output was cut at the length limit (OpenAI, Anthropic, Ollama)
_CUT = {"length", "max_tokens"}


def forget_servers() -> None:
    """Forget which servers refused json_schema (a server restarted with a newer version,
    or a test's server on a port another one used)."""
    with _SERVERS_LOCK:
        _JSON_OBJECT_SERVERS.clear()


class LLMBackend:
    """PM and developers on chat models; `models` maps role (pm, developer) to a spec
    (`PROVIDER:NAME`) or a LangChain chat model object (a configured client, or a fake from
    orchestrator.testing), which a session continues with in this process only."""

    sequential = False

    def __init__(
        self,
        models: Mapping[str, Any],
        *,
        prompts: str | None = None,
        workdir: str | None = None,
        options: ModelOptions | Mapping[str, Any] | None = None,
        max_retries: int | None = None,
    ) -> None:
        self.models = {
            role: _models.given_model(model, f"the {role}") for role, model in models.items()
        }
        self.prompts = Path(prompts) if prompts else None
        self.workdir = workdir
        chosen = ModelOptions.of(options)
        if max_retries is not None:
            chosen = ModelOptions.model_validate(
                {**chosen.model_dump(), "max_retries": max_retries}
            )
        self.options = chosen
        self._chat: dict[str, Any] = {}
        self._bound: dict[tuple[Any, ...], tuple[Any, Mode]] = {}  # see _bind
        self._binding = threading.Lock()
        self._system: dict[str, str] = {}  # the system prompts, read once (see _turn)

    @property
    def _json_object(self) -> bool:
        """The server refused a json_schema response format before (in this process)."""
        return self.options.base_url in _JSON_OBJECT_SERVERS

    @property
    def max_retries(self) -> int:
        return self.options.max_retries

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "llm",
            "models": self.models,
            "prompts": str(self.prompts) if self.prompts else None,
            "workdir": self.workdir,
            **self.options.model_dump(),
        }

    def workspace(self, session_id: str) -> Path:
        """The session's workspace: --workdir, else <data dir>/workspaces/<session id>."""
        if self.workdir:
            return Path(self.workdir)
        from .scripted import shared_workspace

        return shared_workspace(session_id)

    def _model(self, role: str) -> Any:
        spec = self.models[role]
        if spec not in self._chat:
            self._chat[spec] = _models.init_model(spec, options=self.options)
        return self._chat[spec]

    def respond(self, request: AgentRequest) -> AgentTurn:
        budget = _TurnBudget(self.options, request.agent, request.tokens_used)
        try:
            return self._turn(request, budget)
        except (AgentCallError, AgentReplyError, TokenBudgetExceeded) as exc:
            if budget.model_calls:  # what the failed turn spent is counted all the same
                exc.usage = {request.agent: budget.usage()}
            raise

    def _turn(self, request: AgentRequest, budget: _TurnBudget) -> AgentTurn:
        from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

        agent = request.agent
        role = "pm" if agent == "pm" else "developer"
        tools, context = self._tools(role, request)
        chat, mode = self._bind(role, agent, tools)
        new: list[Any] = []
        if not request.history:
            if role not in self._system:  # read once: each developer of a hundred needs it
                self._system[role] = system_prompt(role, self.prompts)
            new.append(SystemMessage(self._system[role]))
        text = turn_message(request)
        if mode == "text":
            text += f"\n\nReply with exactly one JSON object:\n{contract_summary(agent)}"
        new.append(HumanMessage(text))
        by_name = {t.name: t for t in tools}
        failures: list[str] = []
        notes: list[str] = []
        conversation = [*request.history, *new]

        def done(reading: Reading) -> AgentTurn:
            notes.extend(reading.notes)
            return AgentTurn(
                reading.reply,
                tuple(new),
                tuple(sorted(context.changed)) if context else (),
                budget.usage(),
                tuple(notes),
                tuple(context.ran) if context else (),
            )

        def refused(problem: str) -> None:
            failures.append(problem)
            if len(failures) > self.options.max_retries:
                # The failed turn is not recorded: its last reply goes with the error, so
                # that `log` shows what the model actually said.
                last = next(m for m in reversed(new) if getattr(m, "type", "") == "ai")
                said = clip(_said(last), _REPLY_CHARS)
                raise AgentReplyError(
                    f"{agent} gave no valid reply in {len(failures)} attempts "
                    f"(max_retries={self.options.max_retries}); last problem: {problem}\n"
                    f"its last reply: {said}"
                )

        while True:
            budget.before_model_call()
            try:
                answer = self._invoke(chat, conversation, agent, budget)
            except BudgetExceeded:
                budget.count_unanswered()
                raise
            except AgentCallError as exc:
                if not self._refused_json_schema(exc):
                    raise
                with _SERVERS_LOCK:
                    _JSON_OBJECT_SERVERS.add(self.options.base_url)
                notes.append("the server takes no json_schema response format: json_object sent")
                chat, mode = self._bind(role, agent, tools)
                continue
            budget.count(answer)
            new.append(answer)
            conversation.append(answer)
            tool_calls = getattr(answer, "tool_calls", None) or []
            if not tool_calls:
                reading = read_text(agent, _text(answer))
                if reading.reply is not None:
                    return done(reading)
                notes.extend(reading.notes)
                budget.check_cut(answer)
                refused(reading.problem)
                reply_to = HumanMessage(feedback(agent, reading.problem, mode="text"))
                new.append(reply_to)
                conversation.append(reply_to)
                continue
            accepted: Reading | None = None
            for call in tool_calls:
                name = call["name"]
                ok = False
                if name == SUBMIT and accepted is None:
                    reading = read_arguments(agent, call["args"])
                    ok = reading.reply is not None
                    if ok:
                        accepted, result = reading, "accepted"
                    else:
                        notes.extend(reading.notes)
                        budget.check_cut(answer)
                        refused(reading.problem)
                        result = feedback(agent, reading.problem, mode="tool")
                elif name == SUBMIT:
                    result = "ignored: an earlier submit_reply in this answer was accepted"
                elif name in by_name:
                    budget.count_tool_call()
                    outcome = by_name[name].invoke(call["args"])
                    ok, result = outcome.ok, outcome.to_text()
                else:
                    refused(f"called {name!r}, which is not a tool")
                    result = f"There is no tool named {name!r}. The tools: " + ", ".join(
                        sorted([*by_name, SUBMIT])
                    )
                message = ToolMessage(
                    result, tool_call_id=call["id"], name=name, status="success" if ok else "error"
                )
                new.append(message)
                conversation.append(message)
            if accepted is not None:
                return done(accepted)

    def _bind(self, role: str, agent: str, tools: list[Any]) -> tuple[Any, Mode]:
        """The model with what it needs bound for the reply mode; the mode replies come in.

        Bound once per kind of turn and kept: turning tool schemas into the provider's
        form costs milliseconds of CPU per call (pydantic's JSON schemas), which a
        hundred developers starting at once would pay one after another under the GIL.
        The binding holds only schemas; each turn's own tools run from `tools`."""
        schemas = tuple((t.name, t.description, t.Input) for t in tools)
        key = (role, submit_schema(agent), schemas, self.options.reply_mode, self._json_object)
        with self._binding:  # the first of many developers binds, the others wait for it
            found = self._bound.get(key)
            if found is None:
                found = self._bound[key] = self._bind_anew(role, agent, tools)
        return found

    def _bind_anew(self, role: str, agent: str, tools: list[Any]) -> tuple[Any, Mode]:
        model = self._model(role)
        workspace = [t.as_langchain() for t in tools]
        mode = self.options.reply_mode
        provider = self.models[role].partition(":")[0]
        # A grammar server gets a branch per status (PLANNED with tasks); a hosted API
        # the flat object (Anthropic refuses an anyOf at a tool schema's top level).
        shape = shown_schema(agent, by_status=_models.grammar_server(provider, self.options))
        if mode == "tools":
            from langchain_core.tools import StructuredTool

            submit = StructuredTool.from_function(
                func=lambda **_: "received",
                name=SUBMIT,
                description=submit_schema(agent).__doc__ or SUBMIT,
                # As its JSON schema: from the pydantic class, LangChain drops
                # `additionalProperties: false`, and a grammar-constrained server then lets
                # the arguments run on (agents.replies: the schema is shown as it is).
                args_schema=shape,
            )
            extra = {"tool_choice": "required"} if self.options.tool_choice == "required" else {}
            try:
                return model.bind_tools([*workspace, submit], **extra), "tool"
            except NotImplementedError:
                return model, "text"  # no tool calling: the reply comes as a JSON object
        chat = model.bind_tools(workspace) if workspace else model
        if mode == "json_schema":
            if provider == "ollama":
                chat = chat.bind(format=shape)
            else:
                # As the request body's own field: langchain-openai's `response_format`
                # would parse the reply itself and insist on strict tool schemas.
                # llama-cpp-python's server knows only json_object (with a schema).
                # The model's own extra_body (max_tokens for a local server) is kept.
                chat = chat.bind(
                    extra_body={
                        **(getattr(model, "extra_body", None) or {}),
                        "response_format": {"type": "json_object", "schema": shape}
                        if self._json_object
                        else {
                            "type": "json_schema",
                            "json_schema": {"name": "reply", "schema": shape, "strict": False},
                        },
                    }
                )
        return chat, "text"

    def _refused_json_schema(self, exc: AgentCallError) -> bool:
        """Did the server refuse the json_schema response format (and only that)?"""
        return (
            self.options.reply_mode == "json_schema"
            and not self._json_object
            and not isinstance(exc, BudgetExceeded)
            and "json_object" in exc.message
            and "response_format" in exc.message
        )

    def _tools(self, role: str, request: AgentRequest) -> tuple[list[Any], Any]:
        """The developer's tools on its desk (its worktree where the session has a
        repository, else the shared workspace) and their shared context."""
        if role != "developer":
            return [], None
        from orchestrator.skills import Desk

        desk: Desk = request.desk or Desk(self.workspace(request.session_id))
        tools, context = desk.tools(request.agent)
        return list(tools), context

    @staticmethod
    def _invoke(chat: Any, conversation: list[Any], agent: str, budget: _TurnBudget) -> Any:
        """One model call. A rate limit (HTTP 429) that outlasts the client's own retries
        is waited out here, in this agent's thread only (Retry-After, else a growing
        backoff with jitter), for as long as the turn has time left; the other agents'
        calls go on meanwhile."""
        refusals = 0
        while True:
            seconds = budget.call_seconds()
            try:
                return _within(seconds, lambda: chat.invoke(conversation))
            except Exception as exc:
                if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
                    raise BudgetExceeded(
                        f"the model call for {agent} took longer than {seconds:.0f} s "
                        "(call_timeout, or what was left of turn_timeout)"
                    ) from None
                wait = rate_limit_wait(exc, refusals)
                if wait is not None and wait < budget.seconds_left():
                    refusals += 1
                    log.info(
                        "%s: rate limited by the provider; trying again in %.1f s", agent, wait
                    )
                    time.sleep(wait)
                    continue
                said = ""
                if wait is not None:
                    said = (
                        f" (rate limited after {refusals} waits; the next, {wait:.0f} s, would "
                        "pass the turn's turn_timeout: lower --max-parallel)"
                    )
                raise AgentCallError(
                    f"the model call for {agent} failed: {type(exc).__name__}: "
                    + clip(mask_secrets(str(exc)), _ERROR_CHARS)  # kept and shown
                    + _server_of(chat, exc)
                    + said
                ) from exc  # the provider's errors: network, auth, rate limits


def _server_of(chat: Any, exc: BaseException) -> str:
    """' (server: URL)' for an error that did not reach the model server ("Connection
    error." names none), the URL masked; '' for others, or a chat model without one."""
    if "Connection" not in type(exc).__name__ and "connect" not in str(exc).lower():
        return ""
    for name in ("openai_api_base", "anthropic_api_url", "base_url"):
        url = getattr(chat, name, None)
        if isinstance(url, str) and url:
            return f" (server: {mask_url(url)}; is it running and reachable from here?)"
    return ""


class _TurnBudget:
    """Counts one agent turn against its budgets; raises when one is spent."""

    def __init__(self, options: ModelOptions, agent: str, tokens_before: int) -> None:
        self.options = options
        self.agent = agent
        self.tokens_before = tokens_before
        self.started = time.monotonic()
        self.model_calls = 0
        self.tool_calls = 0
        self.tokens = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}

    def _left(self) -> float:
        return self.options.turn_timeout - (time.monotonic() - self.started)

    def before_model_call(self) -> None:
        options = self.options
        if self.model_calls >= options.max_model_calls:
            raise BudgetExceeded(
                f"{self.agent} made {self.model_calls} model calls in one turn without a "
                f"valid reply (max_model_calls={options.max_model_calls})"
            )
        if self._left() <= 0:
            raise BudgetExceeded(
                f"{self.agent}'s turn ran past turn_timeout={options.turn_timeout:g} s"
            )
        used = self.tokens_before + self.tokens["total_tokens"]
        if options.max_session_tokens is not None and used >= options.max_session_tokens:
            raise TokenBudgetExceeded(
                f"the session used {used:,} tokens, its budget is "
                f"max_session_tokens={options.max_session_tokens:,}"
            )

    def seconds_left(self) -> float:
        return self._left()

    def call_seconds(self) -> float:
        return max(0.001, min(self.options.call_timeout, self._left()))

    def count(self, answer: Any) -> None:
        self.model_calls += 1
        usage = getattr(answer, "usage_metadata", None) or {}
        for name in self.tokens:
            self.tokens[name] += int(usage.get(name) or 0)

    def count_unanswered(self) -> None:
        """A call the client gave up on: it is counted, and so are the output tokens the
        server may still generate for it (up to max_output_tokens; it reports none)."""
        self.model_calls += 1
        self.tokens["output_tokens"] += self.options.max_output_tokens
        self.tokens["total_tokens"] += self.options.max_output_tokens

    def count_tool_call(self) -> None:
        self.tool_calls += 1
        if self.tool_calls > self.options.max_tool_calls:
            raise BudgetExceeded(
                f"{self.agent} called tools {self.tool_calls} times in one turn "
                f"(max_tool_calls={self.options.max_tool_calls})"
            )

    def check_cut(self, answer: Any) -> None:
        """A reply that could not be used because the output hit max_output_tokens."""
        metadata = getattr(answer, "response_metadata", None) or {}
        reason = (
            metadata.get("finish_reason")
            or metadata.get("stop_reason")
            or metadata.get("done_reason")
        )
        if reason in _CUT:
            raise BudgetExceeded(
                f"{self.agent}'s reply was cut at max_output_tokens="
                f"{self.options.max_output_tokens} before it was complete"
            )

    def usage(self) -> dict[str, int]:
        return {**self.tokens, "model_calls": self.model_calls}


def rate_limit_wait(exc: BaseException, refusals: int) -> float | None:
    """Seconds to wait before calling again after `exc`, if it is a rate limit (HTTP 429:
    the openai, anthropic and ollama clients' errors carry `status_code`); None for any
    other failure. The provider's Retry-After (seconds) when it gives one, else 1, 2, 4
    ... up to MAX_BACKOFF seconds, each with jitter so that agents refused together do not
    come back together."""
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    if status != 429:
        return None
    headers = getattr(response, "headers", None) or {}
    try:
        asked = float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        asked = 0.0  # absent, or an HTTP date: our own backoff
    if math.isfinite(asked) and asked > 0:
        return asked
    return min(MAX_BACKOFF, 2.0**refusals) * random.uniform(0.5, 1.0)


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """`call()`, or TimeoutError after `seconds`. The call runs on a daemon thread, so a
    reply that never ends cannot hold the session (or the process's exit) with it."""
    box: dict[str, Any] = {}
    finished = threading.Event()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = context.run(call)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=target, name="model-call", daemon=True).start()
    if not finished.wait(seconds):
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["value"]


def _said(message: Any) -> str:
    """What a model's answer said: its text, and its tool calls as name(arguments)."""
    calls = [
        f"{c['name']}({json.dumps(c.get('args'), ensure_ascii=False)})"
        for c in getattr(message, "tool_calls", None) or []
    ]
    return " ".join([_text(message), *calls]).strip() or "(nothing)"


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))
