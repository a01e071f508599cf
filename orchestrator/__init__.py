"""A multi-agent orchestrator with a clarification gate.

The public API is the session API (`Sessions`, `Reply`, `Settings`, `ModelOptions`); every
edge — the command line (`orchestrator.cli`), and any program of yours — drives sessions
through it.
Importing this package is cheap: the names below load on first use, and the core never
imports Typer, a web framework or a model provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Sessions",
    "Reply",
    "Settings",
    "ModelOptions",
    "Scenario",
    "load_scenario",
    "parse_scenario",
    "OrchestratorError",
    "UserError",
    "EnvironmentFailure",
    "RunError",
    "__version__",
]

if TYPE_CHECKING:
    from orchestrator.api import Reply, Sessions
    from orchestrator.errors import EnvironmentFailure, OrchestratorError, RunError, UserError
    from orchestrator.model_options import ModelOptions
    from orchestrator.scenario import Scenario, load_scenario, parse_scenario
    from orchestrator.settings import Settings

_LAZY = {
    "Sessions": "orchestrator.api",
    "Reply": "orchestrator.api",
    "Settings": "orchestrator.settings",
    "ModelOptions": "orchestrator.model_options",
    "Scenario": "orchestrator.scenario",
    "load_scenario": "orchestrator.scenario",
    "parse_scenario": "orchestrator.scenario",
    "OrchestratorError": "orchestrator.errors",
    "UserError": "orchestrator.errors",
    "EnvironmentFailure": "orchestrator.errors",
    "RunError": "orchestrator.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
