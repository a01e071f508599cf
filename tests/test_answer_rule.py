"""One answer rule for every door (contract section 3): a `choices` entry that is not an
option is refused by the CLI, the Python API, the web API, the web form and MCP's
`answer_session` with the same message, also where the question allows an answer of the
user's own; nothing is written. And "answer now, run elsewhere": `resume --no-run` and
`Sessions.answer` leave a session answered, waiting for a driver (not stalled), that a
worker runs to its end."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from orchestrator import Reply, Sessions
from orchestrator.errors import ConfigError, InvalidAnswer
from orchestrator.mcp_server import build_server
from orchestrator.runtime.worker_loop import run_worker
from orchestrator.web import WebConfig, create_app
from tests.conftest import EXAMPLES
from tests.mcp_client import call, in_memory
from tests.test_bad_input import invoke
from tests.web_support import AUTH, BASE, TOKEN

CHOOSE = EXAMPLES / "choose-at-the-terminal.yaml"  # allow_other: an answer of one's own
PAUSE = EXAMPLES / "pause-and-resume.yaml"
TYPO = "Per API kye"
# The core's words (worded for the session API), whatever the door.
EXPECTED = (
    "'Per API kye' is not one of the options; choose a label or a number: 1. Per API key; "
    "2. Per IP address; 3. Both. Did you mean 'Per API key'? An answer of your own goes in "
    "the `answer` text, not among the `choices`."
)


@pytest.fixture
def sessions(db_url: str) -> Iterator[Sessions]:
    with Sessions(db_url) as s:
        yield s


def paused(sessions: Sessions, scenario: Path = CHOOSE) -> str:
    doc = sessions.start_scenario(scenario)
    assert doc["status"] == "paused", doc
    return doc["session_id"]


def unchanged(sessions: Sessions, session_id: str, before: list[Any]) -> None:
    doc = sessions.status(session_id)
    assert doc["status"] == "paused" and doc["pending_question"] is not None
    assert sessions.log(session_id) == before


def test_the_python_api_refuses_the_typo_with_the_core_message(sessions: Sessions) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)
    for attempt in (sessions.answer, sessions.resume):
        with pytest.raises(InvalidAnswer) as refused:
            attempt(sid, Reply(choices=(TYPO,)))
        assert refused.value.message == EXPECTED
        assert "--" not in refused.value.message  # no CLI flags in the Python API's words
        unchanged(sessions, sid, before)
    # An answer of one's own is the answer text; an option by its number is a choice.
    assert (
        sessions.answer(sid, Reply(text=TYPO))["orchestrator_state"]["user_clarification_response"]
        == TYPO
    )


@pytest.mark.backends("sqlite")
def test_the_cli_refuses_the_typo_with_the_core_message_and_its_flags(
    db_url: str, sessions: Sessions
) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)
    result = invoke("resume", sid, "--choice", TYPO, "--json", "--db", db_url)
    assert result.code == 2
    assert result.document()["session_id"] == sid  # an error about a session names it
    message = result.document()["error"]
    assert message.startswith(EXPECTED)
    assert message.endswith(
        "On the command line, `choices` is --choice LABEL|N, `answer` is --answer TEXT."
    )
    unchanged(sessions, sid, before)


@pytest.mark.backends("sqlite")
def test_every_cli_error_about_a_session_names_it_and_one_about_no_session_does_not(
    db_url: str, sessions: Sessions
) -> None:
    """Contract section 3: an error document that concerns a session carries its id."""
    sid = paused(sessions, PAUSE)
    sessions.cancel(sid)
    for argv in (
        ("resume", sid, "--answer", "Weekly"),  # not waiting any more
        ("cancel", sid),  # ended
        ("resume", sid, "--decline"),
    ):
        result = invoke(*argv, "--json", "--db", db_url)
        assert (result.code, result.document()["session_id"]) == (2, sid), argv
    for argv in (("status", "nosuch"), ("log", "nosuch"), ("resume", "nosuch", "--answer", "x")):
        result = invoke(*argv, "--json", "--db", db_url)
        assert result.code == 2 and "session_id" not in result.document(), argv
    # Nothing about the session was read: a bad database, or options that do not go together.
    for argv in (
        ("status", sid, "--db", "foo://x"),
        ("resume", sid, "--choice", "1", "--answer", "x", "--db", db_url),
    ):
        result = invoke(*argv, "--json")
        assert result.code == 2 and "session_id" not in result.document(), argv


@pytest.mark.backends("sqlite")
def test_the_cli_flags_follow_a_core_message_as_a_sentence_of_their_own(
    db_url: str, sessions: Sessions
) -> None:
    """A core message without a full stop ("… takes no per-part answers") still reads as
    two sentences once the CLI adds its flags."""
    sid = paused(sessions)
    before = sessions.log(sid)
    result = invoke("resume", sid, "--part", "1", "--answer", "x", "--json", "--db", db_url)
    assert result.code == 2
    assert (
        "takes no per-part answers. On the command line, `parts` is --part N"
        in (result.document()["error"])
    )
    unchanged(sessions, sid, before)


def test_the_web_api_refuses_the_typo_with_422_and_the_core_message(
    db_url: str, sessions: Sessions
) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)
    config = WebConfig(db=db_url, token=TOKEN, run_on=False)
    with TestClient(create_app(config), base_url=BASE, headers=AUTH) as client:
        r = client.post(f"/api/sessions/{sid}/answer", json={"choices": [TYPO]})
    assert r.status_code == 422
    assert r.json() == {"error": EXPECTED}
    unchanged(sessions, sid, before)


def test_the_web_form_refuses_the_typo_with_422_and_the_core_message(
    db_url: str, sessions: Sessions
) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)
    config = WebConfig(db=db_url, token=TOKEN, run_on=False)
    with TestClient(create_app(config), base_url=BASE) as page:
        assert page.get(f"/?token={TOKEN}").status_code == 200
        found = re.search(r'name="csrf" value="([^"]+)"', page.get(f"/sessions/{sid}").text)
        assert found
        r = page.post(
            f"/sessions/{sid}/answer",
            data={"csrf": found.group(1), "action": "answer", "choice": TYPO},
        )
    assert r.status_code == 422
    assert EXPECTED in html.unescape(r.text)
    unchanged(sessions, sid, before)


def test_mcp_answer_session_refuses_the_typo_as_invalid_input_with_the_core_message(
    db_url: str, sessions: Sessions
) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)

    async def main() -> Any:
        async with in_memory(build_server(db_url)) as session:
            return await call(session, "answer_session", {"session_id": sid, "choices": [TYPO]})

    document = anyio.run(main)
    assert document == {"ok": False, "error": {"code": "invalid_input", "message": EXPECTED}}
    unchanged(sessions, sid, before)


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        (Reply(choices=("Both", "Per API kye")), "'Per API kye' is not one of the options"),
        (Reply(choices=("4",)), "'4' is not one of the options"),
        (Reply(text="   "), "the answer is empty"),
        (Reply(text="x" * 10_001), "the answer is 10,001 characters long; at most 10,000"),
        (Reply(text="a", note="n" * 10_001), "the note is 10,001 characters long"),
        (Reply(choices=None), "choices: Input should be a valid list"),  # type: ignore[arg-type]
        (Reply(text="A", parts=None), "parts: Input should be a valid list"),  # type: ignore[arg-type]
        (Reply(parts=({"answer": "A"},)), "parts: each should be a reply"),  # type: ignore[arg-type]
    ],
    ids=[
        "typo-among-choices",
        "number-too-big",
        "blank-text",
        "long-text",
        "long-note",
        "choices-none",
        "parts-none",
        "part-not-a-reply",
    ],
)
def test_one_rule_one_limit_for_every_reply(
    sessions: Sessions, reply: Reply, fragment: str
) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)
    with pytest.raises(InvalidAnswer) as refused:
        sessions.answer(sid, reply)
    assert fragment in refused.value.message
    unchanged(sessions, sid, before)


@pytest.mark.parametrize(
    ("reply", "body", "expected"),
    [
        (
            Reply(action="decline", text="Weekly"),
            {"action": "decline", "answer": "Weekly"},
            "give exactly one of answer, choices, action, parts (got answer, action)",
        ),
        (
            Reply(action="cancel", choices=("Both",)),
            {"action": "cancel", "choices": ["Both"]},
            "give exactly one of answer, choices, action, parts (got choices, action)",
        ),
        (
            Reply(action="explode", text="Weekly"),  # type: ignore[arg-type]
            {"action": "explode"},
            "action: Input should be 'decline' or 'cancel'",
        ),
        (Reply(choices=(2,)), {"choices": [2]}, "choices.0: Input should be a valid string"),  # type: ignore[arg-type]
        (Reply(choices="Both"), {"choices": "Both"}, "choices: Input should be a valid list"),  # type: ignore[arg-type]
        (Reply(text=3), {"answer": 3}, "answer: Input should be a valid string"),  # type: ignore[arg-type]
    ],
    ids=[
        "decline-with-text",
        "cancel-with-choices",
        "unknown-action",
        "int-choice",
        "str-choices",
        "int-text",
    ],
)
def test_a_reply_no_door_could_send_is_refused_by_the_python_api_as_by_the_web(
    db_url: str, sessions: Sessions, reply: Reply, body: dict[str, Any], expected: str
) -> None:
    """The session API checks a reply's shape as the JSON doors do, in their words: a
    decline with an answer is not declined with the text dropped, an unknown action is no
    answer, a number among the choices is no TypeError."""
    sid = paused(sessions)
    before = sessions.log(sid)
    with pytest.raises(InvalidAnswer) as refused:
        sessions.answer(sid, reply)
    assert refused.value.message == expected
    unchanged(sessions, sid, before)
    config = WebConfig(db=db_url, token=TOKEN, run_on=False)
    with TestClient(create_app(config), base_url=BASE, headers=AUTH) as client:
        r = client.post(f"/api/sessions/{sid}/answer", json=body)
    assert (r.status_code, r.json()) == (422, {"error": expected})
    unchanged(sessions, sid, before)


def test_choices_take_a_label_a_label_ignoring_case_or_a_number(sessions: Sessions) -> None:
    for pick, label in (("2", "Per IP address"), ("per ip ADDRESS", "Per IP address")):
        sid = paused(sessions)
        doc = sessions.answer(sid, Reply(choices=(pick,)))
        assert doc["orchestrator_state"]["user_clarification_response"] == label
        assert doc["orchestrator_state"]["answer_status"] == "selected"


# -- answer now, run elsewhere ------------------------------------------------------------


def test_sessions_answer_leaves_it_waiting_for_a_driver_not_stalled(sessions: Sessions) -> None:
    sid = paused(sessions, PAUSE)
    doc = sessions.answer(sid, Reply(text="Weekly"))
    assert doc["status"] == "running"
    assert doc["waiting_for_driver"] is True and doc["stalled"] is False
    assert doc["owner"] is None
    log = sessions.log(sid)
    assert [e["kind"] for e in log[-2:]] == ["answer", "status"]
    assert log[-1]["note"] == "answered, waiting for a driver"
    assert sessions.run_on(sid)["status"] == "completed"
    done = sessions.status(sid)
    assert done["waiting_for_driver"] is False and done["stalled"] is False


@pytest.mark.backends()
@pytest.mark.parametrize(
    "how",
    [["--answer", "Weekly"], ["--decline"]],
    ids=["answer", "decline"],
)
def test_resume_no_run_leaves_a_session_that_a_worker_finishes(
    db_url: str, sessions: Sessions, how: list[str]
) -> None:
    sid = paused(sessions, PAUSE)
    answered = invoke("resume", sid, *how, "--no-run", "--json", "--db", db_url)
    assert answered.code == 0, answered.stderr
    doc = answered.document()
    assert doc["status"] == "running" and doc["waiting_for_driver"] and not doc["stalled"]
    assert not [e for e in sessions.log(sid) if e["kind"] == "agent_reply" and e["agent"] != "pm"]
    replies_before = len([e for e in sessions.log(sid) if e["kind"] == "agent_reply"])
    # Every door says the same: status, list (JSON and text), log.
    status = invoke("status", sid, "--db", db_url)
    assert "answered, waiting for a driver" in status.stdout and "stalled" not in status.stdout
    listed = invoke("list", "--db", db_url).stdout
    assert "answered, waiting for a driver" in listed
    (listed_doc,) = invoke("list", "--json", "--db", db_url).document()
    assert listed_doc["waiting_for_driver"] is True and listed_doc["stalled"] is False
    assert (
        "session running: answered, waiting for a driver"
        in invoke("log", sid, "--db", db_url).stdout
    )
    stats = run_worker(db_url, 1, idle_exit=0.5, poll=0.05)
    assert stats.claimed == 1 and stats.ended == {"completed": 1}
    done = sessions.status(sid)
    assert done["status"] == "completed" and not done["waiting_for_driver"]
    log = sessions.log(sid)
    assert len([e for e in log if e["kind"] == "agent_reply"]) > replies_before
    picked = [e for e in log if e["kind"] == "status" and e.get("previous") == "running"]
    assert [e["note"] for e in picked] == ["picked up by a driver"]


@pytest.mark.backends("sqlite")
def test_resume_no_run_needs_an_answer_and_refuses_a_typo(db_url: str, sessions: Sessions) -> None:
    sid = paused(sessions)
    before = sessions.log(sid)
    alone = invoke("resume", sid, "--no-run", "--json", "--db", db_url)
    assert alone.code == 2 and "--no-run goes with" in alone.document()["error"]
    cancel = invoke("resume", sid, "--cancel", "--no-run", "--json", "--db", db_url)
    assert cancel.code == 2
    typo = invoke("resume", sid, "--choice", TYPO, "--no-run", "--json", "--db", db_url)
    assert typo.code == 2 and typo.document()["error"].startswith(EXPECTED)
    unchanged(sessions, sid, before)


@pytest.mark.backends("sqlite")
def test_resume_cancel_does_not_say_resumed_first(db_url: str, sessions: Sessions) -> None:
    sid = paused(sessions)
    result = invoke("resume", sid, "--cancel", "--db", db_url)
    assert result.code == 4, result.stderr
    assert "resumed" not in result.stderr
    statuses = [e["status"] for e in sessions.log(sid) if e["kind"] == "status"]
    assert statuses == ["paused", "cancelled"]


def test_the_inbox_says_paused_as_the_cli_does_and_shows_waiting_for_a_driver(
    db_url: str, sessions: Sessions
) -> None:
    waiting = paused(sessions)
    handed = paused(sessions, PAUSE)
    sessions.answer(handed, Reply(text="Weekly"))
    config = WebConfig(db=db_url, token=TOKEN, run_on=False)
    with TestClient(create_app(config), base_url=BASE) as page:
        inbox = page.get(f"/?token={TOKEN}").text
        session_page = page.get(f"/sessions/{handed}").text
    badges = re.findall(r'<span class="badge status-\w+">(\w+)</span>', inbox)
    assert sorted(badges) == ["paused", "running"], badges
    assert ">waiting<" not in inbox
    assert "answered, waiting for a driver" in inbox
    assert "answered, waiting for a driver" in session_page
    assert waiting in inbox


def test_waiting_lists_the_paused_sessions_on_every_door_and_a_bad_status_is_refused(
    db_url: str, sessions: Sessions
) -> None:
    """`list --status waiting` (the README's synonym for paused) means the same through the
    Python API, the JSON API and MCP; a status no door knows is refused, not an empty list."""
    waiting = paused(sessions)
    sessions.answer(paused(sessions, PAUSE), Reply(text="Weekly"))  # running, not waiting
    assert [v["session_id"] for v in sessions.list("waiting")] == [waiting]
    assert sessions.list("waiting") == sessions.list("paused")
    with pytest.raises(ConfigError, match="'bogus' is not a session status; use one of"):
        sessions.list("bogus")
    config = WebConfig(db=db_url, token=TOKEN, run_on=False)
    with TestClient(create_app(config), base_url=BASE, headers=AUTH) as client:
        listed = client.get("/api/sessions", params={"status": "waiting"})
        assert [v["session_id"] for v in listed.json()] == [waiting]
        assert client.get("/api/sessions", params={"status": "bogus"}).status_code == 422

    async def main() -> tuple[Any, Any]:
        async with in_memory(build_server(db_url)) as session:
            good = await call(session, "list_sessions", {"status": "waiting"})
            return good, await call(session, "list_sessions", {"status": "bogus"})

    good, bad = anyio.run(main)
    assert [v["session_id"] for v in good["data"]] == [waiting]
    assert bad["error"]["code"] == "invalid_input"
    result = invoke("list", "--status", "waiting", "--json", "--db", db_url)
    assert [v["session_id"] for v in result.document()] == [waiting]


def test_hand_off_lets_go_of_a_claim_taken_otherwise(sessions: Sessions) -> None:
    from orchestrator.store import Owner
    from orchestrator.store.queue import hand_off

    sid = paused(sessions, PAUSE)
    owner, other = Owner(), Owner()
    assert not hand_off(sessions._opened, sid, owner)  # paused: nobody's claim to drop
    assert sessions.answer(sid, Reply(text="Weekly"))["waiting_for_driver"]
    claim = sessions._opened.claim(sid, owner)  # as `resume` does before it drives
    assert not sessions.status(sid)["waiting_for_driver"]  # a live driver holds it
    assert not hand_off(sessions._opened, sid, other)  # not other's to give away
    assert hand_off(sessions._opened, sid, owner)
    doc = sessions.status(sid)
    assert doc["waiting_for_driver"] and not doc["stalled"] and doc["owner"] is None
    from orchestrator.errors import ClaimLost

    with pytest.raises(ClaimLost):  # the generation moved on: the old claim is fenced out
        sessions._opened.check_fence(claim)
