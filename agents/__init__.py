"""Agent backends: the scripted one (scenario files) now; LLM backends plug in beside it.

A backend is rebuilt in every process from the description the store keeps
(`AgentBackend.describe()`), so `orchestrator resume` continues with the same agents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.agent import AgentBackend
from orchestrator.errors import ConfigError

__all__ = ["load_backend"]


def load_backend(
    description: Mapping[str, Any], *, replies_so_far: Mapping[str, int]
) -> AgentBackend:
    """Rebuild a backend from its stored description; `replies_so_far` counts recorded replies."""
    kind = description.get("kind")
    if kind == "script":
        from agents.scripted import ScriptedBackend

        return ScriptedBackend(description["agents"], replies_so_far=replies_so_far)
    if kind == "llm":
        from agents.llm import LLMBackend

        options = {k: v for k, v in description.items() if k not in ("kind", "models")}
        return LLMBackend(description["models"], **options)
    raise ConfigError(f"this session uses agents of kind {kind!r}, which this version cannot run")
