"""A user's reply (from the CLI, the terminal or a scenario) checked against the question."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.domain import gate
from orchestrator.errors import InvalidAnswer
from orchestrator.records import PendingQuestion

__all__ = ["UserReply", "to_gate_event", "from_scripted", "choice_labels"]


@dataclass(frozen=True)
class UserReply:
    action: Literal["answer", "decline", "cancel"] = "answer"
    text: str | None = None
    choices: tuple[str, ...] = ()
    note: str | None = None  # the user's remark, kept with the answer


def from_scripted(answer: Any) -> UserReply:
    """A scenario's `answers` entry (text, {choices}, {action}) as a UserReply."""
    if isinstance(answer, str):
        return UserReply(text=answer)
    note = answer.get("note")
    if "choices" in answer:
        return UserReply(choices=tuple(answer["choices"]), note=note)
    if "answer" in answer:
        return UserReply(text=answer["answer"], note=note)
    return UserReply(action=answer["action"], note=note)


def to_gate_event(
    question: PendingQuestion, reply: UserReply
) -> tuple[gate.Answer | gate.Decline | gate.Cancel, list[str] | None]:
    """Validate `reply` against `question`; raise InvalidAnswer naming what was expected."""
    if reply.action == "decline":
        return gate.Decline(reply.note), None
    if reply.action == "cancel":
        return gate.Cancel(reply.note), None
    kind = question.get("kind", "free_text")
    labels = [option["label"] for option in question.get("options") or []]
    if kind == "free_text":
        if reply.choices:
            raise InvalidAnswer(
                "this question takes a free-text answer (--answer TEXT), not --choice"
            )
        if reply.text is None or not reply.text.strip():
            raise InvalidAnswer("the answer is empty; give the answer text with --answer TEXT")
        return gate.Answer(reply.text.strip(), note=reply.note), None
    picks = list(reply.choices) or ([reply.text] if reply.text is not None else [])
    if not picks:
        raise InvalidAnswer(f"choose one of the options: {_quote(labels)}")
    if kind == "single_select" and len(picks) != 1:
        raise InvalidAnswer(f"this question takes exactly one choice; got {len(picks)}")
    allow_other = bool(question.get("allow_other"))
    chosen = [_match(pick, labels, allow_other=allow_other) for pick in picks]
    if len(set(chosen)) != len(chosen):
        raise InvalidAnswer("the same option was chosen twice")
    selected = all(c in labels for c in chosen)
    return gate.Answer(
        ", ".join(chosen), kind="selected" if selected else "answered", note=reply.note
    ), chosen


def _match(pick: str, labels: list[str], *, allow_other: bool) -> str:
    if pick in labels:
        return pick
    folded = [label for label in labels if label.casefold() == pick.strip().casefold()]
    if len(folded) == 1:
        return folded[0]
    if allow_other and pick.strip():
        return pick.strip()  # the question accepts an answer of the user's own
    raise InvalidAnswer(f"{pick!r} is not one of the options; expected one of {_quote(labels)}")


def _quote(labels: list[str]) -> str:
    return ", ".join(repr(label) for label in labels)


def choice_labels(
    question: Mapping[str, Any], picks: list[str] | tuple[str, ...]
) -> tuple[str, ...]:
    """`--choice` values as option labels: a label (exact, or the one label equal ignoring
    case) or an option's number from 1. Anything else raises InvalidAnswer listing the
    options and the closest label, also when the question accepts an answer of the user's
    own: that goes through --answer, so that a typo never becomes the final answer."""
    labels = [str(option["label"]) for option in question.get("options") or []]
    return tuple(_choice_label(pick, labels, bool(question.get("allow_other"))) for pick in picks)


def _choice_label(pick: str, labels: list[str], allow_other: bool) -> str:
    import difflib

    if pick in labels:
        return pick
    folded = [label for label in labels if label.casefold() == pick.strip().casefold()]
    if len(folded) == 1:
        return folded[0]
    if pick.strip().isdigit() and 1 <= int(pick.strip()) <= len(labels):
        return labels[int(pick.strip()) - 1]
    numbered = "; ".join(f"{n}. {label}" for n, label in enumerate(labels, start=1))
    close = difflib.get_close_matches(pick, labels, n=1, cutoff=0.6) or difflib.get_close_matches(
        pick.casefold(), [label.casefold() for label in labels], n=1, cutoff=0.6
    )
    hint = ""
    if close:
        match = next(label for label in labels if label.casefold() == close[0].casefold())
        hint = f" Did you mean {match!r}?"
    own = " An answer of your own goes with --answer TEXT." if allow_other else ""
    shown = pick if len(pick) <= 80 else pick[:80] + "…"
    raise InvalidAnswer(
        f"--choice {shown!r} is not an option; choose a label or a number: {numbered}.{hint}{own}"
    )
