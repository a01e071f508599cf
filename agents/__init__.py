"""Agent backends: scripted (scenario files), LLM (any LangChain chat model) and the
reference asking policies of `orchestrator eval`.

A backend is rebuilt in every process from the description the store keeps
(`AgentBackend.describe()`), so `orchestrator resume` continues with the same agents. The
kinds here are registered with `orchestrator.runtime.backends` (the
`orchestrator.backends` entry points in pyproject.toml, and on import of this package).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.runtime.agent import AgentBackend
from orchestrator.runtime.backends import register_backend

__all__ = ["load_backend", "load_script", "load_llm", "load_eval", "check_llm"]


def load_script(description: Mapping[str, Any], replies_so_far: Mapping[str, int]) -> AgentBackend:
    from .scripted import ScriptedBackend

    return ScriptedBackend(description["agents"], replies_so_far=replies_so_far)


def check_llm(description: Mapping[str, Any]) -> None:
    """A model given as an object continues only in the process that has it: refused at
    once (before an answer is written) anywhere else."""
    from .models import OBJECT, init_model

    for spec in (description.get("models") or {}).values():
        if isinstance(spec, str) and spec.startswith(OBJECT):
            init_model(spec)


def load_llm(description: Mapping[str, Any], replies_so_far: Mapping[str, int]) -> AgentBackend:
    from orchestrator.model_options import ModelOptions

    from .llm import LLMBackend

    check_llm(description)
    return LLMBackend(
        description["models"],
        prompts=description.get("prompts"),
        workdir=description.get("workdir"),
        options=ModelOptions.from_description(description),
    )


def load_eval(description: Mapping[str, Any], replies_so_far: Mapping[str, int]) -> AgentBackend:
    from .reference import ReferencePolicy

    return ReferencePolicy(
        description["policy"], description.get("blocker"), description.get("solution")
    )


register_backend("script", load_script)
register_backend("llm", load_llm, check=check_llm)
register_backend("eval", load_eval)


def load_backend(
    description: Mapping[str, Any], *, replies_so_far: Mapping[str, int]
) -> AgentBackend:
    """Rebuild a backend from its stored description (kept for callers of the old name)."""
    from orchestrator.runtime.backends import load_backend as load

    return load(description, replies_so_far)
