"""A late answer's transactions (docs/late-answers.md): record it, hand it to the PM, and
reopen an ended session for one reconciliation round.

The record lives with the question, in `question_object["late"]` (no new column): the
late answer, where it came from, the judged assumptions (orchestrator.domain.reconcile)
and, as the session moves on, when the PM was told and what it re-planned. A `late_answer`
event, keyed, makes a second late answer impossible in the database as well as in the gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.domain import gate, reconcile
from orchestrator.domain.clock import iso
from orchestrator.errors import SessionNotWaiting
from orchestrator.store._tx import add_event, fence, json_value, utcnow
from orchestrator.store.owner import Claim, Owner
from orchestrator.store.sql import Tx
from orchestrator.store.views import LEDGER_SQL, joined_row

__all__ = [
    "record",
    "update",
    "question_of",
    "reopen_facts",
    "late_of",
    "for_pm",
    "delivered",
    "reopen",
    "failed_round",
    "ENDED",
]

ENDED = ("completed", "failed")  # the sessions a reconciliation round may reopen


def question_of(row: Any) -> dict[str, Any]:
    """The session's stored question object with its asker (without the late record)."""
    stored = dict(json_value(row.question_object) or {})
    stored.pop("late", None)
    return stored | {"asked_by": row.asked_by}


def record(
    tx: Tx, row: Any, decision: gate.Late, *, source: str, choices: list[str] | None
) -> None:
    """Record the late answer `decision` for the session `row` (locked by the caller),
    with each assumption that stood in for it judged against it."""
    if row.status == "cancelled":
        raise SessionNotWaiting(f"session {row.id} is cancelled; it takes no answer")
    responses = list(decision.parts or (decision.response,))
    checks = _judged(tx, row, responses)
    policy = str((row.settings or {}).get("on_late_answer", "reconcile"))
    late: dict[str, Any] = {
        "question": row.clarification_question,
        "response": decision.response,
        "source": source,
        "at": iso(utcnow()),
        "checks": checks,
        "needs_review": reconcile.needs_review(checks),
        "policy": policy,
        "reconciled": None,
    }
    if choices:
        late["choices"] = list(choices)
    if decision.parts:
        late["parts"] = list(decision.parts)
    _write(tx, row.id, question_of(row), late)
    tx.run("UPDATE sessions SET updated_at = :at WHERE id = :sid", {"at": utcnow(), "sid": row.id})
    add_event(
        tx, row.id, "late_answer", key="late_answer", response=decision.response,
        choices=choices, source=source, checks=checks, needs_review=late["needs_review"],
        policy=policy,
    )  # fmt: skip


def _judged(tx: Tx, row: Any, responses: list[str | None]) -> list[dict[str, Any]]:
    """The late answer `responses` (per part) held against the session's ledger now."""
    ledger = [
        {
            "key": entry.key,
            "agent": entry.agent,
            **dict(json_value(entry.payload) or {}),
            "after_question": _not_before(entry.created_at, row.asked_at),
        }
        for entry in tx.rows(LEDGER_SQL, {"id": row.id})
    ]
    plan = [int(task["number"]) for task in json_value(row.tasks) or []]
    return [c.as_dict() for c in reconcile.judge(question_of(row), responses, ledger, plan)]


def rejudge(store: Any, claim: Claim) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Hold a late answer not yet reconciled against the ledger again: assumptions the
    agents wrote after it came (an asker that took its default afterwards) are judged too.
    Run by the driver before each PM turn and as the session ends. Returns (the late
    record as it now stands, the question), or None when there is nothing to reconcile."""
    if late_of(store, claim.session_id) is None:
        return None  # the common case: one small read
    with store.writing() as tx:
        row = fence(tx, claim, joined=True)
        late = dict((json_value(row.question_object) or {}).get("late") or {})
        if not late or late.get("reconciled") is not None:
            return None
        checks = _judged(tx, row, list(late.get("parts") or [late["response"]]))
        if checks != late.get("checks"):
            late = update(tx, row, checks=checks, needs_review=reconcile.needs_review(checks))
        return late, question_of(row)


def _not_before(when: Any, asked_at: Any) -> bool:
    """Was a ledger entry written at or after the question was asked?"""
    if when is None or asked_at is None:
        return False
    if (when.tzinfo is None) != (asked_at.tzinfo is None):  # SQLite may drop the zone
        when, asked_at = when.replace(tzinfo=None), asked_at.replace(tzinfo=None)
    return bool(when >= asked_at)


def update(tx: Tx, row: Any, **fields: Any) -> dict[str, Any]:
    """Merge `fields` into the session's late record (read under lock by the caller)."""
    stored = dict(json_value(row.question_object) or {})
    late = dict(stored.get("late") or {}) | fields
    _write(tx, row.id, question_of(row), late)
    return late


def _write(tx: Tx, session_id: str, question: Mapping[str, Any], late: Mapping[str, Any]) -> None:
    stored = {k: v for k, v in question.items() if k != "asked_by"} | {"late": dict(late)}
    tx.run(
        "UPDATE orchestrator_state SET question_object = :question_object WHERE session_id = :sid",
        {"question_object": stored, "sid": session_id},
    )


