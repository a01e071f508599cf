"""A late answer held against what was assumed without it (docs/late-answers.md).

Pure functions, no I/O. When the session's one question was declined or passed its
deadline (on_timeout: proceed), the agents went on with defaults and wrote assumptions in
the ledger. The person's answer may still come afterwards: `judge` compares it with each
assumption that stood in for it and says, for each, whether the answer confirms it,
contradicts it, or is free text for the PM to judge in its reconciliation turn:

- structured values are judged here: the default an asker took (the gate's own ledger
  entry) and an agent's assumption given as a key/value whose key is the question's `key`,
  each against the late answer to that question (or that part): the same option(s), or
  the same text ignoring case, spacing and punctuation, confirms; a different option
  contradicts;
- free text is not judged here: a free-text default that differs from a free-text answer,
  and an agent's assumption written as a sentence after the question was asked, are
  `for_pm`.

`needs_review` says whether anything is left to act on; `instruction` is what the PM is
told (an instruction, never a question: the session's one question is spent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.domain.gate import DEFAULT_TAKEN

__all__ = [
    "question_parts",
    "Check",
    "Verdict",
    "judge",
    "needs_review",
    "due",
    "instruction",
    "affected_tasks",
]

Verdict = Literal["confirmed", "contradicted", "for_pm"]


@dataclass(frozen=True)
class Check:
    """One assumption held against the late answer."""

    ledger: str  # the assumption's ledger key (its event's key)
    agent: str
    assumption: str
    verdict: Verdict
    why: str
    part: int  # the question's part it stood in for (1 for a one-part question)
    tasks: tuple[int, ...]  # the tasks planned or done on it

    def as_dict(self) -> dict[str, Any]:
        return {
            "ledger": self.ledger,
            "agent": self.agent,
            "assumption": self.assumption,
            "verdict": self.verdict,
            "why": self.why,
            "part": self.part,
            "tasks": list(self.tasks),
        }


def question_parts(question: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The question's parts: its `parts`, or the question itself as part 1 (asked by its
    asker)."""
    parts = question.get("parts") or []
    return list(parts) if parts else [{**question, "part": 1, "askers": [question.get("asked_by")]}]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def _labels(kind: str, value: str, options: Sequence[str]) -> frozenset[str]:
    """The labels a value names, compared ignoring case and punctuation. A multi-select's
    are joined with ", " and a label may hold a comma itself ("Red, green"), so from each
    piece on the longest run that is exactly one of the question's labels is taken (an
    answer holds them as written), else the longest that is one ignoring case and
    punctuation (a default an agent wrote), else the piece as it is."""
    if kind != "multi_select":
        return frozenset({_norm(value)})
    exact, loose = {label.strip() for label in options}, {_norm(label) for label in options}
    # No run is longer than the longest label, in pieces or (loosely, "Red/green" for
    # "red, green") in words: linear in the value, whatever it holds.
    widest = max(
        (max(label.count(",") + 1, len(_norm(label).split())) for label in options), default=1
    )
    pieces, found, start = value.split(","), set(), 0
    while start < len(pieces):
        last = min(len(pieces), start + widest)
        runs = [",".join(pieces[start:end]) for end in range(last, start, -1)]
        run = next((r for r in runs if r.strip() in exact), None) or next(
            (r for r in runs if _norm(r) in loose), runs[-1]
        )
        found.add(_norm(run))
        start += run.count(",") + 1
    return frozenset(found - {""})


def _compare(
    kind: str, assumed: str, answer: str, options: Sequence[str] = ()
) -> tuple[Verdict, str]:
    if _labels(kind, assumed, options) == _labels(kind, answer, options):
        return "confirmed", f"the late answer is what was assumed ({assumed})"
    if kind == "free_text":
        return "for_pm", f"assumed {assumed!r}, answered {answer!r} (free text: the PM judges)"
    return "contradicted", f"assumed {assumed!r}; the late answer is {answer!r}"


def affected_tasks(agent: str, plan: Sequence[int]) -> tuple[int, ...]:
    """The tasks an agent's assumption stands under: a developer's own task; the PM's
    whole plan."""
    if agent == "pm":
        return tuple(plan)
    _, _, number = agent.partition("-")
    return (int(number),) if number.isdigit() and int(number) in plan else ()


