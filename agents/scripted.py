"""Scripted agents: each call takes the next reply from the scenario (no model is called)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from orchestrator.domain.replies import parse_reply
from orchestrator.errors import AgentReplyError, ScriptExhausted
from orchestrator.runtime.agent import AgentRequest, AgentTurn

__all__ = ["ScriptedBackend"]


class ScriptedBackend:
    """Replies from a scenario's `agents` mapping.

    `developer-N` takes from its own list when it has one, any other developer from the
    shared `developer` list, in call order. The engine records every reply before the next
    call, so a new process resumes the cursors from `replies_so_far` (recorded replies per
    agent) and a crash between a call and its record replays the same reply.
    """

    # Replies depend on call order; the engine runs parallel developers one at a time.
    sequential = True

    def __init__(
        self, agents: Mapping[str, list[dict[str, Any]]], *, replies_so_far: Mapping[str, int]
    ) -> None:
        self.agents = {name: list(replies) for name, replies in agents.items()}
        self._lock = threading.Lock()
        self._cursor: Counter[str] = Counter()
        for agent, count in replies_so_far.items():
            self._cursor[self.source(agent)] += count

    def source(self, agent: str) -> str:
        if agent in self.agents or not agent.startswith("developer-"):
            return agent
        return "developer"

    def respond(self, request: AgentRequest) -> AgentTurn:
        source = self.source(request.agent)
        replies = self.agents.get(source, [])
        with self._lock:
            index = self._cursor[source]
            if index >= len(replies):
                raise ScriptExhausted(request.agent, source, len(replies))
            self._cursor[source] += 1
        try:
            return AgentTurn(parse_reply(request.agent, replies[index]))
        except ValueError as exc:  # a scenario validated on load cannot get here
            raise AgentReplyError(f"{source}[{index}] is not a valid reply: {exc}") from exc

    def describe(self) -> dict[str, Any]:
        return {"kind": "script", "agents": self.agents}
