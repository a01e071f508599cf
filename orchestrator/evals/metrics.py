"""The ask figures (docs/eval.md), per case and in total: pure functions of what a session
recorded and what the case says, with no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.evals.cases import EvalCase, Matcher

__all__ = ["CaseResult", "score_case", "totals", "f1", "LATE_GOAL"]

# A goal question after this share of the plan is done comes too late to pay off
# ("Ask Early, Ask Late, Ask Right": goal clarification loses its value after ~10% of the
# execution). Measured in the plan's tasks, not in agent calls: with 3-5 calls a session,
# "after 10% of the calls" only meant "not at the first call".
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
    done_before: float | None  # share of the plan done when the first question came
    late_goal: int  # questions about a goal blocker asked after LATE_GOAL of the plan
    assumptions: int
    assumptions_matching: int  # recorded assumptions that name a blocker's hidden answer
    # completed, every required fact named in the plan or the summary, and in a case with
    # checks every task done (its checks passed)
    outcome: bool
    missing: tuple[str, ...]  # the required facts not named
    model_calls: int | None
    tokens: int | None
    error: str | None = None
    session_id: str | None = None
    asked: tuple[str, ...] = ()  # the questions surfaced, as asked
    undone: tuple[str, ...] = ()  # in a case with checks: the tasks not done

    @property
    def failed(self) -> bool:
        """The session did not complete: a failure, never "chose not to ask"."""
        return self.status != "completed"

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
        return self.done_before

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "session_id": self.session_id,
            "control": self.control,
            "status": self.status,
            "failed": self.failed,
            "ask_rate": self.ask_rate,
            "precision": _round(self.precision),
            "recall": _round(self.recall),
            "ask_f1": _round(self.ask_f1),
            "over_ask_rate": (self.ask_rate if self.control and not self.failed else None),
            "timing": _round(self.timing),
            "late_goal_questions": self.late_goal,
            "outcome": 1.0 if self.outcome else 0.0,
            "missing_facts": list(self.missing),
            "undone_tasks": list(self.undone),
            "questions": self.questions,
            "asked": list(self.asked),
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
    case: EvalCase,
    doc: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    matcher: Matcher | None = None,
) -> CaseResult:
    """Score one ended session (`doc`: its session object, `events`: its log); `matcher`:
    the rules over the whole case set (default: this case alone)."""
    judge = matcher or Matcher([case])
    calls = 0
    planned = 0  # tasks in the latest plan
    done = 0  # developer turns that ended their task (DONE or BLOCKED)
    # (question, tasks ended before it; None: asked before there was a plan)
    asked: list[tuple[Mapping[str, Any], int | None]] = []
    plan: list[str] = []
    for event in events:
        kind = event.get("kind")
        if kind == "agent_reply":
            calls += 1
            reply = event.get("reply") or {}
            if reply.get("status") == "PLANNED":
                planned = len(reply.get("tasks") or [])
            elif reply.get("status") in ("DONE", "BLOCKED"):
                done += 1
            for task in reply.get("tasks") or []:
                plan += [str(task.get("title") or ""), str(task.get("description") or "")]
            plan.append(str(reply.get("summary") or ""))
        elif kind == "question_surfaced":
            asked.append((event.get("question") or {}, done if planned else None))
    plan += [str(t.get("summary") or "") for t in doc.get("tasks") or []]
    plan.append(str(doc.get("summary") or ""))
    said = "\n".join(plan).lower()
    # The share of the plan done when each question came (0 before there is a plan).
    shares = [min(before / planned, 1.0) if before and planned else 0.0 for _, before in asked]
    about = [
        (judge.blocker_of(case, q), share) for (q, _), share in zip(asked, shares, strict=True)
    ]
    critical_ids = {b.id for b in case.critical}
    found = {b.id for b, _ in about if b is not None and b.id in critical_ids}
    late_goal = sum(
        1 for b, share in about if b is not None and b.dimension == "goal" and share > LATE_GOAL
    )
    answers = [b.answer.lower() for b in case.blockers] + [
        b.option.lower() for b in case.blockers if b.option
    ]
    assumptions = [str(a.get("assumption") or "").lower() for a in doc.get("assumptions") or []]
    missing = tuple(fact for fact in case.outcome if fact.lower() not in said)
    # Where checks decide "done", a task that is not done (BLOCKED after its checks kept
    # failing) is work the outcome lacks, whatever the summary says.
    tasks = list(doc.get("tasks") or [])
    undone = tuple(
        f"{t.get('number')}. {t.get('title')}: {t.get('status')}"
        for t in tasks
        if case.checks and t.get("status") != "done"
    )
    if case.checks and not tasks:
        undone = ("no task was planned: the checks never ran",)
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
        done_before=shares[0] if shares else None,
        late_goal=late_goal,
        assumptions=len(assumptions),
        assumptions_matching=sum(1 for a in assumptions if any(x in a for x in answers)),
        outcome=status == "completed" and not missing and not undone,
        missing=missing,
        undone=undone,
        model_calls=usage.get("model_calls"),
        tokens=usage.get("total_tokens"),
        error=doc.get("error") or doc.get("last_error"),
        session_id=doc.get("session_id"),
        asked=tuple(str(q.get("question") or "") for q, _ in asked),
    )


def totals(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The figures over all cases: sums of the counts first, then the ratios (micro
    averages), so that a case with more to ask weighs more."""
    questions = sum(r.questions for r in results)
    critical = sum(r.critical for r in results)
    precision = sum(r.hits for r in results) / questions if questions else 0.0
    recall = sum(r.found for r in results) / critical if critical else 0.0
    # A failed control did not "choose not to ask": it is left out of over_ask_rate (and
    # counted in `failed`), so a model that fails everything cannot score a perfect 0.
    controls = [r for r in results if r.control and not r.failed]
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
        "failed": sum(1 for r in results if r.failed),
        "failed_rate": _round(sum(r.failed for r in results) / len(results)) if results else 0.0,
    }
