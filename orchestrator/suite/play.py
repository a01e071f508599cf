"""Playing one scenario through the session API: start, the steps, the expectations.

Runs on a virtual clock (`orchestrator.domain.clock`): a step's `after: 400s` moves time on at
once, so deadlines and `on_timeout` policies are tested without waiting.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.domain import clock
from orchestrator.domain.expect import unmet_lines
from orchestrator.domain.question import UserReply
from orchestrator.errors import ClaimLost, UserError
from orchestrator.scenario.steps import from_scripted

if TYPE_CHECKING:
    from orchestrator.api import Sessions
    from orchestrator.documents import SessionDoc
    from orchestrator.scenario import Scenario, Step

__all__ = ["Played", "play", "final_lines"]


@dataclass(frozen=True)
class Played:
    """The session document at the end, and every expectation that did not hold."""

    doc: SessionDoc
    unmet: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.unmet


def play(
    scenario: Scenario,
    sessions: Sessions,
    *,
    source: str | None = None,
    require_completed: bool = True,
) -> Played:
    """Start `scenario`, run its steps in order, check its `expect`; stop at the first
    step whose reply or `expect` went wrong. With `require_completed`, a scenario whose
    `expect` names no status must complete (contract section 7)."""
    with _clock():
        doc = sessions.start_scenario(scenario, source=source)
        session_id = doc["session_id"]

        def log() -> list[Any]:
            return list(sessions.log(session_id))

        for index, step in enumerate(scenario.steps):
            where = f"steps[{index}]"
            doc, unmet = _step(sessions, session_id, step, where)
            if step.expect is not None and not unmet:
                wanted = step.expect.model_dump(exclude_none=True)
                unmet = unmet_lines(wanted, doc, log, prefix=f"{where}.expect")
            if unmet:
                return Played(doc, tuple(unmet))
        wanted = scenario.expect.model_dump(exclude_none=True) if scenario.expect else {}
        if not require_completed:
            wanted.setdefault("status", doc["status"])
        return Played(doc, tuple(final_lines(wanted, doc, log)))


def final_lines(expect: dict[str, Any], doc: Any, log: Any) -> list[str]:
    """The scenario's own `expect`; without a `status` in it the session must complete."""
    lines = []
    if "status" not in expect and doc["status"] != "completed":
        lines.append(f"status: expected 'completed', got {doc['status']!r}{_why(doc)}")
    return lines + unmet_lines(expect, doc, log)


def _why(doc: Any) -> str:
    if doc["status"] == "paused":
        question = doc.get("pending_question") or {}
        return (
            f" ({question.get('asked_by', 'an agent')} asked {question.get('question')!r} and "
            "no answer was left: add `answers` or `steps`, or `expect: {status: paused}`)"
        )
    if doc["status"] == "failed":
        return f" (error: {doc.get('error')})"
    return ""


def _step(sessions: Sessions, session_id: str, step: Step, where: str) -> tuple[Any, list[str]]:
    if step.after:
        clock.advance(step.after)
    reply = _reply(step)
    try:
        if reply is None and step.action != "resume":
            return sessions.status(session_id), []  # applies a deadline that has passed
        doc = sessions.resume(session_id, reply)
    except (UserError, ClaimLost) as exc:  # (a storage fault is no refusal: it goes up)
        doc = sessions.status(session_id)
        if step.refused is None:
            return doc, [f"{where}: the {_verb(step)} was refused: {exc.message}"]
        if step.refused not in exc.message:
            return doc, [
                f"{where}.refused: expected a refusal containing {step.refused!r}, "
                f"got {exc.message!r}"
            ]
        return doc, []
    if step.refused is not None:
        return doc, [
            f"{where}.refused: expected a refusal containing {step.refused!r}, got the "
            f"{_verb(step)} accepted (status {doc['status']!r})"
        ]
    return doc, []


def _reply(step: Step) -> UserReply | None:
    if step.parts is not None:
        entries = [p if isinstance(p, str) else p.model_dump(exclude_none=True) for p in step.parts]
        return from_scripted({"parts": entries, "note": step.note})
    if step.answer is not None:
        return UserReply(text=step.answer, note=step.note)
    if step.choices is not None:
        return UserReply(choices=tuple(step.choices), note=step.note)
    if step.action in ("decline", "cancel"):
        return UserReply(action=step.action, note=step.note)
    return None


def _verb(step: Step) -> str:
    if step.answer is not None or step.choices is not None or step.parts is not None:
        return "answer"
    return step.action or "status"


def _clock() -> AbstractContextManager[None]:
    """A virtual clock, unless the caller already runs one (its own, to advance)."""
    return nullcontext() if clock.is_virtual() else clock.virtual()
