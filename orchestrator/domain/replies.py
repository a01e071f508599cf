"""The agents' replies and the question object (contract section 2), as pydantic models.

Replies arrive from outside (scenario files, LLM structured output), so they are
validated here; the graph keeps them as plain JSON (`model_dump`) and rebuilds them at
the edges. An agent's question is taken leniently and `repair` turns it into one fit for
the user (the ask-specify fallback): a malformed question (blank, a select without
options, repeated or over-long labels, several recommended options) is rebuilt from what
the agent did give (ambiguity type, reason, options), and the problems found are returned
to be recorded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from orchestrator.domain.question import QuestionFields, StrictModel

__all__ = [
    "Assumption",
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


class Assumption(StrictModel):
    """An assumption as a key/value (besides a plain sentence): `key` names what was
    assumed (a question's `key`), `value` what was taken; held against a late answer."""

    text: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=1)]
    value: Annotated[str, Field(min_length=1)]


Assumptions = list[str | Assumption]


class TaskSpec(StrictModel):
    title: Annotated[str, Field(min_length=1)]
    description: str | None = None
    # The files (paths or globs) the task expects to change: tasks whose lists overlap
    # run one after another (orchestrator.domain.scopes), the others in parallel.
    files: list[Annotated[str, Field(min_length=1, max_length=500)]] | None = None


class NeedsClarification(QuestionFields):
    """`NEEDS_CLARIFICATION`: the question object's fields sit inline in the reply.

    Lenient on purpose: an agent's malformed question (blank, a select without options,
    repeated or over-long labels) is not the user's problem; the gate repairs it
    (orchestrator.domain.question.repair) and records that it did.
    """

    status: Literal["NEEDS_CLARIFICATION"]
    uncertainty: Annotated[int, Field(ge=0, le=100)] | None = None


class Planned(StrictModel):
    status: Literal["PLANNED"]
    tasks: Annotated[list[TaskSpec], Field(min_length=1)]
    assumptions: Assumptions = Field(default_factory=list)


class Complete(StrictModel):
    status: Literal["COMPLETE"]
    summary: str
    assumptions: Assumptions = Field(default_factory=list)


class Done(StrictModel):
    status: Literal["DONE"]
    summary: str
    assumptions: Assumptions = Field(default_factory=list)


class Blocked(StrictModel):
    status: Literal["BLOCKED"]
    reason: Annotated[str, Field(min_length=1)]
    assumptions: Assumptions = Field(default_factory=list)


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
