"""Writes made from inside graph nodes. All idempotent: LangGraph re-runs nodes.

Every write is keyed (`events.key` is unique per session): a re-run reads what the first
run wrote instead of calling an agent again or counting twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, select, update

from orchestrator import clock, gate
from orchestrator.store._base import StoreBase, utcnow
from orchestrator.store.schema import events as _E
from orchestrator.store.schema import sessions as _S
from orchestrator.store.schema import state as _T

__all__ = ["StepsMixin"]


class StepsMixin(StoreBase):
    def recorded_turns(self, session_id: str) -> dict[str, dict[str, Any]]:
        """Every agent turn recorded for the session, by key (`<agent>#<call>`).

        Read once when a process starts driving the session: only the claim's holder
        records turns, so from then on its copy is complete.
        """
        with self._read() as conn:
            rows = conn.execute(
                select(_E.c.key, _E.c.payload).where(
                    _E.c.session_id == session_id, _E.c.kind == "agent_reply"
                )
            )
            return {key: dict(payload) for key, payload in rows}

    def record_reply(
        self,
        session_id: str,
        key: str,
        agent: str,
        turn: dict[str, Any],
        *,
        plan: tuple[int, list[dict[str, Any]]] | None = None,
        task: tuple[int, int, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Store an agent's turn (`reply`, `messages`, `files`) under `key`, with what the
        session row shows of it (a new `plan`, or one `task`'s result), in one transaction.
        If a turn is stored under `key` already, return that one and change nothing."""
        with self._write() as conn:
            if not self._event(conn, session_id, "agent_reply", agent=agent, key=key, **turn):
                stored = conn.execute(
                    select(_E.c.payload).where(_E.c.session_id == session_id, _E.c.key == key)
                ).scalar_one()
                return dict(stored)
            for index, text in enumerate(turn["reply"].get("assumptions", [])):
                self._assumption(
                    conn,
                    session_id,
                    f"{key}:{index}",
                    agent=agent,
                    assumption=text,
                    why="reported by the agent",
                    source="agent",
                )
            if plan is not None:
                conn.execute(
                    update(_S)
                    .where(_S.c.id == session_id)
                    .values(round=plan[0], tasks=plan[1], updated_at=utcnow())
                )
            if task is not None:
                self._update_task(conn, session_id, *task)
            return turn

    def gate_ask(
        self,
        session_id: str,
        ask: gate.Ask,
        question: dict[str, Any],
        *,
        max_fallbacks: int,
        uncertainty_threshold: int = gate.DEFAULT_UNCERTAINTY_THRESHOLD,
        timeout: float | None = None,
        repaired: list[str] | None = None,
    ) -> gate.Decision:
        """Case A, B or D for one NEEDS_CLARIFICATION reply: read, decide, write, one txn.

        A final decision (rerun, fallback, fail) is stored under `gate:<reply key>` and
        returned as stored when the node is re-run, so counters move once per reply.
        """
        final_key = f"gate:{ask.key}"
        with self._write() as conn:
            stored = conn.execute(
                select(_E.c.payload).where(_E.c.session_id == session_id, _E.c.key == final_key)
            ).scalar()
            if stored is not None:
                return _decision_from_payload(stored)
            state = self._gate_state(conn, session_id)
            decision = gate.decide(
                state,
                ask,
                max_fallbacks=max_fallbacks,
                uncertainty_threshold=uncertainty_threshold,
            )
            if isinstance(decision, gate.Surface):
                deadline = None if timeout is None else clock.now() + timeout
                self._surface(conn, session_id, ask, question, decision, deadline, repaired)
            elif isinstance(decision, gate.Wait):
                if ask.key != state.request_key:
                    self._event(
                        conn,
                        session_id,
                        "question_held",
                        agent=ask.agent,
                        key=f"held:{ask.key}",
                        question=ask.question,
                        note="the session's one question is already open; this one waits",
                    )
            else:
                self._apply_final(conn, session_id, final_key, decision)
            return decision

    def _surface(
        self,
        conn: Connection,
        session_id: str,
        ask: gate.Ask,
        question: dict[str, Any],
        decision: gate.Surface,
        deadline: float | None,
        repaired: list[str] | None,
    ) -> None:
        """Case A. Compare-and-set on `clarification_used`, and a unique index on the
        `question_surfaced` event: the database refuses a second question on its own."""
        spent = conn.execute(
            update(_T)
            .where(_T.c.session_id == session_id, _T.c.clarification_used.is_(False))
            .values(
                clarification_used=True,
                clarification_resolved=False,
                clarification_question=decision.update["question"],
                asked_by=decision.update["asked_by"],
                request_key=decision.update["request_key"],
                question_object=question,
                asked_at=utcnow(),
                deadline=deadline,
                questions_surfaced=_T.c.questions_surfaced + 1,
            )
        )
        if spent.rowcount != 1:
            raise RuntimeError(f"session {session_id}: the question was already spent")
        if not self._event(
            conn,
            session_id,
            "question_surfaced",
            agent=ask.agent,
            key=f"surface:{ask.key}",
            question=question,
            **({"repaired": repaired} if repaired else {}),
        ):
            raise RuntimeError(f"session {session_id}: a question was already surfaced")

    def _apply_final(
        self, conn: Connection, session_id: str, key: str, decision: gate.Decision
    ) -> None:
        details: dict[str, Any]
        ledger: tuple[str, str, str] | None = None  # assumption, why, source
        if isinstance(decision, gate.Fallback | gate.Proceed):
            self._merge_state(conn, session_id, decision.update)
        if isinstance(decision, gate.Fallback):
            conn.execute(
                update(_T)
                .where(_T.c.session_id == session_id)
                .values(fallbacks_injected=_T.c.fallbacks_injected + 1)
            )
            kind = "fallback"
            details = {"decision": "fallback", "why": decision.why, "message": decision.message}
            ledger = (
                _fallback_assumption(decision, self._gate_state(conn, session_id)),
                _WHY[decision.why],
                decision.why,
            )
        elif isinstance(decision, gate.Proceed):
            kind = "proceed"
            details = {
                "decision": "proceed",
                "message": decision.message,
                "default": decision.default,
            }
            ledger = (
                f"goes on with its own default: {decision.default or '(none given)'}",
                "its uncertainty was below the threshold, so the user was not asked",
                "uncertainty",
            )
        elif isinstance(decision, gate.Rerun):
            kind = "answer_delivered"
            details = {
                "decision": "rerun",
                "question": decision.question,
                "response": decision.response,
            }
        else:
            assert isinstance(decision, gate.Fail)
            kind, details = "gate_failed", {"decision": "fail", "reason": decision.reason}
        if ledger is not None:
            assumption, why, source = ledger
            self._assumption(
                conn, session_id, key, agent=decision.agent, assumption=assumption, why=why,
                source=source,
            )  # fmt: skip
        # `asker` lets a re-run rebuild this decision (_decision_from_payload).
        self._event(
            conn, session_id, kind, agent=decision.agent, key=key, asker=decision.agent, **details
        )

    def _update_task(
        self, conn: Connection, session_id: str, round_: int, number: int, fields: dict[str, Any]
    ) -> None:
        row = self._session(conn, session_id, lock=True)
        if row.round != round_:
            return
        tasks = [{**task, **fields} if task["number"] == number else task for task in row.tasks]
        conn.execute(
            update(_S).where(_S.c.id == session_id).values(tasks=tasks, updated_at=utcnow())
        )


def _fallback_assumption(decision: gate.Fallback, state: gate.GateState) -> str:
    if decision.why == "hard_cap":
        return "proceeds on its own assumptions; its further question was not asked"
    default = f" (safe default: {state.default})" if state.default else ""
    return f"proceeds without an answer to: {state.question}{default}"


_WHY = {
    "hard_cap": "the session's one question was already used",
    "declined": "the user declined the question",
    "timeout": "no answer before the question's deadline",
}


def _decision_from_payload(payload: Mapping[str, Any]) -> gate.Decision:
    kind = payload["decision"]
    if kind == "proceed":
        return gate.Proceed(payload["asker"], payload["message"], payload["default"], {})
    if kind == "rerun":
        return gate.Rerun(payload["asker"], payload["question"], payload["response"])
    if kind == "fallback":
        return gate.Fallback(payload["asker"], payload["why"], {}, payload["message"])
    return gate.Fail(payload["asker"], payload["reason"])
