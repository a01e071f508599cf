"""What a door that lists and links questions needs: the web inbox, its live progress,
answer links and notifications. Reached as `Sessions.inbox`; the store does the reading."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.api.storage_errors import storage_faults

if TYPE_CHECKING:
    from orchestrator.store import Store

__all__ = ["Inbox"]


@storage_faults
class Inbox:
    """The inbox's reads and writes on one session database (a storage fault is
    StorageFailed, as everywhere in the session API)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def page(
        self, *, limit: int, after: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of at most `limit` inbox rows after the cursor `after` (None: the first
        page). A row is the session object's fields the inbox shows (`session_id`,
        `status`, `task`, `pending_question`, `created_at`, `stalled`,
        `waiting_for_driver`, `last_error`, `owner`). Sessions waiting for an answer first
        (soonest deadline first, then those without one, newest first), then the others,
        newest first; and the next page's cursor (None on the last page). A cursor is
        opaque: take it from a page; one that is not a cursor raises UserError. Each page
        costs its own rows, not the table's."""
        from orchestrator.store.inbox_sql import inbox_page

        return inbox_page(self._store, limit=max(1, limit), after=after)

    def page_number(self, after: str | None) -> int:
        """The number of the page a cursor opens (1 for None); UserError for a bad cursor."""
        from orchestrator.store.inbox_sql import page_number

        return page_number(after)

    def waiting_count(self, *, cap: int) -> int:
        """How many sessions wait for an answer, counted no further than `cap`."""
        from orchestrator.store.inbox_sql import waiting_count

        return waiting_count(self._store, cap=cap)

    def events_after(self, session_id: str, after: int) -> list[tuple[int, dict[str, Any]]]:
        """The session's events with an id above `after`, oldest first, with their ids."""
        from orchestrator.store.inbox_sql import events_after

        return events_after(self._store, session_id, after)

    def status_of(self, session_id: str) -> str:
        """The session's status column alone (live progress polls it)."""
        return str(self._store.session(session_id).status)

    def new_link(self, session_id: str) -> str:
        """A new answer link's token for the session's question (SessionNotFound for an
        unknown session). The database keeps only its hash: show it, send it, or lose it;
        any number may be made, and each answers while the question is open."""
        from orchestrator.store.inbox_sql import new_link

        self._store.session(session_id)  # SessionNotFound
        return new_link(self._store, session_id)

    def session_of_link(self, token: str) -> tuple[str, bool] | None:
        """(session id, whether the link was used) for an answer-link token; None if unknown."""
        from orchestrator.store.inbox_sql import session_of_link

        return session_of_link(self._store, token)

    def mark_link_used(self, token: str) -> None:
        from orchestrator.store.inbox_sql import mark_link_used

        mark_link_used(self._store, token)

    def answered_not_run_on(
        self, *, handed_off_only: bool = False, owner: str | None = None
    ) -> list[str]:
        """Sessions whose answer is committed and whose driver is gone (a server takes them);
        `handed_off_only`: those answered and handed off (`resume --no-run`); `owner` (an
        Owner's id): also those still claimed by it whose drive a database outage cut off
        (the caller knows none of its threads drives them)."""
        from orchestrator.store.inbox_sql import answered_not_run_on

        return answered_not_run_on(self._store, handed_off_only=handed_off_only, owner=owner)

    def waiting(self, *, asked_since: float | None = None) -> list[dict[str, Any]]:
        """Session objects of the sessions waiting for an answer (asked since an epoch time)."""
        from orchestrator.store.inbox_sql import waiting_sessions

        return waiting_sessions(self._store, asked_since=asked_since)

    def has_event(self, session_id: str, key: str) -> bool:
        from orchestrator.store.inbox_sql import has_event

        return has_event(self._store, session_id, key)

    def record_event(
        self, session_id: str, kind: str, *, key: str | None = None, **payload: Any
    ) -> bool:
        """Append an event to the session's log (once per `key`); False if the key was there."""
        from orchestrator.store.inbox_sql import record_event

        return record_event(self._store, session_id, kind, key=key, **payload)
