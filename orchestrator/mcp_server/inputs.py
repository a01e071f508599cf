"""The seven tools' inputs (pydantic: they are the published input schemas) and the one
result shape every tool answers with (contract section 6).

Every input is validated here before anything happens; a model that does not validate is
an `invalid_input` error and nothing is recorded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from orchestrator.api.part_answers import AnswerFields
from orchestrator.documents import StatusFilter
from orchestrator.limits import MAX_ANSWER_CHARS, MAX_LABEL_CHARS, MAX_OPTIONS, MAX_TASK_CHARS
from orchestrator.settings import MAX_PARALLEL, default_of

__all__ = [
    "ERROR_CODES",
    "RESULT_SCHEMA",
    "DATA_SCHEMAS",
    "output_schema",
    "Option",
    "ProvideChoiceInput",
    "AskUserInput",
    "StartSessionInput",
    "SessionIdInput",
    "ListSessionsInput",
    "AnswerSessionInput",
    "DEFAULT_TIMEOUT_SECONDS",
]

DEFAULT_TIMEOUT_SECONDS = 300.0
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600.0

ErrorCode = Literal["invalid_input", "not_found", "not_waiting", "conflict", "internal"]
ERROR_CODES: tuple[str, ...] = ErrorCode.__args__  # type: ignore[attr-defined]

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
# The sizes a person can read, as elsewhere (orchestrator/limits.py): the title or question
# becomes the session's task, the prompt and context are read like an answer.
TaskText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TASK_CHARS)
]
LongText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ANSWER_CHARS)
]
Label = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_LABEL_CHARS)
]
OptionalText = Annotated[str, StringConstraints(max_length=MAX_ANSWER_CHARS)]
Timeout = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        strict=True,
        allow_inf_nan=False,
        description="Seconds to wait for the person's answer; then the result is `timeout`.",
    ),
]
WaitForAnswer = Annotated[
    bool | None,
    Field(
        description=(
            "true: the call waits for the answer (up to timeout_seconds); false: it returns "
            "at once with where the person answers (action_status `pending`, session_id, "
            "answer_url, resume_command) and session_status collects the answer. Unset: "
            "it waits when the client shows forms or sent a progress token (which keeps the "
            "call alive), and otherwise returns at once."
        )
    ),
]


class _Input(BaseModel):
    # Unknown fields are refused: a misspelt `timeout_second` must not be silently ignored.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Option(_Input):
    label: Label = Field(description="What the person sees and what comes back in `selected`.")
    description: OptionalText | None = Field(
        None, description="One line on what choosing it means."
    )


class ProvideChoiceInput(_Input):
    """Ask the person to choose among options."""

    title: TaskText = Field(description="A short title for the decision.")
    prompt: LongText = Field(
        description="The question, with the task's context and why a choice is needed."
    )
    type: Literal["single_select", "multi_select"] = Field(
        description="single_select: exactly one option; multi_select: one or more."
    )
    options: list[Option] = Field(
        min_length=1, max_length=MAX_OPTIONS, description="The options; labels are unique."
    )
    allow_cancel: bool = Field(
        True, description="Whether the person may cancel instead of choosing (default true)."
    )
    timeout_seconds: Timeout = DEFAULT_TIMEOUT_SECONDS
    wait_for_answer: WaitForAnswer = None

    @model_validator(mode="after")
    def _unique_labels(self) -> ProvideChoiceInput:
        seen: set[str] = set()
        for option in self.options:
            folded = option.label.casefold()
            if folded in seen:
                raise ValueError(f"option labels must be unique; {option.label!r} appears twice")
            seen.add(folded)
        return self


class AskUserInput(_Input):
    """Ask the person a free-text question."""

    question: TaskText = Field(description="One question for the person.")
    context: OptionalText | None = Field(
        None, description="What the person needs to know to answer."
    )
    urgency: Literal["low", "medium", "high"] = Field(
        "medium", description="How urgent the answer is (shown to the person)."
    )
    timeout_seconds: Timeout = DEFAULT_TIMEOUT_SECONDS
    wait_for_answer: WaitForAnswer = None


class StartSessionInput(_Input):
    """Start a session: `task` and `model`, or `scenario` (a scenario file's YAML text)."""

    task: Text | None = Field(None, description="What the agents should do.")
    model: Text | None = Field(
        None, description="PROVIDER:NAME chat model for every agent, e.g. openai:gpt-4o-mini."
    )
    scenario: Text | None = Field(
        None,
        description="A scenario's YAML (or JSON) text: scripted agents and answers, no model "
        "is called. `task`, if given too, replaces the scenario's task.",
    )
    max_parallel: int | None = Field(
        None,
        ge=1,
        le=MAX_PARALLEL,
        strict=True,
        description=f"Agents of one round that run at once (default {default_of('max_parallel')}"
        "; a scenario's scripted agents run one at a time).",
    )

    @model_validator(mode="after")
    def _one_way(self) -> StartSessionInput:
        if self.scenario is not None:
            if self.model is not None:
                raise ValueError("give either `scenario` or `model`, not both")
        elif self.task is None or self.model is None:
            raise ValueError("give `task` and `model`, or `scenario`")
        return self


class SessionIdInput(_Input):
    session_id: Text = Field(description="The session's id (see list_sessions).")


class ListSessionsInput(_Input):
    status: StatusFilter | None = Field(
        None, description="Only sessions with this status ('waiting': a question is open)."
    )


class _PausedSession(_Input):
    session_id: Text = Field(description="The paused session's id.")


class AnswerSessionInput(AnswerFields, _PausedSession):
    """Answer a paused session's question: exactly one of `answer`, `choices`, `action`,
    `parts` (the web API's answer body, after the session's id). What they hold is checked
    by the core's answer rule, as on the web: a blank answer is refused there."""


# The one result shape (contract section 6), published as every tool's output schema and
# checked by the tests for every result, success and error alike.
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "ok": {"const": True},
                "data": {"type": ["object", "array"]},
            },
            "required": ["ok", "data"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "ok": {"const": False},
                "error": {
                    "type": "object",
                    "properties": {
                        "code": {"enum": list(ERROR_CODES)},
                        "message": {"type": "string", "minLength": 1},
                    },
                    "required": ["code", "message"],
                    "additionalProperties": False,
                },
            },
            "required": ["ok", "error"],
            "additionalProperties": False,
        },
    ],
}


