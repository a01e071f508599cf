"""The HTML side: inbox, session page, forms with CSRF, escaping, answer links, live SSE."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from html import unescape as html_unescape

import pytest
from fastapi.testclient import TestClient

from orchestrator.api import Reply, Sessions
from orchestrator.web import WebConfig, create_app
from tests.dbcheck import sqlite_fault
from tests.web_support import BASE, TOKEN, paused


@pytest.fixture
def sessions(db_url: str) -> Iterator[Sessions]:
    with Sessions(db_url) as s:
        yield s


def browser(db_url: str, **config: object) -> TestClient:
    """A client that opened the start URL: it has the token cookie, not a Bearer header."""
    client = TestClient(create_app(WebConfig(db=db_url, token=TOKEN, **config)), base_url=BASE)
    client.__enter__()
    assert client.get(f"/?token={TOKEN}").status_code == 200
    return client


@pytest.fixture
def page(db_url: str) -> Iterator[TestClient]:
    client = browser(db_url)
    yield client
    client.__exit__(None, None, None)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the form carries a CSRF value"
    return found.group(1)


def wait_status(sessions: Sessions, sid: str, status: str, timeout: float = 60) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        doc = sessions.status(sid)
        if doc["status"] == status:
            return dict(doc)
        time.sleep(0.1)
    raise AssertionError(f"{sid}: {sessions.status(sid)['status']} != {status}")


def test_inbox_lists_waiting_sessions_first(page: TestClient, sessions: Sessions) -> None:
    waiting = paused(sessions, {"question": "Which export format?"}, task="older, waiting")
    done = sessions.start_scenario(
        json.dumps(
            {
                "task": "newer, completed",
                "agents": {"pm": [{"status": "COMPLETE", "summary": "nothing to do"}]},
            },
            indent=2,
        )
    )["session_id"]
    html = page.get("/").text
    assert html.index(waiting) < html.index(done)
    assert "pm asks:" in html and "Which export format?" in html
    assert "high" in html  # urgency
    assert re.search(r'<time class="countdown" datetime="[^"]+"[^>]*>\d+ min \d+ s</time>', html)


def test_inbox_pages(db_url: str, sessions: Sessions) -> None:
    """Pages of two, walked through their "next page" links; "first page" leads back."""
    ids = [paused(sessions, task=f"task {n}") for n in range(5)]
    client = browser(db_url, page_size=2)
    try:
        first = client.get("/").text
        assert "5 waiting for an answer" in first and "page 1" in first
        assert 'rel="next"' in first and 'rel="first"' not in first
        pages, html = [first], first
        while (found := re.search(r'href="(/\?after=[^"]+)" rel="next"', html)) is not None:
            html = client.get(found.group(1).replace("&amp;", "&")).text
            pages.append(html)
            assert len(pages) <= 3
        assert len(pages) == 3 and "page 3" in pages[-1] and 'rel="first"' in pages[-1]
        shown = [[sid for sid in ids if sid in html] for html in pages]
        assert [len(page) for page in shown] == [2, 2, 1]
        assert sorted(sum(shown, [])) == sorted(ids)
        back = re.search(r'href="([^"]+)" rel="first"', pages[-1])
        assert back is not None and client.get(back.group(1)).text == first
    finally:
        client.__exit__(None, None, None)


def test_an_old_page_number_goes_to_the_first_page(page: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    old = page.get("/?page=3", follow_redirects=False)
    assert old.status_code == 303 and old.headers["location"] == "/"
    followed = page.get("/?page=2")
    assert followed.status_code == 200 and sid in followed.text


DEEP = base64.urlsafe_b64encode(b"[" * 5000).decode()  # json.loads would recurse too deep


@pytest.mark.parametrize(
    "cursor", ["garbage", "eyJhIjoxfQ", "WyJvIiwyLCJub3QgYSB0aW1lIiwiYSJd", DEEP]
)
def test_a_bad_cursor_is_a_clear_400_page(page: TestClient, cursor: str) -> None:
    r = page.get(f"/?after={cursor}")
    assert r.status_code == 400
    assert "not an inbox cursor" in r.text and "Traceback" not in r.text
    assert '<a href="/">' in r.text  # back to the inbox


def test_session_page_shows_every_part_of_a_single_select(
    page: TestClient, sessions: Sessions
) -> None:
    sid = paused(
        sessions,
        {
            "options": [
                {"label": "All visible columns", "description": "what the table shows now"},
                {"label": "A fixed summary set", "recommended": True},
            ],
            "allow_other": True,
            "default": "A fixed summary set",
        },
    )
    html = page.get(f"/sessions/{sid}").text
    assert 'type="radio" name="choice" value="All visible columns">' in html
    assert 'type="radio" name="choice" value="A fixed summary set" checked>' in html
    assert "what the table shows now" in html and "recommended" in html
    assert 'value="__other__"' in html and 'name="other"' in html
    assert "The table has 40 columns" in html and "reports page, CSV export" in html
    assert "high urgency" in html and "Without an answer" in html
    assert 'class="timeline"' in html and "QUESTION" in html
    assert "Assumptions" in html and f"/sessions/{sid}/cancel" in html

    # the answer link is made on request, shown once
    assert 'class="answer-link"' not in html
    assert f'action="/sessions/{sid}/link"' in html
    made = page.post(f"/sessions/{sid}/link", data={"csrf": csrf_of(html)})
    assert made.status_code == 200
    link = re.search(
        r'<code class="answer-link">http://127.0.0.1:8765/q/([\w-]+)</code>', made.text
    )
    assert link is not None
    assert sessions.inbox.session_of_link(link[1]) == (sid, False)
    assert page.post(f"/sessions/{sid}/link", data={"csrf": "forged"}).status_code == 403


def test_multi_select_and_free_text_forms(page: TestClient, sessions: Sessions) -> None:
    multi = paused(
        sessions,
        {"kind": "multi_select", "options": [{"label": "A", "recommended": True}, {"label": "B"}]},
    )
    html = page.get(f"/sessions/{multi}").text
    assert 'type="checkbox" name="choice" value="A" checked>' in html
    assert 'type="checkbox" name="choice" value="B">' in html
    free = paused(sessions, {"kind": "free_text", "options": []})
    assert '<textarea name="text"' in page.get(f"/sessions/{free}").text


def test_answering_with_the_form_runs_the_session_on(page: TestClient, sessions: Sessions) -> None:
    sid = paused(
        sessions,
        {"kind": "multi_select", "options": [{"label": "A"}, {"label": "B"}], "allow_other": True},
    )
    html = page.get(f"/sessions/{sid}").text
    r = page.post(
        f"/sessions/{sid}/answer",
        data={
            "csrf": csrf_of(html),
            "action": "answer",
            "choice": ["A", "__other__"],
            "other": "C of my own",
            "note": "from the page",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/sessions/{sid}"
    done = wait_status(sessions, sid, "completed")
    assert done["orchestrator_state"]["user_clarification_response"] == "A, C of my own"
    assert done["orchestrator_state"]["answer_note"] == "from the page"
    assert "CSV export shipped" in page.get(f"/sessions/{sid}").text


def test_form_errors_show_on_the_page(page: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    csrf = csrf_of(page.get(f"/sessions/{sid}").text)
    r = page.post(f"/sessions/{sid}/answer", data={"csrf": csrf, "action": "answer"})
    assert r.status_code == 422 and "the answer is empty; choose one of the options" in r.text
    assert sessions.status(sid)["status"] == "paused"


def test_decline_from_the_form(page: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    csrf = csrf_of(page.get(f"/sessions/{sid}").text)
    page.post(f"/sessions/{sid}/answer", data={"csrf": csrf, "action": "decline"})
    done = wait_status(sessions, sid, "completed")
    assert done["orchestrator_state"]["answer_status"] == "declined"


def test_cancel_asks_for_confirmation(page: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    confirm = page.get(f"/sessions/{sid}/cancel")
    assert "Yes, cancel the session" in confirm.text
    assert sessions.status(sid)["status"] == "paused"  # looking is not cancelling
    csrf = csrf_of(confirm.text)
    r = page.post(f"/sessions/{sid}/cancel", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and sessions.status(sid)["status"] == "paused"
    page.post(f"/sessions/{sid}/cancel", data={"csrf": csrf, "confirm": "yes"})
    assert sessions.status(sid)["status"] == "cancelled"


def test_every_form_needs_its_csrf_value(page: TestClient, sessions: Sessions) -> None:
    sid = paused(sessions)
    page.get(f"/sessions/{sid}")
    for path, data in [
        (f"/sessions/{sid}/answer", {"action": "decline"}),
        (f"/sessions/{sid}/answer", {"action": "decline", "csrf": "forged"}),
        (f"/sessions/{sid}/cancel", {"confirm": "yes", "csrf": "forged"}),
    ]:
        assert page.post(path, data=data).status_code == 403
    assert sessions.status(sid)["status"] == "paused"


def test_what_an_agent_wrote_is_shown_as_text(page: TestClient, sessions: Sessions) -> None:
    evil = "<script>alert('x')</script>"
    sid = paused(
        sessions,
        {
            "question": f"Pick one {evil}",
            "options": [{"label": '"><img src=x onerror=alert(1)>', "description": evil}],
            "reason": evil,
        },
        task=f"task {evil}",
    )
    for html in (page.get(f"/sessions/{sid}").text, page.get("/").text):
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(" in html
    assert (
        'value="&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in page.get(f"/sessions/{sid}").text
    )


def test_answer_link_opens_one_question_and_takes_one_answer(
    db_url: str, sessions: Sessions
) -> None:

    sid = paused(sessions)
    token = sessions.inbox.new_link(sid)
    other = sessions.inbox.new_link(sid)  # a second link for the same question
    assert other != token and len(token) >= 40
    app = create_app(WebConfig(db=db_url, token=TOKEN))
    with TestClient(app, base_url=BASE) as anon:  # no access token at all
        assert anon.get("/").status_code == 401
        assert anon.get("/q/not-a-token").status_code == 404
        html = anon.get(f"/q/{token}").text
        assert "Which columns should the export contain?" in html
        assert "Log" not in html and f"/sessions/{sid}/cancel" not in html
        r = anon.post(f"/q/{token}", data={"csrf": csrf_of(html), "choice": "nonsense"})
        assert r.status_code == 422 and "not one of the options" in r.text
        r = anon.post(f"/q/{token}", data={"csrf": csrf_of(html), "choice": "All visible columns"})
        assert r.status_code == 200 and "your answer is recorded" in r.text
        assert anon.get(f"/q/{token}").status_code == 410
        assert anon.get(f"/q/{other}").status_code == 410  # the question is answered
        again = anon.post(f"/q/{token}", data={"csrf": csrf_of(html), "action": "decline"})
        assert again.status_code == 410
        assert anon.get(f"/sessions/{sid}").status_code == 401  # the link opens nothing else
    done = wait_status(sessions, sid, "completed")
    assert done["orchestrator_state"]["user_clarification_response"] == "All visible columns"


def test_an_answer_link_whose_marking_fails_still_says_the_answer_is_recorded(
    db_url: str, sessions: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer commits, then marking the link used meets a storage fault: the answer is
    kept and the question closed, so the page says it is recorded (a 503 "try again"
    would send the person back to a link that now says 410)."""
    import sqlite3

    from orchestrator.store import inbox_sql

    sid = paused(sessions)
    token = sessions.inbox.new_link(sid)

    def failing(*_args: object, **_kwargs: object) -> None:
        raise sqlite_fault(sqlite3.SQLITE_FULL)

    monkeypatch.setattr(inbox_sql, "mark_link_used", failing)
    app = create_app(WebConfig(db=db_url, token=TOKEN, run_on=False))
    with TestClient(app, base_url=BASE) as anon:
        html = anon.get(f"/q/{token}").text
        r = anon.post(f"/q/{token}", data={"csrf": csrf_of(html), "choice": "All visible columns"})
        assert r.status_code == 200 and "your answer is recorded" in r.text, r.text
        assert anon.get(f"/q/{token}").status_code == 410  # the question is answered
    state = sessions.status(sid)["orchestrator_state"]
    assert state["user_clarification_response"] == "All visible columns"


