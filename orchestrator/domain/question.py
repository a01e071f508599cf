"""A question, from the agent's ask to the user's answer.

- `Question`: what reaches the user. An agent's question (NEEDS_CLARIFICATION, contract
  section 2) is taken leniently and `repair` rebuilds a malformed one (blank, a select
  without options, repeated or over-long labels, several recommended options) from what
  the agent did give, returning the problems found, to be recorded.
- `to_gate_event`: the user's reply checked against the question, the one answer rule of
  every door (the CLI, the terminal, the Python API, the web, MCP, scenarios), with one
  set of messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.documents import PendingQuestion
from orchestrator.domain import gate
from orchestrator.errors import InvalidAnswer
from orchestrator.limits import MAX_ANSWER_CHARS

__all__ = [
    "QuestionKind",
    "Urgency",
    "Ambiguity",
    "StrictModel",
    "Option",
    "QuestionFields",
    "Question",
    "repair",
    "UserReply",
    "parts_needed",
    "to_gate_event",
    "option_label",
    "check_reply",
]


QuestionKind = Literal["free_text", "single_select", "multi_select"]
Urgency = Literal["low", "medium", "high"]


class StrictModel(BaseModel):
    """What arrives from outside, strictly: no unknown field, frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Option(StrictModel):
    label: str
    description: str | None = None
    recommended: bool = False


Ambiguity = Literal["target", "action", "parameter", "intent"]


class QuestionFields(StrictModel):
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


