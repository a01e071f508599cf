"""The simulated user: answers an agent's question from a case's hidden specification,
through the session API's `ask` callback (the door a person's answers go through)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.api import Reply
from orchestrator.evals.cases import EvalCase, Matcher

__all__ = ["SimulatedUser", "ModelUser", "DONT_KNOW"]

DONT_KNOW = "I don't know; decide as you think best."


class SimulatedUser:
    """Deterministic: the same question always gets the same reply.

    On a question about one of the case's blockers (Matcher.blocker_of: the same rule
    the figures use, so a bundle of questions gets no answer either) it picks the
    blocker's right option when the question offers it, else gives the blocker's answer as
    text (where the question takes text). Otherwise it says it does not know: a text
    answer, or a decline where the question takes only its options."""

    def __init__(self, case: EvalCase, matcher: Matcher | None = None) -> None:
        self.case = case
        self.matcher = matcher or Matcher([case])

    def __call__(self, question: Mapping[str, Any]) -> Reply:
        kind = question.get("kind", "free_text")
        labels = [str(o.get("label")) for o in question.get("options") or []]
        takes_text = kind == "free_text" or bool(question.get("allow_other"))
        blocker = self.matcher.blocker_of(self.case, question)
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


USER_PROMPT = """You play the user who gave a team of software agents this task:

{task}

What you know, and only this:

{spec}
{facts}
An agent asks you the question below. Answer it in one or two sentences from what you know.
When the question offers options, reply with exactly one option label and nothing else.
When what you know does not settle the question, reply exactly: {dont_know}"""


class ModelUser:
    """A chat model playing the user (`--user-model`): it sees the hidden specification and
    the blockers' answers, and its reply goes through the same door. A select question
    takes the option the reply names; a reply that names none is treated as not knowing."""

    def __init__(self, case: EvalCase, model: Any) -> None:
        self.case = case
        self.model = model

    def __call__(self, question: Mapping[str, Any]) -> Reply:
        from langchain_core.messages import HumanMessage, SystemMessage

        facts = "".join(f"- {b.fact} {b.answer}\n" for b in self.case.blockers)
        system = USER_PROMPT.format(
            task=self.case.task,
            spec=self.case.spec,
            facts="\nFacts:\n" + facts if facts else "",
            dont_know=DONT_KNOW,
        )
        labels = [str(o.get("label")) for o in question.get("options") or []]
        asked = str(question.get("question") or "")
        if labels:
            asked += "\nOptions: " + "; ".join(labels)
        said = self.model.invoke([SystemMessage(system), HumanMessage(asked)]).content
        text = (said if isinstance(said, str) else str(said)).strip() or DONT_KNOW
        if question.get("kind", "free_text") == "free_text":
            return Reply(text=text)
        named = [label for label in labels if label.lower() in text.lower()]
        if named:
            return Reply(choices=(max(named, key=len),))
        if question.get("allow_other") and text != DONT_KNOW:
            return Reply(text=text)
        return Reply(action="decline", note=DONT_KNOW)
