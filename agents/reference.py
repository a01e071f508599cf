"""The reference asking policies of `orchestrator eval` (`--model eval:NAME`): baselines
that play a whole session without a model, so that a report shows where a real model
stands between them.

- never-ask: plans at once, assuming whatever the task leaves open;
- always-ask: asks one broad question at the start of every session, whatever the task;
- oracle: asks exactly about the case's critical blocker (and only then), at the start,
  offering its options, and plans with the answer.

Every policy plans one task named after the session task, carries the user's answer (if
any) into the plan and the summary, and completes once the developers are done. In a case
with a repository, the developer writes the case's `solution` file before its DONE: with
the user's answer where the plan carries one, else with the case's guess; the case's
checks then decide whether the task is done.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.domain.replies import parse_reply
from orchestrator.errors import ConfigError
from orchestrator.runtime.agent import AgentRequest, AgentTurn

__all__ = ["ReferencePolicy", "POLICIES", "BROAD_QUESTION", "SAID"]

POLICIES = ("never-ask", "always-ask", "oracle")
BROAD_QUESTION = "Before I plan this: is there anything else I should know?"
ASSUMPTION = "Whatever the task leaves open takes the usual default of the codebase."
# How the plan carries the user's answer to the developer.
SAID = "As the user said: "


class ReferencePolicy:
    """One reference policy; `blocker` is the case's critical blocker (the oracle's hidden
    knowledge, as the case file gives it), None when the case has none."""

    sequential = True

    def __init__(
        self,
        policy: str,
        blocker: Mapping[str, Any] | None = None,
        solution: Mapping[str, Any] | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ConfigError(
                f"unknown reference policy eval:{policy}; choose from "
                + ", ".join(f"eval:{p}" for p in POLICIES)
            )
        self.policy = policy
        self.blocker = dict(blocker) if blocker else None
        self.solution = dict(solution) if solution else None

    def respond(self, request: AgentRequest) -> AgentTurn:
        if request.agent != "pm":
            return self._develop(request)
        answer = _answer(request)
        if request.tasks:
            summary = f"Completed: {request.task}" + (f" ({answer})" if answer else "")
            return self._turn(request, {"status": "COMPLETE", "summary": summary})
        question = self._question() if request.clarification is None else None
        if question is not None and request.call == 1:
            return self._turn(request, question)
        task: dict[str, Any] = {"title": request.task}
        if answer:
            task["description"] = SAID + answer
        planned = {"status": "PLANNED", "tasks": [task]}
        if not answer:
            planned["assumptions"] = [ASSUMPTION]
        return self._turn(request, planned)

    def _question(self) -> dict[str, Any] | None:
        if self.policy == "always-ask":
            return {"status": "NEEDS_CLARIFICATION", "question": BROAD_QUESTION, "uncertainty": 100}
        if self.policy == "oracle" and self.blocker is not None:
            asked: dict[str, Any] = {
                "status": "NEEDS_CLARIFICATION",
                "question": self.blocker["fact"],
                "reason": "The task does not say, and the outcome depends on it.",
                "uncertainty": 100,
            }
            if self.blocker.get("options"):
                asked["kind"] = "single_select"
                asked["options"] = [{"label": label} for label in self.blocker["options"]]
            return asked
        return None

    def _develop(self, request: AgentRequest) -> AgentTurn:
        assignment = request.assignment or {}
        title = assignment.get("title", request.task)
        reply = parse_reply(request.agent, {"status": "DONE", "summary": f"Done: {title}"})
        if self.solution is None or request.desk is None:
            return AgentTurn(reply)
        from orchestrator.skills import play_calls

        described = str(assignment.get("description") or "")
        value = described.partition(SAID)[2] or str(self.solution.get("guess") or "")
        content = str(self.solution["content"]).replace("{value}", value)
        write = {"write_file": {"path": self.solution["path"], "content": content}}
        changed, ran = play_calls(request.desk, request.agent, [write])
        return AgentTurn(reply, files=tuple(sorted(changed)), commands=tuple(ran))

    @staticmethod
    def _turn(request: AgentRequest, reply: dict[str, Any]) -> AgentTurn:
        return AgentTurn(parse_reply(request.agent, reply))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "eval",
            "policy": self.policy,
            "blocker": self.blocker,
            "solution": self.solution,
        }


def _answer(request: AgentRequest) -> str | None:
    clarification = request.clarification
    return clarification.response if clarification is not None else None
