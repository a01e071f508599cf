"""Index the deadlines of the questions still waiting: orchestrator_state (deadline), partial.

Workers look for waiting questions whose deadline has passed on every poll. The index holds
only questions that are open with a deadline not yet applied (no resolution, not timed
out), so that look costs what is due, not every session ever paused.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

OPEN = "deadline IS NOT NULL AND NOT timed_out AND resolution IS NULL"


def upgrade() -> None:
    op.create_index(
        "ix_state_open_deadline",
        "orchestrator_state",
        ["deadline"],
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )


def downgrade() -> None:
    op.drop_index("ix_state_open_deadline", table_name="orchestrator_state")
