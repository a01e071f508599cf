"""Measure how well agents ask (`orchestrator eval`): evaluation cases with a hidden
specification, a simulated user that answers from it through the session API's `ask` door,
and the ask figures (Ask-F1, over-asking, timing, outcome) per case and in total.

An edge like the scenario suites: it reaches the core only through `orchestrator.api`.
See docs/eval.md for the case format and what every figure means.
"""

from __future__ import annotations

__all__ = ["REFERENCE_POLICIES"]

# The built-in baselines, accepted as `--model eval:NAME` (orchestrator.agents.reference).
REFERENCE_POLICIES = ("eval:never-ask", "eval:always-ask", "eval:oracle")
