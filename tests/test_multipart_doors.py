"""A multi-part question answered through the JSON doors: the web API's answer body and
MCP's answer_session take `parts`, one per part in part order, each checked by the core's
answer rule (docs/multi-part-questions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.api import Sessions
from tests.conftest import EXAMPLES
from tests.test_mcp import run
from tests.test_web_api import client_for, wait_for

PARTS = [{"choices": ["Memcached"]}, {"answer": "us-east"}]


def paused_with_parts(db: str, tmp_path: Path) -> str:
    """examples/multi-part-question.yaml without its answers: paused on two parts."""
    script = tmp_path / "paused.yaml"
    script.write_text((EXAMPLES / "multi-part-question.yaml").read_text().split("answers:")[0])
    with Sessions(db) as sessions:
        doc = sessions.start_scenario(str(script))
    assert doc["status"] == "paused"
    assert [p["part"] for p in doc["pending_question"]["parts"]] == [1, 2]
    return str(doc["session_id"])


def delivered(db: str, session_id: str) -> dict[str, Any]:
    with Sessions(db) as sessions:
        log = sessions.log(session_id)
    return {e["agent"]: e["response"] for e in log if e["kind"] == "answer_delivered"}


@pytest.mark.backends()
def test_the_json_api_takes_one_answer_per_part(db_url: str, tmp_path: Path) -> None:
    sid = paused_with_parts(db_url, tmp_path)
    with client_for(db_url) as client:
        posted = client.post(f"/api/sessions/{sid}/answer", json={"parts": PARTS, "note": "n"})
        assert posted.status_code == 200, posted.text
        done = wait_for(client, sid, "completed")
    assert done["orchestrator_state"]["user_clarification_response"] == "1. Memcached\n2. us-east"
    assert delivered(db_url, sid) == {
        "developer-1": "Memcached",
        "developer-2": "us-east",
        "developer-3": "Memcached",
    }


def test_the_json_api_refuses_a_bad_part_with_the_cores_message(
    db_url: str, tmp_path: Path
) -> None:
    sid = paused_with_parts(db_url, tmp_path)
    with Sessions(db_url) as sessions:
        before = sessions.log(sid)
    with client_for(db_url) as client:
        url = f"/api/sessions/{sid}/answer"
        bad_choice = client.post(url, json={"parts": [{"choices": ["Mongo"]}, {"answer": "x"}]})
        assert bad_choice.status_code == 422
        assert bad_choice.json()["error"].startswith("part 1: ")
        assert "Mongo" in bad_choice.json()["error"]
        too_few = client.post(url, json={"parts": [{"action": "decline"}]})
        assert too_few.json() == {"error": "this question has 2 parts; got answers for 1"}
        two_kinds = client.post(url, json={"parts": PARTS, "answer": "Redis"})
        assert two_kinds.status_code == 422
        assert "exactly one of answer, choices, action, parts" in two_kinds.json()["error"]
        one_part_two_kinds = client.post(url, json={"parts": [{"answer": "a", "choices": ["b"]}]})
        assert one_part_two_kinds.status_code == 422
        assert client.get(f"/api/sessions/{sid}").json()["status"] == "paused"
    with Sessions(db_url) as sessions:
        assert sessions.log(sid) == before  # nothing written


def test_mcp_answer_session_takes_one_answer_per_part(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    sid = paused_with_parts(str(db), tmp_path)
    bad, good = run(
        db,
        None,
        ("answer_session", {"session_id": sid, "parts": [{"answer": "x"}]}),
        ("answer_session", {"session_id": sid, "parts": PARTS}),
    )
    assert bad["ok"] is False and "part" in bad["error"]["message"], bad
    assert good["ok"] is True, good
    assert good["data"]["status"] == "completed"
    assert delivered(str(db), sid)["developer-2"] == "us-east"
