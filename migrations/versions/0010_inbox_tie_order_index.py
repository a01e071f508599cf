"""The inbox's whole order in one index: orchestrator_state (deadline, asked_at,
session_id), partial on open questions; it replaces revision 0009's (deadline).

The inbox shows the questions still waiting by deadline, soonest first. 0009's index held
the deadline only, and the ties were broken on the sessions table (created_at DESC, id
DESC), so a page sorted every waiting session sharing the deadline (100,000 sessions, a
third waiting with one deadline: 1-5 s a page). The tie-break now is the question's own
time, then the session id, both of this table and both in the index, ascending (the
question asked first comes first), so that a page's cursor is one row-value comparison,
a range of the index on both databases: any tie pattern (one deadline for all, or none)
costs a page's rows. An open question
without `asked_at` (none is written so; a row written by hand) gets its session's
creation time, so that the cursor's comparisons never meet a NULL.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# store.views.OPEN_QUESTION_SQL without its table prefix, term for term (SQLite uses a
# partial index only when the query says each of its terms).
OPEN = (
    "clarification_used AND NOT clarification_resolved"
    " AND (resolution IS NULL OR resolution <> 'cancelled')"
)


def upgrade() -> None:
    op.execute(
        "UPDATE orchestrator_state SET asked_at = (SELECT s.created_at FROM sessions AS s"
        f" WHERE s.id = orchestrator_state.session_id) WHERE asked_at IS NULL AND {OPEN}"
    )
    op.create_index(
        "ix_state_waiting_order",
        "orchestrator_state",
        ["deadline", "asked_at", "session_id"],
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )
    op.drop_index("ix_state_waiting_deadline", table_name="orchestrator_state")


def downgrade() -> None:
    op.create_index(
        "ix_state_waiting_deadline",
        "orchestrator_state",
        ["deadline"],
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )
    op.drop_index("ix_state_waiting_order", table_name="orchestrator_state")
