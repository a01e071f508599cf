"""Asking in the 2026-07-28 protocol era, where a server may not send the client requests:
the question goes back as an `InputRequiredResult` (a form elicitation inside it), and the
client calls the tool again with the person's response and our `request_state`.

Between the two calls nothing of ours runs for that question, so a keeper thread renews
the claims of the open questions and records `timeout` for any whose deadline passes; a
response that arrives after that gets `timeout` too. `request_state` is an unguessable
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

from orchestrator.mcp_server.record import Asked, QuestionLog
from orchestrator.mcp_server.results import ToolFailure
from orchestrator.store.owner import lease_seconds

__all__ = ["Rounds", "ANSWER_KEY"]

log = logging.getLogger("orchestrator.mcp")

ANSWER_KEY = "answer"
ENDED_KEPT = 1000  # tokens of timed-out questions remembered, to answer `timeout`


@dataclass(frozen=True)
class _Open:
    asked: Asked
    deadline: float  # time.time()


class Rounds:
    """The open questions of this process that wait for the client's next call."""

    def __init__(self, questions: QuestionLog) -> None:
        self.questions = questions
        self._open: dict[str, _Open] = {}
        self._ended: dict[str, None] = {}
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
        form = ElicitRequestFormParams(message=message, requested_schema=schema)
        return InputRequiredResult(
            input_requests={ANSWER_KEY: ElicitRequest(params=form)}, request_state=token
        )

    def answered(self, token: str, responses: dict[str, Any] | None) -> tuple[Asked, Any] | None:
        """The second call: the open question and the client's response for it, or None
        when its deadline has passed (the timeout is recorded)."""
        with self._lock:
            opened = self._open.pop(token, None)
            ended = token in self._ended
        if opened is None:
            if ended:
                return None
            raise ToolFailure(
                "invalid_input",
                "request_state does not name an open question of this server (it was "
                "answered already, or the server restarted); ask again",
            )
        if time.time() >= opened.deadline:
            self._time_out(token, opened)
            return None
        response = (responses or {}).get(ANSWER_KEY)
        if isinstance(response, dict):
            response = ElicitResult.model_validate(response)
        if not isinstance(response, ElicitResult):
            with self._lock:  # still open: the client may try again
                self._open[token] = opened
            raise ToolFailure(
                "invalid_input", f"input_responses.{ANSWER_KEY}: the elicitation result is missing"
            )
        return opened.asked, response

    def _time_out(self, token: str, opened: _Open) -> None:
        with self._lock:
            self._ended[token] = None
            while len(self._ended) > ENDED_KEPT:
                del self._ended[next(iter(self._ended))]
        self.questions.timed_out(opened.asked)

    def _keep(self) -> None:
        """Renew the open questions' claims; record the timeouts when deadlines pass."""
        beat = lease_seconds() / 3
        next_beat = time.time() + beat
        while True:
            with self._lock:
                deadlines = [o.deadline for o in self._open.values()]
            now = time.time()
            self._wake.wait(max(0.0, min([next_beat, *deadlines]) - now))
            self._wake.clear()
            now = time.time()
            with self._lock:
                due = [(t, o) for t, o in self._open.items() if o.deadline <= now]
                for token, _ in due:
                    del self._open[token]
                alive = list(self._open.values())
            for token, opened in due:
                try:
                    self._time_out(token, opened)
                except Exception:
                    log.exception("recording the timeout of session %s", opened.asked.session_id)
            if now >= next_beat:
                next_beat = now + beat
                for opened in alive:
                    try:
                        self.questions.heartbeat(opened.asked)
                    except Exception:
                        log.exception("renewing the claim of session %s", opened.asked.session_id)
