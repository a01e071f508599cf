"""Notifications with Apprise: tell people a question waits, and when its deadline is near.

`Notifier.on_event` is a session-API listener (`Sessions(on_event=...)`): a
`question_surfaced` event queues a message. A background thread sends it to every URL,
retrying with backoff, and records the outcome in the session's log as a
`notification_sent` or `notification_failed` event. Nothing here can block or fail a
session: the listener only enqueues, and delivery errors become log events.

A server also watches the database (`start_watching`): questions surfaced by processes
without `--notify` since it started, and reminders when a deadline is near.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

__all__ = ["Notifier", "message_for"]

log = logging.getLogger("orchestrator.web")

WATCH_SECONDS = 5.0


def message_for(
    doc: dict[str, Any], about: str, *, answer_link: str | None, db: str | None
) -> tuple[str, str]:
    """(title, body) of the message about `doc`'s open question."""
    from orchestrator.present.printable import continued
    from orchestrator.present.render import resume_hint

    question = doc["pending_question"] or {}
    asker = question.get("asked_by", "an agent")
    prefix = "Deadline near: " if about == "deadline" else ""
    parts = question.get("parts") or []
    lines = [f"Session {doc['session_id']}: {continued(doc['task'])}", ""]
    if len(parts) > 1:
        title = f"{prefix}{len(parts)}-part question: {_short(question.get('question', ''), 70)}"
        lines.append(f"A question in {len(parts)} parts (answer each one):")
        for part in parts:
            lines += ["", f"Part {part['part']} ({', '.join(part.get('askers') or [])}):"]
            lines += _question_lines(part)
    else:
        title = f"{prefix}{asker} asks: {_short(question.get('question', ''), 80)}"
        lines.append(f"{asker} asks ({question.get('urgency', 'medium')} urgency):")
        lines += _question_lines(question)
    if question.get("deadline"):
        from orchestrator.present.words import moment

        lines.append(f"Answer by: {moment(question['deadline'])}")
    if answer_link:
        lines.append(f"Answer here: {answer_link}")
    lines.append(f"Or: {resume_hint(doc['session_id'], question, db)}")
    return title, "\n".join(lines)


def _question_lines(question: dict[str, Any]) -> list[str]:
    """The agent's words, every line set apart (`quoted`, `continued`): a line in them
    cannot pass for one of ours ("Answer here:", "Or:")."""
    from orchestrator.present.printable import continued, quoted

    lines = [quoted(question.get("question", ""))]
    for number, option in enumerate(question.get("options") or [], start=1):
        described = (
            f" - {continued(option['description'], '     ')}" if option.get("description") else ""
        )
        lines.append(f"  {number}. {continued(option['label'], '     ')}{described}")
    if question.get("reason"):
        lines.append(f"Why: {continued(question['reason'])}")
    return lines