def test_answer_link_closes_when_the_session_ends(db_url: str, sessions: Sessions) -> None:

    sid = paused(sessions)
    token = sessions.inbox.new_link(sid)
    sessions.cancel(sid)
    with TestClient(create_app(WebConfig(db=db_url, token=TOKEN)), base_url=BASE) as anon:
        assert anon.get(f"/q/{token}").status_code == 410


def test_live_progress_streams_until_the_session_stops(
    page: TestClient, sessions: Sessions
) -> None:
    sid = paused(sessions)
    after = max(0, len(sessions.log(sid)))
    web = page.app.state.web  # type: ignore[attr-defined]
    web.sessions.answer(sid, Reply(text="All visible columns"))  # the server's claim
    web.runner.submit(sid)
    seen: list[tuple[str, dict]] = []
    with page.stream("GET", f"/sessions/{sid}/live?after={after}") as stream:
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind:
                seen.append((kind, json.loads(line.split(":", 1)[1])))
                if kind == "end":
                    break
    texts = [d["text"] for k, d in seen if k == "log"]
    assert any("ANSWER" in t for t in texts)
    assert any("session completed" in t for t in texts)
    assert seen[-1] == ("end", {"status": "completed"})
    ids = [d["id"] for k, d in seen if k == "log"]
    assert ids == sorted(ids) and len(ids) == len(set(ids))


