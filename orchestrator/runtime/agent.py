"""The one interface every agent backend implements (scripted, LLM; see
orchestrator.runtime.backends)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.domain.replies import AgentReply

__all__ = ["AgentRequest", "AgentTurn", "Clarification", "AgentBackend"]


@dataclass(frozen=True)
class Clarification:
    """The session's question and the user's answer (None when declined)."""

    question: str
    response: str | None


@dataclass(frozen=True)
class AgentRequest:
    """Everything an agent gets for one call.

    `instruction` is the orchestrator's message for this call: the auto-fallback text, or
    the user's answer to this agent's question. `tasks` carries the current round's plan
    and the developers' results, with the files each changed (what the PM reviews).
    `history` is this agent's conversation so far (LangChain messages), kept in the graph
    state so that a resumed session, in any process, continues the same conversation.
    """

    agent: str
    session_id: str
    task: str
    round: int
    call: int
    instruction: str | None = None
    clarification: Clarification | None = None
    assignment: dict[str, Any] | None = None
    tasks: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    history: tuple[Any, ...] = field(default_factory=tuple)
    tokens_used: int = 0  # by the session's recorded turns so far (for a token budget)
    # A developer's desk (orchestrator.skills.Desk): its worktree and how its commands
    # run. None: the backend's own workspace, and commands refused.
    desk: Any = None


@dataclass(frozen=True)
class AgentTurn:
    """What one call produced: the reply, the messages it added to the agent's
    conversation (LangChain messages; none for scripted agents), the workspace files it
    wrote (relative paths) and the commands it ran; for chat models, the tokens the turn
    used (input_tokens, output_tokens, total_tokens, model_calls) and notes on how the
    reply was read (fields ignored, shapes normalised)."""

    reply: AgentReply
    messages: tuple[Any, ...] = ()
    files: tuple[str, ...] = ()
    usage: dict[str, int] | None = None
    notes: tuple[str, ...] = ()
    commands: tuple[dict[str, Any], ...] = ()  # the commands run, as `command` events keep them


class AgentBackend(Protocol):
    """Answers agent calls. `describe()` is what the store keeps to rebuild it on resume."""

    def respond(self, request: AgentRequest) -> AgentTurn: ...

    def describe(self) -> dict[str, Any]: ...
