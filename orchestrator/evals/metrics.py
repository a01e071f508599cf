"""The ask figures (docs/eval.md), per case and in total: pure functions of what a session
recorded and what the case says, with no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.evals.cases import EvalCase

__all__ = ["CaseResult", "score_case", "totals", "f1", "LATE_GOAL"]

# A goal question after this share of the agent calls comes too late to pay off
# ("Ask Early, Ask Late, Ask Right": goal clarification loses its value after ~10%).
LATE_GOAL = 0.1


@dataclass(frozen=True)
class CaseResult:
    """One case run with one configuration: the counts, then the figures made of them."""

    case: str
    control: bool
    status: str
    questions: int  # questions surfaced to the (simulated) user
    hits: int  # of them, questions about a critical blocker
    critical: int  # critical blockers in the case
    found: int  # critical blockers a surfaced question was about
    calls: int  # agent calls in the session
    calls_before: int | None  # agent calls before the one that asked (None: no question)
    late_goal: int  # questions about a goal blocker asked after LATE_GOAL of the calls
    assumptions: int
    assumptions_matching: int  # recorded assumptions that name a blocker's hidden answer
    outcome: bool  # completed, and every required fact named in the plan or the summary
    missing: tuple[str, ...]  # the required facts not named
    model_calls: int | None
    tokens: int | None
    error: str | None = None

    @property
    def ask_rate(self) -> float:
        return 1.0 if self.questions else 0.0

    @property
    def precision(self) -> float | None:
        return self.hits / self.questions if self.questions else None

    @property
    def recall(self) -> float | None:
        return self.found / self.critical if self.critical else None

    @property
    def ask_f1(self) -> float | None:
        if not self.questions and not self.critical:
            return None  # nothing to ask and nothing asked: over_ask_rate covers controls
        return f1(self.precision or 0.0, self.recall or 0.0)

    @property
    def timing(self) -> float | None:
        if self.calls_before is None or not self.calls:
            return None
        return self.calls_before / self.calls

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "control": self.control,
            "status": self.status,
            "ask_rate": self.ask_rate,
            "precision": _round(self.precision),
            "recall": _round(self.recall),
            "ask_f1": _round(self.ask_f1),
            "over_ask_rate": (self.ask_rate if self.control else None),
            "timing": _round(self.timing),
            "late_goal_questions": self.late_goal,
            "outcome": 1.0 if self.outcome else 0.0,
            "missing_facts": list(self.missing),
            "questions": self.questions,
            "assumptions": self.assumptions,
            "assumptions_matching": self.assumptions_matching,
            "agent_calls": self.calls,
            "model_calls": self.model_calls,
            "tokens": self.tokens,
            "error": self.error,
        }


def f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def score_case(
    case: EvalCase, doc: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> CaseResult:
    """Score one ended session (`doc`: its session object, `events`: its log)."""
    calls = 0
    calls_before: int | None = None
    asked: list[tuple[Mapping[str, Any], int]] = []  # (question, calls before its asker)
    plan: list[str] = []
    for event in events:
        kind = event.get("kind")
        if kind == "agent_reply":
            calls += 1
            reply = event.get("reply") or {}
            for task in reply.get("tasks") or []:
                plan += [str(task.get("title") or ""), str(task.get("description") or "")]
            plan.append(str(reply.get("summary") or ""))
        elif kind == "question_surfaced":
            # The reply that asked is the agent call recorded just before this event.
            before = max(calls - 1, 0)
            asked.append((event.get("question") or {}, before))
            calls_before = before if calls_before is None else calls_before
    plan += [str(t.get("summary") or "") for t in doc.get("tasks") or []]
    plan.append(str(doc.get("summary") or ""))
    said = "\n".join(plan).lower()
    about = [(case.blocker_of(q), before) for q, before in asked]
    critical_ids = {b.id for b in case.critical}
    found = {b.id for b, _ in about if b is not None and b.id in critical_ids}
    late_goal = sum(
        1
        for b, before in about
        if b is not None and b.dimension == "goal" and calls and before / calls > LATE_GOAL
    )
    answers = [b.answer.lower() for b in case.blockers] + [
        b.option.lower() for b in case.blockers if b.option
    ]
    assumptions = [str(a.get("assumption") or "").lower() for a in doc.get("assumptions") or []]
    missing = tuple(fact for fact in case.outcome if fact.lower() not in said)
    usage = doc.get("usage") or {}
    status = str(doc.get("status"))
    return CaseResult(
        case=case.name,
        control=case.is_control,
        status=status,
        questions=len(asked),
        hits=sum(1 for b, _ in about if b is not None and b.critical),
        critical=len(case.critical),
        found=len(found),
        calls=calls,
        calls_before=calls_before,
        late_goal=late_goal,
        assumptions=len(assumptions),
        assumptions_matching=sum(1 for a in assumptions if any(x in a for x in answers)),
        outcome=status == "completed" and not missing,
        missing=missing,
        model_calls=usage.get("model_calls"),
        tokens=usage.get("total_tokens"),
        error=doc.get("error") or doc.get("last_error"),
    )


def totals(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The figures over all cases: sums of the counts first, then the ratios (micro
    averages), so that a case with more to ask weighs more."""
    questions = sum(r.questions for r in results)
    critical = sum(r.critical for r in results)
    precision = sum(r.hits for r in results) / questions if questions else 0.0
    recall = sum(r.found for r in results) / critical if critical else 0.0
    controls = [r for r in results if r.control]
    timed = [t for t in (r.timing for r in results) if t is not None]
    reported = [r for r in results if r.model_calls is not None]
    return {
        "cases": len(results),
        "controls": len(controls),
        "ask_rate": _round(sum(r.ask_rate for r in results) / len(results)) if results else 0.0,
        "precision": _round(precision),
        "recall": _round(recall),
        "ask_f1": _round(f1(precision, recall)),
        "over_ask_rate": _round(sum(r.ask_rate for r in controls) / len(controls))
        if controls
        else None,
        "timing": _round(sum(timed) / len(timed)) if timed else None,
        "late_goal_questions": sum(r.late_goal for r in results),
        "outcome": _round(sum(r.outcome for r in results) / len(results)) if results else 0.0,
        "questions": questions,
        "assumptions": sum(r.assumptions for r in results),
        "assumptions_matching": sum(r.assumptions_matching for r in results),
        "agent_calls": sum(r.calls for r in results),
        "model_calls": sum(r.model_calls or 0 for r in reported) if reported else None,
        "tokens": sum(r.tokens or 0 for r in reported) if reported else None,
        "failed": sum(1 for r in results if r.status != "completed"),
    }
