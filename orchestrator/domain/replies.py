"""The agents' replies and the question object (contract section 2), as pydantic models.

Replies arrive from outside (scenario files, LLM structured output), so they are
validated here; the graph keeps them as plain JSON (`model_dump`) and rebuilds them at
the edges.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

__all__ = [
    "Option",
    "Question",
    "TaskSpec",
    "NeedsClarification",
    "Planned",
    "Complete",
    "Done",
    "Blocked",
    "PmReply",
    "DeveloperReply",
    "AgentReply",
    "PM_REPLY",
    "DEVELOPER_REPLY",
    "parse_reply",
]

QuestionKind = Literal["free_text", "single_select", "multi_select"]
Urgency = Literal["low", "medium", "high"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Option(_Model):
    label: str
    description: str | None = None
    recommended: bool = False


Ambiguity = Literal["target", "action", "parameter", "intent"]


class _QuestionFields(_Model):
    """What a question carries (shared by Question and the reply that asks it)."""

    question: str = ""
    kind: QuestionKind = "free_text"
    options: list[Option] = Field(default_factory=list)
    allow_other: bool = False
    reason: str | None = None
    context: str | None = None
    default: str | None = None
    urgency: Urgency = "medium"
    ambiguity: Ambiguity | None = None


class Question(_QuestionFields):
    """One question for the user, with what it takes to answer it well.

    Validated strictly: this is what reaches the user. What agents send is the lenient
    NeedsClarification (below); orchestrator.domain.questions.repair turns one into a Question.
    """

    question: Annotated[str, Field(min_length=1)]

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question must not be blank")
        return value

    @model_validator(mode="after")
    def _options_fit_kind(self) -> Question:
        labels = [o.label for o in self.options]
        if self.kind != "free_text" and not labels:
            raise ValueError(f"a {self.kind} question needs at least one option")
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"option labels must be unique; repeated: {', '.join(duplicates)}")
        if sum(o.recommended for o in self.options) > 1:
            raise ValueError("at most one option may be recommended")
        return self

    @property
    def labels(self) -> list[str]:
        return [o.label for o in self.options]


class TaskSpec(_Model):
    title: Annotated[str, Field(min_length=1)]
    description: str | None = None


class NeedsClarification(_QuestionFields):
    """`NEEDS_CLARIFICATION`: the question object's fields sit inline in the reply.

    Lenient on purpose: an agent's malformed question (blank, a select without options,
    repeated or over-long labels) is not the user's problem; the gate repairs it
    (orchestrator.domain.questions.repair) and records that it did.
    """

    status: Literal["NEEDS_CLARIFICATION"]
    uncertainty: Annotated[int, Field(ge=0, le=100)] | None = None


class Planned(_Model):
    status: Literal["PLANNED"]
    tasks: Annotated[list[TaskSpec], Field(min_length=1)]
    assumptions: list[str] = Field(default_factory=list)


class Complete(_Model):
    status: Literal["COMPLETE"]
    summary: str
    assumptions: list[str] = Field(default_factory=list)


class Done(_Model):
    status: Literal["DONE"]
    summary: str
    assumptions: list[str] = Field(default_factory=list)


class Blocked(_Model):
    status: Literal["BLOCKED"]
    reason: Annotated[str, Field(min_length=1)]
    assumptions: list[str] = Field(default_factory=list)


PmReply = Annotated[NeedsClarification | Planned | Complete, Field(discriminator="status")]
DeveloperReply = Annotated[NeedsClarification | Done | Blocked, Field(discriminator="status")]
AgentReply = NeedsClarification | Planned | Complete | Done | Blocked

PM_REPLY: TypeAdapter[Any] = TypeAdapter(PmReply)
DEVELOPER_REPLY: TypeAdapter[Any] = TypeAdapter(DeveloperReply)


def parse_reply(agent: str, data: Any) -> AgentReply:
    """Validate `data` as a reply of `agent` (`pm` or `developer-N`)."""
    adapter = PM_REPLY if agent == "pm" else DEVELOPER_REPLY
    reply: AgentReply = adapter.validate_python(data)
    return reply
