"""Chat-model agents: any LangChain chat model, replies validated into the contract's models.

One loop serves every model. Tools are bound when the model supports tool calling: the
developers' workspace tools, and `submit_reply`, whose arguments are the reply. A model
without tool calling answers with a JSON object instead. Either way the reply is validated
into the same pydantic models the scripted backend uses; an invalid one is sent back with
the validation errors, at most `max_retries` times, and then the session fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.domain.replies import AgentReply, parse_reply
from orchestrator.errors import AgentCallError, AgentReplyError
from orchestrator.runtime.agent import AgentRequest, AgentTurn
from orchestrator.scenario import format_validation_error

from . import models as _models
from .prompts import system_prompt, turn_message

__all__ = ["LLMBackend", "PmSubmit", "DeveloperSubmit"]

SUBMIT = "submit_reply"


class _Option(BaseModel):
    label: str
    description: str | None = None
    recommended: bool | None = Field(None, description="at most one option")


class _TaskArg(BaseModel):
    title: str
    description: str | None = None


class _Submit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str | None = Field(
        None, description="NEEDS_CLARIFICATION: one question, with its context"
    )
    kind: Literal["free_text", "single_select", "multi_select"] | None = None
    options: list[_Option] | None = Field(None, description="the choices, for selects")
    allow_other: bool | None = Field(None, description="accept an answer not in options")
    reason: str | None = Field(None, description="why a choice is needed / why blocked")
    context: str | None = Field(None, description="what the user needs to know to answer")
    default: str | None = Field(None, description="the safe choice without an answer")
    urgency: Literal["low", "medium", "high"] | None = None
    ambiguity: Literal["target", "action", "parameter", "intent"] | None = Field(
        None, description="what is unclear: which target, which action, a missing value, intent"
    )
    uncertainty: int | None = Field(
        None, ge=0, le=100, description="how unsure you are without an answer (0-100)"
    )
    assumptions: list[str] | None = Field(
        None, description="every assumption you made (with any status but NEEDS_CLARIFICATION)"
    )


class PmSubmit(_Submit):
    """Submit the PM's reply to the orchestrator."""

    status: Literal["NEEDS_CLARIFICATION", "PLANNED", "COMPLETE"]
    tasks: list[_TaskArg] | None = Field(None, description="PLANNED: the tasks")
    summary: str | None = Field(None, description="COMPLETE: what was delivered")


class DeveloperSubmit(_Submit):
    """Submit the developer's reply to the orchestrator."""

    status: Literal["NEEDS_CLARIFICATION", "DONE", "BLOCKED"]
    summary: str | None = Field(None, description="DONE: what you did")


