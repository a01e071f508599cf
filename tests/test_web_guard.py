"""Attacks on the web inbox before authentication, against a real server on 127.0.0.1:
a huge or endless body must not be read (token first, then a size cap), and the API's
schema needs the token like the API itself."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.web.security import MAX_BODY_BYTES
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
    for _ in range(500):
        if srv.started:
            break
        time.sleep(0.02)
    assert srv.started, "the server did not start"
    yield number, srv
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def port(server: tuple[int, Any]) -> int:
    return int(server[0])


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


def test_a_client_too_slow_with_its_headers_is_disconnected(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slowloris: a request line and half a header, then nothing. The server closes the
    connection at the header deadline (here 0.5 s) instead of holding it for ever."""
    from orchestrator.web.protocol import HeaderDeadlineProtocol

    monkeypatch.setattr(HeaderDeadlineProtocol, "header_seconds", 0.5)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as slow:
        slow.sendall(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        assert slow.recv(1024) == b""  # closed by the server (a timeout would raise)
    assert time.monotonic() - started < 15
    # a connection that sends nothing at all is closed the same way
    with socket.create_connection(("127.0.0.1", port), timeout=20) as idle:
        assert idle.recv(1024) == b""


def test_a_request_whose_headers_are_in_runs_past_the_header_deadline(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline is on the headers only: a body sent slowly after them, and a second
    request on the same kept-alive connection, are served."""
    from orchestrator.web.protocol import HeaderDeadlineProtocol

    monkeypatch.setattr(HeaderDeadlineProtocol, "header_seconds", 0.5)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.putrequest("POST", "/api/sessions/nope/answer")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", "17")
    conn.endheaders()
    time.sleep(1.0)  # past the header deadline, with the headers in
    conn.send(b'{"answer": "yes"}')
    first = conn.getresponse()
    assert first.status == 404  # served: unknown session
    first.read()
    conn.request("GET", "/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    second = conn.getresponse()
    assert second.status == 200
    second.read()
    conn.close()