class Question(QuestionFields):
    """One question for the user, with what it takes to answer it well.

    Validated strictly: this is what reaches the user. What agents send is the lenient
    NeedsClarification (orchestrator.domain.replies); `repair` (below) turns one into a
    Question.
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


def repair(ask: QuestionFields, asker: str) -> tuple[Question, list[str]]:
    """A valid Question for `ask` (an agent's NeedsClarification), and the problems that
    had to be fixed (empty if none)."""
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


# -- the user's reply ------------------------------------------------------------------


@dataclass(frozen=True)
class UserReply:
    action: Literal["answer", "decline", "cancel"] = "answer"
    text: str | None = None
    choices: tuple[str, ...] = ()
    note: str | None = None  # the user's remark, kept with the answer
    # A multi-part question: one reply per part, in part order (each an answer, choices
    # or a decline of that part); the whole reply's `note` is kept with the answer.
    parts: tuple[UserReply, ...] = ()


def check_reply(reply: UserReply) -> UserReply:
    """`reply`, refused (InvalidAnswer, nothing written) when no door could send it (a
    decline or cancel with more, parts with more, an unknown action, a value that is not
    text) or a text in it is over the size limit: every door has this one, in the web's and
    MCP's words. An answer text beside choices is a select question's answer of one's own
    (the prompts' and the form's "something else"): `to_gate_event` says if it fits."""
    if reply.action not in ("answer", "decline", "cancel"):
        raise InvalidAnswer("action: Input should be 'decline' or 'cancel'", fields=("action",))
    for listed in ("choices", "parts"):
        if not isinstance(getattr(reply, listed), tuple | list):
            raise InvalidAnswer(f"{listed}: Input should be a valid list", fields=(listed,))
    if not all(isinstance(part, UserReply) for part in reply.parts):
        raise InvalidAnswer("parts: each should be a reply to its part", fields=("parts",))
    values = [("answer", reply.text), ("note", reply.note), *enumerate(reply.choices)]
    for name, value in values:
        if value is not None and not isinstance(value, str):
            field_name = "choices" if isinstance(name, int) else name
            where = f"choices.{name}" if isinstance(name, int) else name
            raise InvalidAnswer(f"{where}: Input should be a valid string", fields=(field_name,))
    there = {
        "answer": reply.text is not None,
        "choices": reply.choices,
        "action": reply.action != "answer",
        "parts": reply.parts,
    }
    given = [name for name, value in there.items() if value]
    if len(given) > 1 and ("action" in given or "parts" in given):
        raise InvalidAnswer(
            f"give exactly one of answer, choices, action, parts (got {', '.join(given)})"
        )
    texts = [("the answer", "answer", reply.text), ("the note", "note", reply.note)]
    texts += [("a choice", "choices", choice) for choice in reply.choices]
    for part in reply.parts:
        check_reply(part)
    for what, field_name, value in texts:
        if value is not None and len(value) > MAX_ANSWER_CHARS:
            raise InvalidAnswer(
                f"{what} is {len(value):,} characters long; at most {MAX_ANSWER_CHARS:,} "
                "are accepted",
                fields=(field_name,),
            )
    return reply


def to_gate_event(
    question: PendingQuestion, reply: UserReply, *, scripted: bool = False
) -> tuple[gate.Answer | gate.Decline | gate.Cancel, list[str] | None]:
    """Validate `reply` against `question`; raise InvalidAnswer naming what was expected.

    The one answer rule of every door. On a select question each `choices` entry must be
    an option (its label, the one label equal ignoring case, or its number from 1), also
    when the question allows an answer of the user's own: that one comes as the `answer`
    text, so that a typo among the choices never becomes the final answer. A person's
    answer without parts to a question of several parts is refused (it would leave the
    other parts unanswered); a `scripted` one (a scenario file written before parts)
    keeps its old meaning: part 1's answer."""
    check_reply(reply)
    parts = cast("list[PendingQuestion] | None", question.get("parts"))
    if parts and reply.action == "decline" and not reply.parts:
        # A plain decline declines the question, every part of it (each asker takes its
        # part's default), whichever door sent it: the web's Decline, `resume --decline`.
        return gate.Decline(reply.note, parts=len(parts)), None
    if parts and len(parts) == 1 and not reply.parts and reply.action != "cancel":
        # One part asked by several agents (the same question, merged): a plain answer
        # or decline is that part's, for every one of its askers.
        part = UserReply(action=reply.action, text=reply.text, choices=reply.choices)
        reply = UserReply(parts=(part,), note=reply.note)
    if parts and reply.action == "answer":
        if not reply.parts and not scripted:
            raise InvalidAnswer(parts_needed(parts), fields=("parts",))
        return _parts_event(parts, reply)
    if reply.parts:
        what = "a decline or cancel" if reply.action != "answer" else "this question"
        raise InvalidAnswer(f"{what} takes no per-part answers", fields=("parts",))
    if reply.action == "decline":
        return gate.Decline(reply.note), None
    if reply.action == "cancel":
        return gate.Cancel(reply.note), None
    kind = question.get("kind", "free_text")
    labels = [str(option["label"]) for option in question.get("options") or []]
    if kind == "free_text":
        if reply.choices:
            raise InvalidAnswer(
                "this question takes a free-text answer (`answer`), not `choices`",
                fields=("answer", "choices"),
            )
        if reply.text is None or not reply.text.strip():
            raise InvalidAnswer("the answer is empty; give the answer text", fields=("answer",))
        return gate.Answer(reply.text.strip(), note=reply.note), None
    allow_other = bool(question.get("allow_other"))
    chosen = [option_label(pick, labels, allow_other=allow_other) for pick in reply.choices]
    if reply.text is not None:
        chosen.append(_text_pick(reply.text, labels, allow_other=allow_other))
    if not chosen:
        raise InvalidAnswer(
            f"the answer is empty; choose one of the options: {_numbered(labels)}",
            fields=("choices",),
        )
    if kind == "single_select" and len(chosen) != 1:
        raise InvalidAnswer(
            f"this question takes exactly one choice; got {len(chosen)}", fields=("choices",)
        )
    if len(set(chosen)) != len(chosen):
        raise InvalidAnswer("the same option was chosen twice", fields=("choices",))
    selected = all(c in labels for c in chosen)
    return gate.Answer(
        ", ".join(chosen), kind="selected" if selected else "answered", note=reply.note
    ), chosen


def option_label(pick: str, labels: list[str], *, allow_other: bool = False) -> str:
    """A `choices` entry as an option's label: the label itself, the one label equal
    ignoring case, or an option's number from 1. Anything else raises InvalidAnswer with
    the options and the closest label (`allow_other` only adds where an answer of one's
    own goes: never among the choices)."""
    found = _label_of(pick, labels)
    if found is not None:
        return found
    if pick.strip().isdigit() and 1 <= int(pick.strip()) <= len(labels):
        return labels[int(pick.strip()) - 1]
    raise _not_an_option(pick, labels, allow_other)


def _text_pick(text: str, labels: list[str], *, allow_other: bool) -> str:
    """The `answer` text on a select question: an option's label (exact, or ignoring
    case), or, where the question allows it, an answer of the user's own."""
    found = _label_of(text, labels)
    if found is not None:
        return found
    if allow_other and text.strip():
        return text.strip()
    if not text.strip():
        raise InvalidAnswer(
            f"the answer is empty; choose one of the options: {_numbered(labels)}",
            fields=("answer", "choices"),
        )
    raise _not_an_option(text, labels, allow_other)


def _label_of(pick: str, labels: list[str]) -> str | None:
    if pick in labels:
        return pick
    folded = [label for label in labels if label.casefold() == pick.strip().casefold()]
    return folded[0] if len(folded) == 1 else None


def _not_an_option(pick: str, labels: list[str], allow_other: bool) -> InvalidAnswer:
    import difflib

    close = difflib.get_close_matches(pick, labels, n=1, cutoff=0.6) or difflib.get_close_matches(
        pick.casefold(), [label.casefold() for label in labels], n=1, cutoff=0.6
    )
    hint = ""
    if close:
        match = next(label for label in labels if label.casefold() == close[0].casefold())
        hint = f" Did you mean {match!r}?"
    own = " An answer of your own goes in the `answer` text, not among the `choices`."
    shown = pick if len(pick) <= 80 else pick[:80] + "…"
    return InvalidAnswer(
        f"{shown!r} is not one of the options; choose a label or a number: "
        f"{_numbered(labels)}.{hint}{own if allow_other else ''}",
        fields=("choices", "answer") if allow_other else ("choices",),
    )


def _numbered(labels: list[str]) -> str:
    return "; ".join(f"{n}. {label}" for n, label in enumerate(labels, start=1))


def parts_needed(parts: Sequence[Mapping[str, Any]]) -> str:
    """Why an answer without parts is refused for a question of several `parts`, naming
    each part and how every door answers them."""
    named = "; ".join(
        f"part {number}: {_quoted(str(part.get('question') or ''))}"
        for number, part in enumerate(parts, start=1)
    )
    return (
        f"this question has {len(parts)} parts and an answer without parts would answer "
        f"part 1 only ({named}); give `parts`, one answer (or decline) per part, in "
        "part order"
    )


def _quoted(text: str, limit: int = 80) -> str:
    one_line = " ".join(text.split())
    return repr(one_line if len(one_line) <= limit else one_line[: limit - 1] + "…")


def _parts_event(
    parts: list[PendingQuestion], reply: UserReply
) -> tuple[gate.Answer | gate.Decline | gate.Cancel, list[str] | None]:
    """A multi-part question's reply: each part validated by that part's own rules
    (`to_gate_event` on the part's question). A part may be declined (its askers take
    their defaults); cancel is for the whole session. All parts declined is a decline."""
    replies = reply.parts
    if not replies:
        # An answer without parts (a door or scenario that predates them) answers the ask
        # that was surfaced first, by part 1's rules; the other asks are held (hard cap).
        return to_gate_event(cast(PendingQuestion, {**parts[0], "parts": []}), reply)
    if len(replies) != len(parts):
        raise InvalidAnswer(
            f"this question has {len(parts)} parts; got answers for {len(replies)}",
            fields=("parts",),
        )
    responses: list[str | None] = []
    chosen: list[str] | None = None
    selected = True
    refused: list[InvalidAnswer] = []  # every part that cannot be taken is named, not the first
    for number, (part, part_reply) in enumerate(zip(parts, replies, strict=True), start=1):
        if part_reply.action == "cancel" or part_reply.parts:
            raise InvalidAnswer(
                f"part {number}: a part takes an answer, choices or a decline "
                "(cancel stops the whole session)",
                fields=("parts",),
            )
        if part_reply.action == "decline":
            responses.append(None)
            continue
        try:
            event, chosen = to_gate_event(part, part_reply)
        except InvalidAnswer as exc:
            refused.append(InvalidAnswer(f"part {number}: {exc.message}", fields=exc.fields))
            continue
        assert isinstance(event, gate.Answer)
        responses.append(event.response)
        selected = selected and event.kind == "selected"
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise InvalidAnswer(
            "\n".join(exc.message for exc in refused),
            fields=tuple(dict.fromkeys(f for exc in refused for f in exc.fields)),
        )
    if all(response is None for response in responses):
        return gate.Decline(reply.note, parts=len(responses)), None
    if len(parts) == 1:
        assert responses[0] is not None
        text = responses[0]
    else:
        text = "\n".join(
            f"{n}. {r if r is not None else '(declined)'}" for n, r in enumerate(responses, 1)
        )
        chosen = None
    kind: Literal["answered", "selected"] = "selected" if selected else "answered"
    return gate.Answer(text, kind=kind, note=reply.note, parts=tuple(responses)), chosen
