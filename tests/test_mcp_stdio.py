"""The MCP server as MCP clients run it: `python -m orchestrator mcp --db DB` in a real
subprocess, driven over stdio (and streamable HTTP) by the SDK's own client."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import forkserver
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import EXAMPLES, ROOT, argv, cli
from tests.mcp_client import TOOLS, Person, Session, call, over_stdio, shaped, snapshot
from tests.test_mcp import ASK, CHOICE, MALFORMED, MULTI
from tests.waiting import until


def test_the_tools_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"
    person = Person(
        [
            ("accept", {"choice": "CSV", "annotation": "keep it simple"}),
            ("accept", {"choice": ["Excel", "JSON"]}),
            ("decline",),
            ("cancel",),
            ("silent",),
            ("accept", {"answer": "release-2.4"}),
            ("decline",),
            ("cancel",),
            ("silent",),
        ]
    )
    short = {"timeout_seconds": 0.5}

    async def main() -> dict[str, Any]:
        async with over_stdio(str(db), person) as session:
            tools = (await session.list_tools()).tools
            docs = [
                await call(session, "provide_choice", CHOICE),
                await call(session, "provide_choice", MULTI),
                await call(session, "provide_choice", CHOICE),
                await call(session, "provide_choice", CHOICE),
                await call(session, "provide_choice", {**CHOICE, **short}),
                await call(session, "ask_user", ASK),
                await call(session, "ask_user", ASK),
                await call(session, "ask_user", ASK),
                await call(session, "ask_user", {**ASK, **short}),
            ]
            before = snapshot(db)
            refused = [await call(session, tool, args) for tool, args, _ in MALFORMED]
            after = snapshot(db)
            listed = await call(session, "list_sessions", {})
            return {
                "tools": [t.name for t in tools],
                "docs": docs,
                "refused": refused,
                "unchanged": before == after,
                "listed": listed,
            }

    out = anyio.run(main)
    assert out["tools"] == TOOLS
    choice_statuses = [(d["data"]["action_status"], d["data"]["selected"]) for d in out["docs"][:5]]
    assert choice_statuses == [
        ("selected", ["CSV"]),
        ("selected", ["Excel", "JSON"]),
        ("cancelled", []),
        ("cancelled", []),
        ("timeout", []),
    ]
    assert out["docs"][0]["data"]["annotation"] == "keep it simple"
    assert out["docs"][1]["data"]["selected_indices"] == [1, 2]
    assert [d["data"] for d in out["docs"][5:]] == [
        {"action_status": "answered", "answer": "release-2.4"},
        {"action_status": "declined", "answer": None},
        {"action_status": "cancelled", "answer": None},
        {"action_status": "timeout", "answer": None},
    ]
    assert [p.mode for p in person.seen] == ["form"] * 9
    assert all(doc["error"]["code"] == "invalid_input" for doc in out["refused"])
    assert out["unchanged"]
    # Every question is recorded: one session each, newest first.
    sessions = out["listed"]["data"]
    assert len(sessions) == 9
    assert [s["status"] for s in reversed(sessions)] == [
        "completed",
        "completed",
        "completed",
        "cancelled",
        "completed",
        "completed",
        "completed",
        "cancelled",
        "completed",
    ]
    assert [s["orchestrator_state"]["answer_status"] for s in reversed(sessions)] == [
        "selected",
        "selected",
        "declined",
        "cancelled",
        "timeout",
        "answered",
        "declined",
        "cancelled",
        "timeout",
    ]
    # ... and visible to the CLI like any other session.
    shown = cli("log", sessions[-1]["session_id"], "--json", db=str(db))
    assert shown.returncode == 0 and '"question_surfaced"' in shown.stdout


def test_session_tools_over_stdio_and_a_race_with_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"
    scenario = (EXAMPLES / "pause-and-resume.yaml").read_text()

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with over_stdio(str(db)) as session:
            started = await call(session, "start_session", {"scenario": scenario})
            sid = started["data"]["session_id"]
            out["started"] = started

            async def by_cli() -> None:
                out["cli"] = await anyio.to_thread.run_sync(
                    lambda: cli("resume", sid, "--answer", "Daily", "--json", db=str(db))
                )

            async def by_mcp() -> None:
                out["mcp"] = await call(
                    session, "answer_session", {"session_id": sid, "answer": "Weekly"}
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(by_cli)
                tg.start_soon(by_mcp)
            out["status"] = await call(session, "session_status", {"session_id": sid})
            out["log"] = await call(session, "session_log", {"session_id": sid})
            out["unknown"] = await call(session, "session_status", {"session_id": "nope"})
        return out

    out = anyio.run(main)
    assert out["started"]["data"]["status"] == "paused"
    cli_won, mcp_won = out["cli"].returncode == 0, out["mcp"]["ok"]
    assert cli_won != mcp_won, out
    if not cli_won:
        assert out["cli"].returncode == 2
    else:
        assert out["mcp"]["error"]["code"] in ("not_waiting", "conflict")
    winner = "Daily" if cli_won else "Weekly"
    state = out["status"]["data"]["orchestrator_state"]
    assert state["user_clarification_response"] == winner
    assert out["status"]["data"]["status"] == "completed"
    assert [e["kind"] for e in out["log"]["data"]].count("answer") == 1
    assert out["unknown"]["error"]["code"] == "not_found"


def test_the_sdk_client_with_default_settings_connects_over_stdio(tmp_path: Path) -> None:
    """`Client` opens in the 2026-07-28 era: the form goes back to it in an
    InputRequiredResult, and its second call carries the person's choice."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "orchestrator", "mcp", "--db", str(tmp_path / "c.db")],
        cwd=str(ROOT),
    )
    person = Person([("accept", {"choice": "Excel"})])

    async def main() -> tuple[str, dict[str, Any]]:
        async with Client(params, elicitation_callback=person) as client:
            result = await client.call_tool("provide_choice", CHOICE)
            return client.protocol_version, shaped(result)

    version, doc = anyio.run(main)
    assert version == "2026-07-28"
    assert doc["data"]["selected"] == ["Excel"]
    assert [p.mode for p in person.seen] == ["form"]