def test_pages_need_the_token(db_url: str, sessions: Sessions) -> None:
    sid = paused(sessions)
    with TestClient(create_app(WebConfig(db=db_url, token=TOKEN)), base_url=BASE) as anon:
        for path in ("/", f"/sessions/{sid}", f"/sessions/{sid}/live", f"/sessions/{sid}/cancel"):
            r = anon.get(path)
            assert r.status_code == 401 and "access token" in r.text, path


def test_answer_links_are_stored_only_as_hashes(db_url: str, sessions: Sessions) -> None:
    import hashlib

    from tests.dbcheck import query as rows

    sid = paused(sessions)
    token = sessions.inbox.new_link(sid)
    stored = rows(db_url, "SELECT token_hash, session_id FROM answer_links")
    assert stored == [(hashlib.sha256(token.encode()).hexdigest(), sid)]
    assert token not in repr(rows(db_url, "SELECT * FROM answer_links"))
    assert sessions.inbox.session_of_link(token) == (sid, False)
    assert sessions.inbox.session_of_link(stored[0][0]) is None  # the hash opens nothing


def test_inbox_pages_keep_one_order_across_waiting_and_ended_sessions(
    sessions: Sessions,
) -> None:
    """The inbox is read in runs (waiting, then the rest), after a cursor; walked page by
    page at any page size, it is one order: waiting first, soonest deadline first, those
    without a deadline after them (the question asked first first: the longest waiting),
    then every other session, newest first."""
    from tests.web_support import scenario

    def start(timeout: object, *, end: bool = False) -> str:
        doc = sessions.start_scenario(scenario(), settings={"timeout": timeout})
        if end:
            sessions.cancel(doc["session_id"])
        return str(doc["session_id"])

    made = [
        start(900),
        start(120),
        start("none"),
        start(600, end=True),
        start(300),
        start("none"),
        start(60, end=True),
    ]
    views = {v["session_id"]: v for v in sessions.list(limit=100)}
    newest = [v["session_id"] for v in sessions.list(limit=100)]
    waiting = [sid for sid in newest if views[sid]["pending_question"]]
    timed = sorted(
        (sid for sid in waiting if views[sid]["pending_question"]["deadline"]),
        key=lambda sid: views[sid]["pending_question"]["deadline"],
    )
    untimed = [sid for sid in waiting if not views[sid]["pending_question"]["deadline"]][::-1]
    expected = timed + untimed + [sid for sid in newest if sid not in waiting]
    assert sorted(expected) == sorted(made) and len(timed) == 3 and len(untimed) == 2
    for size in (1, 2, 3, 4, 7):
        walked: list[str] = []
        cursor = None
        for _ in range(len(made)):
            page, cursor = sessions.inbox.page(limit=size, after=cursor)
            walked += [v["session_id"] for v in page]
            if cursor is None:
                break
        assert walked == expected, size


