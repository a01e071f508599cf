"""Fenced claims: the claim generation, the owner's identity (boot id, PID namespace,
process start time), a cancel request for a live driver, and a stalled session's last error.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (SQLite has it): a batch "move and copy" would drop `sessions`, and
    # the foreign keys' ON DELETE CASCADE would take every session's state and events along.
    op.add_column(
        "sessions",
        sa.Column("claim_generation", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column("sessions", sa.Column("owner_boot", sa.String(64)))
    op.add_column("sessions", sa.Column("owner_pidns", sa.String(64)))
    op.add_column("sessions", sa.Column("owner_started", sa.BigInteger()))
    op.add_column("sessions", sa.Column("cancel_requested_at", sa.DateTime(timezone=True)))
    op.add_column("sessions", sa.Column("last_error", sa.Text()))


def downgrade() -> None:
    for column in (
        "last_error",
        "cancel_requested_at",
        "owner_started",
        "owner_pidns",
        "owner_boot",
        "claim_generation",
    ):
        op.drop_column("sessions", column)
