"""Our tables. The schema changes only through Alembic revisions in `migrations/`.

LangGraph's checkpoint tables live in the same database but are not ours: migrations/env.py
keeps them out of autogenerate.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "SessionRow", "StateRow", "EventRow", "HEAD_REVISION", "OUR_TABLES"]

# The newest Alembic revision; tests/test_migrations.py checks it matches migrations/.
HEAD_REVISION = "0001"


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    task: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The claim: which process runs the session now, and until when its lease holds.
    owner: Mapped[str | None] = mapped_column(String(64))
    owner_pid: Mapped[int | None] = mapped_column(Integer)
    owner_host: Mapped[str | None] = mapped_column(String(255))
    lease_expires_at: Mapped[float | None] = mapped_column(Float)
    # How to rebuild the agents in a new process (e.g. the whole parsed scenario).
    agents: Mapped[dict[str, Any]] = mapped_column(JSON)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    tasks: Mapped[list[Any]] = mapped_column(JSON, default=list)
    round: Mapped[int] = mapped_column(Integer, default=0)
    answers_used: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)


class StateRow(Base):
    """The persisted orchestrator state the gate decides on (one row per session)."""

    __tablename__ = "orchestrator_state"

    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    clarification_used: Mapped[bool] = mapped_column(Boolean, default=False)
    clarification_resolved: Mapped[bool] = mapped_column(Boolean, default=False)
    clarification_question: Mapped[str | None] = mapped_column(Text)
    user_clarification_response: Mapped[str | None] = mapped_column(Text)
    question_object: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    asked_by: Mapped[str | None] = mapped_column(String(64))
    request_key: Mapped[str | None] = mapped_column(String(128))
    asked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    resolution: Mapped[str | None] = mapped_column(String(16))
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    questions_surfaced: Mapped[int] = mapped_column(Integer, default=0)
    fallbacks_injected: Mapped[int] = mapped_column(Integer, default=0)
    fallback_counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class EventRow(Base):
    """Append-only log. `key` makes every write idempotent: a re-run node cannot add twice."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("session_id", "key", name="uq_events_session_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    key: Mapped[str] = mapped_column(String(160))
    kind: Mapped[str] = mapped_column(String(32))
    agent: Mapped[str | None] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


OUR_TABLES = frozenset({"sessions", "orchestrator_state", "events", "alembic_version"})
