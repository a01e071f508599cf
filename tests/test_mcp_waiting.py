"""A question an MCP client asks while it waits (docs/mcp.md, "How the person is asked"),
through a real `orchestrator mcp` process over stdio and over streamable HTTP, with the
official Python SDK client *without* form elicitation: the path of the Inspector CLIs and of
every client that cannot show a form. Each door answers it and the waiting call returns that
answer; the one-question page then refuses a second answer and is gone (its port, its
threads); a read (`status`) changes nothing on the way; with a progress token the call is
kept alive by notifications at the promised interval; over HTTP a dropped stream is resumed
with `Last-Event-ID`. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import forkserver
import pytest
from mcp import StdioServerParameters, stdio_client

from orchestrator import Reply, Sessions
from tests.conftest import ROOT, argv, cli
from tests.mcp_client import Session, call
from tests.test_mcp import CHOICE
from tests.test_mcp_doors import _by_inbox, _by_link
from tests.test_mcp_stdio import MCP_TOKEN, _authorized, _wait_for
from tests.waiting import until

pytestmark = pytest.mark.backends()

KEEPALIVE = 0.4  # ORCHESTRATOR_MCP_KEEPALIVE_SECONDS in these tests: seconds, not 20


def _env(db_url: str) -> dict[str, str]:
    """The server and the command line share the database through ORCHESTRATOR_DB (no
    `--db`): the set-up of the issue's report, where the page's resume command is the
    plain one."""
    env = {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_DB"}
    return {**env, "ORCHESTRATOR_DB": db_url, "ORCHESTRATOR_MCP_KEEPALIVE_SECONDS": str(KEEPALIVE)}


class Server:
    """A client (no elicitation) of a real `python -m orchestrator mcp` process."""

    def __init__(self, session: Session, errlog: Path, env: dict[str, str]) -> None:
        self.session = session
        self.errlog = errlog
        self.env = env

    def stderr(self) -> str:
        return self.errlog.read_text()


@asynccontextmanager
async def no_form_client(
    db_url: str, tmp_path: Path, transport: str = "stdio"
) -> AsyncIterator[Server]:
    """A client without elicitation (handshake era) of a real server process, over `stdio`
    or streamable `http`."""
    env = _env(db_url)
    errlog = tmp_path / "server.err"
    if transport == "http":
        with http_server(env, tmp_path, errlog) as (url, _):
            async with _authorized(url) as (read, write):
                session = Session(read, write)
                session.modes = ()
                async with session:
                    await session.initialize()
                    yield Server(session, errlog, env)
        return
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "orchestrator", "mcp"], cwd=str(ROOT), env=env
    )
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            session = Session(read, write)  # no elicitation callback: no elicitation at all
            session.modes = ()
            async with session:
                await session.initialize()
                yield Server(session, errlog, env)


@contextmanager
def http_server(
    env: dict[str, str], tmp_path: Path, errlog: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`orchestrator mcp --http` on a free port (its stderr in `errlog`): its URL and process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token_file = tmp_path / "token"
    token_file.write_text(MCP_TOKEN + "\n")
    with errlog.open("w") as err:
        proc = forkserver.Popen(
            argv("mcp", "--http", "--port", str(port), "--token-file", str(token_file)),
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        _wait_for(proc, port)  # type: ignore[arg-type]
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _server_pid(server: Server) -> int:
    """The server process's id, from its log line ("serving stdio (pid N)", or HTTP's)."""
    found = re.search(r"\(pid (\d+)\)", server.stderr())
    assert found, server.stderr()
    return int(found.group(1))


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its sockets matched against the kernel's
    table of listening sockets)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _open_question(db_url: str) -> str:
    """The id of the MCP question once it is open (the tool call is waiting)."""

    def opened() -> str | None:
        with Sessions(db_url) as sessions:
            for doc in sessions.list():
                if doc["pending_question"] is not None and doc["task"] == CHOICE["title"]:
                    return str(doc["session_id"])
        return None

    return until(opened, "the MCP question to open")


def _page_url(text: str) -> str:
    found = re.search(r"Answer on this page: (http://127\.0\.0\.1:\d+/choice/\S+)", text)
    assert found, text
    return found.group(1)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def _by_status_then_resume(server: Server, db_url: str, session_id: str) -> None:
    """The issue's report: `status` (a read) first, then the command it prints."""
    shown = cli("status", session_id, env=server.env)
    assert shown.returncode == 0, shown.stderr
    assert f"orchestrator resume {session_id} --choice" in shown.stdout  # no --db: the env's
    done = cli("resume", session_id, "--choice", "Excel", env=server.env)
    assert done.returncode == 0, done.stderr
    assert "the MCP client that asked receives it" in done.stderr + done.stdout


