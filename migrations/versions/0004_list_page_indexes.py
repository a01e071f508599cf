"""Indexes for `list` pages: (status, created_at DESC, id DESC) and (created_at DESC, id DESC).

A page of the newest sessions, with or without a status filter, is then read straight off
an index instead of sorting the whole table. They make the single-column indexes on
status and on created_at redundant (each is a prefix), which are dropped.

Revision ID: 0004
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_sessions_status_created_at_id",
        "sessions",
        ["status", sa.text("created_at DESC"), sa.text("id DESC")],
    )
    op.create_index(
        "ix_sessions_created_at_id", "sessions", [sa.text("created_at DESC"), sa.text("id DESC")]
    )
    op.drop_index("ix_sessions_status", table_name="sessions")
    op.drop_index("ix_sessions_created_at", table_name="sessions")


def downgrade() -> None:
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])
    op.create_index("ix_sessions_status", "sessions", ["status"])
    op.drop_index("ix_sessions_created_at_id", table_name="sessions")
    op.drop_index("ix_sessions_status_created_at_id", table_name="sessions")