def test_the_templates_read_dict_keys_as_jinja_does() -> None:
    from jinja2 import Environment

    from orchestrator.web.pages import page_templates

    source = (
        "{{ d.status }}|{{ d.missing }}|{{ d['status'] }}|{{ d.items is callable }}"
        "|{{ d.get('status') }}|{{ n.real }}|{{ d.nested.deep }}"
    )
    context = {"d": {"status": "paused", "items": "a key", "nested": {"deep": 1}}, "n": 3}
    ours = page_templates().from_string(source).render(**context)
    assert ours == "paused||paused|True|paused|3|1"  # a key never hides a dict method
    assert ours == Environment(autoescape=True).from_string(source).render(**context)


def test_a_csrf_value_opens_only_the_forms_of_what_its_page_shows(
    page: TestClient, sessions: Sessions
) -> None:
    """A CSRF value read off one answer link's page (which needs no token) was accepted by
    the inbox forms of every session; one session's by another's. Each is now bound to
    its link or its session (issue 45, item 7)."""
    one, two = paused(sessions), paused(sessions)
    link = sessions.inbox.new_link(one)
    from_link = csrf_of(page.get(f"/q/{link}").text)
    from_one = csrf_of(page.get(f"/sessions/{one}").text)
    for path in (f"/sessions/{one}/answer", f"/sessions/{two}/answer"):
        refused = page.post(path, data={"csrf": from_link, "action": "decline"})
        assert refused.status_code == 403, path
    refused = page.post(f"/sessions/{two}/answer", data={"csrf": from_one, "action": "decline"})
    assert refused.status_code == 403
    refused = page.post(f"/q/{link}", data={"csrf": from_one, "action": "decline"})
    assert refused.status_code == 403
    assert sessions.status(one)["status"] == sessions.status(two)["status"] == "paused"
    answered = page.post(f"/sessions/{one}/answer", data={"csrf": from_one, "action": "decline"})
    assert answered.status_code == 200 and sessions.status(one)["status"] != "paused"


