"""A chat model as the judge of what a question is about (`orchestrator eval
--judge-model`), as HiL-Bench's judge is: shown one blocker and one question, it says
whether the question asks for that missing information. Keywords only miss a question
phrased in other words; a judge reads it.

The deterministic rules that make a question specific stay (orchestrator.evals.cases):
a question that bundles several asks is about none of them, whatever the judge would say.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.evals.cases import Blocker, EvalCase, Matcher, bundled, question_text

__all__ = ["JUDGE_PROMPT", "ModelJudge"]

JUDGE_PROMPT = """You judge questions that a software agent asked its user.

The task left out one piece of information (the blocker):
{fact}
The user's answer to it would be: {answer}

The agent asked:
{question}

Does the agent's question ask for this missing information, specifically? A question that
asks for something else, asks only in general ("anything else I should know?"), or lists
many topics hoping to hit one does not. Reply with exactly one word: YES or NO."""


class ModelJudge(Matcher):
    """Which blocker a question is about, by a chat model's verdict per blocker (critical
    blockers first). Verdicts are kept per (case, blocker, question), so the simulated user
    and the score hear the same one and each is asked once."""

    def __init__(self, cases: Iterable[EvalCase], model: Any) -> None:
        super().__init__(cases)
        self.model = model
        self._verdicts: dict[tuple[str, str, str], bool] = {}
        self._lock = threading.Lock()

    def blocker_of(self, case: EvalCase, question: Mapping[str, Any]) -> Blocker | None:
        if not case.blockers or bundled(str(question.get("question") or "")):
            return None
        for blocker in sorted(case.blockers, key=lambda b: not b.critical):
            if self._asks(case, blocker, question):
                return blocker
        return None

    def _asks(self, case: EvalCase, blocker: Blocker, question: Mapping[str, Any]) -> bool:
        from langchain_core.messages import HumanMessage

        text = str(question.get("question") or "")
        labels = [str(o.get("label", "")) for o in question.get("options") or []]
        if labels:
            text += "\nOptions: " + "; ".join(labels)
        key = (case.name, blocker.id, question_text(question))
        with self._lock:
            if key in self._verdicts:
                return self._verdicts[key]
        prompt = JUDGE_PROMPT.format(fact=blocker.fact, answer=blocker.answer, question=text)
        said = self.model.invoke([HumanMessage(prompt)]).content
        verdict = str(said).strip().upper().startswith("YES")
        with self._lock:
            return self._verdicts.setdefault(key, verdict)
