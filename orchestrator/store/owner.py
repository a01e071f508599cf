"""Who runs a session: a claim held by one process, with a lease it renews."""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass, field

__all__ = ["Owner", "LEASE_SECONDS", "is_dead"]

# A claim not renewed for this long is free to take over, whatever host held it.
LEASE_SECONDS = 30.0


@dataclass(frozen=True)
class Owner:
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)

    def lease_until(self) -> float:
        return time.time() + LEASE_SECONDS


def is_dead(owner_pid: int | None, owner_host: str | None, lease_expires_at: float | None) -> bool:
    """Is the process holding a claim gone? Same host: ask the OS. Elsewhere: the lease."""
    if lease_expires_at is None or lease_expires_at < time.time():
        return True
    if owner_host == socket.gethostname() and owner_pid is not None:
        if owner_pid == os.getpid():
            return False
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False
