"""Agent backends by kind: the engine rebuilds a session's agents from their stored
description without knowing where backends live.

A backend package registers a loader per kind, either by calling `register_backend` on
import or through the `orchestrator.backends` entry point group (name = kind, value = the
loader), which is looked up only when a kind is not registered yet:

    [project.entry-points."orchestrator.backends"]
    script = "orchestrator.agents.scripted:load"
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.runtime.agent import AgentBackend

__all__ = [
    "Loader",
    "Check",
    "register_backend",
    "load_backend",
    "check_backend",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "orchestrator.backends"

# (stored description, recorded replies per agent) -> a backend that continues the session
Loader = Callable[[Mapping[str, Any], Mapping[str, int]], AgentBackend]
# (stored description) -> None, or a ConfigError: this process cannot continue the session
Check = Callable[[Mapping[str, Any]], None]

_lock = threading.Lock()
_loaders: dict[str, Loader] = {}
_checks: dict[str, Check] = {}


def register_backend(kind: str, loader: Loader, *, check: Check | None = None) -> None:
    """Make `kind` loadable; a later registration of the same kind replaces the earlier.
    `check` tells, before anything is written, whether this process can continue a session
    of this kind (a chat model given as an object lives only in the process given it)."""
    with _lock:
        _loaders[kind] = loader
        if check is not None:
            _checks[kind] = check


def check_backend(description: Mapping[str, Any]) -> None:
    """ConfigError if this process cannot rebuild the backend `description` names (its
    kind's check says so); nothing when its kind has no check or is not known yet."""
    with _lock:
        check = _checks.get(str(description.get("kind")))
    if check is not None:
        check(description)


def load_backend(description: Mapping[str, Any], replies_so_far: Mapping[str, int]) -> AgentBackend:
    """Rebuild a backend from its stored description (`AgentBackend.describe()`)."""
    kind = description.get("kind")
    if not isinstance(kind, str):
        raise ConfigError("this session's agents have no kind; it cannot be continued")
    loader = _loaders.get(kind) or _from_entry_points(kind)
    if loader is None:
        raise ConfigError(
            f"this session uses agents of kind {kind!r}, which this installation cannot run"
        )
    return loader(description, replies_so_far)


def _from_entry_points(kind: str) -> Loader | None:
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP, name=kind):
        loader: Loader = entry.load()
        register_backend(kind, loader)
        return loader
    return None