def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    """`orchestrator mcp --http --port N`: the same tools at http://127.0.0.1:N/mcp."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token_file = tmp_path / "token"
    token_file.write_text(MCP_TOKEN + "\n")
    server = forkserver.Popen(
        argv(
            "mcp",
            "--http",
            "--port",
            str(port),
            "--token-file",
            str(token_file),
            db=str(tmp_path / "h.db"),
        ),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(server, port)
        person = Person([("accept", {"choice": "JSON"}), ("accept", {"answer": "main"})])
        url = f"http://127.0.0.1:{port}/mcp"

        async def main() -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
            async with Client(_authorized(url), elicitation_callback=person) as client:
                # 2026-07-28
                foreign = await anyio.to_thread.run_sync(post_with_foreign_host, port)
                assert foreign in (400, 403, 421), foreign  # DNS-rebinding protection
                chosen = shaped(await client.call_tool("provide_choice", CHOICE))
                version = client.protocol_version
            # The handshake era: the form is sent while the call waits, on its SSE stream.
            async with (
                _authorized(url) as (read, write),
                Session(read, write, elicitation_callback=person) as session,
            ):
                await session.initialize()
                answered = await call(session, "ask_user", ASK)
                listed = await call(session, "list_sessions", {})
            return version, chosen, answered, listed

        version, chosen, answered, listed = anyio.run(main)
        taken = cli("mcp", "--http", "--port", str(port), db=str(tmp_path / "h.db"))
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert version == "2026-07-28"
    assert chosen["data"]["selected"] == ["JSON"]
    assert answered["data"] == {"action_status": "answered", "answer": "main"}
    assert [s["task"] for s in listed["data"]] == ["Which branch should I deploy?", "Export format"]
    assert f"serving http://127.0.0.1:{port}/mcp" in stderr
    assert taken.returncode == 2
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in taken.stderr


def _wait_for(server: subprocess.Popen[str], port: int) -> None:
    """Until the server accepts connections on `port` (failing if it ends first)."""

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            assert server.poll() is None, "the server ended"
            return False

    until(accepts, f"the server to accept connections on port {port}")


def _authorized(url: str) -> Any:
    """The streamable HTTP transport with the server's bearer token."""
    import httpx2

    headers = {"Authorization": f"Bearer {MCP_TOKEN}"}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))


def post_with_foreign_host(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Host": "evil.example", "Authorization": f"Bearer {MCP_TOKEN}"}
        conn.request("POST", "/mcp", body="{}", headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


MCP_TOKEN = "mcp-test-token-0123456789"


def test_streamable_http_needs_the_bearer_token(tmp_path: Path) -> None:
    """Any local process could otherwise list, answer, cancel and start sessions: without
    the token (none, wrong, a huge unread body) every request is refused; the generated
    token is printed once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_MCP_TOKEN"}
    server = forkserver.Popen(
        argv("mcp", "--http", "--port", str(port), db=str(tmp_path / "h.db")),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    statuses = []
    challenges: list[str | None] = []
    try:
        _wait_for(server, port)
        listing = (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
            ' "params": {"name": "list_sessions", "arguments": {}}}'
        )
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            conn.request(
                "POST",
                "/mcp",
                body=listing,
                headers={"Content-Type": "application/json", **headers},
            )
            response = conn.getresponse()
            challenges.append(response.getheader("WWW-Authenticate"))
            statuses.append((response.status, response.read()))
            conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.putrequest("POST", "/mcp")
        conn.putheader("Content-Length", str(400 * 1024 * 1024))  # never sent
        conn.endheaders()
        statuses.append((conn.getresponse().status, b""))
        conn.close()
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert [status for status, _ in statuses] == [401, 401, 401]
    assert all(b"Bearer" in body for _, body in statuses[:2])
    assert challenges == ['Bearer realm="orchestrator"'] * 2  # how to authenticate (RFC 6750)
    printed = [line for line in stderr.splitlines() if "Authorization: Bearer" in line]
    assert len(printed) == 1 and len(printed[0].split()[-1]) >= 24


def test_without_the_sdk_the_command_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import orchestrator, orchestrator.api, orchestrator.cli\n"
        "assert not [m for m in sys.modules if m.startswith(('mcp.', 'mcp_types'))]\n"
        "sys.argv = ['orchestrator', 'mcp']\n"
        "orchestrator.cli.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "install -e '.[mcp]'" in done.stderr  # the hint for this checkout
    assert "Traceback" not in done.stderr
