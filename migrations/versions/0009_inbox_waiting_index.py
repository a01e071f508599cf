"""Index the open questions for the inbox: orchestrator_state (deadline), partial.

The web inbox shows the sessions waiting for an answer first, soonest deadline first, then
those without a deadline. Its pages are read with a cursor (keyset), straight off indexes:
this one gives the open questions in deadline order (and those without one, `deadline IS
NULL`), holding only open questions, so a page costs its own rows, not every session ever
paused. The other sessions come off revision 0004's (created_at DESC, id DESC).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# store.views.OPEN_QUESTION_SQL without its table prefix, term for term (SQLite uses a
# partial index only when the query says each of its terms).
OPEN = (
    "clarification_used AND NOT clarification_resolved"
    " AND (resolution IS NULL OR resolution <> 'cancelled')"
)


def upgrade() -> None:
    op.create_index(
        "ix_state_waiting_deadline",
        "orchestrator_state",
        ["deadline"],
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )


def downgrade() -> None:
    op.drop_index("ix_state_waiting_deadline", table_name="orchestrator_state")
