"""The Store: one short transaction per method, over the functions of the store modules.

    gate_tx    the gate's read-decide-write transactions (the only callers of gate.decide)
    lifecycle  create, claim, heartbeat, release, abandon, cancel, the fence
    turns      recorded agent turns
    reads      the session object, the open question, listings, the log

Ordering rules the engine relies on:
- an answer is accepted when `resolve` commits; the graph resumes only after that, so a
  crash afterwards never loses it (the store wins over LangGraph's checkpoint);
- every write made from inside a graph node is keyed (`events.key` is unique per session),
  so a node that LangGraph re-runs writes nothing twice;
- every write a driver makes passes the fence first, in its own transaction: a process
  that lost its claim writes nothing after the loss.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from orchestrator import clock, gate
from orchestrator.records import PendingQuestion
from orchestrator.store import gate_tx, lifecycle, reads, turns
from orchestrator.store._tx import (
    FINAL_STATUSES,
    STATUSES,
    Listener,
    fence,
    gate_state,
    read,
    session_row,
    write,
)
from orchestrator.store.owner import Claim, Owner
from orchestrator.store.schema import state as _T
from orchestrator.store.views import owner_alive

__all__ = ["Store", "FINAL_STATUSES", "STATUSES", "Listener"]


class Store:
    """Sessions, the gate's persisted state, the event log and claims, over one engine."""

    def __init__(self, engine: Engine, listener: Listener | None = None) -> None:
        self.engine = engine
        self.listener = listener

    def _write(self, *, durable: bool = False) -> Any:
        return write(self.engine, self.listener, durable=durable)

    def _read(self) -> Any:
        return read(self.engine)

    # -- reads --------------------------------------------------------------------------

    def session(self, session_id: str) -> Any:
        """The session's row (raises SessionNotFound)."""
        with self._read() as conn:
            return session_row(conn, session_id)

    def gate_state(self, session_id: str) -> gate.GateState:
        with self._read() as conn:
            session_row(conn, session_id)
            return gate_state(conn, session_id)

    def snapshot(self, session_id: str) -> reads.Snapshot:
        """Row, gate state, open question and session object, read in one transaction."""
        with self._read() as conn:
            return reads.snapshot(conn, session_id)

    def view(self, session_id: str) -> dict[str, Any]:
        """The contract's session object."""
        with self._read() as conn:
            return reads.view(conn, session_id)

    def status(self, session_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the session object, the session's settings), a question deadline that passed
        while nothing ran applied first. One read unless a deadline is due."""
        with self._read() as conn:
            doc, row, due = reads.status(conn, session_id)
        if due and self.expire(session_id) is not None:
            with self._read() as conn:
                doc, row, _ = reads.status(conn, session_id)
        return doc, row.settings

    def pending(self, session_id: str) -> tuple[Any, PendingQuestion | None]:
        """The session's row and its open question (None if none waits), in one read."""
        snap = self.snapshot(session_id)
        return snap.row, snap.question

    def list_views(
        self, status: str | None = None, *, limit: int | None = None, after: str | None = None
    ) -> list[dict[str, Any]]:
        """Sessions, newest first: at most `limit`, those listed after session `after`."""
        with self._read() as conn:
            return reads.list_views(conn, status, limit=limit, after=after)

    def events(self, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
        with self._read() as conn:
            return reads.events(conn, session_id, after=after)

    def reply_counts(self, session_id: str) -> dict[str, int]:
        with self._read() as conn:
            return turns.reply_counts(conn, session_id)

    def recorded_turns(self, session_id: str) -> dict[str, dict[str, Any]]:
        """Read once when a process starts driving the session: only the claim's holder
        records turns, so from then on its copy is complete."""
        with self._read() as conn:
            return turns.recorded_turns(conn, session_id)

    # -- lifecycle ----------------------------------------------------------------------

    def start_session(
        self, task: str, *, agents: dict[str, Any], settings: dict[str, Any], owner: Owner
    ) -> Claim:
        """Create a session, claimed by `owner`."""
        with self._write() as conn:
            return lifecycle.create(conn, task, agents=agents, settings=settings, owner=owner)

    def create_session(
        self, task: str, *, agents: dict[str, Any], settings: dict[str, Any], owner: Owner
    ) -> str:
        return self.start_session(task, agents=agents, settings=settings, owner=owner).session_id

    def claim(self, session_id: str, owner: Owner) -> Claim:
        """Take a paused session, or one whose owner is gone, for `owner` (raises
        SessionBusy if a live process holds it); renew it if `owner` holds it already."""
        with self._write() as conn:
            return lifecycle.take(conn, session_row(conn, session_id, lock=True), owner)

    def heartbeat(self, claim: Claim) -> bool:
        with self._write() as conn:
            return lifecycle.heartbeat(conn, claim)

    def check_fence(self, claim: Claim) -> None:
        """Raise ClaimLost unless `claim` still holds its session (a read: cheap enough to
        run before every checkpoint write)."""
        with self._read() as conn:
            fence(conn, claim)

    def check_call(self, claim: Claim) -> None:
        """Before an agent call: ClaimLost or CancelRequested, or go ahead. A read: it
        writes nothing, and the call itself runs outside any transaction anyway."""
        with self._read() as conn:
            lifecycle.check_call(conn, claim)

    def release(
        self, claim: Claim, status: str, *, summary: str | None = None, error: str | None = None
    ) -> None:
        """Leave the session in `status` and drop the claim (ClaimLost if not ours)."""
        with self._write() as conn:
            lifecycle.release(conn, claim, status, summary=summary, error=error)

    def abandon(self, claim: Claim) -> None:
        with self._write() as conn:
            lifecycle.abandon(conn, claim)

    def record_failure(self, claim: Claim, agent: str | None, message: str) -> None:
        with self._write() as conn:
            lifecycle.record_failure(conn, claim, agent, message)

    def cancel(self, session_id: str) -> str:
        """Stop a session that has not ended: "cancelled" at once (waiting, or its process
        is gone), or "cancel_requested" (its live driver stops before its next agent
        call). Raises SessionNotFound, or SessionNotWaiting for an ended session."""
        with self._write(durable=True) as conn:
            row = session_row(conn, session_id, lock=True)

            def through_gate() -> bool:
                if not gate_state(conn, session_id).waiting:
                    return False
                gate_tx.resolve_answer(
                    conn, row, gate.Cancel(), source="user", choices=None, take=lambda: None
                )
                return True

            return lifecycle.cancel(conn, row, resolve=through_gate)

    # -- the gate -----------------------------------------------------------------------

    def gate_ask(
        self,
        claim: Claim,
        ask: gate.Ask,
        question: dict[str, Any],
        *,
        max_fallbacks: int,
        uncertainty_threshold: int,
        timeout: float | None = None,
        repaired: list[str] | None = None,
    ) -> gate.Decision:
        """Case A, B or D for one NEEDS_CLARIFICATION reply: fence, read, decide, write."""
        with self._write() as conn:
            fence(conn, claim)
            return gate_tx.ask(
                conn,
                claim.session_id,
                ask,
                question,
                max_fallbacks=max_fallbacks,
                uncertainty_threshold=uncertainty_threshold,
                timeout=timeout,
                repaired=repaired,
            )

    def resolve(
        self,
        session_id: str,
        owner: Owner,
        event: gate.Answer | gate.Decline | gate.Cancel,
        *,
        source: str = "user",
        choices: list[str] | None = None,
        claim: Claim | None = None,
    ) -> tuple[gate.Resolve, Claim]:
        """Accept the user's answer, decline or cancel, and claim the session for `owner`,
        in one transaction. A person's answer is durable (fsynced: it survives a power
        loss); a scripted one is not, since the scenario file replays it. A driver passes
        its `claim` (an answer from its prompt or script): fenced like its other writes."""
        claimed: list[Claim] = []
        with self._write(durable=source != "script") as conn:
            if claim is not None:
                row = fence(conn, claim)
                claimed.append(claim)  # the driver's own claim: it goes on with it
            else:
                row = session_row(conn, session_id, lock=True)

            def take() -> None:
                if claim is None:
                    claimed.append(lifecycle.take(conn, row, owner))

            decision = gate_tx.resolve_answer(
                conn, row, event, source=source, choices=choices, take=take
            )
            return decision, claimed[0]

    def expire(
        self, session_id: str, *, owner: Owner | None = None, claim: Claim | None = None
    ) -> gate.Resolve | None:
        """Apply the on-timeout policy if the open question's deadline has passed.

        Runs on `status` and `resume` (a deadline that passed while no process ran) and
        when a prompt times out. Not while another live process holds the session: that
        process applies its own deadline. Returns the decision, or None if nothing applied.
        """
        with self._read() as conn:  # the common case: nothing to do, and no write lock
            session_row(conn, session_id)
            deadline = conn.execute(
                select(_T.c.deadline).where(
                    _T.c.session_id == session_id, _T.c.timed_out.is_(False)
                )
            ).scalar()
        if deadline is None or deadline > clock.now():
            return None
        with self._write(durable=True) as conn:
            if claim is not None:
                row = fence(conn, claim)
                mine = True
            else:
                row = session_row(conn, session_id, lock=True)
                mine = owner is not None and row.owner == owner.id
            may_act = row.status != "running" or mine or not owner_alive(row)
            return gate_tx.expire_deadline(conn, row, may_act=may_act)

    # -- recorded turns -----------------------------------------------------------------

    def record_reply(
        self,
        claim: Claim,
        key: str,
        agent: str,
        turn: dict[str, Any],
        *,
        plan: tuple[int, list[dict[str, Any]]] | None = None,
        task: tuple[int, int, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Store an agent's turn under `key` (fenced); a turn stored already is returned."""
        with self._write() as conn:
            fence(conn, claim)
            return turns.record_reply(
                conn, claim.session_id, key, agent, turn, plan=plan, task=task
            )
