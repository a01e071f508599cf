"""Scenario files: a session's task, scripted agents and answers, and what to expect.

`format` holds the file format (pydantic models, loading, the error texts); `steps` the
virtual-clock steps a scenario may take between replies.
"""

from orchestrator.scenario.format import (
    EventExpect,
    Expect,
    Scenario,
    ScriptedAnswer,
    Step,
    TaskExpect,
    format_validation_error,
    load_scenario,
    parse_scenario,
)

__all__ = [
    "Scenario",
    "ScriptedAnswer",
    "Expect",
    "Step",
    "TaskExpect",
    "EventExpect",
    "load_scenario",
    "parse_scenario",
    "format_validation_error",
]
