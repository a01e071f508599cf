"""One process-wide thread renews the leases of every session this process drives.

A heartbeat that fails (the claim was taken over, or the database cannot be reached) marks
the lease lost; the driver checks that mark before every agent call and every checkpoint
write and stops there (the fence in the store catches what the mark has not seen yet).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orchestrator.errors import ClaimLost
from orchestrator.store.owner import Claim, lease_seconds

__all__ = ["held", "Lease"]


class Lease:
    """The heartbeat's verdict on one claim: `lost` says why it was lost, or is None."""

    def __init__(self, store: Any, claim: Claim) -> None:
        self.store = store
        self.claim = claim
        self.lost: str | None = None
        self.taken_over = False  # lost to another process (not to a failed renewal)

    def renew(self) -> None:
        try:
            if not self.store.heartbeat(self.claim):
                self.lost = "its claim was taken over"
                self.taken_over = True
        except Exception as exc:  # any failure to renew stops the driver (kept as `lost`)
            self.lost = f"its lease could not be renewed: {exc}"

    def check(self) -> None:
        """Raise ClaimLost if a heartbeat failed."""
        if self.lost is not None:
            raise ClaimLost(self.claim.session_id, self.lost, elsewhere=self.taken_over)


_lock = threading.Lock()
_held: dict[int, Lease] = {}
_thread: threading.Thread | None = None


def _renew_forever() -> None:
    while True:
        threading.Event().wait(lease_seconds() / 3)
        with _lock:
            leases = list(_held.values())
        for lease in leases:
            if lease.lost is None:
                lease.renew()


@contextmanager
def held(store: Any, claim: Claim) -> Iterator[Lease]:
    """Keep renewing `claim`'s lease while the block runs."""
    global _thread
    lease = Lease(store, claim)
    with _lock:
        _held[id(lease)] = lease
        if _thread is None:
            _thread = threading.Thread(target=_renew_forever, name="leases", daemon=True)
            _thread.start()
    try:
        yield lease
    finally:
        with _lock:
            _held.pop(id(lease), None)
