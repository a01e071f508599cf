"""The MCP server's question log: each question asked through `provide_choice` or
`ask_user` is recorded as a session of its own, so it shows in `list`, `status` and `log`
like any other question. The session API's door for the MCP server, which never reaches
the store itself.

Written only through the store's public methods, in this order:

    start_session    task = the title (provide_choice) or the question (ask_user);
                     agents {"kind": "mcp", "tool": ...}: no agent ever runs for it
    gate_ask         case A: the question is surfaced (`question_surfaced` event, the
                     question object, its deadline); the session is held by this process
    heartbeat,       while the person answers (the claim's lease, as at a terminal prompt);
    check_call       a cancel requested meanwhile (`orchestrator cancel`) withdraws the
                     question, which then ends as a cancel
    resolve          the answer, decline or cancel (`answer` / `decline` / `cancel` event)
    expire           or, at the deadline, the timeout (`timeout` event; on_timeout=proceed)
    release          the final status: completed (answered, declined, timed out), failed
                     (the client answered something unusable); a cancel ends it `cancelled`;
                     the tool call ended first (the client withdrew it, or went away):
                     `paused`, held by no one, open for every door (`left_open`)
    claim, release   at the next start, a question whose server died unanswered: failed

The session is `running` and claimed by the MCP server while the person answers, like a
session whose terminal prompt is open: another command (`resume`, the web inbox) is told it
is busy instead of answering a session it could not run on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from orchestrator.api.storage_errors import storage_faults
from orchestrator.domain import gate
from orchestrator.domain.clock import iso_epoch
from orchestrator.domain.question import UserReply, to_gate_event
from orchestrator.errors import CancelRequested, SessionNotWaiting, UserError
from orchestrator.store import Owner, Store, resolve_url
from orchestrator.store.owner import Claim, lease_seconds

__all__ = ["Asked", "QuestionLog", "ASKED_BY", "STOPPED", "WITHDRAWN", "CALL_ENDED", "summary_of"]

ASKED_BY = "mcp-client"
STOPPED = "the MCP server stopped before the person answered"
WITHDRAWN = "cancel requested while the person was asked"
CALL_ENDED = (
    "the MCP client's tool call ended before the answer; the question stays open for every door"
)


@dataclass(frozen=True)
class Asked:
    question: dict[str, Any]
    claim: Claim
    deadline: float  # epoch seconds

    @property
    def session_id(self) -> str:
        return self.claim.session_id

    def page_question(self) -> dict[str, Any]:
        """The question as the web page shows it: the pending-question document."""
        deadline = iso_epoch(self.deadline)
        return {**self.question, "asked_by": ASKED_BY, "deadline": deadline, "timed_out": False}


@storage_faults
class QuestionLog:
    """Record MCP questions in the store (each public method is one or two transactions; a
    storage fault is StorageFailed, as everywhere in the session API)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @classmethod
    def connect(cls, db: str | None) -> QuestionLog:
        """The question log of the database `db` (a URL or SQLite path; None: the default),
        migrated before this returns."""
        return cls(Store.open(resolve_url(db)))

    @property
    def url(self) -> str | None:
        """The database's URL (what `Sessions` opens for the other tools)."""
        return self.store.url

    def close(self) -> None:
        self.store.close()

    def keep_every(self, at_most: float) -> float:
        """How often to `keep` an open question: a third of the claim's lease, at most
        `at_most` seconds (also how soon an answer given at another door is seen)."""
        return min(lease_seconds() / 3, at_most)

    def open(self, tool: str, task: str, question: dict[str, Any], timeout: float) -> Asked:
        settings = {
            "source": "mcp",
            "tool": tool,
            "timeout": timeout,
            "on_timeout": "proceed",
            "max_fallbacks": 0,
        }
        deadline = time.time() + timeout
        claim, _ = self.store.create(
            task, agents={"kind": "mcp", "tool": tool}, settings=settings, owner=Owner()
        )
        decision = self.store.gate_ask(
            claim,
            gate.Ask(agent=ASKED_BY, key=f"mcp:{tool}", question=question["question"]),
            question,
            # The caller chose to ask: no threshold applies, and it is one question.
            gate.GateLimits(
                max_fallbacks=0, uncertainty_threshold=0, max_question_parts=1, timeout=timeout
            ),
        )
        assert isinstance(decision, gate.Surface), "a new session always surfaces its question"
        return Asked(question, claim, deadline)

    def keep(self, asked: Asked) -> UserReply | None:
        """Renew the claim while the person answers. Not None once the question was
        settled elsewhere: answered or declined at another door (`resume`, the inbox, its
        answer link, `answer_session`: that reply), or a cancel was asked for (`orchestrator
        cancel`: the question is then withdrawn, a cancel reply)."""
        self.store.heartbeat(asked.claim)
        try:
            self.store.check_call(asked.claim)
        except CancelRequested:
            return UserReply(action="cancel", note=WITHDRAWN)
        return self.answered_elsewhere(asked)

    def answered_elsewhere(self, asked: Asked) -> UserReply | None:
        """The reply another door committed to this question, or None while it waits."""
        state = self.store.gate_state(asked.session_id)
        if state.resolution in (None, "timeout", "cancelled"):
            return None
        if state.resolution == "declined":
            return UserReply(action="decline", note=state.note)
        answers = [e for e in self.store.events(asked.session_id) if e["kind"] == "answer"]
        choices = answers[-1].get("choices") if answers else None
        if choices:
            return UserReply(choices=tuple(choices), note=state.note)
        return UserReply(text=state.response or "", note=state.note)

    def reply(self, asked: Asked, reply: UserReply, summary: str) -> UserReply:
        """Record the person's answer, decline or cancel (validated against the question)
        and end the session; returns the reply that counts: the first committed, which may
        be another door's (then that one is returned, and this one is dropped)."""
        pending: Any = {**asked.question, "asked_by": ASKED_BY}
        event, choices = to_gate_event(pending, reply)
        first = self.answered_elsewhere(asked)
        if first is None:
            try:
                self.store.resolve(
                    asked.session_id,
                    asked.claim.owner,
                    event,
                    source="mcp",
                    choices=choices,
                    claim=asked.claim,
                )
            except SessionNotWaiting:  # another door's answer went in first
                first = self.answered_elsewhere(asked)
                if first is None:
                    raise
        if first is not None:
            reply, summary = first, summary_of(first)
        if reply.action != "cancel":  # a cancel has ended the session already
            self.store.release(asked.claim, "completed", summary=summary)
        return reply

    def left_open(self, asked: Asked) -> UserReply | None:
        """The tool call ended before the person answered (the client withdrew it, or the
        server stops): leave the question open for every door, `paused` and held by no one
        (`resume`, a worker or `serve` end it once it is answered). Returns the reply
        another door committed meanwhile instead, if any (the caller records it)."""
        first = self.keep(asked)
        if first is not None:
            return first
        self.store.release(asked.claim, "paused", summary=CALL_ENDED)
        return None

    def timed_out(self, asked: Asked) -> None:
        # The deadline was stored by gate_ask a moment before our wait began, so it has
        # passed; the loop only guards against a clock that steps.
        for _ in range(50):
            if self.store.expire(asked.session_id, claim=asked.claim) is not None:
                break
            time.sleep(0.05)
        self.store.release(asked.claim, "completed", summary="no answer before the deadline")

    def failed(self, asked: Asked, error: str) -> None:
        self.store.release(asked.claim, "failed", error=error)

    def reap(self) -> list[str]:
        """End the questions whose MCP server died while the person answered (`failed`);
        return their session ids. A question held by a live server is left alone (the
        claim is refused while its owner lives)."""
        reaped = []
        for view in self.store.list_views("running"):
            row = self.store.session(view["session_id"])
            if (row.agents or {}).get("kind") != "mcp":
                continue
            try:
                claim = self.store.claim(row.id, Owner())
            except UserError:
                continue  # its server lives, or it was taken or ended meanwhile
            self.store.release(claim, "failed", error=STOPPED)
            reaped.append(row.id)
        return reaped


def summary_of(reply: UserReply) -> str:
    """The session's summary for how its question ended."""
    return {
        "answer": f"answered: {reply.text or ', '.join(reply.choices)}",
        "decline": "declined",
        "cancel": "cancelled",
    }[reply.action]
