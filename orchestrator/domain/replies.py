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

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

__all__ = [
    "Option",
    "Question",
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
    "repair",
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
    # A short name for what is asked (`cache`): an assumption given as {key, value} with
    # this key is held against a late answer (orchestrator.domain.reconcile).
    key: str | None = None


class Question(_QuestionFields):
    """One question for the user, with what it takes to answer it well.

    Validated strictly: this is what reaches the user. What agents send is the lenient
    NeedsClarification (below); `repair` (below) turns one into a Question.
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


class Assumption(_Model):
    """An assumption as a key/value (besides a plain sentence): `key` names what was
    assumed (a question's `key`), `value` what was taken; held against a late answer."""

    text: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=1)]
    value: Annotated[str, Field(min_length=1)]


Assumptions = list[str | Assumption]


class TaskSpec(_Model):
    title: Annotated[str, Field(min_length=1)]
    description: str | None = None


class NeedsClarification(_QuestionFields):
    """`NEEDS_CLARIFICATION`: the question object's fields sit inline in the reply.

    Lenient on purpose: an agent's malformed question (blank, a select without options,
    repeated or over-long labels) is not the user's problem; the gate repairs it
    (`repair`, below) and records that it did.
    """

    status: Literal["NEEDS_CLARIFICATION"]
    uncertainty: Annotated[int, Field(ge=0, le=100)] | None = None


class Planned(_Model):
    status: Literal["PLANNED"]
    tasks: Annotated[list[TaskSpec], Field(min_length=1)]
    assumptions: Assumptions = Field(default_factory=list)


class Complete(_Model):
    status: Literal["COMPLETE"]
    summary: str
    assumptions: Assumptions = Field(default_factory=list)


class Done(_Model):
    status: Literal["DONE"]
    summary: str
    assumptions: Assumptions = Field(default_factory=list)


class Blocked(_Model):
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


# -- repairing an agent's question ------------------------------------------------------

_MAX_LABEL = 80
_MAX_OPTIONS = 12

_FALLBACK_TEXT = {
    "target": "Which one should {asker} work on?",
    "action": "What should {asker} do here?",
    "parameter": "{asker} is missing a required value: what should it be?",
    "intent": "What outcome do you want here?",
    None: "{asker} needs a decision to continue: how should it proceed?",
}


def repair(ask: NeedsClarification, asker: str) -> tuple[Question, list[str]]:
    """A valid Question for `ask`, and the problems that had to be fixed (empty if none)."""
    problems: list[str] = []
    options = _clean_options(ask.options, problems)
    kind = ask.kind
    if kind != "free_text" and not options:
        problems.append(f"a {kind} question came without options")
        kind = "free_text"
    text = ask.question.strip()
    if not text:
        problems.append("the question was blank")
        text = _FALLBACK_TEXT[ask.ambiguity].format(asker=asker)
        if ask.reason:
            text += f" ({ask.reason.strip()})"
    fields: dict[str, Any] = ask.model_dump(
        exclude={"status", "uncertainty", "question", "kind", "options"}
    )
    question = Question(question=text, kind=kind, options=options, **fields)
    return question, problems


def _clean_options(options: list[Option], problems: list[str]) -> list[Option]:
    kept: list[Option] = []
    seen: set[str] = set()
    for option in options:
        label = " ".join(option.label.split())
        description = option.description
        if not label:
            problems.append("an option had an empty label")
            continue
        if len(label) > _MAX_LABEL:
            problems.append(f"an option label was over {_MAX_LABEL} characters")
            description = option.label if not description else f"{option.label}: {description}"
            label = label[: _MAX_LABEL - 1].rstrip() + "…"
        if label in seen:
            problems.append(f"the option {label!r} was repeated")
            continue
        seen.add(label)
        kept.append(Option(label=label, description=description, recommended=option.recommended))
    if len(kept) > _MAX_OPTIONS:
        problems.append(f"more than {_MAX_OPTIONS} options; the first {_MAX_OPTIONS} are kept")
        kept = kept[:_MAX_OPTIONS]
    if sum(o.recommended for o in kept) > 1:
        problems.append("several options were marked recommended; the first one is kept")
        first = next(i for i, o in enumerate(kept) if o.recommended)
        kept = [o.model_copy(update={"recommended": i == first}) for i, o in enumerate(kept)]
    return kept