class LLMBackend:
    """PM and developers on chat models; `models` maps role (pm, developer) to a spec."""

    sequential = False

    def __init__(
        self,
        models: Mapping[str, str],
        *,
        prompts: str | None = None,
        workdir: str | None = None,
        max_retries: int = 2,
        max_steps: int = 30,
    ) -> None:
        self.models = dict(models)
        self.prompts = Path(prompts) if prompts else None
        self.workdir = workdir
        self.max_retries = max_retries
        self.max_steps = max_steps
        self._chat: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "llm",
            "models": self.models,
            "prompts": str(self.prompts) if self.prompts else None,
            "workdir": self.workdir,
            "max_retries": self.max_retries,
            "max_steps": self.max_steps,
        }

    def workspace(self, session_id: str) -> Path:
        """The session's workspace: --workdir, else <data dir>/workspaces/<session id>."""
        if self.workdir:
            return Path(self.workdir)
        from platformdirs import user_data_dir

        return Path(user_data_dir("orchestrator", appauthor=False)) / "workspaces" / session_id

    def _model(self, role: str) -> Any:
        spec = self.models[role]
        if spec not in self._chat:
            self._chat[spec] = _models.init_model(spec)
        return self._chat[spec]

    def respond(self, request: AgentRequest) -> AgentTurn:
        from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
        from langchain_core.tools import StructuredTool

        role = "pm" if request.agent == "pm" else "developer"
        schema: type[_Submit] = PmSubmit if role == "pm" else DeveloperSubmit
        new: list[Any] = []
        if not request.history:
            new.append(SystemMessage(system_prompt(role, self.prompts)))
        new.append(HumanMessage(turn_message(request)))
        tools, changed = self._tools(role, request)
        submit = StructuredTool.from_function(
            func=lambda **_: "received",
            name=SUBMIT,
            description=schema.__doc__ or SUBMIT,
            args_schema=schema,
        )
        model = self._model(role)
        try:
            chat = model.bind_tools([*(t.as_langchain() for t in tools), submit])
        except NotImplementedError:
            chat = model  # no tool calling: the reply comes as a JSON object
        by_name = {t.name: t for t in tools}
        failures: list[str] = []
        conversation = [*request.history, *new]
        for _ in range(self.max_steps):
            answer = self._invoke(chat, conversation, request.agent)
            new.append(answer)
            conversation.append(answer)
            if not getattr(answer, "tool_calls", None):
                reply, problem = _parse_text(request.agent, _text(answer))
                if reply is not None:
                    return AgentTurn(reply, tuple(new), tuple(sorted(changed)))
                failures.append(problem)
                self._check_failures(request.agent, failures)
                feedback = HumanMessage(_feedback(problem, tools=chat is not model))
                new.append(feedback)
                conversation.append(feedback)
                continue
            accepted: AgentReply | None = None
            for call in answer.tool_calls:
                ok = True
                if call["name"] == SUBMIT and accepted is None:
                    accepted, problem = _parse_args(request.agent, call["args"])
                    ok = accepted is not None
                    text = "accepted" if ok else _feedback(problem, tools=True)
                    if not ok:
                        failures.append(problem)
                elif call["name"] in by_name:
                    result = by_name[call["name"]].invoke(call["args"])
                    ok, text = result.ok, result.to_text()
                else:
                    ok = False
                    text = f"no tool named {call['name']!r}; use {sorted([*by_name, SUBMIT])}"
                message = ToolMessage(
                    text,
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="success" if ok else "error",
                )
                new.append(message)
                conversation.append(message)
            if accepted is not None:
                return AgentTurn(accepted, tuple(new), tuple(sorted(changed)))
            self._check_failures(request.agent, failures)
        raise AgentReplyError(
            f"{request.agent} did not submit a reply within {self.max_steps} steps"
        )

    def _tools(self, role: str, request: AgentRequest) -> tuple[list[Any], set[str]]:
        if role != "developer":
            return [], set()
        from orchestrator.skills import WORKSPACE_TOOLS, ToolContext, Workspace, make_tools

        context = ToolContext(
            workspace=Workspace(self.workspace(request.session_id)),
            agent=request.agent,
            changed=set(),
        )
        return make_tools(WORKSPACE_TOOLS, context), context.changed

    def _check_failures(self, agent: str, failures: list[str]) -> None:
        if len(failures) > self.max_retries:
            raise AgentReplyError(
                f"{agent} gave no valid reply in {len(failures)} attempts "
                f"(max_retries={self.max_retries}); last problem: {failures[-1]}"
            )

    @staticmethod
    def _invoke(chat: Any, conversation: list[Any], agent: str) -> Any:
        try:
            return chat.invoke(conversation)
        except Exception as exc:  # the provider's errors: network, auth, rate limits
            raise AgentCallError(
                f"the model call for {agent} failed: {type(exc).__name__}: {exc}"
            ) from exc


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _parse_args(agent: str, args: Mapping[str, Any]) -> tuple[AgentReply | None, str]:
    data = {k: v for k, v in args.items() if v is not None}
    try:
        return parse_reply(agent, data), ""
    except ValidationError as exc:
        return None, format_validation_error(exc)


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def _parse_text(agent: str, text: str) -> tuple[AgentReply | None, str]:
    body = _FENCE.sub("", text.strip()).strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None, "the reply contains no JSON object"
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        return None, f"the reply is not valid JSON: {exc.msg} (line {exc.lineno})"
    if not isinstance(data, dict):
        return None, "the reply must be a JSON object"
    return _parse_args(agent, data)


def _feedback(problem: str, *, tools: bool) -> str:
    how = f"Call {SUBMIT} again" if tools else "Reply again with one JSON object"
    return f"Your reply was not valid:\n{problem}\n{how}, fixing exactly these problems."
