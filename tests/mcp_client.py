"""The MCP SDK's own client for the MCP server tests: in memory or over a real stdio
subprocess, with a scripted person standing in behind the client's elicitation."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.memory import create_client_server_memory_streams

from orchestrator.domain.question import UserReply
from orchestrator.mcp_server.inputs import RESULT_SCHEMA

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Person:
    """Answers elicitations in order: ("accept", content), ("decline",), ("cancel",),
    ("silent",): never answers (the tool's deadline passes), ("slow", seconds, content):
    accepts, but only after that long, or ("after", event, content): accepts once the
    `threading.Event` is set (by the test, e.g. once it has cancelled the session)."""

    plan: list[tuple[Any, ...]] = field(default_factory=list)
    seen: list[types.ElicitRequestParams] = field(default_factory=list)

    async def __call__(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.seen.append(params)
        step = self.plan.pop(0)
        if step[0] == "silent":
            await anyio.sleep_forever()
        if step[0] == "slow":
            await anyio.sleep(step[1])
            return types.ElicitResult(action="accept", content=step[2])
        if step[0] == "after":
            assert await anyio.to_thread.run_sync(step[1].wait, 60), "the event never came"
            return types.ElicitResult(action="accept", content=step[2])
        if step[0] == "accept" and len(step) > 1:
            return types.ElicitResult(action="accept", content=step[1])
        return types.ElicitResult(action=step[0])


class Session(ClientSession):
    """A client session that declares exactly the elicitation modes it is given."""

    modes: tuple[str, ...] = ("form", "url")

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        caps = super()._build_capabilities(version)
        if caps.elicitation is None:
            return caps
        elicitation = types.ElicitationCapability(
            form=types.FormElicitationCapability() if "form" in self.modes else None,
            url=types.UrlElicitationCapability() if "url" in self.modes else None,
        )
        return caps.model_copy(update={"elicitation": elicitation})


# The seven tools of contract section 6, in the order the server lists them, and after
# them ask_session (docs/mcp.md) and the late answer's reconcile_session
# (docs/late-answers.md).
TOOLS = [
    "provide_choice",
    "ask_user",
    "start_session",
    "session_status",
    "list_sessions",
    "answer_session",
    "session_log",
    "ask_session",
    "reconcile_session",
]


def _session(read: Any, write: Any, person: Person | None, modes: Iterable[str]) -> Session:
    session = Session(read, write, elicitation_callback=person)
    session.modes = tuple(modes)
    return session


@asynccontextmanager
async def in_memory(
    server: Any, person: Person | None = None, modes: Iterable[str] = ("form", "url")
) -> AsyncIterator[Session]:
    """A client connected to `server` in this process (the handshake era, as real clients)."""
    streams = create_client_server_memory_streams()
    async with streams as (client_streams, server_streams), anyio.create_task_group() as tg:

        async def serve() -> None:
            await server.run(*server_streams, server.create_initialization_options())

        tg.start_soon(serve)
        async with _session(*client_streams, person, modes) as session:
            await session.initialize()
            yield session
        tg.cancel_scope.cancel()


@asynccontextmanager
async def served_over_http(server: Any) -> AsyncIterator[str]:
    """`server` as `orchestrator mcp --http` serves it, without the bearer token's check,
    on a free loopback port in this process (uvicorn in this event loop): its URL."""
    import socket

    import uvicorn

    from orchestrator.mcp_server.transports import http_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    served = uvicorn.Server(uvicorn.Config(http_app(server), log_level="warning"))
    try:
        async with anyio.create_task_group() as tg:

            async def serve() -> None:
                await served._serve(sockets=[sock])  # no signal handlers: a test's loop

            tg.start_soon(serve)
            with anyio.fail_after(30):
                while not served.started:
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                served.should_exit = True
    finally:
        sock.close()


@asynccontextmanager
async def over_http_in_process(
    server: Any, person: Person | None = None, modes: Iterable[str] = ("form", "url")
) -> AsyncIterator[Session]:
    """A client of `server` over streamable HTTP in this process, where its threads can be
    counted (the handshake era, as real clients)."""
    from mcp.client.streamable_http import streamable_http_client

    async with (
        served_over_http(server) as url,
        streamable_http_client(url) as (read, write),
        _session(read, write, person, modes) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def over_stdio(
    db: str, person: Person | None = None, modes: Iterable[str] = ("form", "url")
) -> AsyncIterator[Session]:
    """A client of a real `python -m orchestrator mcp --db DB` subprocess."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "orchestrator", "mcp", "--db", db], cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), _session(read, write, person, modes) as s:
        await s.initialize()
        yield s


def shaped(result: types.CallToolResult) -> dict[str, Any]:
    """The result's document, checked against the one result shape (every tool, every
    outcome) and against its own isError flag and text block."""
    document = result.structured_content
    assert document is not None, result
    jsonschema.validate(document, RESULT_SCHEMA)
    assert bool(result.is_error) == (document["ok"] is False)
    assert json.loads(result.content[0].text) == document  # type: ignore[union-attr]
    return document


async def call(session: ClientSession, tool: str, arguments: dict[str, Any], **kw: Any) -> Any:
    return shaped(await session.call_tool(tool, arguments, **kw))


def snapshot(db_path: Path) -> list[tuple[Any, ...]]:
    """Everything in our tables (to show that a refused call changed nothing)."""
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as conn:
        rows: list[tuple[Any, ...]] = []
        for table in ("sessions", "orchestrator_state", "events"):
            rows += [(table, *row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")]
        return rows


@dataclass
class FakePage:
    """Stands in for the one-question web page: the test decides what the person does."""

    reply: UserReply | None  # None: the person never answers
    url: str = "http://127.0.0.1:9/q/token-for-tests"
    opened: list[dict[str, Any]] = field(default_factory=list)
    closed: int = 0

    @asynccontextmanager
    async def __call__(self, question: dict[str, Any], deadline: float) -> AsyncIterator[FakePage]:
        self.opened.append({**question, "_deadline": deadline})
        try:
            yield self
        finally:
            self.closed += 1

    async def wait(self) -> UserReply | None:
        if self.reply is None:
            await anyio.sleep_forever()
        return self.reply
