"""Asking in the 2026-07-28 protocol era, where a server may not send the client requests:
the question goes back as an `InputRequiredResult` (a form elicitation inside it), and the
client calls the tool again with the person's response and our `request_state`.

Between the two calls nothing of ours runs for that question, so a keeper thread renews
the claims of the open questions, records `timeout` for any whose deadline passes and
withdraws any whose session someone asked to cancel; a response that arrives after that
gets `timeout` (or `cancelled`). `request_state` is an unguessable
token for an open question of this process (a restarted server does not know it).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from orchestrator.api.mcp_questions import Asked, QuestionLog, summary_of
from orchestrator.domain.question import UserReply
from orchestrator.mcp_server.envelope import ToolFailure

__all__ = ["Rounds", "Ended", "ANSWER_KEY", "form_request", "response_of"]

log = logging.getLogger("orchestrator.mcp")

ANSWER_KEY = "answer"
ENDED_KEPT = 1000  # tokens of ended questions remembered, to answer the late response


@dataclass(frozen=True)
class Ended:
    """A question that ended between the calls: at its deadline (no reply), withdrawn (a
    cancel reply), or answered at another door (that reply)."""

    question: dict[str, Any]
    reply: UserReply | None


@dataclass(frozen=True)
class _Open:
    asked: Asked
    deadline: float  # time.time()


def form_request(message: str, schema: dict[str, Any], state: str) -> InputRequiredResult:
    """The first call's result: the form for the client to show, and our `state`."""
    form = ElicitRequestFormParams(message=message, requested_schema=schema)
    return InputRequiredResult(
        input_requests={ANSWER_KEY: ElicitRequest(params=form)}, request_state=state
    )


def response_of(responses: dict[str, Any] | None) -> ElicitResult:
    """The second call's elicitation result (invalid_input when the client left it out)."""
    response = (responses or {}).get(ANSWER_KEY)
    if isinstance(response, dict):
        response = ElicitResult.model_validate(response)
    if not isinstance(response, ElicitResult):
        raise ToolFailure(
            "invalid_input", f"input_responses.{ANSWER_KEY}: the elicitation result is missing"
        )
    return response


class Rounds:
    """The open questions of this process that wait for the client's next call."""

    def __init__(self, questions: QuestionLog) -> None:
        self.questions = questions
        self._open: dict[str, _Open] = {}
        self._ended: dict[str, Ended] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._keeper: threading.Thread | None = None

    def ask(
        self, asked: Asked, message: str, schema: dict[str, Any], timeout: float
    ) -> InputRequiredResult:
        """The first call: hand the form to the client; the question stays open."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._open[token] = _Open(asked, time.time() + timeout)
            if self._keeper is None:
                self._keeper = threading.Thread(target=self._keep, name="mcp-rounds", daemon=True)
                self._keeper.start()
        self._wake.set()
        return form_request(message, schema, token)

    def answered(
        self, token: str, responses: dict[str, Any] | None
    ) -> tuple[Asked, ElicitResult] | Ended:
        """The second call: the open question and the client's response for it, or how it
        ended meanwhile (recorded already)."""
        with self._lock:
            opened = self._open.pop(token, None)
            ended = self._ended.get(token)
        if opened is None:
            if ended is not None:
                return ended
            raise ToolFailure(
                "invalid_input",
                "request_state does not name an open question of this server (it was "
                "answered already, or the server restarted); ask again",
            )
        if time.time() >= opened.deadline:
            return self._end(token, opened)
        try:
            return opened.asked, response_of(responses)
        except ToolFailure:
            with self._lock:  # still open: the client may try again
                self._open[token] = opened
            raise

    def _end(self, token: str, opened: _Open, *, settled: UserReply | None = None) -> Ended:
        """Record how a question ended between the calls (its token is no longer open):
        at its deadline, or `settled` elsewhere (withdrawn by a cancel, or answered at
        another door)."""
        if settled is None:
            settled = self.questions.answered_elsewhere(opened.asked)  # just before the end
        if settled is None:
            self.questions.timed_out(opened.asked)
        else:
            settled = self.questions.reply(opened.asked, settled, summary_of(settled))
        ended = Ended(opened.asked.question, settled)
        with self._lock:
            self._ended[token] = ended
            while len(self._ended) > ENDED_KEPT:
                del self._ended[next(iter(self._ended))]
        return ended

    def _keep(self) -> None:
        """Renew the open questions' claims, record the timeouts when deadlines pass, and
        withdraw the questions whose sessions someone asked to cancel."""
        beat = self.questions.keep_every(0.5)
        next_beat = time.time() + beat
        while True:
            with self._lock:
                deadlines = [o.deadline for o in self._open.values()]
            if deadlines:
                self._wake.wait(max(0.0, min([next_beat, *deadlines]) - time.time()))
            else:
                self._wake.wait()  # nothing open: sleep until `ask` opens a question
                next_beat = time.time() + beat
            self._wake.clear()
            now = time.time()
            with self._lock:
                due = [(t, o) for t, o in self._open.items() if o.deadline <= now]
                for token, _ in due:
                    del self._open[token]
                alive = list(self._open.items())
            for token, opened in due:
                try:
                    self._end(token, opened)
                except Exception:
                    log.exception("recording the timeout of session %s", opened.asked.session_id)
            if now >= next_beat:
                next_beat = now + beat
                for token, opened in alive:
                    try:
                        settled = self.questions.keep(opened.asked)
                        if settled is not None:
                            with self._lock:
                                still_open = self._open.pop(token, None) is not None
                            if still_open:
                                self._end(token, opened, settled=settled)
                    except Exception:
                        log.exception("keeping session %s", opened.asked.session_id)
