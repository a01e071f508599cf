"""A session's settings: the one place their defaults and limits live.

Scenario files (`settings:`), the CLI's options, the session API and every other edge
validate through `Settings`; the CLI's help shows the defaults from here.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["Settings", "MAX_PARALLEL", "MAX_TIMEOUT_SECONDS", "default_of"]

# A deadline further away than this is a mistake (1e12 s, inf), not a wish: refuse it.
MAX_TIMEOUT_SECONDS = 30 * 24 * 3600.0
# One thread per running agent: more than this many at once is a typo, not a plan.
MAX_PARALLEL = 1000

OnTimeout = Literal["wait", "proceed", "cancel"]
OnLateAnswer = Literal["reconcile", "record"]
SandboxChoice = Literal["auto", "bwrap", "none"]


class Settings(BaseModel):
    """How one session runs. Unset fields take the defaults below."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_rounds: Annotated[
        int, Field(strict=True, ge=1, le=100, description="Planning rounds allowed.")
    ] = 5
    max_fallbacks: Annotated[
        int,
        Field(
            strict=True,
            ge=0,
            le=100,
            description="Auto-fallbacks an agent may ignore before the session fails.",
        ),
    ] = 2
    uncertainty_threshold: Annotated[
        int,
        Field(
            strict=True,
            ge=0,
            le=100,
            description="Questions from agents less uncertain than this (0-100) are not "
            "asked; the agent proceeds with its default.",
        ),
    ] = 70
    max_question_parts: Annotated[
        int,
        Field(
            strict=True,
            ge=1,
            le=12,
            description="Parts one question may have: asks raised in the same round are "
            "merged into one multi-part question (default 4, as many as a question "
            "tool such as Claude Code's AskUserQuestion takes); further asks take their "
            "defaults. 1: only the first ask is surfaced, the others get the fallback "
            "once it is resolved (the contract's section 1).",
        ),
    ] = 4
    max_parallel: Annotated[
        int,
        Field(
            strict=True,
            ge=1,
            le=MAX_PARALLEL,
            description="Agents of one round that run at once (developers wait on their "
            "models, so this is not limited by the machine's CPU count). Scripted agents "
            "run one at a time whatever this says: their replies are in call order.",
        ),
    ] = 8
    timeout: Annotated[
        float | None,
        Field(
            description="Seconds the question waits for an answer ('none': no deadline).",
        ),
    ] = 300.0
    on_timeout: Annotated[
        OnTimeout,
        Field(
            description="When the deadline passes: wait (stay paused and answerable), "
            "proceed (the asker takes its default), cancel.",
        ),
    ] = "wait"
    on_late_answer: Annotated[
        OnLateAnswer,
        Field(
            description="An answer that comes after the question was declined or timed "
            "out: reconcile (the PM gets it with the assumptions it contradicts and "
            "re-plans; an ended session waits for `resume --reconcile`), record (only "
            "recorded and compared).",
        ),
    ] = "reconcile"

    # -- developers that run code (contract section 9) -----------------------------------
    sandbox: Annotated[
        SandboxChoice,
        Field(
            description="Where developers' commands and checks run: auto (bubblewrap "
            "where it runs here, else commands are refused saying why), bwrap, none "
            "(unconfined: the user's explicit choice, shown as a warning).",
        ),
    ] = "auto"
    allow_network: Annotated[
        bool,
        Field(strict=True, description="Let commands and checks reach the network."),
    ] = False
    command_timeout: Annotated[
        float,
        Field(
            gt=0,
            le=3600,
            description="Seconds one command or check may run before its process group is killed.",
        ),
    ] = 120.0
    checks: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=2000)]],
        Field(
            max_length=20,
            description="Shell commands run in the sandbox after a developer replies "
            "DONE; a task is done only when they all pass.",
        ),
    ] = []
    max_check_attempts: Annotated[
        int,
        Field(
            strict=True,
            ge=1,
            le=10,
            description="Times failing checks go back to the developer before the task is BLOCKED.",
        ),
    ] = 2

    @field_validator("checks")
    @classmethod
    def _checks(cls, checks: list[str]) -> list[str]:
        for check in checks:
            if not check.strip():
                raise ValueError("a check is blank; expected a shell command, e.g. 'make test'")
        return checks

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> float | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
            return None
        if isinstance(value, bool):
            raise ValueError("expected a number of seconds or 'none'")
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number of seconds or 'none', got {value!r}") from None
        if not math.isfinite(seconds) or seconds <= 0:
            raise ValueError(
                f"expected a positive, finite number of seconds or 'none', got {value!r}"
            )
        if seconds > MAX_TIMEOUT_SECONDS:
            raise ValueError(
                f"at most {MAX_TIMEOUT_SECONDS:.0f} seconds (30 days), got {value!r}; "
                "use 'none' for no deadline"
            )
        return seconds

    def merged(self, **overrides: Any) -> Settings:
        """These settings with every override that is not None (validated)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        if not given:
            return self
        return Settings.model_validate({**self.model_dump(), **given})


def default_of(field: str) -> Any:
    """A setting's default, for help texts (`[5]`)."""
    return Settings.model_fields[field].default