def _by_api(server: Server, db_url: str, session_id: str) -> None:
    with Sessions(db_url) as sessions:
        sessions.answer(session_id, Reply(choices=("Excel",)))


def _by_inbox_form(server: Server, db_url: str, session_id: str) -> None:
    _by_inbox(db_url, session_id, None)


def _by_answer_link(server: Server, db_url: str, session_id: str) -> None:
    _by_link(db_url, session_id, None)


DOORS: dict[str, Callable[[Server, str, str], None]] = {
    "status-then-resume": _by_status_then_resume,
    "inbox-form": _by_inbox_form,
    "answer-link": _by_answer_link,
    "python-api": _by_api,
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("progress", [False, True], ids=["no-progress-token", "progress-token"])
@pytest.mark.parametrize("door", [*DOORS, "answer_session"])
def test_every_door_answers_the_waiting_call_of_a_client_without_forms(
    db_url: str, tmp_path: Path, door: str, progress: bool, transport: str
) -> None:
    notes: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        notes.append((done, total, message))

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with no_form_client(db_url, tmp_path, transport) as server:
            pid = _server_pid(server)
            got["ports_before"] = listening_ports(pid)
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    # Without a progress token the call waits only when asked to (by default
                    # it returns at once: test_a_client_without_forms_or_progress_...).
                    args = {**CHOICE, "timeout_seconds": 300, "wait_for_answer": True}
                    kw = {"progress_callback": on_progress} if progress else {}
                    got["doc"] = await call(server.session, "provide_choice", args, **kw)
                    got["returned"] = time.monotonic()

                tg.start_soon(ask)
                sid = await anyio.to_thread.run_sync(_open_question, db_url)
                got["sid"] = sid
                with anyio.fail_after(30):
                    while "Answer on this page" not in server.stderr():
                        await anyio.sleep(0.05)
                url = _page_url(server.stderr())
                got["ports_waiting"] = listening_ports(pid)
                if progress:  # keep-alive notifications arrive while the call waits
                    with anyio.fail_after(30):
                        while len(notes) < 3:
                            await anyio.sleep(0.05)
                if door == "answer_session":
                    answered = await call(
                        server.session, "answer_session", {"session_id": sid, "choices": ["2"]}
                    )
                    assert answered["ok"], answered
                else:
                    await anyio.to_thread.run_sync(DOORS[door], server, db_url, sid)
                got["answered"] = time.monotonic()
                with anyio.fail_after(30):  # a guard against a hang; the figure is a bench's
                    while "doc" not in got:
                        await anyio.sleep(0.02)
            got["ports_after"] = listening_ports(pid)
            got["page"] = await anyio.to_thread.run_sync(_second_answer, url)
            port = int(url.split(":")[2].split("/")[0])
            got["page_port"] = port
            got["port_refused"] = _refused(port)
        return got

    got = anyio.run(main)
    doc = got["doc"]
    assert doc["ok"], doc
    assert doc["data"]["action_status"] == "selected"
    assert doc["data"]["selected"] == ["Excel"] and doc["data"]["selected_indices"] == [1]
    assert got["page"] == "gone", got["page"]  # no second answer: the page's server is gone
    assert got["port_refused"]
    # Ports counted: the page's while the call waited, none of it once the call returned
    # (the HTTP server's own port, over HTTP, throughout).
    page_port = got["page_port"]
    assert len(got["ports_before"]) == (1 if transport == "http" else 0), got
    assert got["ports_waiting"] == got["ports_before"] | {page_port}, got
    assert got["ports_after"] == got["ports_before"], got
    # (Its threads: test_the_page_and_its_threads_are_gone_once_another_door_answers, in
    # process, where they can be named; here the SDK's pooled worker threads blur a count.)
    with Sessions(db_url) as sessions:
        final = sessions.status(got["sid"])
        kinds = [e["kind"] for e in sessions.log(got["sid"])]
    assert final["status"] == "completed", final
    assert final["summary"] == "answered: Excel"
    assert kinds.count("answer") == 1
    if progress:
        waiting = [n for n in notes if n[2] and "left" in n[2]]
        assert len(waiting) >= 3, notes
        # `progress` is the seconds waited so far, on the server's clock (receipt times here
        # would add the transport's jitter): one note per interval, the first at once.
        assert waiting[0][0] < KEEPALIVE, waiting
        gaps = [b[0] - a[0] for a, b in zip(waiting, waiting[1:], strict=False)]
        assert all(KEEPALIVE * 0.9 < gap < KEEPALIVE * 5 for gap in gaps), gaps
        # total: the wait, from the keep-alive's start to the deadline (300 s after the
        # question opened; the keep-alive starts once the page is up, later under load), the
        # same in every note.
        totals = [n[1] if n[1] is not None else 0.0 for n in waiting]
        assert all(250 < total <= 300.01 for total in totals), totals
        assert max(totals) - min(totals) < 1, totals
        assert "Answer on this page" in (waiting[0][2] or "")
        assert "orchestrator resume" in (waiting[0][2] or "")


def _second_answer(url: str) -> str:
    """What the page does with a second answer: 'gone' when nothing listens any more."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return f"{response.status}: {response.read()[:200]!r}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code}"
    except (urllib.error.URLError, ConnectionError):
        return "gone"


def test_the_server_exits_when_stdin_closes_while_a_question_waits(
    db_url: str, tmp_path: Path
) -> None:
    """A stdio server whose client went away (stdin closed) while a provide_choice call
    waited on the answer page: it exits at once, and the page's port is closed."""
    env = _env(db_url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "mcp"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for message in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "provide_choice",
                    "arguments": {**CHOICE, "wait_for_answer": True},
                },
            },
        ):
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        _open_question(db_url)
        proc.stdin.close()
        code = proc.wait(timeout=20)  # a guard; before the fix it waited for the deadline
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0
    stderr = proc.stderr.read() if proc.stderr else ""
    port = int(_page_url(stderr).split(":")[2].split("/")[0])
    assert _refused(port)
    with Sessions(db_url) as sessions:
        (doc,) = sessions.list()
    # The client that asked is gone; the question stays open for every other door.
    assert doc["status"] == "paused", doc
    assert doc["pending_question"]["question"] == CHOICE["prompt"]


