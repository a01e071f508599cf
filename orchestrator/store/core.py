"""The Store: one short transaction per method, over the functions of the store modules.

    gate_tx    the gate's read-decide-write transactions (round_tx: one round's asks)
    lifecycle  create, claim, heartbeat, hand-off, release, abandon, cancel
    views      the session object and its gate state; turns: recorded agent turns
    _tx        events, the fence, the gate state's columns: what the others share

Each runs plain SQL on a `Tx` (orchestrator.store.sql): one sqlite3 connection per store
on SQLite, a small psycopg pool on PostgreSQL (orchestrator.store.pg_db).

Ordering rules the engine relies on:
- an answer is accepted when `resolve` commits; the graph resumes only after that, so a
  crash afterwards never loses it (the store wins over LangGraph's checkpoint);
- every write made from inside a graph node is keyed (`events.key` is unique per session),
  so a node that LangGraph re-runs writes nothing twice;
- every write a driver makes passes the fence first, in its own transaction: a process
  that lost its claim writes nothing after the loss.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from orchestrator.documents import PendingQuestion
from orchestrator.domain import gate
from orchestrator.domain.question import UserReply
from orchestrator.faults import crash_point
from orchestrator.store import gate_tx, late_tx, lifecycle, round_tx, turns, views
from orchestrator.store._tx import (
    Listener,
    add_fenced_event,
    fence,
    heard,
)
from orchestrator.store.owner import Claim, Owner
from orchestrator.store.sql import Db, Row, SqliteDb, Tx
from orchestrator.store.views import gate_state, joined_row, owner_alive, session_row

__all__ = ["Store", "Listener"]


class Store:
    """Sessions, the gate's persisted state, the event log and claims, in one database.

    Made from a SQLAlchemy engine (`Store(open_engine(url))`) or a `Db`
    (`Store.open(url)`, which on SQLite imports no SQLAlchemy at all). On a SQLite file the
    store runs its SQL on one `sqlite3` connection (orchestrator.store.sql.SqliteDb)."""

    def __init__(self, db: Any, listener: Listener | None = None, *, url: str | None = None):
        self._engine: Any = None
        if not hasattr(db, "write"):  # a SQLAlchemy Engine
            from orchestrator.store.opener import db_of_engine

            self._engine, url = db, url or db.url.render_as_string(hide_password=False)
            db = db_of_engine(db, url)
        self.db: Db = db
        self.url = url
        self.listener = listener

    @classmethod
    def open(cls, url: str, listener: Listener | None = None) -> Store:
        """The store at `url` (a resolved URL), its schema brought up to date first."""
        from orchestrator.store.opener import open_db

        return cls(open_db(url), listener, url=url)

    def close(self) -> None:
        self.db.close()
        if self._engine is not None:
            self._engine.dispose()

    def _statement(self) -> AbstractContextManager[Tx]:
        """One writing statement, atomic on its own: on SQLite without a transaction around
        it (one statement less on each side), elsewhere in a write transaction."""
        opened = self.db.read() if isinstance(self.db, SqliteDb) else self.db.write()
        return heard(opened, self.listener)

    def writing(self, *, durable: bool = False) -> AbstractContextManager[Tx]:
        """A write transaction (`durable`: fsynced on commit); the listener hears its new
        events once it commits. The store's own modules (inbox, queue) write in it too."""
        return heard(self.db.write(durable=durable), self.listener)

    def reading(self) -> Any:
        """A read transaction: a `Tx`."""
        return self.db.read()

    # -- reads --------------------------------------------------------------------------

    def session(self, session_id: str) -> Row:
        """The session's row (raises SessionNotFound)."""
        with self.reading() as tx:
            return session_row(tx, session_id)

    def gate_state(self, session_id: str) -> gate.GateState:
        with self.reading() as tx:
            return gate_state(tx, session_id)

    def snapshot(self, session_id: str) -> views.Snapshot:
        """Row, gate state, open question and session object, as one statement read them."""
        with self.reading() as tx:
            return views.snapshot(tx, session_id)

    def view(self, session_id: str) -> dict[str, Any]:
        """The contract's session object."""
        with self.reading() as tx:
            return views.view(tx, session_id)

    def status(self, session_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the session object, the session's settings), a question deadline that passed
        while nothing ran applied first. One read unless a deadline is due."""
        with self.reading() as tx:
            doc, row, due = views.status(tx, session_id)
        if due and self.expire(session_id) is not None:
            with self.reading() as tx:
                doc, row, _ = views.status(tx, session_id)
        return doc, row.settings

    def pending(self, session_id: str) -> tuple[Row, PendingQuestion | None]:
        """The session's row and its open question (None if none waits), in one read."""
        with self.reading() as tx:
            return views.pending(tx, session_id)

    def list_views(
        self, status: str | None = None, *, limit: int | None = None, after: str | None = None
    ) -> list[dict[str, Any]]:
        """Sessions, newest first: at most `limit`, those listed after session `after`."""
        with self.reading() as tx:
            return views.list_views(tx, status, limit=limit, after=after)

    def events(self, session_id: str, *, after: int = 0) -> list[dict[str, Any]]:
        with self.reading() as tx:
            return views.events(tx, session_id, after=after)

    def reply_counts(self, session_id: str) -> dict[str, int]:
        with self.reading() as tx:
            return turns.reply_counts(tx, session_id)

    def recorded_turns(self, session_id: str) -> dict[str, dict[str, Any]]:
        """Read once when a process starts driving the session: only the claim's holder
        records turns, so from then on its copy is complete."""
        with self.reading() as tx:
            return turns.recorded_turns(tx, session_id)

    # -- lifecycle ----------------------------------------------------------------------

    def create(
        self,
        task: str,
        *,
        agents: dict[str, Any],
        settings: dict[str, Any],
        owner: Owner,
        session_id: str | None = None,
    ) -> tuple[Claim, Row]:
        """Create a session, claimed by `owner`: the claim and the row as written."""
        with self.writing() as tx:
            return lifecycle.create(
                tx, task, agents=agents, settings=settings, owner=owner, session_id=session_id
            )

    def claim(self, session_id: str, owner: Owner) -> Claim:
        """Take a paused session, or one whose owner is gone, for `owner` (raises
        SessionBusy if a live process holds it); renew it if `owner` holds it already."""
        with self.writing() as tx:
            return lifecycle.take(tx, session_row(tx, session_id, lock=True), owner)

    def heartbeat(self, claim: Claim) -> bool:
        with self._statement() as tx:
            return lifecycle.heartbeat(tx, claim)

    def check_fence(self, claim: Claim) -> None:
        """Raise ClaimLost unless `claim` still holds its session (one read)."""
        with self.reading() as tx:
            lifecycle.check_held(tx, claim)

    def fence_in(self, tx: Tx, claim: Claim) -> None:
        """Raise ClaimLost unless `claim` holds its session, inside the caller's write
        transaction (the shared checkpointer's writes: orchestrator.runtime.checkpoints)."""
        lifecycle.check_held(tx, claim)

    def shares(self, saver: Any) -> bool:
        """Does `saver` write through this store's connection (and fence in its
        transactions)?"""
        return getattr(saver, "db", None) is self.db

    def check_call(self, claim: Claim) -> None:
        """Before an agent call: ClaimLost or CancelRequested, or go ahead. A read: it
        writes nothing, and the call itself runs outside any transaction anyway."""
        with self.reading() as tx:
            lifecycle.check_call(tx, claim)

    def release(
        self,
        claim: Claim,
        status: str,
        *,
        summary: str | None = None,
        error: str | None = None,
        checkpoints: bool = False,
        usage: dict[str, dict[str, int]] | None = None,
    ) -> None:
        """Leave the session in `status` and drop the claim (ClaimLost if not ours).

        `checkpoints`: also delete the session's LangGraph checkpoints (SQLite: the same
        file and transaction), which nothing reads once the session has ended."""
        with self.writing() as tx:
            if status == "failed":
                # A failed reconciliation round never undoes the outcome it reopened.
                kept = late_tx.failed_round(tx, claim, error)
                if kept is not None:
                    status, summary, error = kept
            lifecycle.release(tx, claim, status, summary=summary, error=error, usage=usage)
            if checkpoints:
                lifecycle.drop_checkpoints(tx, claim.session_id)

    def abandon(self, claim: Claim) -> None:
        with self._statement() as tx:
            lifecycle.abandon(tx, claim)

    def hand_off(self, session_id: str, owner: Owner) -> bool:
        """Drop `owner`'s claim on a running session on purpose: it waits for a driver
        (not stalled). False if `owner` did not hold it."""
        with self.writing() as tx:
            row = session_row(tx, session_id, lock=True)
            if row.status != "running" or row.owner != owner.id:
                return False
            lifecycle.hand_off(tx, row, owner)
            return True

    def record_failure(
        self,
        claim: Claim,
        agent: str | None,
        message: str,
        usage: dict[str, dict[str, int]] | None = None,
        *,
        kind: str = "agent_failed",
    ) -> None:
        with self.writing() as tx:
            lifecycle.record_failure(tx, claim, agent, message, usage, kind=kind)

    def cancel(self, session_id: str) -> str:
        """Stop a session that has not ended: "cancelled" at once (waiting, or its process
        is gone), or "cancel_requested" (its live driver stops before its next agent
        call). Raises SessionNotFound, or SessionNotWaiting for an ended session."""
        with self.writing(durable=True) as tx:
            row = joined_row(tx, session_id, lock=True)
            outcome = lifecycle.cancel(tx, row, resolve=lambda: gate_tx.cancel_question(tx, row))
            if outcome == "cancelled":  # ended: nothing reads its checkpoints any more
                lifecycle.drop_any_checkpoints(tx, session_id)
            return outcome

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
        """Case A, B or D for one NEEDS_CLARIFICATION reply: fence, read, decide, write
        (the fence, the gate state and a decision stored for this reply: one SELECT)."""
        with self.writing() as tx:
            row = fence(
                tx, claim, extra=gate_tx.STORED_DECISION, params={"final_key": f"gate:{ask.key}"}
            )
            return gate_tx.ask(
                tx,
                row,
                ask,
                question,
                max_fallbacks=max_fallbacks,
                uncertainty_threshold=uncertainty_threshold,
                timeout=timeout,
                repaired=repaired,
            )

    def gate_round(
        self,
        claim: Claim,
        asks: list[tuple[gate.Ask, dict[str, Any], list[str] | None]],
        *,
        max_fallbacks: int,
        uncertainty_threshold: int,
        max_parts: int,
        timeout: float | None = None,
    ) -> list[gate.Decision]:
        """One round's NEEDS_CLARIFICATION replies (ask, question, repairs), decided together
        in one transaction: asks of the same round merge into one multi-part question."""
        with self.writing() as tx:
            return round_tx.ask_round(
                tx,
                fence(tx, claim, joined=True),
                asks,
                max_fallbacks=max_fallbacks,
                uncertainty_threshold=uncertainty_threshold,
                max_parts=max_parts,
                timeout=timeout,
            )

    def resolve(
        self,
        session_id: str,
        owner: Owner,
        event: gate.Answer | gate.Decline | gate.Cancel | UserReply,
        *,
        source: str = "user",
        choices: list[str] | None = None,
        claim: Claim | None = None,
        hand_off: bool = False,
    ) -> tuple[gate.Resolve | gate.Late, Claim]:
        """Accept the user's answer, decline or cancel (a `UserReply` is validated against
        the open question first), and claim the session for `owner`, in one transaction.
        A person's answer is durable (fsynced: it survives a power loss); a scripted one
        is not, since the scenario file replays it. A driver passes
        its `claim` (an answer from its prompt or script): fenced like its other writes.
        With `hand_off` nobody claims it: answered, it waits for a driver. (After a cancel
        or a hand-off the claim returned holds nothing: its fence refuses every write.)"""
        taken: list[Claim] = []
        with self.writing(durable=source != "script") as tx:
            if claim is not None:
                row = fence(tx, claim, joined=True)  # the driver's own claim: it goes on
            else:
                row = joined_row(tx, session_id, lock=True)
            if isinstance(event, UserReply):  # validated against the question read here
                event, choices = gate_tx.reply_event(row, event, scripted=source == "script")
            cancel = isinstance(event, gate.Cancel)
            # An MCP client's question whose server lives: that server returns the answer
            # to its waiting tool call, and nobody else claims the session.
            asker = claim is None and not cancel and lifecycle.held_by_asker(row, owner)

            def take() -> None:
                if claim is None and not asker:
                    got = lifecycle.take_answered(tx, row, owner, nobody=cancel or hand_off)
                    taken.extend([got] if got is not None else [])

            decision = gate_tx.resolve_answer(
                tx, row, event, source=source, choices=choices, take=take
            )
            answered = isinstance(decision, gate.Resolve) and not decision.cancel  # not late
            if isinstance(decision, gate.Resolve) and decision.cancel:
                # Ended: nothing reads its checkpoints any more (as `cancel` drops them).
                lifecycle.drop_any_checkpoints(tx, session_id)
            if hand_off and answered and not asker:
                lifecycle.hand_off(tx, row, owner)
            return decision, claim or (taken[0] if taken else Claim(session_id, owner, -1))

    def answer(
        self, session_id: str, owner: Owner, reply: UserReply, *, hand_off: bool = False
    ) -> gate.Resolve | gate.Late:
        """A person's reply from outside any drive, after a deadline that passed (whose
        policy may end the session): `resolve`, claimed for `owner` or with `hand_off` not."""
        self.expire(session_id, owner=owner)
        decision, _ = self.resolve(session_id, owner, reply, hand_off=hand_off)
        crash_point("answer_committed")
        return decision

    def expire(
        self, session_id: str, *, owner: Owner | None = None, claim: Claim | None = None
    ) -> gate.Resolve | None:
        """Apply the on-timeout policy if the open question's deadline has passed.

        Runs on `status` and `resume` (a deadline that passed while no process ran) and
        when a prompt times out. Not while another live process holds the session: that
        process applies its own deadline. Returns the decision, or None if nothing applied.
        """
        with self.reading() as tx:  # the common case: nothing to do, and no write lock
            if not gate_tx.deadline_passed(tx, session_id):
                return None
        with self.writing(durable=True) as tx:
            if claim is not None:
                row = fence(tx, claim, joined=True)
                mine = True
            else:
                row = joined_row(tx, session_id, lock=True)
                mine = owner is not None and row.owner == owner.id
            may_act = row.status != "running" or mine or not owner_alive(row)
            decision = gate_tx.expire_deadline(tx, row, may_act=may_act)
            if decision is not None and decision.cancel:  # ended by the on-timeout policy
                lifecycle.drop_any_checkpoints(tx, session_id)
            return decision

    # -- recorded turns -----------------------------------------------------------------

    def recorded_merges(self, session_id: str) -> dict[str, dict[str, Any]]:
        """The session's merges (the merge queue's durable state), by key, in order."""
        with self.reading() as tx:
            return turns.recorded_merges(tx, session_id)

    def record_merge(
        self,
        claim: Claim,
        key: str,
        agent: str,
        merge: dict[str, Any],
        *,
        task: tuple[int, int, dict[str, Any]],
    ) -> dict[str, Any]:
        """Store a merge's outcome under `key` with the task's result (fenced); a merge
        stored already is returned as stored."""
        with self.writing() as tx:
            row = fence(tx, claim)
            return turns.record_merge(tx, row, key, agent, merge, task)

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
        alone = (
            plan is None
            and task is None
            and not turn["reply"].get("assumptions")
            and "usage" not in turn
            and not turn.get("commands")
            and not turn.get("checks")
        )
        if alone:
            # The turn alone: the fence and the insert in one statement, atomic on its own
            # (orchestrator.store._tx: SQLite's write lock, PostgreSQL's row lock).
            with heard(self.db.read(), self.listener) as tx:
                if add_fenced_event(tx, claim, "agent_reply", agent=agent, key=key, **turn):
                    return turn
            # Nothing went in: the claim was lost (the fence below says so) or the turn
            # is stored already (returned as stored).
        with self.writing() as tx:
            row = fence(tx, claim)
            return turns.record_reply(tx, row, key, agent, turn, plan=plan, task=task)
