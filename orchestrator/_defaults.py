"""The session settings' defaults, until the settings model (orchestrator/settings.py) holds
them: one spot, imported by the engine; the gate takes every limit as an argument."""

from __future__ import annotations

from typing import Any

__all__ = ["SESSION_DEFAULTS"]

SESSION_DEFAULTS: dict[str, Any] = {
    "max_rounds": 5,
    "max_fallbacks": 2,
    "uncertainty_threshold": 70,
    "timeout": 300.0,
    "on_timeout": "wait",
}