def reopen_facts(row: Any) -> dict[str, Any]:
    """Why the ended session `row` can (or cannot) be reopened for its reconciliation
    round: its late record, or SessionNotWaiting naming what is missing."""
    late = (json_value(row.question_object) or {}).get("late")
    if row.status not in ENDED:
        raise SessionNotWaiting(
            f"session {row.id} is {row.status}; only an ended (completed or failed) session "
            "is reconciled with `--reconcile` (a running one tells its PM on its next turn)"
        )
    if late is None:
        raise SessionNotWaiting(
            f"session {row.id} has no late answer to reconcile: a late answer is one given "
            "after the question was declined or timed out (`resume ID --answer ...`)"
        )
    if late.get("reconciled") is not None:
        raise SessionNotWaiting(f"session {row.id}: its late answer was already reconciled")
    return dict(late)


# -- over a Store's transactions (the engine's and the graph's calls) ---------------------


def late_of(store: Any, session_id: str) -> dict[str, Any] | None:
    """The session's late record, or None."""
    with store.reading() as tx:
        row = tx.first(
            "SELECT question_object FROM orchestrator_state WHERE session_id = :sid",
            {"sid": session_id},
        )
    late = (json_value(row.question_object) or {}).get("late") if row is not None else None
    return dict(late) if late else None


def for_pm(store: Any, claim: Claim) -> str | None:
    """What the PM is told on its next turn: the late answer and the assumptions it
    contradicts (or leaves to the PM), judged against the ledger as it now stands, when
    the policy acts on it (`on_late_answer: reconcile`, or the round `--reconcile`
    reopened) and it is not reconciled yet."""
    found = rejudge(store, claim)
    if found is None or not reconcile.due(found[0]):
        return None
    late, question = found
    return reconcile.instruction(question, str(late["response"]), late["checks"])


def delivered(store: Any, claim: Claim, key: str, reply: Mapping[str, Any]) -> None:
    """The PM's turn `key` had the late answer and replied `reply` (PLANNED: the tasks it
    re-planned; COMPLETE: nothing to change): the late answer is reconciled."""
    status = str(reply.get("status"))
    if status not in ("PLANNED", "COMPLETE"):
        return  # it asked again (the hard cap answers it): it hears the answer next turn
    with store.writing() as tx:
        row = fence(tx, claim, joined=True)
        outcome: dict[str, Any] = {
            "by": key,
            "outcome": "re-planned" if status == "PLANNED" else "nothing to change",
            "at": iso(utcnow()),
        }
        if status == "PLANNED":
            outcome |= {"round": row.round, "tasks": [t["title"] for t in reply["tasks"]]}
        update(tx, row, reconciled=outcome)
        add_event(tx, row.id, "reconciled", agent="pm", key="reconciled", **outcome)


def reopen(
    store: Any, session_id: str, owner: Owner, calls: Mapping[str, int], *, hand_off: bool
) -> Claim:
    """Reopen the ended session for its reconciliation round (`resume --reconcile`):
    running again, claimed by `owner` (with `hand_off`: by nobody, for a driver), the
    round's start kept in the late record so that a crash in it resumes the same round.
    Raises SessionNotWaiting (nothing to reconcile) or SessionBusy (raced)."""
    from orchestrator.store import lifecycle

    with store.writing() as tx:
        row = joined_row(tx, session_id, lock=True)
        reopen_facts(row)
        start = {
            "round": row.round,
            "calls": dict(calls),
            "tasks": list(json_value(row.tasks) or []),
            "at": iso(utcnow()),
            # What the session had ended on: a round that fails gives it back.
            "ended": {"status": row.status, "summary": row.summary, "error": row.error},
        }
        update(tx, row, reopened=start)
        return lifecycle.reopen(tx, row, owner, nobody=hand_off)


def failed_round(tx: Tx, claim: Claim, error: str | None) -> tuple[str, Any, Any] | None:
    """A reconciliation round that fails, for the session `claim` holds: recorded in the
    late record (`reconciled`, outcome `failed`) and as a `reconcile_failed` event, and the
    (status, summary, error) the session had ended on before it was reopened returned, to
    end on again. None when the session is not in such a round (its failure stands)."""
    row = fence(tx, claim, joined=True)
    late = dict((json_value(row.question_object) or {}).get("late") or {})
    ended = (late.get("reopened") or {}).get("ended")
    if not ended or late.get("reconciled") is not None:
        return None
    outcome = {
        "by": "the reconciliation round",
        "outcome": "failed",
        "error": error or "the round failed",
        "at": iso(utcnow()),
        "kept": ended["status"],
    }
    update(tx, row, reconciled=outcome)
    add_event(tx, row.id, "reconcile_failed", key="reconciled", **outcome)
    return str(ended["status"]), ended.get("summary"), ended.get("error")
