"""Running sessions: start, answer, run on, resume, and drive the graph between pauses.

The store wins over LangGraph's checkpoint for every gate fact: the graph is resumed only
after the store has committed the user's answer, and the gate re-reads the store when its
node re-runs. A crash anywhere leaves either an answer in the store (a plain `resume`
feeds it to the graph) or no accepted answer at all (the question is shown again).

Exactly one driver: a drive holds a fenced claim (orchestrator.store.owner.Claim). Before
every agent call and every checkpoint write the claim is checked, and every store write
checks it in its own transaction; a driver that lost it stops with ClaimLost, having
called no agent and written nothing after the loss.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.documents import FINAL_STATUSES, PendingQuestion
from orchestrator.domain import gate
from orchestrator.domain.question import UserReply
from orchestrator.errors import (
    AgentCallError,
    CancelRequested,
    ClaimLost,
    RepositoryElsewhere,
    RunError,
    SessionBusy,
    SessionNotWaiting,
)
from orchestrator.faults import crash_point
from orchestrator.runtime import ask_only, heap
from orchestrator.runtime.agent import AgentBackend
from orchestrator.runtime.backends import check_backend, load_backend
from orchestrator.runtime.kept_turns import KeptTurns
from orchestrator.runtime.lease import held
from orchestrator.settings import Settings
from orchestrator.store import Claim, Owner, Store, gate_tx
from orchestrator.store.claims import ASK_ONLY, held_by_asker

__all__ = ["Engine", "AskUser", "max_parallel"]

# Given the pending question (contract section 2 + asked_by), return the user's reply, or
# None to leave the session paused (`--ui none`).
AskUser = Callable[[PendingQuestion], UserReply | None]

# Why a session is stalled after Ctrl+C (its `last_error`; `status` adds the commands).
INTERRUPTED = "interrupted (Ctrl+C) while the agents worked; every finished agent call is kept"
RECURSION_LIMIT = 10_000  # a backstop only: max_rounds and max_fallbacks bound every run


class Engine:
    def __init__(
        self,
        store: Store,
        url: str,
        *,
        ask_user: AskUser | None = None,
        owner: Owner | None = None,
        activity: Any = None,
    ) -> None:
        self.store = store
        self.url = url
        self.ask_user = ask_user
        self.owner = owner or Owner()
        self.activity = activity  # told when each agent call starts and stops
        self.answered: str | None = None  # the session whose answer this engine committed
        self.reopened: str | None = None  # the session whose reconciliation it reopened
        self.started: str | None = None  # the session it created
        # The status its drive left the session in, once that release committed: a fault
        # in the reads after it does not make an ended drive look cut off (a worker counts it).
        self.ended: str | None = None

    # -- entry points -------------------------------------------------------------------

    def start(
        self,
        task: str,
        backend: AgentBackend,
        settings: Mapping[str, Any],
        *,
        workdir: Path | None = None,
        fixture: Path | None = None,
    ) -> str:
        """Create a session and run it until it ends or pauses; return its id.

        `workdir` in a git repository (or `fixture`, a scenario's `repo:` folder) gives
        the developers worktrees of it (orchestrator.runtime.developers)."""
        from orchestrator.runtime.checkpoints import set_up
        from orchestrator.runtime.developers import prepare
        from orchestrator.store.claims import new_session_id

        stored = {**Settings().model_dump(), **settings}  # every limit stored
        set_up(self.url)  # before the session exists: a set-up that fails leaves none
        session_id = new_session_id()
        bench = prepare(session_id, stored, workdir=workdir, fixture=fixture)
        if bench is not None:
            stored["workbench"] = bench
        claim, row = self.store.create(
            task,
            agents=backend.describe(),
            settings=stored,
            owner=self.owner,
            session_id=session_id,
        )
        self.started = claim.session_id  # created: a later fault must name it
        crash_point("session_created")
        self._drive(claim, backend, fresh=True, row=row)
        self._scripted_late_at_end(claim.session_id, stored)
        return claim.session_id

    def resume(self, session_id: str, reply: UserReply | None = None) -> dict[str, Any]:
        """Continue a session: with `reply` it answers; without, it re-asks or recovers.

        Returns the session object this command ended on. A plain resume decides on one
        snapshot of the session: still waiting (case B, nothing written: that snapshot is
        returned), answered or stalled (claimed and driven), or held by a live process
        (SessionBusy).
        """
        self._here_or_refuse(session_id, reply)
        expired = self.store.expire(session_id, owner=self.owner)
        if expired is not None and expired.cancel:
            return self.store.view(session_id)  # the deadline passed; the policy cancels
        claim: Claim | None
        if reply is not None:
            recorded = self.store.answer(session_id, self.owner, reply)
            self.answered = session_id  # committed: a later fault must not say otherwise
            if recorded.cancel or isinstance(recorded, gate.Late):
                # A late answer runs nothing here: a live driver's PM gets it on its next
                # turn; an ended session waits for `resume --reconcile` (which another
                # process may have begun meanwhile: the view then says `running`).
                return self.store.view(session_id)
            if held_by_asker(self.store.session(session_id), self.owner):
                return ask_only.ended_by_asker(self.store, session_id)
            claim = self.store.claim(session_id, self.owner)  # ours since the answer
        else:
            snap = self.store.snapshot(session_id)
            if snap.row.status in FINAL_STATUSES:
                raise SessionNotWaiting(
                    f"session {session_id} is {snap.row.status}; there is nothing to resume"
                )
            if snap.question is not None:
                claim = None
                if snap.row.status == "running":
                    claim = self.store.claim(session_id, self.owner)  # raises if owner lives
                # Case B: no agent runs; the stored question is surfaced again.
                claim = self._answer_pending(session_id, snap.question, snap.row, claim)
                if claim is None:
                    if snap.row.status == "paused" and self.ask_user is None:
                        return self._still_waiting(session_id)
                    return self.store.view(session_id)
            else:
                # Answered (or timed out to proceed) but not run on, or a gone owner's.
                claim = self.store.claim(session_id, self.owner)
        row = self.store.session(session_id)
        if (row.agents or {}).get("kind") == ASK_ONLY:
            return ask_only.end(self.store, claim)
        counts = self.store.reply_counts(session_id)
        for agent, kept in KeptTurns(self.store.url or "", session_id).counts().items():
            counts[agent] = counts.get(agent, 0) + kept  # recorded, not asked, on the way
        backend = load_backend(row.agents, counts)
        self._drive(claim, backend, fresh=False, row=row)
        self._scripted_late_at_end(session_id, row.settings or {})
        return self.store.view(session_id)

    def _here_or_refuse(self, session_id: str, reply: UserReply | None) -> None:
        """A session whose repository this machine cannot see is not run here: refused
        before anything is written (an answer is taken with `--no-run`, for a driver on
        the machine that has the repository)."""
        from orchestrator.runtime.worktrees import Workbench

        row = self.store.session(session_id)
        check_backend(row.agents or {})  # agents this process cannot rebuild: refused here
        stored = (row.settings or {}).get("workbench")
        if not stored or (row.status == "running" and row.owner == self.owner.id):
            # (A worker claimed it first: its drive records why it leaves it alone, and
            # drops the claim; the queue offers it again only much later.)
            return
        gone = Workbench.from_settings(session_id, stored).reachable()
        if gone is not None:
            hint = (
                f"; to record the answer here, add --no-run: `orchestrator resume {session_id} "
                "... --no-run`, and run it on from that machine"
                if reply is not None
                else ""
            )
            raise RepositoryElsewhere(
                f"session {session_id} is not run here: {gone}; run it on from the machine "
                f"that has it{hint}"
            )

    def reconcile(self, session_id: str, *, hand_off: bool = False) -> dict[str, Any]:
        """Run the reconciliation round of an ended session whose late answer needs
        review (`resume --reconcile`): one PM turn with the late answer and the assumptions
        it contradicts, the developers of what it re-plans, the PM's review. With
        `hand_off` the session is only reopened, for a driver (worker, serve, resume)."""
        counts = self.store.reply_counts(session_id)
        claim = gate_tx.reopen_late(self.store, session_id, self.owner, counts, hand_off=hand_off)
        self.reopened = session_id  # committed: running now, a plain `resume` goes on
        if hand_off:
            return self.store.view(session_id)
        row = self.store.session(session_id)
        self._drive(claim, load_backend(row.agents, counts), fresh=False, row=row)
        return self.store.view(session_id)

    def _scripted_late_at_end(self, session_id: str, settings: Mapping[str, Any]) -> None:
        """A scenario's late answer scripted (in the session's `settings`) to come once the
        session has ended: recorded (as a person's would be), and with `reconcile: true`
        reconciled at once."""
        scripted = settings.get("late_answer") or {}
        if not scripted or scripted.get("when", "ended") != "ended":
            return
        row = self.store.session(session_id)
        if row.status not in gate_tx.ENDED:
            return
        from orchestrator.scenario.steps import from_scripted  # (the scenario models: ~10 ms)

        try:
            self.store.resolve(session_id, self.owner, from_scripted(scripted), source="script")
        except SessionNotWaiting:
            # answered in time (or never asked): nothing is late; or already recorded
            return
        if scripted.get("reconcile") and self.store.view(session_id)["needs_review"]:
            self.reconcile(session_id)

    def _still_waiting(self, session_id: str) -> dict[str, Any]:
        """Case B changed nothing: the session object, if it is still waiting. An answer
        that another command committed meanwhile is theirs to run on (SessionBusy: the
        caller reports "being resumed elsewhere", not this command's outcome)."""
        now = self.store.snapshot(session_id)
        if now.row.status == "paused" and now.question is not None:
            return now.view
        raise SessionBusy(
            f"session {session_id} was answered by another command meanwhile; it is "
            f"{now.row.status} there. See `orchestrator status {session_id}`"
        )

    # -- the loop -----------------------------------------------------------------------

    def _drive(self, claim: Claim, backend: AgentBackend, *, fresh: bool, row: Any = None) -> None:
        from langgraph.errors import GraphRecursionError
        from langgraph.types import Command

        from orchestrator.runtime.checkpoints import (
            checkpointer,
            fenced,
            not_at_the_end,
            unwritten,
        )
        from orchestrator.runtime.developers import Workroom
        from orchestrator.runtime.graph import RunContext, compiled, initial_state
        from orchestrator.runtime.graph_state import reconciling_state

        session_id = claim.session_id
        heap.drive_starts()  # the backend is built: its provider's objects frozen too
        row = row if row is not None else self.store.session(session_id)
        settings = {**Settings().model_dump(), **row.settings}  # older sessions too
        late = gate_tx.late_of(self.store, session_id) if not fresh else None
        reopened = (late or {}).get("reopened")  # where a reconciliation round started
        scripted_late = settings.get("late_answer") or {}
        config: Any = {
            "configurable": {"thread_id": session_id},
            "recursion_limit": RECURSION_LIMIT,
            "max_concurrency": max_parallel(settings, backend),
        }
        try:
            try:
                workroom = Workroom.of(session_id, settings)
            except RepositoryElsewhere as exc:
                # Its repository is not on this machine: left alone, and its document
                # says why (`last_error`: which host and path it needs); the claim goes.
                self.store.record_failure(claim, None, exc.message, code=exc.code)
                raise
            # The heartbeat covers the whole drive, the user's time at a prompt included.
            with held(self.store, claim) as lease:

                def still_ours() -> None:
                    lease.check()
                    self.store.check_fence(claim)

                def fence_in(tx: Any) -> None:  # in a checkpoint's own write transaction
                    lease.check()
                    self.store.fence_in(tx, claim)

                def before_call() -> None:
                    lease.check()
                    self.store.check_call(claim)

                with checkpointer(self.url, self.store.db, fence_in) as saver:
                    shares = self.store.shares(saver)
                    if not shares:
                        saver = fenced(saver, still_ours)
                    if fresh:
                        saver = unwritten(saver, session_id)
                    saver = not_at_the_end(saver, lambda values: bool(values.get("outcome")))
                    ctx = RunContext(
                        claim=claim,
                        task=row.task,
                        store=self.store,
                        backend=backend,
                        # A reconciliation round may plan once more than the run did.
                        max_rounds=max(
                            settings["max_rounds"], reopened["round"] + 1 if reopened else 0
                        ),
                        limits=gate.GateLimits.of(settings),
                        before_call=before_call,
                        activity=self.activity,
                        recorded={} if fresh else self.store.recorded_turns(session_id),
                        merges={}
                        if fresh or workroom is None
                        else self.store.recorded_merges(session_id),
                        fresh=fresh,
                        scripted_late=dict(scripted_late)
                        if scripted_late.get("when") == "running"
                        else None,
                        workroom=workroom,
                    )
                    graph = compiled(saver)

                    def finish(values: Mapping[str, Any]) -> None:
                        # The checkpoints go with the session's end: nothing reads them after
                        # (on SQLite in the same transaction as the outcome).
                        self._finish(claim, values, checkpoints=shares)
                        if not shares:
                            saver.delete_thread(session_id)
                        if workroom is not None and self.store.view(session_id)["status"] in (
                            "completed",
                            "cancelled",
                        ):
                            workroom.bench.remove_worktrees()  # the branches stay

                    payload: Any = initial_state()
                    # A fresh session has no checkpoint to look at; one without a
                    # checkpoint yet starts from the beginning too.
                    snapshot = None if fresh else graph.get_state(config)
                    if snapshot is not None and snapshot.interrupts:
                        payload = self._resume_command(snapshot.interrupts, Command)
                    elif snapshot is not None and snapshot.values:
                        # Go on from the checkpoint. One at the run's end (an older
                        # version's, killed before its release) has nothing left to run:
                        # invoke(None) returns its values, and the run is finished below.
                        payload = None
                    elif reopened is not None:
                        # An ended run reopened to reconcile its late answer (its
                        # checkpoints went with its end): the round starts from the store.
                        payload = reconciling_state(reopened, late or {})
                    while True:
                        # Checkpoints at interrupts only (none at the end, which the
                        # release would delete at once): a crash in between
                        # re-runs from the last one, and every agent turn, gate decision and
                        # event the re-run meets is already in the store (keyed), so it is
                        # replayed, never repeated. Per-step checkpoints would add nothing.
                        values = graph.invoke(payload, config, context=ctx, durability="exit")
                        interrupts = values.get("__interrupt__")
                        if not interrupts:
                            finish(values)
                            return
                        pending_row, question = self.store.pending(session_id)
                        if question is None:
                            self.store.check_fence(claim)  # only a lost claim explains this
                            raise RuntimeError(
                                f"session {session_id}: interrupted, no question open"
                            )
                        if self._answer_pending(session_id, question, pending_row, claim) is None:
                            return
                        payload = self._resume_command(interrupts, Command)
        except ClaimLost:
            raise  # not ours any more: nothing more is written
        except CancelRequested:
            self._release(claim, "cancelled")
        except RunError as exc:
            self._release(claim, "failed", error=exc.message, usage=exc.usage)
        except AgentCallError as exc:
            # Nothing of the failed call was recorded: the session is left stalled (the
            # failure logged, the claim dropped); `resume` retries it, `cancel` ends it.
            self.store.record_failure(claim, exc.agent, exc.message, exc.usage, code=exc.code)
            stalled = type(exc)(
                f"{exc.message}\nsession {session_id} is kept; try again with: "
                f"orchestrator resume {session_id}"
            )
            stalled.agent, stalled.session_id = exc.agent, session_id
            raise stalled from exc
        except GraphRecursionError as exc:
            self._release(claim, "failed", error=f"the run did not converge: {exc}")
        except BaseException as stopped:
            # Ctrl+C, a bug or a storage fault: keep everything, drop the claim so `resume`
            # can take over. With the database away the claim cannot be dropped (it lapses
            # with this process): the original error is the one to report.
            from orchestrator.store.connect import storage_failure

            try:
                if isinstance(stopped, KeyboardInterrupt):
                    # Said in the session (`status`: stalled, why, how to go on).
                    self.store.record_failure(
                        claim, None, INTERRUPTED, kind="interrupted", code="interrupted"
                    )
                else:
                    self.store.abandon(claim)
            except Exception as exc:
                if storage_failure(exc) is None:
                    raise
            raise

    def _release(self, claim: Claim, status: str, **details: Any) -> None:
        self.store.release(claim, status, **details)
        self.ended = status

    @staticmethod
    def _resume_command(interrupts: Any, command: Any) -> Any:
        # The gate re-reads the answer from the store; the value only releases the interrupt.
        return command(resume={i.id: "answered" for i in interrupts})

    def _answer_pending(
        self, session_id: str, question: PendingQuestion, row: Any, claim: Claim | None
    ) -> Claim | None:
        """Get an answer for the open question: scripted answers first, then the user.

        `claim` is held when this process drives the session (None for a paused one).
        Returns the claim to drive on once an answer (or decline) was accepted, None when
        the session stays paused or was cancelled.
        """
        scripted = row.settings.get("answers") or []
        origin = "user"
        if row.answers_used < len(scripted):
            from orchestrator.scenario.steps import from_scripted

            reply: UserReply | None = from_scripted(scripted[row.answers_used])
            origin = "script"
        else:
            reply = self.ask_user(question) if self.ask_user is not None else None
            if reply is not None and row.settings.get("on_timeout", "wait") == "wait":
                # Answered at a prompt that stayed open past the deadline: its passing is
                # recorded first (a `timeout` event), as `status` or `resume` would have.
                self.store.expire(session_id, owner=self.owner, claim=claim)
        if reply is None:
            # No answer: the prompt's deadline passed, or nobody is there to ask (--ui none).
            expired = self.store.expire(session_id, owner=self.owner, claim=claim)
            if expired is not None and expired.cancel:
                return None
            if expired is not None and expired.update.get("resolved"):
                # On-timeout proceed: the asker gets the fallback and its default.
                return claim or self.store.claim(session_id, self.owner)
            if claim is not None:
                crash_point("before_pause")
                self._release(claim, "paused")
            return None
        decision, claim = self.store.resolve(
            session_id, self.owner, reply, source=origin, claim=claim
        )
        crash_point("answer_committed")
        return None if decision.cancel else claim

    def _finish(
        self, claim: Claim, values: Mapping[str, Any], *, checkpoints: bool = False
    ) -> None:
        outcome = values.get("outcome") or {}
        status = outcome.get("status", "failed")
        gate_tx.rejudge(self.store, claim)  # a late answer, against the whole ledger
        crash_point("before_finish")
        self._release(
            claim,
            status,
            summary=outcome.get("summary"),
            error=outcome.get("error")
            or (None if outcome else "the graph ended without an outcome"),
            checkpoints=checkpoints,
        )
        crash_point("after_finish")  # tests: the end committed, nothing read back yet


def max_parallel(settings: Mapping[str, Any], backend: AgentBackend) -> int:
    """How many of a round's agents run at once: the session's max_parallel.

    It is LangGraph's `max_concurrency`, which sizes the thread pool a step's tasks run
    in (langchain_core's get_executor_for_config). Left unset, that pool is a
    ThreadPoolExecutor's default, min(32, CPU count + 4): six agents at a time on two
    cores, however long each waits on its model. Scripted developers share one reply list
    "in call order": they run one at a time, in task order, so a scenario gives the same
    result on every run."""
    if getattr(backend, "sequential", False):
        return 1
    found = settings.get("max_parallel")  # a session stored before it existed: the default
    return int(found if found is not None else Settings.model_fields["max_parallel"].default)
