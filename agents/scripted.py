"""Scripted agents: each call takes the next reply from the scenario (no model is called)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.domain.replies import parse_reply
from orchestrator.errors import AgentReplyError, ScriptExhausted
from orchestrator.runtime.agent import AgentRequest, AgentTurn
from orchestrator.scenario.format import without_tools

__all__ = ["ScriptedBackend", "shared_workspace"]


def shared_workspace(session_id: str) -> Path:
    """The developers' shared folder of a session without a repository (as a chat-model
    session without --workdir has): <data dir>/workspaces/<session id>."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("orchestrator", appauthor=False)) / "workspaces" / session_id


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
        scripted = replies[index]
        try:
            reply = parse_reply(request.agent, without_tools(scripted))
        except ValueError as exc:  # a scenario validated on load cannot get here
            raise AgentReplyError(f"{source}[{index}] is not a valid reply: {exc}") from exc
        if not scripted.get("tools"):
            return AgentTurn(reply)
        # The scripted tool calls, played through the same tools (and sandbox) as a
        # model's, before the reply is given.
        from orchestrator.skills import Desk, play_calls

        desk = request.desk or Desk(shared_workspace(request.session_id))
        changed, ran = play_calls(desk, request.agent, scripted["tools"])
        return AgentTurn(reply, files=tuple(sorted(changed)), commands=tuple(ran))

    def describe(self) -> dict[str, Any]:
        return {"kind": "script", "agents": self.agents}
