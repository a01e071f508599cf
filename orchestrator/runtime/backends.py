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

__all__ = ["Loader", "register_backend", "load_backend", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "orchestrator.backends"

# (stored description, recorded replies per agent) -> a backend that continues the session
Loader = Callable[[Mapping[str, Any], Mapping[str, int]], AgentBackend]

_lock = threading.Lock()
_loaders: dict[str, Loader] = {}


def register_backend(kind: str, loader: Loader) -> None:
    """Make `kind` loadable; a later registration of the same kind replaces the earlier."""
    with _lock:
        _loaders[kind] = loader


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
