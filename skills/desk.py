"""A developer's desk for one turn: the folder its tools work in and how its commands run.

The runtime lays one out per developer turn (its worktree where the session has a
repository, else the session's shared workspace); chat-model agents and scripted ones
(a scenario's `tools:`) both work through it, so a scenario plays the same tools, sandbox
and events as a model does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import Tool, ToolContext, make_tools
from .commands import Commands
from .files import DEVELOPER_TOOLS
from .workspace import Workspace

__all__ = ["Desk", "play_calls"]


@dataclass(frozen=True)
class Desk:
    """Where one developer works: `root` (its worktree, or the shared workspace), how its
    commands run (None: refused, no repository), and hook folders its tools never write."""

    root: Path
    commands: Commands | None = None
    hooks: tuple[str, ...] = ()

    def tools(self, agent: str) -> tuple[list[Tool], ToolContext]:
        """The developer tools, sharing one context (what they changed and ran)."""
        context = ToolContext(
            workspace=Workspace(self.root, hooks=self.hooks), agent=agent, commands=self.commands
        )
        return make_tools(DEVELOPER_TOOLS, context), context


def play_calls(
    desk: Desk, agent: str, calls: Sequence[Mapping[str, Any]]
) -> tuple[set[str], list[dict[str, Any]]]:
    """Play a scenario's scripted tool calls (`[{tool: args}, ...]`) in order; the files
    they wrote and the commands they ran. A call that fails is the model's concern, not
    the run's: it goes on, as a model would."""
    tools, context = desk.tools(agent)
    by_name = {tool.name: tool for tool in tools}
    for call in calls:
        ((name, args),) = call.items()
        by_name[name].invoke(args)
    return context.changed, context.ran
