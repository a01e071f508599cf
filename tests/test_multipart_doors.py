"""A multi-part question answered through the JSON doors: the web API's answer body and
MCP's answer_session take `parts`, one per part in part order, each checked by the core's
answer rule (docs/multi-part-questions.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from orchestrator.api import Reply, Sessions
from orchestrator.errors import InvalidAnswer
from tests.conftest import EXAMPLES
from tests.test_mcp import run
from tests.test_web_api import client_for, wait_for

PARTS = [{"choices": ["Memcached"]}, {"answer": "us-east"}]


def paused_with_parts(db: str, tmp_path: Path, settings: str = "") -> str:
    """examples/multi-part-question.yaml without its answers: paused on two parts
    (`settings`: more of its settings, YAML lines)."""
    script = tmp_path / "paused.yaml"
    text = (EXAMPLES / "multi-part-question.yaml").read_text().split("answers:")[0]
    script.write_text(text.replace("settings:\n", f"settings:\n{settings}", 1))
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
        no_parts = client.post(url, json={"parts": []})
        assert no_parts.status_code == 422 and "parts" in no_parts.json()["error"], no_parts.text
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
    assert bad["ok"] is False, bad
    assert bad["error"]["message"] == "this question has 2 parts; got answers for 1", bad
    assert good["ok"] is True, good
    assert good["data"]["status"] == "completed"
    assert delivered(str(db), sid)["developer-2"] == "us-east"


BAD_BODIES = [
    {"answer": "Redis", "action": "decline"},
    {},
    {"parts": PARTS, "answer": "Redis"},
    {"choices": []},
    {"parts": []},
    {"parts": [{"answer": "a", "choices": ["b"]}, {"answer": "eu"}]},
    {"action": "maybe"},
    {"answer": "Redis", "colour": "red"},
    {"parts": [{"choices": ["Mongo"]}, {"answer": "eu"}]},  # the core's rule, past the model
    {"parts": [{"action": "decline"}]},
    {"answer": "   "},  # both doors strip it, and the core refuses it as empty
    {"choices": [" Mongo "]},
]


def test_the_json_api_and_mcp_refuse_a_bad_answer_in_the_same_words(tmp_path: Path) -> None:
    """One answer model (api.part_answers.AnswerFields) and one way of wording what it
    refuses (errors.validation_text) for both JSON doors; nothing is written."""
    db = tmp_path / "doors.db"
    sid = paused_with_parts(str(db), tmp_path)
    with Sessions(str(db)) as sessions:
        before = sessions.log(sid)
    with client_for(str(db)) as client:
        web = [client.post(f"/api/sessions/{sid}/answer", json=body) for body in BAD_BODIES]
    mcp = run(db, None, *(("answer_session", {"session_id": sid, **b}) for b in BAD_BODIES))
    for body, posted, called in zip(BAD_BODIES, web, mcp, strict=True):
        assert posted.status_code == 422 and called["ok"] is False, (body, posted.text, called)
        assert called["error"]["code"] == "invalid_input", (body, called)
        assert posted.json()["error"] == called["error"]["message"], body
    assert (
        "give exactly one of answer, choices, action, parts (got answer, action)"
        in (web[0].json()["error"])
    )
    with Sessions(str(db)) as sessions:
        assert sessions.log(sid) == before and sessions.status(sid)["status"] == "paused"


# -- the web page and answer links: one form, a fieldset per part --------------------------


def test_the_session_page_shows_each_part_and_its_form_answers_them_all(
    db_url: str, tmp_path: Path
) -> None:
    from tests.test_web_pages import browser, csrf_of

    sid = paused_with_parts(db_url, tmp_path)
    page = browser(db_url)
    try:
        assert '<span class="badge parts">2 parts</span>' in page.get("/").text  # the inbox
        html = page.get(f"/sessions/{sid}").text
        assert "Part 1 of 2 — developer-1, developer-3" in html
        assert "Part 2 of 2 — developer-2" in html
        assert 'name="p1-choice" value="Memcached"' in html and 'name="p2-text"' in html
        form = {"csrf": csrf_of(html), "action": "answer", "p1-choice": "Mongo", "p2-text": "x"}
        refused = page.post(f"/sessions/{sid}/answer", data=form)
        assert refused.status_code == 422
        assert "part 1: &#39;Mongo&#39; is not one of the options" in refused.text
        assert page.get(f"/api/sessions/{sid}").json()["status"] == "paused"
        form |= {"p1-choice": "Memcached", "p2-text": "", "p2-decline": "1", "note": "web"}
        posted = page.post(f"/sessions/{sid}/answer", data=form, follow_redirects=False)
        assert posted.status_code == 303, posted.text
        done = wait_for(page, sid, "completed")
    finally:
        page.__exit__(None, None, None)
    state = done["orchestrator_state"]
    assert state["user_clarification_response"] == "1. Memcached\n2. (declined)"
    assert state["answer_note"] == "web"
    assert delivered(db_url, sid) == {"developer-1": "Memcached", "developer-3": "Memcached"}


def test_an_answer_link_takes_every_part(db_url: str, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from orchestrator.web import WebConfig, create_app
    from tests.test_web_pages import csrf_of, wait_status
    from tests.web_support import BASE, TOKEN

    sid = paused_with_parts(db_url, tmp_path)
    with Sessions(db_url) as sessions:
        token = sessions.inbox.new_link(sid)
    with TestClient(create_app(WebConfig(db=db_url, token=TOKEN)), base_url=BASE) as anon:
        html = anon.get(f"/q/{token}").text
        assert "Part 2 of 2" in html
        form = {"csrf": csrf_of(html), "p1-choice": "Redis", "p2-text": "us-east"}
        assert "your answer is recorded" in anon.post(f"/q/{token}", data=form).text
        with Sessions(db_url) as sessions:  # the server runs it on
            done = wait_status(sessions, sid, "completed")
    assert done["orchestrator_state"]["user_clarification_response"] == "1. Redis\n2. us-east"


def test_a_notification_lists_every_part(db_url: str, tmp_path: Path) -> None:
    from orchestrator.web.notify import message_for

    sid = paused_with_parts(db_url, tmp_path)
    with Sessions(db_url) as sessions:
        doc = dict(sessions.status(sid))
    title, body = message_for(doc, "question", answer_link="https://x/q/t", db=db_url)
    assert title.startswith("2-part question: Which cache should we use?")
    assert "Part 1 (developer-1, developer-3):\n  │ Which cache should we use?\n  1. Redis" in body
    assert "Part 2 (developer-2):\n  │ Which region do we deploy to?" in body
    assert "Or: orchestrator resume" in body and "--part 1" in body


DECLINED_EVERY_PART = {  # each asker of both parts takes its default; developer-4 was over the cap
    "developer-1": "declined",
    "developer-2": "declined",
    "developer-3": "declined",
    "developer-4": "part_cap",
}


@pytest.mark.backends()
@pytest.mark.parametrize("door", ["cli", "json", "python"])
def test_a_plain_decline_declines_every_part_whichever_door(
    db_url: str, tmp_path: Path, door: str
) -> None:
    """`resume --decline`, `{"action": "decline"}` and Reply(action="decline"), without
    parts, decline the whole question, as the web form's Decline does."""
    from orchestrator.api import Reply
    from tests.conftest import invoke

    sid = paused_with_parts(db_url, tmp_path)
    if door == "cli":
        done = invoke("resume", sid, "--decline", "--json", db=db_url)
        assert done.returncode == 0, done.stderr
    elif door == "json":
        with client_for(db_url) as client:
            posted = client.post(f"/api/sessions/{sid}/answer", json={"action": "decline"})
            assert posted.status_code == 200, posted.text
            wait_for(client, sid, "completed")
    else:
        with Sessions(db_url) as sessions:
            assert sessions.resume(sid, Reply(action="decline"))["status"] == "completed"
    with Sessions(db_url) as sessions:
        log, view = sessions.log(sid), sessions.status(sid)
    assert view["orchestrator_state"]["answer_status"] == "declined"
    assert {e["agent"]: e["why"] for e in log if e["kind"] == "fallback"} == DECLINED_EVERY_PART


