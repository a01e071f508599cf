"""What every tool shares: the one result shape, input validation, error wrapping, a registry.

A tool's failures that the model can act on (a bad path, a missing file) are `ToolError`s
and go back to the model as a `ToolResult` with `ok=False`, and so does any OSError a tool
did not word itself (a path the file system refuses: a name too long, a permission): it
says what the file system said, never crashes the run. Any other exception is a bug and
keeps its traceback.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .workspace import ToolError, Workspace

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool, ToolException

__all__ = [
    "ToolError",
    "ToolResult",
    "ToolContext",
    "Tool",
    "register",
    "registry",
    "make_tools",
]


class ToolResult(BaseModel):
    """The one result shape of every tool; `to_text()` is what the model reads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    ok: bool
    output: str
    data: dict[str, Any] = {}
    error: str | None = None

    def to_text(self) -> str:
        """Compact JSON for a ToolMessage."""
        return self.model_dump_json(exclude_none=True)


@dataclass
class ToolContext:
    """What a tool call may touch: the session's workspace (a developer's worktree where
    the session has a repository), who is calling, and how its commands run."""

    workspace: Workspace
    agent: str
    # Workspace-relative POSIX paths this agent wrote during this turn; tools only add.
    changed: set[str] = field(default_factory=set)
    # How `run_command` runs (skills.commands.Commands); None: refused, no repository.
    commands: Any = None
    # The commands run this turn, as their `command` events keep them; tools only add.
    ran: list[dict[str, Any]] = field(default_factory=list)


class Tool(ABC):
    """A tool a model can call: subclasses set `name`, `description`, `Input` and `run`.

    `Input` is a pydantic model with `extra="forbid"` and a description on every field; its
    JSON schema is what the model sees.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    @abstractmethod
    def run(self, args: Any) -> ToolResult:
        """Do the work for validated `args` (an `Input`); raise ToolError for the model."""

    def invoke(self, raw: Mapping[str, Any]) -> ToolResult:
        """Validate `raw`, run, and turn invalid arguments and ToolErrors into results."""
        try:
            args = self.Input.model_validate(raw)
        except ValidationError as e:
            return self.failure(_describe_invalid(e))
        try:
            return self.run(args)
        except ToolError as e:
            return self.failure(e.message)
        except OSError as e:  # the file system's refusal, not a bug (module docstring)
            why = e.strerror or type(e).__name__  # not str(e): it names host paths
            return self.failure(f"{self.name} failed: {why}")

    def result(self, output: str, **data: Any) -> ToolResult:
        """A successful result of this tool."""
        return ToolResult(tool=self.name, ok=True, output=output, data=data)

    def failure(self, error: str) -> ToolResult:
        """A failed result of this tool."""
        return ToolResult(tool=self.name, ok=False, output="", error=error)

    def as_langchain(self) -> BaseTool:
        """This tool as a LangChain StructuredTool, for `bind_tools` and ToolMessages.

        It never raises for the model's mistakes: the content is always `to_text()`, and a
        failed result also marks the ToolMessage `status="error"`.
        """
        # Imported here so that `skills` loads without LangChain's import cost.
        from langchain_core.tools import StructuredTool, ToolException

        def call(**kwargs: Any) -> str:
            result = self.invoke(kwargs)
            if not result.ok:
                raise ToolException(result.to_text())
            return result.to_text()

        def on_invalid(e: ValidationError) -> str:
            return self.failure(_describe_invalid(e)).to_text()

        def on_error(e: ToolException) -> str:
            return str(e.args[0])

        return StructuredTool.from_function(
            func=call,
            name=self.name,
            description=self.description,
            args_schema=self.Input,
            infer_schema=False,
            handle_validation_error=on_invalid,
            handle_tool_error=on_error,
        )


def _describe_invalid(e: ValidationError) -> str:
    """One line per problem, `field: message`, for the model to fix its call."""
    lines = []
    for problem in e.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "(arguments)"
        lines.append(f"{where}: {problem['msg']}")
    return "invalid arguments:\n" + "\n".join(lines)


# Tool names as the chat APIs accept them (OpenAI: ^[a-zA-Z0-9_-]{1,64}$).
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_REGISTRY: dict[str, type[Tool]] = {}
T = TypeVar("T", bound=type[Tool])


def register(cls: T) -> T:
    """Class decorator: make a tool available to `make_tools` under its `name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TypeError(f"{cls.__qualname__}.name must match {_NAME.pattern}, got {name!r}")
    if not isinstance(getattr(cls, "description", None), str):
        raise TypeError(f"{cls.__qualname__} has no description")
    if not (isinstance(getattr(cls, "Input", None), type) and issubclass(cls.Input, BaseModel)):
        raise TypeError(f"{cls.__qualname__}.Input must be a pydantic model")
    if _REGISTRY.get(name, cls) is not cls:
        raise ValueError(f"a tool named {name!r} is already registered ({_REGISTRY[name]!r})")
    _REGISTRY[name] = cls
    return cls


def registry() -> dict[str, type[Tool]]:
    """A copy of the registered tools by name."""
    return dict(_REGISTRY)


def make_tools(names: Iterable[str], context: ToolContext) -> list[Tool]:
    """Instances of the named tools, in order, all sharing `context`."""
    tools: list[Tool] = []
    for name in names:
        if name not in _REGISTRY:
            known = ", ".join(sorted(_REGISTRY)) or "(none)"
            raise KeyError(f"unknown tool {name!r}; known tools: {known}")
        if any(tool.name == name for tool in tools):
            raise ValueError(f"tool {name!r} is listed twice")
        tools.append(_REGISTRY[name](context))
    return tools