@pytest.mark.parametrize("transport", ["memory", "http"])
def test_the_page_and_its_threads_are_gone_once_another_door_answers(
    db_url: str, transport: str
) -> None:
    """In process (in memory, and over streamable HTTP on loopback), so the threads can be
    named: once the answer came from another door, the page's server thread ("oneshot") has
    ended and no thread still waits on the page (before, both lived until the question's
    deadline)."""
    import threading

    from orchestrator.mcp_server import build_server
    from tests.mcp_client import in_memory, over_http_in_process

    connect = over_http_in_process if transport == "http" else in_memory

    def page_threads() -> list[str]:
        frames = sys._current_frames()
        waiting = [
            t.name
            for t in threading.enumerate()
            if t.ident in frames and _in_page_wait(frames[t.ident])
        ]
        return [t.name for t in threading.enumerate() if t.name == "oneshot"] + waiting

    async def main() -> tuple[dict[str, Any], list[str], list[str], str]:
        server = build_server(db_url)
        got: dict[str, Any] = {}
        async with connect(server, None, ()) as session, anyio.create_task_group() as tg:

            async def ask() -> None:
                got["doc"] = await call(
                    session,
                    "provide_choice",
                    {**CHOICE, "timeout_seconds": 300, "wait_for_answer": True},
                )

            tg.start_soon(ask)
            sid = await anyio.to_thread.run_sync(_open_question, db_url)
            with anyio.fail_after(30):
                while len(page_threads()) < 2:
                    await anyio.sleep(0.05)
            during = page_threads()
            await anyio.to_thread.run_sync(_by_api, None, db_url, sid)
            with anyio.fail_after(30):
                while "doc" not in got:
                    await anyio.sleep(0.02)
            after = page_threads()
        return got["doc"], during, after, sid

    doc, during, after, _ = anyio.run(main)
    assert doc["data"]["selected"] == ["Excel"]
    assert "oneshot" in during and len(during) == 2, during
    assert after == [], after