def _short(text: str, size: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


class Notifier:
    """Sends Apprise notifications for surfaced questions, off the session's path."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        public_url: str | None = None,
        db: str | None = None,
        retry_delays: Sequence[float] = (1.0, 4.0, 15.0),
        reminder_seconds: float = 60.0,
    ) -> None:
        self.urls = tuple(urls)
        self.public_url = public_url
        self.db = db
        self.retry_delays = tuple(retry_delays)
        self.reminder_seconds = reminder_seconds
        self._sessions: Any = None
        self._jobs: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sender = threading.Thread(target=self._send_forever, name="notify", daemon=True)
        self._sender.start()
        self._watcher: threading.Thread | None = None

    # -- feeding ------------------------------------------------------------------------

    def bind(self, sessions: Any) -> None:
        """Use this session API (else one is opened on `db` when first needed)."""
        self._sessions = sessions

    def on_event(self, session_id: str, event: dict[str, Any]) -> None:
        """The session-API listener: only enqueues (called right after a commit)."""
        if event.get("kind") == "question_surfaced":
            self.queue(session_id, "question")

    def queue(self, session_id: str, about: str) -> None:
        with self._lock:
            if (session_id, about) in self._seen:
                return
            self._seen.add((session_id, about))
        self._jobs.put((session_id, about))

    def start_watching(self, *, since: float) -> None:
        """Watch the database for questions surfaced since `since` and near deadlines."""
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch_forever, args=(since,), name="notify-watch", daemon=True
            )
            self._watcher.start()

    def flush(self, timeout: float) -> bool:
        """Wait until every queued message is sent or given up; False on timeout."""
        end = time.monotonic() + timeout
        while self._jobs.unfinished_tasks and time.monotonic() < end:
            time.sleep(0.05)
        return not self._jobs.unfinished_tasks

    def close(self, timeout: float | None = None) -> None:
        """Let queued messages go out (bounded by the retry schedule), then stop."""
        self.flush(timeout if timeout is not None else sum(self.retry_delays) + 15)
        self._stop.set()
        self._jobs.put(None)

    # -- the threads --------------------------------------------------------------------

    @property
    def inbox(self) -> Any:
        return self.sessions.inbox

    @property
    def sessions(self) -> Any:
        if self._sessions is None:
            from orchestrator.api import Sessions

            self._sessions = Sessions(self.db)
        return self._sessions

    def _watch_forever(self, since: float) -> None:

        def notified(session_id: str, about: str) -> bool:
            return any(self.inbox.has_event(session_id, k) for k in self._keys(about))

        while not self._stop.wait(WATCH_SECONDS):
            try:
                for doc in self.inbox.waiting(asked_since=since):
                    if not notified(doc["session_id"], "question"):
                        self.queue(doc["session_id"], "question")
                for doc in self.inbox.waiting():
                    deadline = (doc["pending_question"] or {}).get("deadline")
                    left = _epoch(deadline) - time.time() if deadline else -1.0
                    if 0 < left <= self.reminder_seconds and not notified(
                        doc["session_id"], "deadline"
                    ):
                        self.queue(doc["session_id"], "deadline")
            except Exception:  # the watcher must outlive a locked or busy database
                log.exception("notification watcher")

    def _keys(self, about: str) -> list[str]:

        return [
            f"notification:{about}:{target_name(url)}:{outcome}"
            for url in self.urls
            for outcome in ("sent", "failed")
        ]

    def _send_forever(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                self._deliver(*job)
            except Exception:  # one bad message must not stop the others; keep the trace
                log.exception("notification for %s", job)
            finally:
                self._jobs.task_done()

    def _deliver(self, session_id: str, about: str) -> None:
        from orchestrator.web.config import answer_url

        doc = self.sessions.status(session_id)
        if doc["pending_question"] is None:
            return  # answered (or ended) before we got to it: nothing to say
        link = None
        if self.public_url:
            link = answer_url(self.public_url, self.inbox.new_link(session_id))
        title, body = message_for(doc, about, answer_link=link, db=self.db)
        for url in self.urls:
            ok, error, attempts = self._send(url, title, body)
            outcome = "sent" if ok else "failed"
            self.inbox.record_event(
                session_id,
                f"notification_{outcome}",
                key=f"notification:{about}:{target_name(url)}:{outcome}",
                about=about,
                target=target_name(url),
                attempts=attempts,
                **({} if ok else {"error": error}),
            )

    def _send(self, url: str, title: str, body: str) -> tuple[bool, str, int]:
        import apprise

        error = ""
        attempts = 0
        for delay in (0.0, *self.retry_delays):
            if delay and self._stop.wait(delay):
                break
            attempts += 1
            # async_mode off: sent from this thread, not a pool that refuses new work once
            # the interpreter starts exiting (a CLI flushes its messages at exit).
            sender = apprise.Apprise(asset=apprise.AppriseAsset(async_mode=False))
            if not sender.add(url):
                return False, "not a notification URL Apprise understands", attempts
            with apprise.LogCapture(level=logging.WARNING) as output:  # type: ignore[no-untyped-call]
                ok = sender.notify(body=body, title=title)
            if ok:
                return True, "", attempts
            error = _last_line(output.getvalue()) or "delivery failed"
        return False, error, attempts


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _epoch(iso: str | None) -> float:
    if not iso:
        return 0.0
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def target_name(url: str) -> str:
    """A notification URL without its secrets: scheme, and a short digest to tell targets apart."""
    scheme = url.split("://", 1)[0] if "://" in url else "?"
    return f"{scheme}://…#{hashlib.sha256(url.encode()).hexdigest()[:8]}"
