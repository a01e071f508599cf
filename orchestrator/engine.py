"""Running sessions: start, resume, and drive the graph between pauses.

The store wins over LangGraph's checkpoint for every gate fact: the graph is resumed only
after the store has committed the user's answer, and the gate re-reads the store when its
node re-runs. A crash anywhere leaves either an answer in the store (a plain `resume`
feeds it to the graph) or no accepted answer at all (the question is shown again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator import gate
from orchestrator._faults import crash_point
from orchestrator._lease import held
from orchestrator.agent import AgentBackend
from orchestrator.answers import UserReply, from_scripted, to_gate_event
from orchestrator.errors import AgentCallError, RunError, SessionNotWaiting
from orchestrator.store import Owner, Store

__all__ = ["Engine", "AskUser", "DEFAULT_SETTINGS"]

# Given the pending question (contract section 2 + asked_by), return the user's reply, or
# None to leave the session paused (`--ui none`).
AskUser = Callable[[Mapping[str, Any]], UserReply | None]

DEFAULT_SETTINGS: dict[str, Any] = {
    "max_rounds": 5,
    "max_fallbacks": 2,
    "uncertainty_threshold": 70,
    "timeout": 300.0,
    "on_timeout": "wait",
}
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

    # -- entry points -------------------------------------------------------------------

    def start(self, task: str, backend: AgentBackend, settings: Mapping[str, Any]) -> str:
        """Create a session and run it until it ends or pauses; return its id."""
        session_id = self.store.create_session(
            task,
            agents=backend.describe(),
            settings={**DEFAULT_SETTINGS, **settings},
            owner=self.owner,
        )
        crash_point("session_created")
        self._drive(session_id, backend, fresh=True)
        return session_id

    def resume(self, session_id: str, reply: UserReply | None = None) -> None:
        """Continue a session: with `reply` it answers; without, it re-asks or recovers."""
        expired = self.store.expire(session_id, owner=self.owner)
        if expired is not None and expired.cancel:
            return  # the deadline passed and the policy was to cancel
        row = self.store.session(session_id)
        if reply is None:
            state = self.store.gate_state(session_id)
            waiting = state.used and not state.resolved and state.resolution != "cancelled"
            if waiting and row.status in ("paused", "running"):
                if row.status == "running":
                    self.store.claim(session_id, self.owner)  # raises if its owner lives
                # Case B: no agent runs; the stored question is surfaced again.
                if not self._answer_pending(session_id):
                    return
            else:
                # Answered (or timed out to proceed) but not run on, or a dead owner's.
                self.store.claim(session_id, self.owner)
        else:
            question = self.store.view(session_id)["pending_question"]
            if question is None:
                state = self.store.gate_state(session_id)
                why = (
                    "its question was already answered"
                    if state.resolved
                    else "it has no open question"
                )
                raise SessionNotWaiting(
                    f"session {session_id} is {row.status}, not waiting for an answer: {why}"
                )
            event, choices = to_gate_event(question, reply)  # validated before any write
            self.store.resolve(session_id, self.owner, event, choices=choices)
            crash_point("answer_committed")
            if isinstance(event, gate.Cancel):
                return
        row = self.store.session(session_id)
        from agents import load_backend

        backend = load_backend(row.agents, replies_so_far=self.store.reply_counts(session_id))
        self._drive(session_id, backend, fresh=False)

    # -- the loop -----------------------------------------------------------------------

    def _drive(self, session_id: str, backend: AgentBackend, *, fresh: bool) -> None:
        from langgraph.errors import GraphRecursionError
        from langgraph.types import Command

        from orchestrator.checkpoints import checkpointer
        from orchestrator.graph import RunContext, compiled, initial_state

        row = self.store.session(session_id)
        settings = {**DEFAULT_SETTINGS, **row.settings}  # sessions from older versions too
        ctx = RunContext(
            session_id=session_id,
            task=row.task,
            store=self.store,
            backend=backend,
            max_rounds=settings["max_rounds"],
            max_fallbacks=settings["max_fallbacks"],
            uncertainty_threshold=settings["uncertainty_threshold"],
            timeout=settings["timeout"],
            activity=self.activity,
            recorded={} if fresh else self.store.recorded_turns(session_id),
        )
        config: Any = {
            "configurable": {"thread_id": session_id},
            "recursion_limit": RECURSION_LIMIT,
        }
        if getattr(backend, "sequential", False):
            # Scripted developers share one reply list "in call order": run them one at a
            # time, in task order, so a scenario gives the same result on every run.
            config["max_concurrency"] = 1
        try:
            # The heartbeat covers the whole drive, the user's time at a prompt included.
            with checkpointer(self.url) as saver, held(self.store, session_id, self.owner):
                graph = compiled(saver)
                snapshot = graph.get_state(config)
                payload: Any = initial_state() if fresh or not snapshot.values else None
                if snapshot.interrupts:
                    payload = self._resume_command(snapshot, Command)
                elif not fresh and snapshot.values and not snapshot.tasks:
                    # Crashed after the last step. (Not `not snapshot.next`: a task whose
                    # writes were saved before its step's checkpoint leaves next == () with
                    # the run unfinished; invoke(None) applies those writes and goes on.)
                    self._finish(session_id, snapshot.values)
                    return
                while True:
                    graph.invoke(payload, config, context=ctx)
                    snapshot = graph.get_state(config)
                    if not snapshot.interrupts:
                        self._finish(session_id, snapshot.values)
                        return
                    if not self._answer_pending(session_id):
                        return
                    payload = self._resume_command(snapshot, Command)
        except RunError as exc:
            self.store.release(session_id, self.owner, "failed", error=exc.message)
        except AgentCallError as exc:
            # Nothing of the failed call was recorded: drop the claim, `resume` retries it.
            self.store.abandon(session_id, self.owner)
            raise AgentCallError(
                f"{exc.message}\nsession {session_id} is kept; try again with: "
                f"orchestrator resume {session_id}"
            ) from exc
        except GraphRecursionError as exc:
            self.store.release(
                session_id, self.owner, "failed", error=f"the run did not converge: {exc}"
            )
        except BaseException:
            # Ctrl+C or a bug: keep everything, drop the claim so `resume` can take over.
            self.store.abandon(session_id, self.owner)
            raise

    @staticmethod
    def _resume_command(snapshot: Any, command: Any) -> Any:
        # The gate re-reads the answer from the store; the value only releases the interrupt.
        return command(resume={i.id: "answered" for i in snapshot.interrupts})

    def _answer_pending(self, session_id: str) -> bool:
        """Get an answer for the open question: scripted answers first, then the user.

        Returns True when an answer (or decline) was accepted and the run should go on,
        False when the session stays paused or was cancelled.
        """
        row, question = self.store.pending(session_id)
        assert question is not None, "only called while a question is open"
        scripted = row.settings.get("answers") or []
        origin = "user"
        if row.answers_used < len(scripted):
            reply: UserReply | None = from_scripted(scripted[row.answers_used])
            origin = "script"
        else:
            reply = self.ask_user(question) if self.ask_user is not None else None
        if reply is None:
            # No answer: the prompt's deadline passed, or nobody is there to ask (--ui none).
            expired = self.store.expire(session_id, owner=self.owner)
            if expired is not None and expired.cancel:
                return False
            if expired is not None and expired.update.get("resolved"):
                return True  # on-timeout proceed: the asker gets the fallback and its default
            if self.store.session(session_id).status == "running":
                crash_point("before_pause")
                self.store.release(session_id, self.owner, "paused")
            return False
        event, choices = to_gate_event(question, reply)
        self.store.resolve(session_id, self.owner, event, source=origin, choices=choices)
        crash_point("answer_committed")
        return not isinstance(event, gate.Cancel)

    def _finish(self, session_id: str, values: Mapping[str, Any]) -> None:
        outcome = values.get("outcome") or {}
        status = outcome.get("status", "failed")
        crash_point("before_finish")
        self.store.release(
            session_id,
            self.owner,
            status,
            summary=outcome.get("summary"),
            error=outcome.get("error")
            or (None if outcome else "the graph ended without an outcome"),
        )
