"""Fake chat models for the LLM backend: scripted AI messages, tool calls included.

GenericFakeChatModel (langchain-core) replays messages but cannot bind tools; the fake
here can, and it keeps every conversation it was sent so tests can check what the agent
saw. No network, no API key.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

_ids = itertools.count(1)


def submit(**reply: Any) -> AIMessage:
    """An AI message that submits `reply` through the submit_reply tool."""
    return AIMessage(
        "", tool_calls=[{"name": "submit_reply", "args": reply, "id": f"c{next(_ids)}"}]
    )


def tool(name: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{next(_ids)}"}])


class ToolCallingFake(GenericFakeChatModel):
    """Replays `messages` in order; `bind_tools` is accepted (and recorded)."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Iterable[Any], **kwargs: Any) -> ToolCallingFake:
        self.bound = [getattr(t, "name", str(t)) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class TextOnlyFake(GenericFakeChatModel):
    """A model without tool calling (bind_tools raises NotImplementedError)."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def fake(messages: Iterable[AIMessage | str], *, tools: bool = True) -> Any:
    cls = ToolCallingFake if tools else TextOnlyFake
    return cls(messages=iter(list(messages)))