# Each tool's `data`, for its published output schema (clients validate structured content
# against it, and show it to their models). Session objects and events name the fields a
# caller relies on; they carry more (docs/mcp.md), so more properties are allowed.
def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    # anyOf with one type per branch: a `type` list is legal JSON Schema but less portable
    # (the Inspector's --strict, Gemini's single-type dialect).
    return {"anyOf": [schema, {"type": "null"}]}


_SESSION_OBJECT: dict[str, Any] = {
    "type": "object",
    "description": "A session object, as `orchestrator status --json` prints it.",
    "properties": {
        "session_id": {"type": "string"},
        "status": {"enum": ["running", "paused", "completed", "failed", "cancelled"]},
        "task": _or_null({"type": "string"}),
        "orchestrator_state": {"type": "object"},
        "pending_question": _or_null({"type": "object"}),
        "questions_surfaced": {"type": "integer"},
        "fallbacks_injected": {"type": "integer"},
        "summary": _or_null({"type": "string"}),
        "error": _or_null({"type": "string"}),
    },
    "required": ["session_id", "status"],
}
_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One event of a session's log, as `orchestrator log --json` prints it.",
    "properties": {"kind": {"type": "string"}},
    "required": ["kind"],
}
_LABELS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
# With action_status `pending` (the call returned before the answer): where to answer, and
# how to collect the answer.
_PENDING: dict[str, Any] = {
    "session_id": {"type": "string", "description": "The question's session."},
    "answer_url": {"type": "string", "description": "The one-question page."},
    "resume_command": {"type": "string", "description": "Answers it from a terminal."},
    "collect": {"type": "string", "description": "How to collect the answer."},
}
DATA_SCHEMAS: dict[str, dict[str, Any]] = {
    "provide_choice": {
        "type": "object",
        "properties": {
            "action_status": {"enum": ["selected", "cancelled", "timeout", "pending"]},
            "selected": {**_LABELS, "description": "The chosen labels, in the order chosen."},
            "selected_indices": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0},
                "description": "The chosen options' positions in `options`, from 0.",
            },
            "annotation": {**_or_null({"type": "string"}), "description": "The person's note."},
            **_PENDING,
        },
        "required": ["action_status", "selected", "selected_indices", "annotation"],
        "additionalProperties": False,
    },
    "ask_user": {
        "type": "object",
        "properties": {
            "action_status": {"enum": ["answered", "declined", "cancelled", "timeout", "pending"]},
            "answer": _or_null({"type": "string"}),
            **_PENDING,
        },
        "required": ["action_status", "answer"],
        "additionalProperties": False,
    },
    "start_session": _SESSION_OBJECT,
    "session_status": _SESSION_OBJECT,
    "list_sessions": {"type": "array", "items": _SESSION_OBJECT},
    "answer_session": _SESSION_OBJECT,
    "session_log": {"type": "array", "items": _EVENT},
    "ask_session": _SESSION_OBJECT,
    "reconcile_session": _SESSION_OBJECT,
}


def output_schema(tool: str) -> dict[str, Any]:
    """The tool's published output schema: the one result shape (RESULT_SCHEMA) with the
    tool's own `data`, written without a top-level oneOf (which several clients cannot
    read): `ok`, then `data` when it is true, `error` when it is false."""
    error = RESULT_SCHEMA["oneOf"][1]["properties"]["error"]
    return {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "data": DATA_SCHEMAS[tool],
            "error": error,
        },
        "required": ["ok"],
        "additionalProperties": False,
    }
