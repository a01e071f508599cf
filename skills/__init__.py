"""Tools that agents call: a base class with one result shape, a registry, workspace files.

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
from .files import WORKSPACE_TOOLS
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
]