@pytest.mark.backends()
def test_a_deadline_that_proceeds_settles_every_part_as_a_decline(
    db_url: str, tmp_path: Path
) -> None:
    """`on_timeout: proceed` gives every asker of every part its part's default, as a plain
    decline does (it settled the first ask only, and the others got the hard cap)."""
    from orchestrator.domain import clock

    with clock.virtual():
        settings = "  timeout: 60\n  on_timeout: proceed\n  max_fallbacks: 0\n"
        sid = paused_with_parts(db_url, tmp_path, settings)
        clock.advance(61)
        with Sessions(db_url) as sessions:
            assert sessions.status(sid)["orchestrator_state"]["answer_status"] == "timeout"
            done = sessions.resume(sid)
            log = sessions.log(sid)
    assert done["status"] == "completed", done.get("error")
    fallbacks = {e["agent"]: e["why"] for e in log if e["kind"] == "fallback"}
    assert fallbacks == {
        "developer-1": "timeout",
        "developer-2": "timeout",
        "developer-3": "timeout",
        "developer-4": "part_cap",
    }
    assumed = {a["agent"]: a["assumption"] for a in done["assumptions"]}
    assert "(safe default: Redis)" in assumed["developer-3"]
    assert "(safe default: eu-west)" in assumed["developer-2"]


