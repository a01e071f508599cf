"""Crash points for the kill-9 tests: `ORCHESTRATOR_CRASH_AT=<point>` SIGKILLs the process there.

Points: session_created, reply_recorded:<agent>#<call> (e.g. reply_recorded:pm#2),
gate_decided, answer_committed, before_pause, before_finish, after_finish. Unset (always,
outside tests) this costs one dict lookup.

`ORCHESTRATOR_STOP_AT=<point>` SIGSTOPs the process there instead (the storage-fault tests
stop the database while it waits, then SIGCONT it: no timing involved).
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["crash_point"]

_TARGET = os.environ.get("ORCHESTRATOR_CRASH_AT")
_STOP = os.environ.get("ORCHESTRATOR_STOP_AT")


def crash_point(name: str) -> None:
    if _TARGET is not None and name == _TARGET:
        os.kill(os.getpid(), signal.SIGKILL)
    if _STOP is not None and name == _STOP:
        # Sent to this thread, not the process: a process-wide SIGSTOP is taken by the thread
        # the kernel wakes for it (most often the main one), and this one ran on until the
        # group stop reached it: under load, past the point (a worker read its session back
        # after `after_finish` while the test, seeing the process stopped, made its outage).
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
