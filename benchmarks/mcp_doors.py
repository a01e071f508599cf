"""How soon a waiting MCP call returns once another door answers its question (issue 43):
a real `orchestrator mcp` process over stdio and over streamable HTTP, the official Python
SDK client without form elicitation, with a progress token; RUNS times per transport, a
`provide_choice` call waits, the question is answered through the Python API
(`Sessions.answer`, the path every other door shares), and the time from the answer's
commit to the call's return is taken. Prints median and worst per transport. Checks
nothing; exits 0.

  .venv/bin/python benchmarks/mcp_doors.py [--runs N]   # default 10

Target (issue 43): the call returns within 2 s of the answer.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789"
TARGET_SECONDS = 2.0
CHOICE: dict[str, Any] = {
    "title": "Export format",
    "prompt": "Which format should the export offer?",
    "type": "single_select",
    "options": [{"label": "CSV"}, {"label": "Excel"}],
    "timeout_seconds": 300,
    "wait_for_answer": True,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def client(transport: str, db: str, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    """A client without elicitation of a real server process."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "orchestrator", "mcp", "--db", db], env=env
        )
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
        return
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "mcp", "--http", "--port", str(port)] + ["--db", db],
        env={**env, "ORCHESTRATOR_MCP_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await anyio.sleep(0.1)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        server.terminate()
        server.wait(timeout=30)


def open_question(db: str, seen: set[str]) -> str:
    from orchestrator import Sessions

    while True:
        with Sessions(db) as sessions:
            for doc in sessions.list("waiting"):
                if doc["session_id"] not in seen:
                    return str(doc["session_id"])
        time.sleep(0.02)


def answer(db: str, session_id: str) -> float:
    from orchestrator import Reply, Sessions

    with Sessions(db) as sessions:
        sessions.answer(session_id, Reply(choices=("Excel",)))
    return time.monotonic()


async def measure(transport: str, db: str, runs: int) -> list[float]:
    env = {**os.environ, "ORCHESTRATOR_MCP_KEEPALIVE_SECONDS": "20"}
    seen: set[str] = set()
    delays: list[float] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        pass

    async with client(transport, db, env) as session:
        for _ in range(runs + 1):  # +1: warm-up
            got: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:

                async def ask(got: dict[str, Any] = got) -> None:
                    result = await session.call_tool(
                        "provide_choice", CHOICE, progress_callback=note
                    )
                    got["returned"] = time.monotonic()
                    got["result"] = result.structured_content

                tg.start_soon(ask)
                sid = await anyio.to_thread.run_sync(open_question, db, seen)
                seen.add(sid)
                got["answered"] = await anyio.to_thread.run_sync(answer, db, sid)
            assert got["result"]["data"]["selected"] == ["Excel"], got
            delays.append(got["returned"] - got["answered"])
    return delays[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"== a waiting provide_choice call, answered at another door ({args.runs} runs each)")
    with tempfile.TemporaryDirectory() as tmp:
        for transport in ("stdio", "http"):
            db = str(Path(tmp) / f"{transport}.db")
            delays = anyio.run(measure, transport, db, args.runs)
            median, worst = statistics.median(delays), max(delays)
            met = "met" if worst <= TARGET_SECONDS else "NOT met"
            print(
                f"{transport:>5}: answer to return median {median:.2f} s, worst {worst:.2f} s "
                f"(target {TARGET_SECONDS:.0f} s: {met})"
            )


if __name__ == "__main__":
    main()
