"""`run_command`: a developer runs a shell command line in its worktree, in the sandbox.

The model gets the exit code, the tail of stdout and stderr, the duration and the sandbox
that ran it; the session's log keeps each command as a `command` event (a bounded amount
of its output). Without a repository, or where the sandbox cannot run, the tool refuses
with a message that says why and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .base import Tool, ToolError, ToolResult, register
from .sandbox import CommandResult, Confinement, Sandbox

__all__ = [
    "Commands",
    "RunCommand",
    "MODEL_OUTPUT_CHARS",
    "LOG_OUTPUT_CHARS",
    "NO_REPOSITORY",
]

MODEL_OUTPUT_CHARS = 8_000  # of a command's output, what the model reads (the tail)
LOG_OUTPUT_CHARS = 16_000  # of a command's output, what its event keeps (the tail)
NO_REPOSITORY = (
    "commands need a git repository: run the session with --workdir inside a git "
    "repository (or give a scenario a `repo:`), so each developer works in a worktree of "
    "its own where commands can run"
)


@dataclass(frozen=True)
class Commands:
    """How one developer's commands run: the sandbox and where (its worktree), or why
    they are refused (`refusal`)."""

    sandbox: Sandbox | None
    where: Confinement | None
    refusal: str | None = None

    @classmethod
    def refused(cls, why: str) -> Commands:
        return cls(None, None, why)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self.sandbox is None or self.where is None:
            raise ToolError(self.refusal or NO_REPOSITORY)
        return self.sandbox.run(command, self.where, timeout=timeout)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@register
class RunCommand(Tool):
    name = "run_command"
    description = (
        "Run a shell command line (sh -c) in your worktree, e.g. 'python -m pytest -q' or "
        "'ls src': it returns the exit code, the tail of stdout and stderr, and the "
        "duration. It runs in a sandbox: only your worktree is writable, there is no "
        "network, and it is killed at its timeout."
    )

    class Input(_Args):
        command: str = Field(
            min_length=1, max_length=10_000, description="The shell command line to run."
        )
        timeout_s: float | None = Field(
            None,
            gt=0,
            le=3600,
            description="Seconds it may run (at most the session's command timeout).",
        )

    def run(self, args: Input) -> ToolResult:
        commands = self.context.commands
        if commands is None:
            raise ToolError(NO_REPOSITORY)
        if not isinstance(commands, Commands):  # pragma: no cover (wired by the runtime)
            raise TypeError(f"ToolContext.commands is {type(commands).__name__}")
        result = commands.run(args.command, args.timeout_s)
        self.context.ran.append(result.record(LOG_OUTPUT_CHARS))
        for_model = result.record(MODEL_OUTPUT_CHARS)
        status = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        output = f"{status} after {result.duration_s:.2f} s ({result.sandbox} sandbox)\n"
        output += str(for_model["output"])
        data: dict[str, Any] = {
            k: for_model[k] for k in ("exit_code", "timed_out", "duration_s", "sandbox", "cut")
        }
        return self.result(output, **data)