def _in_page_wait(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "wait" and "oneshot" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def test_waiting_lists_the_questions_mcp_calls_wait_on_at_every_door(db_url: str) -> None:
    """`waiting` means a question is open, on every door: `list --status waiting` (the
    fast read path and the full one), `list_sessions {status: waiting}`, `GET
    /api/sessions?status=waiting` and `Sessions.list("waiting")` all show the question an
    MCP call waits on (its session is `running` meanwhile), and a paused session."""
    from orchestrator.mcp_server import build_server
    from tests.mcp_client import FakePage, in_memory
    from tests.test_mcp_doors import _web
    from tests.web_support import TOKEN

    paused = cli("run", "--script", str(ROOT / "examples" / "pause-and-resume.yaml"), db=db_url)
    assert paused.returncode == 3, paused.stderr

    async def main() -> dict[str, Any]:
        server = build_server(db_url, page=FakePage(None))
        seen: dict[str, Any] = {}
        async with in_memory(server, None, ()) as session, anyio.create_task_group() as tg:

            async def ask() -> None:
                seen["asked"] = await call(
                    session,
                    "provide_choice",
                    {**CHOICE, "timeout_seconds": 300, "wait_for_answer": True},
                )

            tg.start_soon(ask)
            sid = await anyio.to_thread.run_sync(_open_question, db_url)
            seen["sid"] = sid

            def other_doors() -> None:
                seen["cli"] = cli("list", "--status", "waiting", "--json", db=db_url)
                seen["cli_full"] = cli("list", "--status", "waiting", "--json", "--all", db=db_url)
                with Sessions(db_url) as sessions:
                    seen["api"] = sessions.list("waiting")
                    seen["paused"] = sessions.list("paused")
                with _web(db_url) as client:
                    got = client.get(
                        "/api/sessions?status=waiting",
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                    assert got.status_code == 200, got.text
                    seen["web"] = got.json()

            await anyio.to_thread.run_sync(other_doors)
            seen["mcp"] = await call(session, "list_sessions", {"status": "waiting"})
            await anyio.to_thread.run_sync(_by_api, None, db_url, sid)
            with anyio.fail_after(30):
                while "asked" not in seen:
                    await anyio.sleep(0.02)
            with Sessions(db_url) as sessions:
                seen["after"] = sessions.list("waiting")
        return seen

    seen = anyio.run(main)
    sid = seen["sid"]
    with Sessions(db_url) as sessions:
        (other,) = [d["session_id"] for d in sessions.list() if d["session_id"] != sid]
        assert sessions.status(other)["status"] == "paused"
    both = {sid, other}
    assert {d["session_id"] for d in json.loads(seen["cli"].stdout)} == both
    assert {d["session_id"] for d in json.loads(seen["cli_full"].stdout)} == both
    assert {d["session_id"] for d in seen["api"]} == both
    assert {d["session_id"] for d in seen["web"]} == both
    assert {d["session_id"] for d in seen["mcp"]["data"]} == both
    assert {d["session_id"] for d in seen["paused"]} == {other}  # a status is still a status
    assert {d["session_id"] for d in seen["after"]} == {other}  # answered: no longer waiting


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_client_without_forms_or_progress_gets_where_to_answer_at_once(
    db_url: str, tmp_path: Path, transport: str
) -> None:
    """The Inspector CLIs' case: no elicitation, no progress token, a request timeout of 60 s.
    The call returns at once with `pending`, the page link and the resume command; the
    question stays open on that page and at every door; an answer given later (here after
    the call returned, at the terminal) is recorded, `session_status` collects it, and the
    page is gone."""

    async def main() -> tuple[dict[str, Any], Any, dict[str, Any], str]:
        async with no_form_client(db_url, tmp_path, transport) as server:
            with anyio.fail_after(30):  # returns at once (a guard, not a timing)
                doc = await call(server.session, "provide_choice", CHOICE)
            data = doc["data"]
            waiting = await call(server.session, "list_sessions", {"status": "waiting"})
            assert [d["session_id"] for d in waiting["data"]] == [data["session_id"]]
            done = await anyio.to_thread.run_sync(
                lambda: cli(*data["resume_command"].split()[1:-1], "Excel", env=server.env)
            )
            sid = {"session_id": data["session_id"]}
            with anyio.fail_after(30):
                status = await call(server.session, "session_status", sid)
                while status["data"]["status"] != "completed":
                    await anyio.sleep(0.05)
                    status = await call(server.session, "session_status", sid)
            page = await anyio.to_thread.run_sync(_second_answer, data["answer_url"])
        return doc, done, status, page

    doc, done, status, page = anyio.run(main)
    data = doc["data"]
    assert doc["ok"] and data["action_status"] == "pending", doc
    assert data["selected"] == [] and data["annotation"] is None
    assert data["answer_url"].startswith("http://127.0.0.1:")
    assert data["resume_command"].startswith(f"orchestrator resume {data['session_id']} --choice")
    assert "session_status" in data["collect"]
    assert done.returncode == 0, done.stderr
    assert status["data"]["summary"] == "answered: Excel"
    assert status["data"]["orchestrator_state"]["user_clarification_response"] == "Excel"
    assert page == "gone", page


def _sse_events(lines: Iterator[str], guard: float = 60) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each server-sent event read from `lines` (failing after `guard`
    seconds: the server's pings keep a stream that carries nothing else alive)."""
    event_id: str | None = None
    data: list[str] = []
    end = time.monotonic() + guard
    for line in lines:
        assert time.monotonic() < end, "no such event on the stream"
        if line == "":
            if data or event_id is not None:
                yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def test_a_dropped_http_stream_is_resumed_with_the_result(db_url: str, tmp_path: Path) -> None:
    """Over HTTP (protocol 2025-11-25) the stream of a waiting provide_choice call drops
    (here: the client closes it after the first event); the answer comes meanwhile, at the
    terminal; the client reconnects with `Last-Event-ID` and gets the call's result. A
    second client session, whose request has the same JSON-RPC id, gets none of it."""
    import httpx

    env = _env(db_url)
    version = "2025-11-25"
    with http_server(env, tmp_path, tmp_path / "server.err") as (url, _):
        base = {
            "Authorization": f"Bearer {MCP_TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }

        def opened(client: httpx.Client) -> dict[str, str]:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
            answer = client.post(url, json=init, headers=base)
            assert answer.status_code == 200, answer.text
            headers = {
                **base,
                "Mcp-Session-Id": answer.headers["mcp-session-id"],
                "Mcp-Protocol-Version": version,
            }
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert client.post(url, json=note, headers=headers).status_code == 202
            return headers

        def call_choice(client: httpx.Client, headers: dict[str, str], title: str) -> str:
            """Start the call, read its stream's first event, then drop the stream."""
            request = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "provide_choice",
                    "arguments": {**CHOICE, "title": title, "wait_for_answer": True},
                },
            }
            with client.stream("POST", url, json=request, headers=headers) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                first_id, _ = next(_sse_events(stream.iter_lines()))
            assert first_id, "no event id: the stream cannot be resumed"
            return first_id

        with httpx.Client(timeout=60) as client, httpx.Client(timeout=60) as other:
            headers = opened(client)
            last_id = call_choice(client, headers, CHOICE["title"])
            other_headers = opened(other)
            other_id = call_choice(other, other_headers, "Another question")
            sid = _open_question(db_url)
            done = cli("resume", sid, "--choice", "Excel", env=env)
            assert done.returncode == 0, done.stderr
            results = []
            resumed = {**headers, "Accept": "text/event-stream", "Last-Event-ID": last_id}
            with client.stream("GET", url, headers=resumed) as stream:
                assert stream.status_code == 200, stream.read()
                for _, data in _sse_events(stream.iter_lines()):
                    if data:
                        message = json.loads(data)
                        if message.get("id") == 2:
                            results.append(message)
                            break
            # The other session's call (same request id 2) is still waiting: its stream's
            # events hold no result, and this session's result is not among them.
            with Sessions(db_url) as sessions:
                waiting = [d for d in sessions.list("waiting")]
            assert [d["task"] for d in waiting] == ["Another question"]
            gone = {**other_headers, "Accept": "text/event-stream", "Last-Event-ID": other_id}
            cancel = cli("cancel", waiting[0]["session_id"], env=env)
            assert cancel.returncode == 0, cancel.stderr
            with other.stream("GET", url, headers=gone) as stream:
                for _, data in _sse_events(stream.iter_lines()):
                    if data and json.loads(data).get("id") == 2:
                        other_result = json.loads(data)
                        break
    (result,) = results
    document = result["result"]["structuredContent"]
    assert document["data"]["action_status"] == "selected", document
    assert document["data"]["selected"] == ["Excel"]
    assert other_result["result"]["structuredContent"]["data"]["action_status"] == "cancelled"
