"""Our tables (SQLAlchemy Core). The schema changes only through Alembic revisions.

Core tables rather than ORM classes: every `status`/`list`/`log` imports this module, and
sqlalchemy.orm alone costs ~45 ms of a CLI start. LangGraph's checkpoint tables live in the
same database but are not ours: migrations/env.py keeps them out of autogenerate.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)

# The newest Alembic revision (kept with the standard-library opening code).
from orchestrator.store.connect import HEAD_REVISION
from orchestrator.store.views import OPEN_DEADLINE_SQL, OPEN_QUESTION_SQL

__all__ = [
    "metadata",
    "sessions",
    "state",
    "events",
    "answer_links",
    "HEAD_REVISION",
    "OUR_TABLES",
]


metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("task", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # The claim: which process runs the session now, and until when its lease holds.
    Column("owner", String(64)),
    Column("owner_pid", Integer),
    Column("owner_host", String(255)),
    Column("lease_expires_at", Float),
    # How to rebuild the agents in a new process (e.g. the whole parsed scenario).
    Column("agents", JSON, nullable=False),
    Column("settings", JSON, nullable=False),
    Column("tasks", JSON, nullable=False),
    Column("round", Integer, nullable=False),
    Column("answers_used", Integer, nullable=False),
    Column("summary", Text),
    Column("error", Text),
    # 0003: the fence (grows on every claim; a driver's writes check it), the owner's
    # identity beyond pid + host name, a cancel asked of a live driver, and the last
    # failed agent call of a stalled session.
    Column("claim_generation", Integer, nullable=False, server_default=text("0")),
    Column("owner_boot", String(64)),
    Column("owner_pidns", String(64)),
    Column("owner_started", BigInteger),
    Column("cancel_requested_at", DateTime(timezone=True)),
    Column("last_error", Text),
    # 0011: that error's kind, its code in orchestrator.errors (the queue reads it).
    Column("last_error_kind", String(40)),
    # 0007: tokens and model calls of the agents' recorded turns, {agent: {input_tokens,
    # output_tokens, total_tokens, model_calls}} (orchestrator.store.turns.add_usage).
    Column("usage", JSON),
)
# 0004: `list` pages, newest first, with or without a status filter, straight off an index
# (orchestrator.store.views.page_sql). They replace the single-column (status) and (created_at).
Index(
    "ix_sessions_status_created_at_id",
    sessions.c.status,
    sessions.c.created_at.desc(),
    sessions.c.id.desc(),
)
Index("ix_sessions_created_at_id", sessions.c.created_at.desc(), sessions.c.id.desc())

# The persisted orchestrator state the gate decides on (one row per session).
state = Table(
    "orchestrator_state",
    metadata,
    Column(
        "session_id", String(32), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("clarification_used", Boolean, nullable=False),
    Column("clarification_resolved", Boolean, nullable=False),
    Column("clarification_question", Text),
    Column("user_clarification_response", Text),
    Column("question_object", JSON),
    Column("asked_by", String(64)),
    Column("request_key", String(128)),
    Column("asked_at", DateTime(timezone=True)),
    Column("resolution", String(16)),
    Column("resolved_at", DateTime(timezone=True)),
    Column("questions_surfaced", Integer, nullable=False),
    Column("fallbacks_injected", Integer, nullable=False),
    Column("fallback_counts", JSON, nullable=False),
    # 0002: when the surfaced question stops waiting (epoch seconds), whether that passed,
    # and the note the user gave with an answer.
    Column("deadline", Float),
    Column("timed_out", Boolean, nullable=False, server_default=false()),
    Column("answer_note", Text),
)
# 0006: the deadlines of the questions still waiting (workers look for the passed ones on
# every poll). The migration gives PostgreSQL the same WHERE. A query that wants the index
# says these terms (store.queue), then views.OPEN_QUESTION_SQL for the open question itself
# (on every state a session can reach the two agree: tests/test_open_question.py).
Index(
    "ix_state_open_deadline",
    state.c.deadline,
    sqlite_where=text(OPEN_DEADLINE_SQL.format(t="")),
)
# 0010 (0009's (deadline) before it): the open questions in the web inbox's order, by
# deadline (those without one under NULL), ties by the question's time, then id: a page
# of sessions waiting for an answer reads its own rows whatever the ties
# (store.inbox_sql); the migration gives PostgreSQL the same WHERE,
# views.OPEN_QUESTION_SQL without its table prefix.
Index(
    "ix_state_waiting_order",
    state.c.deadline,
    state.c.asked_at,
    state.c.session_id,
    sqlite_where=text(OPEN_QUESTION_SQL.replace("t.", "")[1:-1]),
)

# Append-only log. `key` makes every write idempotent: a re-run node cannot add twice.
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "session_id",
        String(32),
        ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("key", String(160), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("agent", String(64)),
    Column("payload", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("session_id", "key", name="uq_events_session_key"),
    Index("ix_events_session_id", "session_id"),
    # One question per session, enforced by the database as well as by the gate. (The
    # migration also gives PostgreSQL the WHERE; naming postgresql_where here would import
    # SQLAlchemy's PostgreSQL dialect on every CLI start.)
    Index(
        "uq_events_one_question",
        "session_id",
        unique=True,
        sqlite_where=text("kind = 'question_surfaced'"),
    ),
)

# 0005, 0008: answer links (`/q/{token}` of the web inbox), made on request, any number per
# question. The token is unguessable and lives only in the link: the database keeps its
# SHA-256. A link accepts one answer while the question is open.
answer_links = Table(
    "answer_links",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column(
        "session_id",
        String(32),
        ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
)

# (question_links: the answer links of revisions 0005-0007, tokens in clear)
OUR_TABLES = frozenset(
    {
        "sessions",
        "orchestrator_state",
        "events",
        "question_links",
        "answer_links",
        "alembic_version",
    }
)
