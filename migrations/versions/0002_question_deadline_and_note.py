"""Question deadlines, the timed-out flag, and the user's note with an answer.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("orchestrator_state") as batch:
        batch.add_column(sa.Column("deadline", sa.Float()))
        batch.add_column(
            sa.Column("timed_out", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("answer_note", sa.Text()))


def downgrade() -> None:
    with op.batch_alter_table("orchestrator_state") as batch:
        batch.drop_column("answer_note")
        batch.drop_column("timed_out")
        batch.drop_column("deadline")
