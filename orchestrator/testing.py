"""Test doubles for flows built on the orchestrator: chat models that reply from a script,
with no network and no API key (as pydantic-ai ships `TestModel`).

    from orchestrator import Sessions
    from orchestrator.testing import fake_model, submit

    pm = fake_model([submit(status="COMPLETE", summary="nothing to do")])
    doc = Sessions(db_url).start("Tidy the README", models={"pm": pm, "developer": pm})
    assert doc["status"] == "completed"
    assert pm.seen  # every conversation the model was sent

A reply is a dict (the agent's reply, given through the `submit_reply` tool: `submit`), an
AI message (a tool call: `tool_call`), or a text (for a model without tool calling, or a
reply in JSON text). A model that runs out of replies raises, and the agent call fails.
docs/testing.md shows a whole flow, a question and its answer included.

A model given as an object is kept by the process that started the session: resume the
session from that process (a new process has no such object and is refused, exit 2).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

__all__ = ["FakeChatModel", "TextOnlyChatModel", "fake_model", "submit", "tool_call"]

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _call_id() -> str:
    with _ids_lock:
        return f"call_{next(_ids)}"


def submit(**reply: Any) -> AIMessage:
    """An AI message giving `reply` (status and its fields, contract section 2) through the
    `submit_reply` tool, as a tool-calling model gives an agent's reply."""
    return tool_call("submit_reply", **reply)


def tool_call(name: str, **args: Any) -> AIMessage:
    """An AI message calling the tool `name` (a developer's `write_file`, `run_command`, ...)
    with `args`; the tool runs and its result is the model's next input."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": _call_id()}])


class _Recording(GenericFakeChatModel):
    """Replays `messages` in order; `seen`: each conversation it was sent, in order."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class TextOnlyChatModel(_Recording):
    """A model without tool calling: `bind_tools` raises NotImplementedError, as it does
    for such a model, so the agents ask for their reply as JSON text."""


class FakeChatModel(_Recording):
    """A tool-calling model: `bind_tools` is accepted and the names of the tools offered
    are kept in `bound`."""

    bound: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Iterable[Any], **kwargs: Any) -> FakeChatModel:
        self.bound = [getattr(t, "name", str(t)) for t in tools]
        return self


def _message(reply: AIMessage | Mapping[str, Any] | str) -> AIMessage | str:
    if isinstance(reply, Mapping):
        return submit(**reply)
    return reply


def fake_model(
    replies: Iterable[AIMessage | Mapping[str, Any] | str], *, tools: bool = True
) -> FakeChatModel | TextOnlyChatModel:
    """A chat model that gives `replies` in order, one a call: a dict is an agent's reply
    (`submit`), an AIMessage is given as it is (`tool_call`), a text is a text reply.
    `tools=False`: a model without tool calling."""
    script = iter([_message(r) for r in replies])
    return FakeChatModel(messages=script) if tools else TextOnlyChatModel(messages=script)
