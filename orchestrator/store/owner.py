"""Who runs a session: a claim held by one process, fenced by a generation, with a lease.

Identity: a pid alone lies (PID namespaces give two live processes the same pid; a dead
process's pid is reused). An owner is (boot id, pid namespace, pid, process start time):
only when the boot id and the namespace match ours can the OS tell whether that very
process still lives. Everywhere else, the lease is the final word.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from functools import cache

__all__ = [
    "Owner",
    "Claim",
    "LEASE_ENV",
    "lease_seconds",
    "is_dead",
    "boot_id",
    "pid_namespace",
    "process_start",
    "OWNER_COLUMNS",
    "DRIVER_COLUMNS",
]

# The session columns a claim writes, which say who holds it and whether that process
# still lives (`is_dead`): what every read that tells "driven" from "stalled" selects.
OWNER_COLUMNS = (
    "owner",
    "owner_pid",
    "owner_host",
    "owner_boot",
    "owner_pidns",
    "owner_started",
    "lease_expires_at",
)
# What tells a running session's state apart (store.views: `owner_alive`, driven or
# stalled; `waiting_for_driver`, answered and handed off): the least a polling read selects.
DRIVER_COLUMNS = ("id", "status", *OWNER_COLUMNS, "last_error")

LEASE_ENV = "ORCHESTRATOR_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 30.0


def lease_seconds() -> float:
    """A claim not renewed for this long is free to take over, whatever host held it.

    $ORCHESTRATOR_LEASE_SECONDS shortens it (tests); heartbeats run three times a lease.
    """
    raw = os.environ.get(LEASE_ENV)
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if 0.1 <= value <= 3600:
            return value
    return DEFAULT_LEASE_SECONDS


@cache
def boot_id() -> str | None:
    """This kernel's boot: the same across the containers of one host, new at each boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


@cache
def pid_namespace() -> str | None:
    """This process's PID namespace (e.g. 'pid:[4026531836]'): pids mean something only
    inside one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (None if unknown or gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Owner:
    """One driving process (one per Engine): its claim's identity on the session row."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    boot: str | None = field(default_factory=boot_id)
    pidns: str | None = field(default_factory=pid_namespace)
    started: int | None = field(default=None)

    def __post_init__(self) -> None:
        if self.started is None:
            object.__setattr__(self, "started", process_start(self.pid))

    def lease_until(self) -> float:
        return time.time() + lease_seconds()

    def columns(self) -> dict[str, object]:
        """The session row's OWNER_COLUMNS for a claim by this owner, its lease from now."""
        values = (self.id, self.pid, self.host, self.boot, self.pidns, self.started)
        return dict(zip(OWNER_COLUMNS, (*values, self.lease_until()), strict=True))


@dataclass(frozen=True)
class Claim:
    """The right to drive one session: `generation` grows on every claim of the session,
    so a process that lost it (taken over while it was frozen, say) is told so by the
    first write it tries (the fence)."""

    session_id: str
    owner: Owner
    generation: int


def is_dead(
    owner_pid: int | None,
    owner_host: str | None,
    lease_expires_at: float | None,
    *,
    owner_boot: str | None = None,
    owner_pidns: str | None = None,
    owner_started: int | None = None,
) -> bool:
    """Is the process holding a claim gone?

    An expired lease: gone, wherever it ran. Within its lease, the OS is asked only when
    the owner ran under this very kernel (boot id) and PID namespace: then a missing pid,
    or a pid now held by a process that started at another time, means gone. A claim
    written before owners had a boot id is judged the old way (same host name).
    """
    if lease_expires_at is None or lease_expires_at < time.time():
        return True
    if owner_pid is None:
        return False
    if owner_boot is not None or owner_pidns is not None:
        if owner_boot != boot_id() or owner_pidns != pid_namespace():
            return False  # another kernel or namespace: its pid means nothing here
    elif owner_host != socket.gethostname():
        return False
    if owner_pid == os.getpid():
        return False
    try:
        os.kill(owner_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    if owner_started is not None:
        started = process_start(owner_pid)
        if started is not None and started != owner_started:
            return True  # the pid was reused by another process
    return False


def lease_left(lease_expires_at: float | None) -> float:
    """Seconds until the lease runs out (0 if it has)."""
    if lease_expires_at is None:
        return 0.0
    return max(0.0, lease_expires_at - time.time())