@pytest.mark.parametrize(
    ("origin", "accepted"),
    [("null", False), ("http://127.0.0.1:9999", False), (None, True), (BASE, True)],
)
def test_origin_null_is_refused_without_sec_fetch_site(
    page: TestClient, sessions: Sessions, origin: str | None, accepted: bool
) -> None:
    """`Origin: null` (a sandboxed frame, a data: page) was accepted when the browser sent
    no Sec-Fetch-Site; our pages now send `Referrer-Policy: same-origin`, under which a
    browser names our real origin on our own forms."""
    sid = paused(sessions)
    shown = page.get(f"/sessions/{sid}")
    assert shown.headers["referrer-policy"] == "same-origin"
    headers = {} if origin is None else {"Origin": origin}
    posted = page.post(
        f"/sessions/{sid}/answer",
        data={"csrf": csrf_of(shown.text), "action": "decline"},
        headers=headers,
    )
    assert (posted.status_code != 403) is accepted, posted.text


def test_bidi_overrides_reach_the_inbox_as_visible_escapes(
    page: TestClient, sessions: Sessions
) -> None:
    """U+202E reordered what the inbox showed (a label reading backwards); it is shown as
    `\\u202e`, as at the terminal, and the option can still be chosen as it is."""
    label = "pay \u202egnp.exe"
    sid = paused(
        sessions,
        {"question": "Which \u202eone?", "options": [{"label": label}, {"label": "B"}]},
        task="task \u2066x\u2069",
    )
    for html in (page.get(f"/sessions/{sid}").text, page.get("/").text):
        assert "\u202e" not in html.replace(f'value="{label}"', "")
        assert "\\u202e" in html
    shown = page.get(f"/sessions/{sid}").text
    assert f'value="{label}"' in shown  # posted back exactly
    page.post(f"/sessions/{sid}/answer", data={"csrf": csrf_of(shown), "choice": label})
    assert sessions.status(sid)["orchestrator_state"]["user_clarification_response"] == label


