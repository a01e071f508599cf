"""Alembic environment: our tables only, never LangGraph's checkpoint tables."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from orchestrator.store.schema import OUR_TABLES, metadata

config = context.config
target_metadata = metadata


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # LangGraph's SqliteSaver/PostgresSaver own their tables (checkpoints, writes, ...).
    if type_ == "table":
        return name in OUR_TABLES
    return True


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {},
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        _run(conn)


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
