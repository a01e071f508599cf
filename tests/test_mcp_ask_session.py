"""MCP's `ask_session`: a paused session's question shown in the client's own form, one
field per part, in both protocol eras (docs/mcp.md, "ask_session")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.api import Sessions
from orchestrator.mcp_server.server import build_server
from tests.conftest import EXAMPLES
from tests.mcp_client import Person, shaped, snapshot
from tests.test_mcp import run
from tests.test_multipart_doors import delivered

THREE = {"part1": "Memcached", "part2": "us-east", "part3": "5", "note": "from the form"}


def paused_three_parts(db: Path, tmp_path: Path, settings: str = "") -> str:
    """examples/multi-part-question.yaml without its answers and with three parts allowed:
    paused on a choice (asked twice, merged) and two free-text parts."""
    text = (EXAMPLES / "multi-part-question.yaml").read_text().split("answers:")[0]
    script = tmp_path / "three.yaml"
    script.write_text(text.replace("max_question_parts: 2", "max_question_parts: 3" + settings))
    with Sessions(str(db)) as sessions:
        doc = sessions.start_scenario(str(script))
    assert [p["part"] for p in doc["pending_question"]["parts"]] == [1, 2, 3]
    return str(doc["session_id"])


def run_modern(db: Path, person: Person, sid: str) -> list[dict[str, Any]]:
    from mcp import Client

    async def main() -> list[dict[str, Any]]:
        async with Client(
            build_server(str(db)), mode="2026-07-28", elicitation_callback=person
        ) as c:
            return [shaped(await c.call_tool("ask_session", {"session_id": sid}))]

    return anyio.run(main)


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
def test_a_three_part_question_answered_in_one_form(tmp_path: Path, era: str) -> None:
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path)
    person = Person([("accept", THREE)])
    if era == "handshake":
        (doc,) = run(db, person, ("ask_session", {"session_id": sid}))
    else:
        (doc,) = run_modern(db, person, sid)
    assert doc["ok"] is True, doc
    assert doc["data"]["status"] == "completed"
    (form,) = person.seen  # one form for the whole question
    fields = form.requested_schema["properties"]
    assert list(fields) == ["part1", "part2", "part3", "note"]
    assert [o["const"] for o in fields["part1"]["oneOf"]] == ["Redis", "Memcached"]
    assert fields["part1"]["title"] == "1. Which cache should we use?"
    assert "developer-1, developer-3" in fields["part1"]["description"]
    assert "the default: Redis" in fields["part1"]["description"]
    assert fields["part2"]["type"] == "string" and "required" not in form.requested_schema
    assert "asks you 3 questions" in form.message
    assert delivered(str(db), sid) == {
        "developer-1": "Memcached",
        "developer-2": "us-east",
        "developer-3": "Memcached",
        "developer-4": "5",
    }
    state = doc["data"]["orchestrator_state"]
    assert state["user_clarification_response"] == "1. Memcached\n2. us-east\n3. 5"
    assert doc["data"]["questions_surfaced"] == 1


def test_an_empty_field_declines_its_part_and_the_agents_take_its_default(
    tmp_path: Path,
) -> None:
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path)
    (doc,) = run(db, Person([("accept", {"part1": "Redis", "part2": "", "part3": "2"})]),
                 ("ask_session", {"session_id": sid}))  # fmt: skip
    assert doc["data"]["status"] == "completed", doc
    with Sessions(str(db)) as sessions:
        log = sessions.log(sid)
    fallbacks = [e for e in log if e["kind"] == "fallback"]
    assert [(e["agent"], e.get("why")) for e in fallbacks] == [("developer-2", "declined")]
    assert delivered(str(db), sid) == {"developer-1": "Redis", "developer-3": "Redis",
                                       "developer-4": "2"}  # fmt: skip


def test_declining_the_form_declines_the_question_and_cancelling_leaves_it_open(
    tmp_path: Path,
) -> None:
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path)
    before = snapshot(db)
    (kept,) = run(db, Person([("cancel",)]), ("ask_session", {"session_id": sid}))
    assert kept["data"]["status"] == "paused" and kept["data"]["pending_question"]
    assert snapshot(db) == before  # nothing written
    (declined,) = run(db, Person([("decline",)]), ("ask_session", {"session_id": sid}))
    assert declined["data"]["status"] == "completed"
    assert declined["data"]["orchestrator_state"]["answer_status"] == "declined"
    (again,) = run(db, Person([("accept", THREE)]), ("ask_session", {"session_id": sid}))
    assert again["error"]["code"] == "not_waiting", again


def test_an_answer_the_question_refuses_is_invalid_input_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """A client's form could return anything: the core's answer rule checks it, as every
    door's, with its `part N:` message."""
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path)
    before = snapshot(db)
    bad_option, bad_type = run(
        db,
        Person([("accept", {**THREE, "part1": "Mongo"}), ("accept", {**THREE, "part2": 7})]),
        ("ask_session", {"session_id": sid}),
        ("ask_session", {"session_id": sid}),
    )
    assert bad_option["error"]["code"] == "invalid_input"
    assert bad_option["error"]["message"].startswith("part 1: 'Mongo' is not one of the options")
    assert bad_type["error"]["code"] == "invalid_input"
    assert "part2" in bad_type["error"]["message"]
    assert snapshot(db) == before