def _visible(html: str) -> str:
    """What a reader sees of a page: its text without tags (attributes left out)."""
    body = html.split("<body>", 1)[1]
    return html_unescape(" ".join(re.sub(r"<[^>]+>", " ", body).split()))


def test_pages_show_times_and_words_as_people_read_them(db_url: str, sessions: Sessions) -> None:
    """Issue 44: no raw ISO time (microseconds and all) and no internal word (`pm#3`,
    `part_cap`, `for_pm`) in what a page shows; a time is '… ago' or a time of day, with
    the moment in its title and the ISO time in its datetime attribute."""
    from tests.conftest import EXAMPLES

    late = sessions.start_scenario(str(EXAMPLES / "late-answer.yaml"))
    parts = sessions.start_scenario(str(EXAMPLES / "multi-part-question.yaml"))
    waiting = paused(sessions)
    assert late["late_answer"]["reconciled"]["by"] == "pm#3"  # the machine's value stays
    assert any(a["source"] == "part_cap" for a in parts["assumptions"])
    page = browser(db_url)
    try:
        shown = {
            "inbox": page.get("/").text,
            "late": page.get(f"/sessions/{late['session_id']}").text,
            "parts": page.get(f"/sessions/{parts['session_id']}").text,
            "waiting": page.get(f"/sessions/{waiting}").text,
        }
    finally:
        page.__exit__(None, None, None)
    for name, html in shown.items():
        text = _visible(html)
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d|\d\d:\d\d:\d\d\.\d+", text), (name, text)
        for word in ("pm#", "developer-1#", "part_cap", "for_pm", "hard_cap"):
            assert word not in text, (name, word, text)
    assert "reconciled by the PM's turn 3" in _visible(shown["late"])
    assert "one part too many for the question" in _visible(shown["parts"])
    created = re.findall(
        r'<time class="ago" datetime="([^"]+)" title="([^"]+)">([^<]+)</time>', shown["inbox"]
    )
    assert len(created) == 3, shown["inbox"]
    for iso_time, title, text in created:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", iso_time)
        assert title == iso_time[:10] + " " + iso_time[11:19] + " UTC"
        assert text in ("just now",) or re.fullmatch(r"\d+ (s|min|h|d) ago", text), text
    clock = re.findall(r'<time class="clock" datetime="([^"]+)" title="[^"]+">([^<]+)</time>',
                       shown["late"])  # fmt: skip
    assert clock and all(text == iso_time[11:19] for iso_time, text in clock)


def test_the_words_helper() -> None:
    from datetime import UTC, datetime

    from orchestrator.present import words

    now = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
    assert words.moment("2026-11-27T11:48:13.706830Z") == "2026-11-27 11:48:13 UTC"
    assert words.moment("2026-11-27T12:48:13.706830+01:00") == "2026-11-27 11:48:13 UTC"
    assert words.moment(None) == "" and words.moment("soon") == "soon"
    assert words.clock_time("2026-11-27T11:48:13.706830Z") == "11:48:13"
    assert words.ago("2026-11-27T11:59:55Z", now) == "just now"
    assert words.ago("2026-11-27T11:56:00Z", now) == "4 min ago"
    assert words.ago("2026-11-25T10:00:00Z", now) == "2 d ago"
    assert words.ago("2026-11-27T12:05:00Z", now) == "in 5 min"
    assert words.turn_name("pm#3") == "the PM's turn 3"
    assert words.turn_name("developer-2#1") == "developer 2's turn 1"
    assert words.turn_name("late-answer") == "late-answer"
    assert words.verdict_word("for_pm") == "for the PM to judge"
    assert words.source_word("part_cap") == "one part too many for the question"
    assert words.source_word("something new") == "something new"