def judge(
    question: Mapping[str, Any],
    responses: Sequence[str | None],
    assumptions: Sequence[Mapping[str, Any]],
    plan: Sequence[int],
) -> tuple[Check, ...]:
    """Each assumption that stood in for the answer, judged against the late answer.

    `question`: the stored question object (with `parts` for a multi-part question);
    `responses`: the late answer per part (None: that part left unanswered again);
    `assumptions`: ledger entries (`key`, `agent`, `assumption`, `source`; the gate's own
    carry `value` (the default taken) and maybe `part`; an agent's may carry `value` and
    `about` (a key); `after_question`: recorded after the question was asked);
    `plan`: the task numbers planned so far. Assumptions unrelated to the question are
    left out."""
    parts = question_parts(question)
    checks: list[Check] = []
    for entry in assumptions:
        part = _part_for(entry, parts)
        if part is None:
            continue
        number = int(part.get("part", 1))
        response = responses[number - 1] if number - 1 < len(responses) else None
        if response is None:
            continue  # this part is still unanswered: nothing to hold it against
        kind = str(part.get("kind", "free_text"))
        value = entry.get("value")
        if value is not None:
            labels = [str(o.get("label", "")) for o in part.get("options") or []]
            verdict, why = _compare(kind, str(value), response, labels)
        elif entry.get("source") in DEFAULT_TAKEN:
            verdict, why = "for_pm", "proceeded without a default (the PM judges)"
        else:
            verdict, why = "for_pm", "written as a sentence (the PM judges)"
        agent = str(entry.get("agent") or "pm")
        checks.append(
            Check(
                ledger=str(entry.get("key", "")),
                agent=agent,
                assumption=str(entry.get("assumption", "")),
                verdict=verdict,
                why=why,
                part=number,
                tasks=affected_tasks(agent, plan),
            )
        )
    return tuple(checks)


def _part_for(entry: Mapping[str, Any], parts: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The part an assumption stood in for, or None when it is not about the question."""
    source = entry.get("source")
    if source in DEFAULT_TAKEN:
        number = entry.get("part")
        if number is not None:
            return next((p for p in parts if int(p.get("part", 1)) == int(number)), None)
        agent = entry.get("agent")
        return next((p for p in parts if agent in (p.get("askers") or [])), parts[0])
    if source != "agent":
        return None  # a hard-cap or part-cap fallback: another, unasked question
    about = entry.get("about")
    if about is not None and entry.get("value") is not None:
        return next(
            (p for p in parts if p.get("key") and _norm(str(p["key"])) == _norm(str(about))),
            None,
        )
    if entry.get("after_question"):
        agent = entry.get("agent")
        return next((p for p in parts if agent in (p.get("askers") or [])), parts[0])
    return None


def needs_review(checks: Sequence[Mapping[str, Any]]) -> bool:
    """Whether anything is left to act on (`checks`: `Check.as_dict()`s): a
    contradiction, or free text for the PM."""
    return any(c.get("verdict") != "confirmed" for c in checks)


def due(late: Mapping[str, Any]) -> bool:
    """Whether the PM is to be told the late answer (the stored late record `late`): it
    needs review, is not reconciled yet, and the session acts on it (`on_late_answer:
    reconcile`, or its ended run was reopened by `resume --reconcile`)."""
    return (
        bool(late.get("needs_review"))
        and late.get("reconciled") is None
        and (late.get("policy") == "reconcile" or late.get("reopened") is not None)
    )


def instruction(
    question: Mapping[str, Any], response: str, checks: Sequence[Mapping[str, Any]]
) -> str:
    """What the PM is told on its next turn (or its reconciliation round)."""
    lines = [
        "The user's answer to the session's clarification question arrived late, after "
        "the agents had proceeded on defaults and assumptions. This is an instruction, not "
        "a question: do not ask for clarification.",
        f"Question: {question.get('question', '')}",
        f"Late answer: {response}",
    ]
    by_verdict: dict[str, list[Mapping[str, Any]]] = {}
    for check in checks:
        by_verdict.setdefault(str(check.get("verdict")), []).append(check)
    titles = {
        "contradicted": "Assumptions the answer contradicts:",
        "for_pm": "Assumptions to judge against the answer yourself:",
        "confirmed": "Assumptions the answer confirms (nothing to do):",
    }
    for verdict, title in titles.items():
        if by_verdict.get(verdict):
            lines.append(title)
            lines += [
                f"- {c.get('agent')}"
                + (f" (tasks {', '.join(map(str, c['tasks']))})" if c.get("tasks") else "")
                + f": {c.get('assumption')}"
                for c in by_verdict[verdict]
            ]
    affected = sorted(
        {n for c in checks if c.get("verdict") != "confirmed" for n in c.get("tasks") or ()}
    )
    lines.append(
        "Re-plan the work the answer changes"
        + (f" (tasks {', '.join(map(str, affected))})" if affected else "")
        + ": reply PLANNED with only the tasks to redo, built on the late answer, or "
        "COMPLETE if nothing needs to change; list what you re-planned in `assumptions`."
    )
    return "\n".join(lines)