def test_a_client_without_forms_is_told_the_other_doors(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path)
    (doc,) = run(db, None, ("ask_session", {"session_id": sid}))
    assert doc["error"]["code"] == "invalid_input"
    message = doc["error"]["message"]
    assert "answer_session" in message
    assert f"orchestrator resume {sid} --db " in message and "--part 3 --answer" in message


def test_a_session_without_an_open_question_and_a_forged_state(tmp_path: Path) -> None:
    from mcp import Client

    db = tmp_path / "mcp.db"
    with Sessions(str(db)) as sessions:
        done = sessions.start_scenario(str(EXAMPLES / "multi-part-question.yaml"))
    (doc,) = run(db, Person([]), ("ask_session", {"session_id": done["session_id"]}))
    assert doc["error"]["code"] == "not_waiting"
    assert "has no open question (it is completed)" in doc["error"]["message"]
    sid = paused_three_parts(db, tmp_path)

    async def forged() -> dict[str, Any]:
        async with Client(build_server(str(db)), mode="2026-07-28") as client:
            result = await client.session.call_tool(
                "ask_session",
                {"session_id": sid},
                request_state=f"{sid}:0000",
                input_responses={"answer": {"action": "accept", "content": THREE}},
                allow_input_required=True,
            )
            return shaped(result)  # type: ignore[arg-type]

    refused = anyio.run(forged)
    assert refused["error"]["code"] == "invalid_input"
    assert "request_state" in refused["error"]["message"]
    with Sessions(str(db)) as sessions:
        assert sessions.status(sid)["status"] == "paused"


def test_the_form_of_a_choice_with_an_answer_of_ones_own_and_a_multi_select() -> None:
    """form_of/reply_of alone: a one-part question is one field; `allow_other` adds a text
    field whose answer is the answer text, never a choice; a multi select is an array."""
    from orchestrator.api import Reply
    from orchestrator.mcp_server.session_form import form_of, reply_of

    question = {
        "question": "Which columns?",
        "kind": "multi_select",
        "options": [{"label": "Date"}, {"label": "Amount", "description": "in cents"}],
        "allow_other": True,
        "asked_by": "pm",
    }
    message, schema = form_of("abc", "Export", question)
    assert "asks you one question" in message
    fields = schema["properties"]
    assert list(fields) == ["part1", "part1_other", "note"]
    assert fields["part1"]["type"] == "array"
    assert fields["part1"]["items"]["anyOf"][1] == {"const": "Amount", "title": "Amount — in cents"}
    assert "asked by pm" in fields["part1"]["description"]
    assert reply_of(question, {"part1": ["Date"], "part1_other": " Status ", "note": " n "}) == (
        Reply(choices=("Date",), text="Status", note="n")
    )
    assert reply_of(question, {"part1": []}) == Reply(action="decline")
    assert reply_of(question, {"part1_other": "Status"}) == Reply(choices=(), text="Status")


def test_a_form_filled_after_the_deadline_still_answers(tmp_path: Path) -> None:
    """2026-07-28 era: the question's deadline passes while the person fills the form
    (on_timeout: wait, so the question stays open); the second call still answers it."""
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path, "\n  timeout: 1")
    (doc,) = run_modern(db, Person([("slow", 1.5, THREE)]), sid)
    assert doc["ok"] is True, doc
    assert doc["data"]["status"] == "completed"
    assert doc["data"]["orchestrator_state"]["user_clarification_response"].startswith(
        "1. Memcached"
    )


def test_with_on_timeout_proceed_a_form_filled_after_the_deadline_is_a_late_answer(
    tmp_path: Path,
) -> None:
    db = tmp_path / "mcp.db"
    sid = paused_three_parts(db, tmp_path, "\n  timeout: 1\n  on_timeout: proceed")
    (doc,) = run_modern(db, Person([("slow", 1.5, THREE)]), sid)
    assert doc["ok"] is True, doc
    late = doc["data"]["late_answer"]
    assert late is not None and "Memcached" in late["response"], late
    assert doc["data"]["orchestrator_state"]["answer_status"] == "timeout"
    assert doc["data"]["questions_surfaced"] == 1
