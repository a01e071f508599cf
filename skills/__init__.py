"""Tools that agents call: a base class with one result shape, a registry, workspace files,
commands in a sandbox.

Importing the package registers every tool, so `make_tools` knows them all.
"""

from .base import (
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    make_tools,
    register,
    registry,
)
from .commands import Commands
from .desk import Desk, play_calls
from .files import DEVELOPER_TOOLS, WORKSPACE_TOOLS
from .sandbox import Confinement, Limits, Sandbox, SandboxUnavailable
from .workspace import Workspace

__all__ = [
    "Tool",
    "ToolResult",
    "ToolContext",
    "ToolError",
    "Workspace",
    "register",
    "registry",
    "make_tools",
    "WORKSPACE_TOOLS",
    "DEVELOPER_TOOLS",
    "Commands",
    "Desk",
    "play_calls",
    "Confinement",
    "Limits",
    "Sandbox",
    "SandboxUnavailable",
]
