"""Turning an agent's question into one fit for the user (the ask-specify fallback).

Pure: no I/O. A malformed question (blank, a select without options, repeated or
over-long labels, several recommended options) is rebuilt locally from what the agent did
give (ambiguity type, reason, options); the problems found are returned to be recorded.
"""

from __future__ import annotations

from typing import Any

from orchestrator.domain.replies import NeedsClarification, Option, Question

__all__ = ["repair", "MAX_LABEL", "MAX_OPTIONS"]

MAX_LABEL = 80
MAX_OPTIONS = 12

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
        if len(label) > MAX_LABEL:
            problems.append(f"an option label was over {MAX_LABEL} characters")
            description = option.label if not description else f"{option.label}: {description}"
            label = label[: MAX_LABEL - 1].rstrip() + "…"
        if label in seen:
            problems.append(f"the option {label!r} was repeated")
            continue
        seen.add(label)
        kept.append(Option(label=label, description=description, recommended=option.recommended))
    if len(kept) > MAX_OPTIONS:
        problems.append(f"more than {MAX_OPTIONS} options; the first {MAX_OPTIONS} are kept")
        kept = kept[:MAX_OPTIONS]
    if sum(o.recommended for o in kept) > 1:
        problems.append("several options were marked recommended; the first one is kept")
        first = next(i for i, o in enumerate(kept) if o.recommended)
        kept = [o.model_copy(update={"recommended": i == first}) for i, o in enumerate(kept)]
    return kept
