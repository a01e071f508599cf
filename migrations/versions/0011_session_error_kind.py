"""The kind of a stalled session's last error: sessions (last_error_kind).

`last_error` is the message for people; `last_error_kind` is the failed error's machine
code (orchestrator.errors: `agent_call_failed`, `budget_exceeded`,
`repository_elsewhere`, or `interrupted` for Ctrl+C), written with it and cleared with
it. The worker's queue reads the kind (a budget is left for `resume`) instead of matching
the message's words. Existing rows get the kind their message shows; the texts matched
here are those the earlier versions wrote, frozen with this revision.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# (kind, what the message of that kind started with before this revision), first match wins
_KINDS = (
    ("budget_exceeded", "budget exceeded: %"),
    ("interrupted", "interrupted (Ctrl+C) while the agents worked%"),
    ("repository_elsewhere", "session % is not run here: %"),
)


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("last_error_kind", sa.String(40), nullable=True))
    for kind, pattern in _KINDS:
        op.execute(
            sa.text(
                "UPDATE sessions SET last_error_kind = :kind"
                " WHERE last_error LIKE :pattern AND last_error_kind IS NULL"
            ).bindparams(kind=kind, pattern=pattern)
        )
    op.execute(  # any other stored failure was an agent call's
        sa.text(
            "UPDATE sessions SET last_error_kind = 'agent_call_failed'"
            " WHERE last_error IS NOT NULL AND last_error_kind IS NULL"
        )
    )


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("last_error_kind")
