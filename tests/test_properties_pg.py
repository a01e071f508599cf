"""The end-to-end session property of tests/test_properties.py on PostgreSQL: generated
scenarios (asks, fallbacks, parallel developers, declines, cancels, resumes in a new
store) end with at most one question, every agent told what the contract says. Fewer
examples than on SQLite (each gets its own database), the same checks."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pgcluster
import pytest
from hypothesis import HealthCheck, given, note, settings
from test_properties import _PROFILE, check_agent_requests, check_session, run_scenario, scenarios

PG_SETTINGS = settings(
    max_examples=max(10, _PROFILE["e2e"] // 3),
    deadline=None,
    derandomize=_PROFILE["derandomize"],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.backends("postgresql")
@PG_SETTINGS
@given(scenario=scenarios())
def test_sessions_end_with_at_most_one_question_on_postgresql(
    pg_cluster: pgcluster.Cluster, scenario: dict[str, Any]
) -> None:
    note(f"scenario: {scenario}")
    with pg_cluster.fresh() as url, tempfile.TemporaryDirectory(prefix="orch-prop-") as tmp:
        out = run_scenario(scenario, Path(tmp), url)
    check_session(scenario, out)
    check_agent_requests(scenario, out)
