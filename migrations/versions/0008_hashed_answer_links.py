"""Answer links stored hashed: answer_links (token_hash), replacing question_links (token).

A link's token now lives only in the link itself (the page that made it, a notification);
the database keeps its SHA-256, so reading the database (a backup, a shared server) does
not give anyone the power to answer. A question may have several links (each one made on
request); any of them answers while the question is open. Existing links keep working:
their tokens are hashed on the way.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    links = op.create_table(
        "answer_links",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_answer_links_session_id", "answer_links", ["session_id"])
    old = sa.table(
        "question_links",
        sa.column("token", sa.String),
        sa.column("session_id", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("used_at", sa.DateTime(timezone=True)),
    )
    bind = op.get_bind()
    rows = bind.execute(sa.select(old)).fetchall()
    if rows:
        op.bulk_insert(
            links,
            [
                {
                    "token_hash": hashlib.sha256(row.token.encode()).hexdigest(),
                    "session_id": row.session_id,
                    "created_at": row.created_at,
                    "used_at": row.used_at,
                }
                for row in rows
            ],
        )
    op.drop_table("question_links")


def downgrade() -> None:
    # The tokens cannot be recovered from their hashes: the links made so far stop working.
    op.create_table(
        "question_links",
        sa.Column("token", sa.String(64), primary_key=True),
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
    )
    op.drop_index("ix_answer_links_session_id", table_name="answer_links")
    op.drop_table("answer_links")
