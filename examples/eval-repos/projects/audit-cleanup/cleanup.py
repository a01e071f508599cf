"""The nightly cleanup of the audit log."""

# How many days an audit log entry is kept (Legal's decision).
RETENTION_DAYS: int | None = None


def expired(age_days: int) -> bool:
    """Whether an entry `age_days` days old is past the retention period."""
    raise NotImplementedError("the retention period is not set")
