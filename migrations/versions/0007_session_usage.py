"""Token usage of a session's model calls: sessions (usage), a JSON object per agent.

Chat-model agents report each turn's tokens (input, output, total) and model calls; the
totals per agent are kept with the session so `status`, `list`, the inbox and suite
reports show them without reading the log. NULL for sessions that never called a model
(scripted agents) and for sessions written before this revision.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("usage", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("usage")
