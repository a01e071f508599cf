"""Sessions, the orchestrator state and the event log.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("owner", sa.String(64)),
        sa.Column("owner_pid", sa.Integer()),
        sa.Column("owner_host", sa.String(255)),
        sa.Column("lease_expires_at", sa.Float()),
        sa.Column("agents", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("tasks", sa.JSON(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("answers_used", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text()),
        sa.Column("error", sa.Text()),
    )
    op.create_index("ix_sessions_status", "sessions", ["status"])
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])
    op.create_table(
        "orchestrator_state",
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("clarification_used", sa.Boolean(), nullable=False),
        sa.Column("clarification_resolved", sa.Boolean(), nullable=False),
        sa.Column("clarification_question", sa.Text()),
        sa.Column("user_clarification_response", sa.Text()),
        sa.Column("question_object", sa.JSON()),
        sa.Column("asked_by", sa.String(64)),
        sa.Column("request_key", sa.String(128)),
        sa.Column("asked_at", sa.DateTime(timezone=True)),
        sa.Column("resolution", sa.String(16)),
        sa.Column("resolved_at", sa.DateTime(timezone=True)),
        sa.Column("questions_surfaced", sa.Integer(), nullable=False),
        sa.Column("fallbacks_injected", sa.Integer(), nullable=False),
        sa.Column("fallback_counts", sa.JSON(), nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.String(160), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(64)),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("session_id", "key", name="uq_events_session_key"),
    )
    op.create_index("ix_events_session_id", "events", ["session_id"])
    # One question per session, enforced by the database as well as by the gate.
    op.create_index(
        "uq_events_one_question",
        "events",
        ["session_id"],
        unique=True,
        sqlite_where=sa.text("kind = 'question_surfaced'"),
        postgresql_where=sa.text("kind = 'question_surfaced'"),
    )


def downgrade() -> None:
    op.drop_index("uq_events_one_question", table_name="events")
    op.drop_index("ix_events_session_id", table_name="events")
    op.drop_table("events")
    op.drop_table("orchestrator_state")
    op.drop_index("ix_sessions_created_at", table_name="sessions")
    op.drop_index("ix_sessions_status", table_name="sessions")
    op.drop_table("sessions")
