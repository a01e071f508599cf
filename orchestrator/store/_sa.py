"""The store's SQL on a SQLAlchemy engine (PostgreSQL): the `Tx` of orchestrator.store.sql
over a pooled connection."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Any

from sqlalchemy import JSON, Connection, DateTime, Engine, bindparam, text
from sqlalchemy.sql.elements import TextClause

from orchestrator.store.sql import JSON_COLUMNS, TIME_COLUMNS, Row, decode_row

__all__ = ["SaDb", "SaTx"]

_PARAM = re.compile(r"(?<!:):(\w+)")


@cache
def _statement(sql: str) -> TextClause:
    """`sql` as a text clause whose JSON and time parameters are typed (PostgreSQL gets
    them cast and serialised as the columns expect); built once per statement."""
    names = set(_PARAM.findall(sql))
    typed = [bindparam(n, type_=JSON) for n in sorted(names & JSON_COLUMNS)]
    typed += [bindparam(n, type_=DateTime(timezone=True)) for n in sorted(names & TIME_COLUMNS)]
    statement = text(sql)
    return statement.bindparams(*typed) if typed else statement


class SaTx:
    """A Tx over a SQLAlchemy connection inside its transaction."""

    __slots__ = ("conn", "dialect", "lock_rows")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name
        self.lock_rows = " FOR UPDATE" if self.dialect == "postgresql" else ""

    @property
    def info(self) -> dict[str, Any]:
        return self.conn.info

    def _execute(self, sql: str, params: Mapping[str, Any] | None) -> Any:
        return self.conn.execute(_statement(sql), dict(params or {}))

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        result = self._execute(sql, params)
        names = tuple(result.keys())
        return [decode_row(names, tuple(values)) for values in result]

    def first(self, sql: str, params: Mapping[str, Any] | None = None) -> Row | None:
        result = self._execute(sql, params)
        values = result.first()
        return None if values is None else decode_row(tuple(result.keys()), tuple(values))

    def scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        row = self.first(sql, params)
        return None if row is None else next(iter(row.values()))

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        return int(self._execute(sql, params).rowcount)


@contextmanager
def read(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        yield conn


class SaDb:
    """The store's database on a SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[SaTx]:
        """A write transaction. (`durable` asks nothing more here: PostgreSQL's commits
        are durable; a SQLite file is never opened through this class, only memory.)"""
        # (BEGIN IMMEDIATE on SQLite: store.db; the listener is told by Store._heard.)
        with self.engine.connect().execution_options(write=True) as conn, conn.begin():
            yield SaTx(conn)

    @contextmanager
    def read(self) -> Iterator[SaTx]:
        with read(self.engine) as conn:
            yield SaTx(conn)

    def close(self) -> None:
        self.engine.dispose()
