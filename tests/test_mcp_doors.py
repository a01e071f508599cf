"""A question an MCP client asks (`provide_choice`) is a session like any other: every door
answers it while the tool call waits, and the waiting call returns that answer. The client
here offers form elicitation but its person never answers, so only another door can:
`orchestrator resume --choice`, the inbox form, the question's answer link, the MCP
`answer_session` tool and the Python API. SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from orchestrator import Reply, Sessions
from orchestrator.mcp_server import build_server
from tests.conftest import cli
from tests.mcp_client import Person, call, in_memory
from tests.test_mcp import CHOICE
from tests.waiting import until
from tests.web_support import TOKEN

pytestmark = pytest.mark.backends()


def _waiting_question(db_url: str) -> str:
    """The id of the MCP question once it is open (the tool call is waiting)."""

    def opened() -> str | None:
        with Sessions(db_url) as sessions:
            waiting = [d for d in sessions.list() if d["pending_question"] is not None]
        return str(waiting[0]["session_id"]) if waiting else None

    return until(opened, "the MCP question to open")


def _by_resume(db_url: str, session_id: str, _session: Any) -> None:
    done = cli("resume", session_id, "--choice", "Excel", "--json", db=db_url)
    assert done.returncode == 0, done.stderr  # the MCP server ended it: completed
    assert '"status": "completed"' in done.stdout


def _web(db_url: str) -> Any:
    from fastapi.testclient import TestClient

    from orchestrator.web import WebConfig, create_app

    app = create_app(WebConfig(db=db_url, token=TOKEN, run_on=False))
    return TestClient(app, base_url="http://127.0.0.1:8765")


def _form_post(client: Any, page_path: str, post_path: str) -> None:
    page = client.get(page_path)
    assert page.status_code == 200, page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    posted = client.post(
        post_path,
        data={"csrf": csrf.group(1), "action": "answer", "choice": "Excel"},
        headers={"Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert posted.status_code in (200, 303), posted.text


def _by_inbox(db_url: str, session_id: str, _session: Any) -> None:
    with _web(db_url) as client:
        client.get(f"/?token={TOKEN}")
        _form_post(client, f"/sessions/{session_id}", f"/sessions/{session_id}/answer")


def _by_link(db_url: str, session_id: str, _session: Any) -> None:
    with Sessions(db_url) as sessions:
        token = sessions.inbox.new_link(session_id)
    with _web(db_url) as client:  # no access token: the link is its own key
        _form_post(client, f"/q/{token}", f"/q/{token}")


def _by_api(db_url: str, session_id: str, _session: Any) -> None:
    with Sessions(db_url) as sessions:
        doc = sessions.answer(session_id, Reply(choices=("Excel",)))
    assert doc["orchestrator_state"]["clarification_resolved"]


DOORS: dict[str, Callable[[str, str, Any], None]] = {
    "resume-choice": _by_resume,
    "inbox-form": _by_inbox,
    "answer-link": _by_link,
    "python-api": _by_api,
}


@pytest.mark.parametrize("door", [*DOORS, "answer_session"])
def test_every_door_answers_a_question_an_mcp_client_asked(db_url: str, door: str) -> None:
    never = Person([("silent",)])  # the client's own form is never answered
    answered: dict[str, Any] = {}

    async def main() -> dict[str, Any]:
        server = build_server(db_url)
        async with in_memory(server, never) as session, anyio.create_task_group() as tg:

            async def ask() -> None:
                args = {**CHOICE, "timeout_seconds": 120}
                answered["doc"] = await call(session, "provide_choice", args)

            tg.start_soon(ask)
            sid = await anyio.to_thread.run_sync(_waiting_question, db_url)
            answered["sid"] = sid
            if door == "answer_session":
                got = await call(session, "answer_session", {"session_id": sid, "choices": ["2"]})
                assert got["ok"], got
            else:
                await anyio.to_thread.run_sync(DOORS[door], db_url, sid, session)
            with anyio.fail_after(60):  # the waiting call returns once the answer is in
                while "doc" not in answered:
                    await anyio.sleep(0.05)
        return answered["doc"]

    doc = anyio.run(main)
    assert doc["ok"], doc
    assert doc["data"]["action_status"] == "selected"
    assert doc["data"]["selected"] == ["Excel"] and doc["data"]["selected_indices"] == [1]
    with Sessions(db_url) as sessions:
        final = until(
            lambda: (doc := sessions.status(answered["sid"]))["status"] != "running" and doc,
            "the session to end",
        )
        log = [e["kind"] for e in sessions.log(answered["sid"])]
    assert final["status"] == "completed", final
    assert final["summary"] == "answered: Excel"
    assert log.count("answer") == 1  # one answer, the other door's; none of the client's
