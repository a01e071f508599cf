"""What a scenario expects, and the steps it plays once its answers ran out.

Read by `orchestrator test` and the pytest plugin (`orchestrator.suite`); `orchestrator run
--script` checks `expect` when the session ends and leaves `steps` alone. See docs/ci.md.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.documents import SessionStatus
from orchestrator.domain.question import UserReply

__all__ = [
    "AGENT_KEY",
    "Expect",
    "TaskExpect",
    "EventExpect",
    "MergeExpect",
    "Step",
    "TextAnswer",
    "ChoicesAnswer",
    "PartDecline",
    "PartEntry",
    "from_scripted",
]

AGENT_KEY = re.compile(r"^(pm|developer|developer-[1-9][0-9]*)$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextAnswer(_Model):
    answer: Annotated[str, Field(min_length=1)]
    note: str | None = None


class ChoicesAnswer(_Model):
    choices: Annotated[list[str], Field(min_length=1)]
    note: str | None = None


class PartDecline(_Model):
    action: Literal["decline"]


# One part's answer in a multi-part reply: text, {answer}, {choices} or {action: decline}.
PartEntry = str | TextAnswer | ChoicesAnswer | PartDecline


class TaskExpect(_Model):
    """One planned task as expected (only the keys given are compared)."""

    number: int | None = None
    title: str | None = None
    status: Literal["pending", "done", "blocked", "needs_clarification"] | None = None


class EventExpect(_Model):
    """An event in the session's log: its kind, who wrote it, a text in its payload."""

    kind: Annotated[str, Field(min_length=1)]
    agent: str | None = None
    text: str | None = None


EventMatch = Annotated[str, Field(min_length=1)] | EventExpect


class MergeExpect(_Model):
    """One merge of a task into the session branch (contract section 9), in the order
    they happened: the task, the outcome, and (optional) files a conflict named."""

    task: Annotated[int, Field(ge=1)]
    outcome: Literal["clean", "conflict", "checks_failed"]
    files: list[str] | None = None


class Expect(_Model):
    """How the session should stand (at the end, or after a step). Unset keys are not
    checked; texts (`question`, `error`, `assumptions`, events' `text`) must appear."""

    status: SessionStatus | None = None
    questions_surfaced: Annotated[int, Field(ge=0)] | None = None
    fallbacks_injected: Annotated[int, Field(ge=0)] | None = None
    summary: str | None = None
    error_contains: str | None = None
    error: str | None = None
    asked_by: Annotated[str, Field(pattern=AGENT_KEY.pattern)] | None = None
    question: str | None = None
    question_kind: Literal["free_text", "single_select", "multi_select"] | None = None
    answer: str | None = None
    answer_status: (
        Literal["answered", "selected", "declined", "timeout", "cancelled", "none"] | None
    ) = None
    assumptions: Annotated[int, Field(ge=0)] | str | list[str] | None = None
    tasks: Annotated[int, Field(ge=0)] | list[TaskExpect] | None = None
    events: list[EventMatch] | None = None
    no_events: list[EventMatch] | None = None
    # A late answer (docs/late-answers.md): a text its response contains; whether the
    # ended session needs review; whether the PM reconciled it; how many assumptions it
    # contradicted.
    late_answer: str | None = None
    needs_review: bool | None = None
    reconciled: bool | None = None
    contradicted: Annotated[int, Field(ge=0)] | None = None
    # A multi-part question (docs/multi-part-questions.md): how many parts it had (1 for a
    # question without parts, 0 for none); a text each named asker's delivered answer holds.
    question_parts: Annotated[int, Field(ge=0)] | None = None
    delivered: dict[Annotated[str, Field(pattern=AGENT_KEY.pattern)], str] | None = None
    # The merges of task branches into the session branch, in order (docs/sandbox.md).
    merges: list[MergeExpect] | None = None


STEP_ACTIONS = ("answer", "choices", "parts", "action")


class Step(_Model):
    """What happens next once a scenario's answers ran out (run by `orchestrator test`).

    In order: the virtual clock moves `after` on; the reply is given (`answer`, `choices`,
    `parts`: one entry per part of a multi-part question, or `action`: decline, cancel, or
    resume with no answer; none of them: the status is read, which applies a passed
    deadline); `refused` says the reply must be refused with that text in the message;
    then `expect` is checked.
    """

    after: float | None = None
    answer: Annotated[str, Field(min_length=1)] | None = None
    choices: Annotated[list[str], Field(min_length=1)] | None = None
    parts: Annotated[list[PartEntry], Field(min_length=1)] | None = None
    action: Literal["decline", "cancel", "resume"] | None = None
    note: str | None = None
    refused: str | None = None
    expect: Expect | None = None

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, value: Any) -> float | None:
        from orchestrator.domain.clock import parse_duration

        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _one_reply(self) -> Step:
        given = [name for name in STEP_ACTIONS if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of answer, choices, parts, action; got {given}")
        if not given and self.after is None and self.expect is None:
            raise ValueError("an empty step; give after, answer, choices, parts, action or expect")
        if self.refused is not None and not given:
            raise ValueError("'refused' goes with answer, choices, parts or action")
        if self.note is not None and (not given or self.action == "resume"):
            raise ValueError("'note' goes with answer, choices, parts, decline or cancel")
        return self


def from_scripted(answer: Any) -> UserReply:
    """A scenario's `answers` entry (text, {choices}, {action}) as a UserReply."""
    if isinstance(answer, str):
        return UserReply(text=answer)
    note = answer.get("note")
    if "parts" in answer:
        return UserReply(parts=tuple(from_scripted(part) for part in answer["parts"]), note=note)
    if "choices" in answer:
        return UserReply(choices=tuple(answer["choices"]), note=note)
    if "answer" in answer:
        return UserReply(text=answer["answer"], note=note)
    return UserReply(action=answer["action"], note=note)
