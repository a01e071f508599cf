"""The simulated user: answers an agent's question from a case's hidden specification,
through the session API's `ask` callback (the door a person's answers go through)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.api import Reply
from orchestrator.evals.cases import EvalCase

__all__ = ["SimulatedUser", "DONT_KNOW"]

DONT_KNOW = "I don't know; decide as you think best."


class SimulatedUser:
    """Deterministic: the same question always gets the same reply.

    On a question about one of the case's blockers (EvalCase.blocker_of) it picks the
    blocker's right option when the question offers it, else gives the blocker's answer as
    text (where the question takes text). Otherwise it says it does not know: a text
    answer, or a decline where the question takes only its options."""

    def __init__(self, case: EvalCase) -> None:
        self.case = case

    def __call__(self, question: Mapping[str, Any]) -> Reply:
        kind = question.get("kind", "free_text")
        labels = [str(o.get("label")) for o in question.get("options") or []]
        takes_text = kind == "free_text" or bool(question.get("allow_other"))
        blocker = self.case.blocker_of(question)
        if blocker is not None:
            if kind != "free_text" and blocker.option is not None:
                chosen = [label for label in labels if label.lower() == blocker.option.lower()]
                if chosen:
                    return Reply(choices=(chosen[0],))
            if takes_text:
                return Reply(text=blocker.answer)
        if takes_text:
            return Reply(text=DONT_KNOW)
        return Reply(action="decline", note=DONT_KNOW)
