"""How the contract writes a time (orchestrator.domain.clock.iso, iso_epoch)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from orchestrator.domain.clock import iso, iso_epoch


def test_a_time_is_written_in_utc_whatever_zone_the_database_handed_back() -> None:
    """PostgreSQL returns timestamptz in the connection's time zone (a server set to
    Asia/Kolkata gave +05:30); SQLite returns naive UTC. Both are written as UTC with Z."""
    kolkata = timezone(timedelta(hours=5, minutes=30))
    at = datetime(2026, 11, 24, 3, 56, 57, 451458, tzinfo=kolkata)
    assert iso(at) == "2026-11-23T22:26:57.451458Z"
    assert iso(at.astimezone(UTC)) == "2026-11-23T22:26:57.451458Z"
    assert iso(datetime(2026, 11, 23, 22, 26, 57)) == "2026-11-23T22:26:57Z"
    assert iso(None) is None
    assert iso_epoch(0.0) == "1970-01-01T00:00:00Z"
    assert iso_epoch(float("inf")) is None  # a deadline no calendar holds
