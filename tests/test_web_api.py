"""The web server's JSON API (contract section 5) with FastAPI's TestClient."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from orchestrator.api import Sessions
from orchestrator.web import WebConfig, create_app
from tests.dbcheck import sqlite_fault
from tests.web_support import AUTH, BASE, TOKEN, paused


@pytest.fixture
def sessions(db_url: str) -> Iterator[Sessions]:
    with Sessions(db_url) as s:
        yield s


def client_for(db_url: str, **config: Any) -> TestClient:
    return TestClient(
        create_app(WebConfig(db=db_url, token=TOKEN, **config)),
        base_url=BASE,
        headers=AUTH,
    )


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    with client_for(db_url) as c:
        yield c


def wait_for(client: TestClient, session_id: str, status: str, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        doc = client.get(f"/api/sessions/{session_id}").json()
        if doc["status"] == status:
            return doc  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"session {session_id} did not reach {status}: {doc}")


def test_reads_are_the_cli_documents(client: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    listed = client.get("/api/sessions")
    assert listed.status_code == 200
    assert listed.json() == sessions.list()
    assert client.get("/api/sessions", params={"status": "paused"}).json() == sessions.list(
        "paused"
    )
    assert client.get("/api/sessions", params={"status": "completed"}).json() == []
    one = client.get(f"/api/sessions/{sid}")
    assert one.status_code == 200 and one.json() == sessions.status(sid)
    assert one.json()["pending_question"]["asked_by"] == "pm"
    events = client.get(f"/api/sessions/{sid}/events")
    assert events.status_code == 200 and events.json() == sessions.log(sid)


def test_answer_commits_then_the_server_runs_the_session_on(
    client: TestClient, sessions: Sessions
) -> None:
    sid = paused(sessions)
    r = client.post(f"/api/sessions/{sid}/answer", json={"answer": "All visible columns"})
    assert r.status_code == 200, r.text
    assert r.json()["orchestrator_state"]["user_clarification_response"] == "All visible columns"
    done = wait_for(client, sid, "completed")
    assert done["summary"] == "CSV export shipped"
    assert done["questions_surfaced"] == 1


def test_choices_decline_and_note(client: TestClient, sessions: Sessions) -> None:
    multi = paused(
        sessions,
        {"kind": "multi_select", "options": [{"label": "A"}, {"label": "B"}, {"label": "C"}]},
    )
    r = client.post(f"/api/sessions/{multi}/answer", json={"choices": ["A", "C"], "note": "hi"})
    assert r.status_code == 200, r.text
    state = r.json()["orchestrator_state"]
    assert state["user_clarification_response"] == "A, C" and state["answer_note"] == "hi"
    declined = paused(sessions)
    r = client.post(f"/api/sessions/{declined}/answer", json={"action": "decline"})
    assert r.status_code == 200
    assert r.json()["orchestrator_state"]["answer_status"] == "declined"
    assert wait_for(client, declined, "completed")["fallbacks_injected"] == 1
    wait_for(client, multi, "completed")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"answer": "Something else"}, "not one of the options"),
        ({"choices": []}, "choices: List should have at least 1 item"),  # as MCP says
        ({"answer": "All visible columns", "action": "decline"}, "exactly one of"),
        ({}, "exactly one of"),
        ({"action": "maybe"}, "action"),
        ({"answer": "x", "colour": "red"}, "colour"),
        ({"choices": ["All visible columns", "A fixed summary set"]}, "exactly one choice"),
    ],
)
def test_invalid_answers_are_422_and_change_nothing(
    client: TestClient, sessions: Sessions, body: dict, says: str
) -> None:
    sid = paused(sessions)
    before = sessions.status(sid)
    r = client.post(f"/api/sessions/{sid}/answer", json=body)
    assert r.status_code == 422
    assert says in r.json()["error"]
    assert set(r.json()) == {"error"}
    assert sessions.status(sid) == before


def test_a_body_that_is_missing_or_not_an_object_is_named(
    client: TestClient, sessions: Sessions
) -> None:
    sid = paused(sessions)
    missing = client.post(f"/api/sessions/{sid}/answer")
    assert missing.status_code == 422 and missing.json()["error"] == "body: Field required"
    listed = client.post(f"/api/sessions/{sid}/answer", json=["All visible columns"])
    assert listed.status_code == 422 and listed.json()["error"].startswith("body: ")


def test_empty_free_text_is_422(client: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions, {"kind": "free_text", "options": []})
    r = client.post(f"/api/sessions/{sid}/answer", json={"answer": "   "})
    assert r.status_code == 422 and "empty" in r.json()["error"]


def test_unknown_session_is_404_everywhere(client: TestClient) -> None:
    for method, path, body in [
        ("get", "/api/sessions/nope", None),
        ("get", "/api/sessions/nope/events", None),
        ("post", "/api/sessions/nope/answer", {"answer": "x"}),
        ("post", "/api/sessions/nope/cancel", None),
    ]:
        r = client.request(method.upper(), path, json=body)
        assert r.status_code == 404, (path, r.text)
        assert "nope" in r.json()["error"]


def test_answer_to_a_session_not_waiting_is_409(client: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    assert client.post(f"/api/sessions/{sid}/answer", json={"action": "cancel"}).status_code == 200
    assert client.get(f"/api/sessions/{sid}").json()["status"] == "cancelled"
    again = client.post(f"/api/sessions/{sid}/answer", json={"answer": "All visible columns"})
    assert again.status_code == 409 and "cancelled" in again.json()["error"]
    assert client.post(f"/api/sessions/{sid}/cancel").status_code == 409


def test_cancel_a_waiting_session(client: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    r = client.post(f"/api/sessions/{sid}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


def test_two_answers_at_once_one_wins(db_url: str, sessions: Sessions) -> None:
    for _ in range(3):
        sid = paused(sessions)
        with client_for(db_url, run_on=False) as client:
            barrier = threading.Barrier(2)
            codes: list[int] = []

            def post(
                label: str,
                client: TestClient = client,
                sid: str = sid,
                barrier: threading.Barrier = barrier,
                codes: list[int] = codes,
            ) -> None:
                barrier.wait()
                r = client.post(f"/api/sessions/{sid}/answer", json={"answer": label})
                codes.append(r.status_code)

            threads = [
                threading.Thread(target=post, args=(label,))
                for label in ("All visible columns", "A fixed summary set")
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert sorted(codes) == [200, 409]
        answers = [e for e in sessions.log(sid) if e["kind"] == "answer"]
        assert len(answers) == 1


def test_token_rules(db_url: str, sessions: Sessions) -> None:
    sid = paused(sessions)
    app = create_app(WebConfig(db=db_url, token=TOKEN, run_on=False))
    with TestClient(app, base_url=BASE) as anon:
        assert anon.get("/api/sessions").status_code == 401
        r = anon.get("/api/sessions", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.json() == {
            "error": "missing or wrong access token: send Authorization: Bearer TOKEN"
        }
        assert (
            anon.get("/api/sessions", headers={"Authorization": f"Basic {TOKEN}"}).status_code
            == 401
        )
        assert anon.post(f"/api/sessions/{sid}/answer", json={"answer": "x"}).status_code == 401
        assert anon.get("/").status_code == 401
        assert anon.get(f"/sessions/{sid}").status_code == 401
        assert anon.get("/?token=wrong").status_code == 401
        # the start URL carries the token once: it becomes an HttpOnly SameSite cookie
        start = anon.get(f"/?token={TOKEN}", follow_redirects=False)
        assert start.status_code == 303 and start.headers["location"] == "/"
        cookie = start.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert anon.get("/").status_code == 200
        assert anon.get("/api/sessions").status_code == 200
        # a POST with only the cookie needs the CSRF header (a form needs its field)
        r = anon.post(f"/api/sessions/{sid}/answer", json={"answer": "All visible columns"})
        assert r.status_code == 403
    assert sessions.status(sid)["status"] == "paused"


def test_token_from_the_environment_or_generated(
    monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_WEB_TOKEN", "from-env")
    assert WebConfig(db=db_url).token == "from-env"
    assert WebConfig(db=db_url, token="given").token == "given"
    monkeypatch.delenv("ORCHESTRATOR_WEB_TOKEN")
    one, two = WebConfig(db=db_url), WebConfig(db=db_url)
    assert one.token_generated and len(one.token or "") >= 30 and one.token != two.token
    assert one.start_url() == f"http://127.0.0.1:8765/?token={one.token}"


def test_host_header_must_name_this_server(db_url: str) -> None:
    app = create_app(WebConfig(db=db_url, token=TOKEN, run_on=False))
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example"):
        with TestClient(app, base_url=f"http://{host}", headers=AUTH) as c:
            r = c.get("/api/sessions")
            assert r.status_code == 400, host
            assert "Host" in r.json()["error"]
            assert c.get(f"/?token={TOKEN}").status_code == 400
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        with TestClient(app, base_url=f"http://{host}", headers=AUTH) as c:
            assert c.get("/api/sessions").status_code == 200, host
    public = create_app(
        WebConfig(db=db_url, token=TOKEN, run_on=False, public_url="https://inbox.example.org")
    )
    with TestClient(public, base_url="https://inbox.example.org", headers=AUTH) as c:
        assert c.get("/api/sessions").status_code == 200


def test_bad_status_filter_is_422(client: TestClient) -> None:
    r = client.get("/api/sessions", params={"status": "sleeping"})
    assert r.status_code == 422 and "status" in r.json()["error"]


def test_openapi_document_and_page(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/api/sessions", "/api/sessions/{session_id}/answer"} <= set(spec["paths"])
    client.cookies.set("orchestrator_token", TOKEN)
    page = client.get("/api/docs")
    assert page.status_code == 200 and "/api/sessions/{session_id}/answer" in page.text


def test_the_session_list_is_paged_with_a_next_link(client: TestClient, sessions: Sessions) -> None:
    made = [paused(sessions) for _ in range(5)]
    newest_first = [doc["session_id"] for doc in sessions.list()]
    assert sorted(newest_first) == sorted(made)
    seen: list[str] = []
    url: str | None = "/api/sessions?status=paused&limit=2"
    pages = 0
    while url:
        page = client.get(url)
        assert page.status_code == 200
        body = page.json()
        assert isinstance(body, list) and len(body) <= 2  # still a list, as `list --json`
        seen += [doc["session_id"] for doc in body]
        link = page.headers.get("link")
        url = link[1 : link.index(">")] if link else None
        if url:
            assert 'rel="next"' in link and "status=paused" in url
        pages += 1
    assert seen == newest_first and pages == 3
    assert client.get("/api/sessions", params={"limit": 0}).status_code == 422
    assert client.get("/api/sessions", params={"limit": 5000}).status_code == 422
    assert client.get("/api/sessions", params={"after": "nope"}).status_code == 404
    # without a limit: the first 100, no link when they are all
    whole = client.get("/api/sessions")
    assert len(whole.json()) == 5 and "link" not in whole.headers


def test_a_storage_fault_is_a_503_with_the_contract_body_and_no_traceback(
    client: TestClient,
    sessions: Sessions,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A full disk (or a database server gone, or a damaged file) is the server's
    storage, not the request: 503 `{"error": …}` saying what to do, one log line naming the
    route (never an answer link's token) and no traceback; nothing half written."""
    import sqlite3

    from orchestrator.store import gate_tx, inbox_sql
    from orchestrator.store.core import Store

    sid = paused(sessions)

    def full(*_args: object, **_kwargs: object) -> None:
        raise sqlite_fault(sqlite3.SQLITE_FULL)

    # (patched in a context of its own: the undo leaves the isolated HOME in place)
    with pytest.MonkeyPatch.context() as patch:
        # The disk fills after the gate state's update, at the answer's event: rolled back.
        patch.setattr(gate_tx, "add_event", full)
        answer = {"choices": ["All visible columns"]}
        answered = client.post(f"/api/sessions/{sid}/answer", json=answer)
        assert answered.status_code == 503, answered.text
        error = answered.json()["error"]
        assert "the disk holding the database is full" in error
        assert "Your answer was not recorded" in error
        patch.setattr(Store, "status", full)  # a read: Sessions.status says StorageFailed
        read = client.get(f"/api/sessions/{sid}")
        assert read.status_code == 503, read.text
        assert "the disk holding the database is full" in read.json()["error"]
        patch.setattr(inbox_sql, "session_of_link", full)  # below Sessions.inbox
        link = client.get("/q/SECRET-LINK-TOKEN")
        assert link.status_code == 503 and "disk holding the database is full" in link.text

        def damaged(*_args: object, **_kwargs: object) -> None:
            raise sqlite_fault(sqlite3.SQLITE_NOTADB)

        patch.setattr(Store, "status", damaged)
        broken = client.get(f"/api/sessions/{sid}")
        assert broken.status_code == 503, broken.text
        assert "damaged or not a SQLite database" in broken.json()["error"]
        lines = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
        assert [line.split(": ", 1)[0] for line in lines] == [  # one a fault, by its route
            "POST /api/sessions/{session_id}/answer",
            "GET /api/sessions/{session_id}",
            "GET /q/{token}",
            "GET /api/sessions/{session_id}",
        ]
        assert lines[0].endswith(error) and not [line for line in lines if "SECRET" in line]
        assert not [record for record in caplog.records if record.exc_info]
    doc = sessions.status(sid)
    assert doc["status"] == "paused" and doc["pending_question"] is not None
    assert "answer" not in [event["kind"] for event in sessions.log(sid)]


@pytest.mark.parametrize(
    "host", ["[::1]evil.example", "127.0.0.1:8765, evil.example", "127.0.0.1:80:80", "[::1]:x"]
)
def test_a_malformed_host_header_is_refused(db_url: str, host: str) -> None:
    """`[::1]evil.com` was read as [::1], `127.0.0.1:18210, evil.com` as 127.0.0.1."""
    app = create_app(WebConfig(db=db_url, token=TOKEN, run_on=False))
    with TestClient(app, base_url="http://127.0.0.1:8765", headers=AUTH) as c:
        assert c.get("/api/sessions", headers={"Host": host}).status_code == 400


def test_pages_and_json_are_not_cached(db_url: str) -> None:
    app = create_app(WebConfig(db=db_url, token=TOKEN, run_on=False))
    with TestClient(app, base_url="http://127.0.0.1:8765", headers=AUTH) as c:
        for path in ("/api/sessions", "/", "/api/sessions/nope", "/q/nope"):
            assert c.get(path).headers["cache-control"] == "no-store", path