def test_the_forms_decline_declines_every_part(db_url: str, tmp_path: Path) -> None:
    from tests.test_web_pages import browser, csrf_of

    sid = paused_with_parts(db_url, tmp_path)
    page = browser(db_url)
    try:
        csrf = csrf_of(page.get(f"/sessions/{sid}").text)
        page.post(f"/sessions/{sid}/answer", data={"csrf": csrf, "action": "decline"})
        wait_for(page, sid, "completed")
    finally:
        page.__exit__(None, None, None)
    with Sessions(db_url) as sessions:
        log = sessions.log(sid)
    assert {e["agent"]: e["why"] for e in log if e["kind"] == "fallback"} == DECLINED_EVERY_PART


def test_the_form_names_every_part_left_empty(db_url: str, tmp_path: Path) -> None:
    """Issue 44: an empty form named only part 1; each part left without an answer (and
    not declined) is named, by the core's rule, so every door says the same."""
    from tests.test_web_pages import browser, csrf_of

    sid = paused_with_parts(db_url, tmp_path)
    page = browser(db_url)
    try:
        html = page.get(f"/sessions/{sid}").text
        form = {"csrf": csrf_of(html), "action": "answer", "p2-text": "  "}
        refused = page.post(f"/sessions/{sid}/answer", data=form)
        assert refused.status_code == 422
        error = re.search(r'<p class="error" role="alert">(.*?)</p>', refused.text, re.S)
        assert error is not None, refused.text
        lines = error.group(1).splitlines()
        assert [line.split(":")[0] for line in lines] == ["part 1", "part 2"], lines
        assert "Redis" in lines[0] and "empty" in lines[1]
        # one part left: only that part is named
        form |= {"p1-choice": "Redis"}
        refused = page.post(f"/sessions/{sid}/answer", data=form)
        assert refused.status_code == 422
        error = re.search(r'<p class="error" role="alert">(.*?)</p>', refused.text, re.S)
        assert error is not None and error.group(1).startswith("part 2: "), refused.text
        assert "part 1" not in error.group(1)
        assert page.get(f"/api/sessions/{sid}").json()["status"] == "paused"
    finally:
        page.__exit__(None, None, None)
    with Sessions(db_url) as sessions, pytest.raises(InvalidAnswer) as raised:
        sessions.answer(sid, Reply(parts=(Reply(text=""), Reply(text=""))))
    assert raised.value.message.splitlines()[1].startswith("part 2: ")


@pytest.mark.backends()
def test_the_answered_page_shows_each_part_with_its_own_answer(db_url: str, tmp_path: Path) -> None:
    """Issue 44: the answered view showed part 1's question with every answer on one
    line. Each part's question is shown with its own answer (a declined part says so),
    and the session object carries them (orchestrator_state.parts)."""
    from tests.test_web_pages import browser

    sid = paused_with_parts(db_url, tmp_path)
    with Sessions(db_url) as sessions:
        done = sessions.resume(
            sid, Reply(parts=(Reply(choices=("Memcached",)), Reply(action="decline")))
        )
    assert done["status"] == "completed"
    assert done["orchestrator_state"]["parts"] == [
        {
            "part": 1,
            "question": "Which cache should we use?",
            "askers": ["developer-1", "developer-3"],
            "response": "Memcached",
            "declined": False,
        },
        {
            "part": 2,
            "question": "Which region do we deploy to?",
            "askers": ["developer-2"],
            "response": None,
            "declined": True,
        },
    ]
    page = browser(db_url)
    try:
        html = page.get(f"/sessions/{sid}").text
    finally:
        page.__exit__(None, None, None)
    shown = {
        n: " ".join(re.sub(r"<[^>]+>", " ", block).split())
        for n, block in re.findall(
            r'<div class="answered-part" id="answered-part-(\d)">(.*?)</div>', html, re.S
        )
    }
    assert shown == {
        "1": "Part 1 of 2 Which cache should we use? (developer-1, developer-3) Answer Memcached",
        "2": "Part 2 of 2 Which region do we deploy to? (developer-2)"
        " Answer (declined: its askers took their defaults)",
    }
    with Sessions(db_url) as sessions:
        plain = sessions.start_scenario(str(EXAMPLES / "answered-question.yaml"))
    assert plain["orchestrator_state"]["parts"] is None
