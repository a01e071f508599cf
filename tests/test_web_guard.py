"""Attacks on the web inbox before authentication, against a real server on 127.0.0.1:
a huge or endless body must not be read (token first, then a size cap), and the API's
schema needs the token like the API itself."""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from orchestrator.web.security import MAX_BODY_BYTES
from tests.waiting import until
from tests.web_support import TOKEN

pytest.importorskip("uvicorn")


@pytest.fixture
def server(db_url: str) -> Iterator[tuple[int, Any]]:
    """(port, uvicorn server): the inbox served in this process on a free loopback port,
    on the socket and the protocol `serve` uses."""
    import uvicorn

    from orchestrator.web import WebConfig, create_app
    from orchestrator.web.protocol import listening_socket, server_config

    sock = listening_socket("127.0.0.1", 0)
    number = sock.getsockname()[1]
    app = create_app(WebConfig(db=db_url, token=TOKEN, port=number, run_on=False))
    srv = uvicorn.Server(server_config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    until(lambda: srv.started, "the server to start")
    yield number, srv
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def port(server: tuple[int, Any]) -> int:
    return int(server[0])


@pytest.fixture
def uvicorn_errors() -> Iterator[list[logging.LogRecord]]:
    """What the servers log at ERROR or above (uvicorn's logger does not propagate)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.ERROR)
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "orchestrator.web")]
    for logger in loggers:
        logger.addHandler(handler)
    yield records
    for logger in loggers:
        logger.removeHandler(handler)


@contextmanager
def running(app: Any, **options: Any) -> Iterator[int]:
    """`app` served in this process on the servers' protocol; yields its port."""
    import uvicorn

    from orchestrator.web.protocol import listening_socket, server_config

    sock = listening_socket("127.0.0.1", 0)
    srv = uvicorn.Server(
        server_config(app, log_level="warning", access_log=False, lifespan="off", **options)
    )
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    until(lambda: srv.started, "the server to start")
    try:
        yield sock.getsockname()[1]
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def test_the_servers_connections_send_without_delay(server: tuple[int, Any]) -> None:
    """Nagle's algorithm is off on every accepted connection: with it on (a listening
    socket made with protocol 0, as `serve` made it), each response after the first on a
    kept-alive connection waited ~40 ms for the client's delayed acknowledgement."""
    number, srv = server
    conn = http.client.HTTPConnection("127.0.0.1", number, timeout=20)
    for _ in range(2):  # kept alive: the second request on the same connection
        conn.request("GET", "/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        assert response.status == 200
        response.read()
    (protocol,) = srv.server_state.connections
    accepted = protocol.transport.get_extra_info("socket")
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    conn.close()


def _headers_only(port: int, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST with a declared body that is never sent: the answer must come without it.
    (If the server waited for the body, the read would hit the socket timeout.)"""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.putrequest("POST", path)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    status, body = response.status, response.read()
    conn.close()
    return status, body


def test_no_token_is_refused_before_a_huge_body_is_read(port: int) -> None:
    status, body = _headers_only(
        port,
        "/api/sessions/abc/answer",
        {"Content-Type": "application/json", "Content-Length": str(400 * 1024 * 1024)},
    )
    assert status == 401
    assert b"access token" in body


def test_a_body_over_the_cap_is_refused_unread_even_with_the_token(port: int) -> None:
    status, body = _headers_only(
        port,
        "/api/sessions/abc/answer",
        {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Content-Length": str(MAX_BODY_BYTES + 1),
        },
    )
    assert status == 413
    assert f"{MAX_BODY_BYTES:,} bytes".encode() in body


def test_a_chunked_body_is_cut_off_at_the_cap(port: int) -> None:
    """No Content-Length: the guard counts what arrives and stops at the cap."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    chunk = b"x" * 65536

    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY_BYTES // len(chunk) + 4):
            yield chunk

    # The server may answer and close while the rest of the body is on its way (it stops
    # reading at the cap): what it answered is waiting to be read all the same.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.request(
            "POST",
            "/api/sessions/abc/answer",
            body=chunks(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
    response = conn.getresponse()
    assert response.status == 413
    conn.close()


def test_an_answer_link_post_is_capped_too(port: int) -> None:
    """Answer links need no access token; their bodies are capped all the same."""
    status, _ = _headers_only(
        port,
        "/q/some-token",
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "Content-Length": str(MAX_BODY_BYTES + 1),
        },
    )
    assert status == 413


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_the_api_schema_needs_the_token(port: int, headers: dict[str, Any]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", "/openapi.json", headers=headers)
    response = conn.getresponse()
    assert response.status == 401
    response.read()
    conn.request("GET", "/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
    allowed = conn.getresponse()
    assert allowed.status == 200 and b'"openapi"' in allowed.read()
    conn.close()


@pytest.mark.parametrize(
    "path",
    ["/?page=9223372036854775807", "/?page=0", "/sessions/abc/live?after=9223372036854775808"],
)
def test_out_of_range_numbers_are_bad_requests_not_server_errors(port: int, path: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", path, headers={"Cookie": f"orchestrator_token={TOKEN}"})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 400, body
    assert b"expected" in body
    conn.close()


@pytest.fixture
def short_clock(monkeypatch: pytest.MonkeyPatch) -> float:
    """Each request must be read within 0.5 s (10 s in a real server)."""
    from orchestrator.web.protocol import DeadlineProtocol

    monkeypatch.setattr(DeadlineProtocol, "request_seconds", 0.5)
    return 0.5


def _closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout, if
    it never does, fails the test)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_a_client_too_slow_with_its_headers_is_disconnected(port: int, short_clock: float) -> None:
    """Slowloris: a request line and half a header, then nothing. The server closes the
    connection at the deadline instead of holding it for ever."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as slow:
        slow.sendall(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        assert _closed_by_server(slow) == b""
    # a connection that sends nothing at all is closed the same way
    with socket.create_connection(("127.0.0.1", port), timeout=20) as idle:
        assert idle.recv(1024) == b""


def test_a_body_trickled_past_the_deadline_is_cut_off_without_a_traceback(
    port: int, short_clock: float, uvicorn_errors: list[logging.LogRecord]
) -> None:
    """The deadline covers the body too (it covered the headers only: one byte every 3 s
    kept a connection for ever), and the cut-off costs no traceback in the log (21,005
    of them, 120 MB, after 20,000 such connections)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as slow:
        slow.sendall(
            b"POST /api/sessions/nope/answer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"
        )
        assert _closed_by_server(slow) == b""  # cut off, nothing answered
    assert uvicorn_errors == []


def test_a_request_read_in_time_runs_as_long_as_it_needs(short_clock: float) -> None:
    """Once its body is in, a request is off the clock (a waiting MCP tool call, a live
    page): here a handler that takes 3 times the deadline answers, and the kept-alive
    connection serves a second request."""
    import asyncio

    from starlette.requests import Request
    from starlette.responses import PlainTextResponse

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await Request(scope, receive).body()
        await asyncio.sleep(3 * short_clock)  # the server's work, past the deadline
        await PlainTextResponse(f"got {len(body)}")(scope, receive, send)

    with running(app) as number:
        conn = http.client.HTTPConnection("127.0.0.1", number, timeout=20)
        for _ in range(2):
            conn.request("POST", "/", body=b"x" * 1000)
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, b"got 1000")
        conn.close()


def test_connections_past_the_cap_are_answered_503_and_closed() -> None:
    """At most `connections` at once: the next is told so and closed
    before a byte of it is read, and once one closes a new one is served."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("ok")(scope, receive, send)

    with running(app, connections=3) as number:
        held = [socket.create_connection(("127.0.0.1", number), timeout=20) for _ in range(3)]
        with socket.create_connection(("127.0.0.1", number), timeout=20) as extra:
            assert _closed_by_server(extra).startswith(b"HTTP/1.1 503 ")
        held.pop().close()
        for _ in range(100):  # the server sees the close soon after
            conn = http.client.HTTPConnection("127.0.0.1", number, timeout=20)
            try:
                conn.request("GET", "/")
                response = conn.getresponse()
                status = response.status
            except ConnectionError:  # refused while the server had not seen the close yet
                status = 503
            conn.close()
            if status == 200:
                break
            time.sleep(0.05)  # a bounded poll (100 tries): each try is itself a request
        assert status == 200
        for sock in held:
            sock.close()


ATTACKERS = 200


@pytest.mark.parametrize(
    "path",
    ["/q/abc", "/sessions/s1/answer", "/sessions/s1/cancel"],
    ids=["answer-link", "answer-form", "cancel-form"],
)
def test_slow_bodies_without_a_token_or_link_are_refused_unread(
    port: int, path: str, uvicorn_errors: list[logging.LogRecord]
) -> None:
    """The attack of issue 45: 200 connections declare a 200,000-byte body and send one
    byte of it. The token (or the link) is checked before the body: each is refused at
    once and closed, and the inbox answers a normal request meanwhile (how fast:
    `benchmarks/slow_bodies.py`, under a second)."""
    attackers = []
    for _ in range(ATTACKERS):
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + b"Content-Type: application/x-www-form-urlencoded\r\n"
            + b"Content-Length: 200000\r\n\r\nc"
        )
        attackers.append(sock)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", "/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    response = conn.getresponse()
    assert (response.status, response.read()) == (200, b"[]")
    conn.close()
    expected = b"HTTP/1.1 404 " if path.startswith("/q/") else b"HTTP/1.1 401 "
    for sock in attackers:
        assert _closed_by_server(sock).startswith(expected)
        sock.close()
    assert uvicorn_errors == []


def test_a_slow_body_on_an_open_link_is_cut_off_at_the_deadline(
    db_url: str, port: int, short_clock: float
) -> None:
    """Who holds an open link may send its body, within the deadline like anyone."""
    from orchestrator import Sessions
    from tests.conftest import EXAMPLES

    with Sessions(db_url) as sessions:
        doc = sessions.start_scenario(EXAMPLES / "pause-and-resume.yaml")
        link = sessions.inbox.new_link(doc["session_id"])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as slow:
        slow.sendall(
            f"POST /q/{link} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + b"Content-Type: application/x-www-form-urlencoded\r\n"
            + b"Content-Length: 200000\r\n\r\nc"
        )
        assert _closed_by_server(slow) == b""


def test_mcp_over_http_takes_the_bearer_header_only_not_the_inbox_cookie() -> None:
    """MCP's HTTP door accepted the web inbox's cookie as its token (undocumented): a
    browser sends that cookie along with any request it makes to the address."""
    from starlette.responses import PlainTextResponse
    from starlette.testclient import TestClient

    from orchestrator.web.security import TOKEN_COOKIE, RequestGuard

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("ok")(scope, receive, send)

    client = TestClient(RequestGuard(app, token=TOKEN, everything=True))  # no lifespan
    client.cookies.set(TOKEN_COOKIE, TOKEN)
    assert client.post("/mcp", content=b"{}").status_code == 401
    client.cookies.clear()
    bearer = client.post("/mcp", content=b"{}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200
