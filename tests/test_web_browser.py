"""A real browser on the web inbox: Playwright driving Debian's headless Chromium.

The server runs in this process (uvicorn in a thread) so that the agents can be slowed
down and the page seen following a run live. Chromium is installed from Debian's
packages when missing (CI runs as root with apt reachable); the test is skipped, loudly,
only when that install fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.api import Sessions
from tests.conftest import ROOT
from tests.waiting import until
from tests.web_support import TOKEN, paused, scenario

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        steps = [["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                pytest.skip(
                    f"BROWSER TESTS NOT RUN: cannot install Debian's chromium "
                    f"({' '.join(step)} exited {done.returncode}: {done.stderr[-500:]})"
                )
    if not CHROMIUM.exists():
        pytest.skip(
            "BROWSER TESTS NOT RUN: apt-get installed chromium but /usr/bin/chromium is missing"
        )
    return CHROMIUM


@pytest.fixture
def server(db_url: str) -> Iterator[tuple[str, Any]]:
    """The inbox served by uvicorn on a free loopback port, in this process."""
    import uvicorn

    from orchestrator.web import WebConfig, create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    app = create_app(WebConfig(db=db_url, token=TOKEN, port=port))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    until(lambda: srv.started, "the server to start")
    yield f"http://127.0.0.1:{port}", app
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser(chromium: Path, tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a new, empty user-data-dir
            executable_path=str(chromium),
            headless=True,
            args=ARGS,
            viewport={"width": 1100, "height": 760},
        )
        yield context
        context.close()


def held_agents(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """The first agent call answers once the first event is set, every later one once the
    second is: the page sees the run going (what the first call recorded arrives while the
    session still runs; a run that ended within one poll would reload the page at once)."""
    from orchestrator.agents.scripted import ScriptedBackend

    respond = ScriptedBackend.respond
    first, rest = threading.Event(), threading.Event()
    calls = iter([first])

    def held(self: ScriptedBackend, request: Any) -> Any:
        gate = next(calls, rest)
        assert gate.wait(60), "the test never released the agents"
        return respond(self, request)

    monkeypatch.setattr(ScriptedBackend, "respond", held)
    return first, rest


def test_answering_in_a_real_browser(
    server: tuple[str, Any],
    browser: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import expect

    base, _app = server
    with Sessions(db_url) as sessions:
        cancelled = paused(
            sessions,
            {
                "kind": "free_text",
                "options": [],
                "question": "Delete the legacy tables too?",
                "urgency": "low",
            },
            task="Clean up the reports database",
        )
        declined = paused(
            sessions,
            {
                "kind": "free_text",
                "options": [],
                "question": "Which date format do you prefer?",
                "urgency": "medium",
            },
            task="Format dates in the export",
        )
        other = paused(
            sessions,
            {
                "question": "Where should the export button go?",
                "allow_other": True,
                "options": [{"label": "Toolbar"}, {"label": "Row menu", "recommended": True}],
            },
            task="Add an export button",
        )
        multi = paused(
            sessions,
            {
                "kind": "multi_select",
                "question": "Which formats should the export offer?",
                "options": [
                    {
                        "label": "CSV",
                        "description": "opens in every spreadsheet",
                        "recommended": True,
                    },
                    {"label": "XLSX", "description": "keeps column types"},
                    {"label": "JSON", "description": "for scripts"},
                ],
                "urgency": "medium",
            },
            task="Export formats",
        )
        evil = paused(
            sessions,
            {
                "question": "Is <script>window.pwned=1</script> allowed?",
                "kind": "free_text",
                "options": [],
                "urgency": "low",
            },
            task="An agent wrote <b>markup</b>",
        )
        single = paused(sessions, task="Add a CSV export to the reports page")

    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{base}/?token={TOKEN}")
    assert page.url == f"{base}/"
    rows = page.locator("table.inbox tbody tr")
    assert rows.count() == 6
    assert "paused" in rows.first.inner_text()  # one vocabulary: the CLI says paused too
    page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)

    # a <script> in a question is shown as text and never runs
    page.goto(f"{base}/sessions/{evil}")
    assert "<script>window.pwned=1</script>" in page.locator(".question-text").inner_text()
    assert page.evaluate("window.pwned") is None
    assert "<b>markup</b>" in page.locator("p.task").inner_text()

    # single select, recommended preselected; the run on is followed live
    first, rest = held_agents(monkeypatch)
    page.goto(f"{base}/sessions/{single}")
    assert page.locator("input[value='A fixed summary set']").is_checked()
    assert "what the table shows now" in page.locator("fieldset.options").inner_text()
    page.screenshot(path=str(tmp_path / "question.png"), full_page=True)
    page.check("input[value='All visible columns']")
    page.click("button[value='answer']")
    page.wait_for_url(f"{base}/sessions/{single}")
    # expect() retries until the page that answers the post is the one shown (an
    # assertion read straight after a click may read the page being left, or none), for
    # as long as the other waits here: its own default of 5 s is short on a loaded machine.
    expect(page.locator("#status")).to_have_text("running", timeout=30_000)
    first.set()  # one agent call goes on: what it records reaches the open page
    page.locator("#timeline li.new").first.wait_for(timeout=30_000)  # appended by SSE
    rest.set()
    page.locator("#status", has_text="completed").wait_for(timeout=60_000)
    expect(page.locator("body")).to_contain_text("CSV export shipped", timeout=30_000)
    expect(page.locator(".answered")).to_contain_text("All visible columns", timeout=30_000)

    # multi select
    page.goto(f"{base}/sessions/{multi}")
    assert page.locator("input[value='CSV']").is_checked()
    page.check("input[value='JSON']")
    page.click("button[value='answer']")
    page.locator("#status", has_text="completed").wait_for(timeout=60_000)
    expect(page.locator(".answered")).to_contain_text("CSV, JSON", timeout=30_000)

    # "other": an answer of the user's own
    page.goto(f"{base}/sessions/{other}")
    page.fill("input[name='other']", "Next to the filters")
    assert page.locator("input[value='__other__']").is_checked()  # the field selects it
    page.click("button[value='answer']")
    page.locator("#status", has_text="completed").wait_for(timeout=60_000)
    expect(page.locator(".answered")).to_contain_text("Next to the filters", timeout=30_000)

    # decline
    page.goto(f"{base}/sessions/{declined}")
    page.click("button[value='decline']")
    page.locator("#status", has_text="completed").wait_for(timeout=60_000)
    expect(page.locator(".answered")).to_contain_text("declined", timeout=30_000)

    # cancel, with its confirmation step
    page.goto(f"{base}/sessions/{cancelled}")
    page.click("text=Cancel the session…")
    expect(page.get_by_text("Yes, cancel the session")).to_be_visible(timeout=30_000)
    page.click("text=Yes, cancel the session")
    expect(page.locator("#status")).to_have_text("cancelled", timeout=30_000)

    assert dialogs == []
    with Sessions(db_url) as sessions:
        statuses = {s["session_id"]: s["status"] for s in sessions.list()}
    assert statuses == {
        single: "completed",
        multi: "completed",
        other: "completed",
        declined: "completed",
        cancelled: "cancelled",
        evil: "paused",
    }
    # The README's pictures: written when missing, or renewed on request, so that a test
    # run does not leave the work tree changed (ORCHESTRATOR_UPDATE_SCREENSHOTS=1).
    docs = ROOT / "docs" / "images"
    docs.mkdir(parents=True, exist_ok=True)
    renew = os.environ.get("ORCHESTRATOR_UPDATE_SCREENSHOTS") == "1"
    for name in ("inbox.png", "question.png"):
        assert (tmp_path / name).stat().st_size > 10_000
        if renew or not (docs / name).exists():
            shutil.copyfile(tmp_path / name, docs / name)


def test_a_page_on_another_local_port_cannot_answer(
    server: tuple[str, Any], browser: Any, db_url: str
) -> None:
    """CSRF from 127.0.0.1:OTHER: cookies are not kept apart by port, so the attacker's
    server overwrites the CSRF cookie with a value it knows and its page posts an answer
    with that value, carrying the victim's access cookie (same site). Refused: the form
    value must be signed by this server, and the browser says the post is not same-origin."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    base, _app = server
    with Sessions(db_url) as sessions:
        sid = paused(sessions, {"kind": "free_text", "options": [], "question": "Drop the table?"})
    forged = "attacker-chosen-value"
    page_html = (
        f'<form id="f" method="post" action="{base}/sessions/{sid}/answer">'
        f'<input name="csrf" value="{forged}"><input name="text" value="yes, drop it">'
        '<input name="action" value="answer"></form>'
        "<script>document.getElementById('f').submit()</script>"
    ).encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            # Cookies ignore ports: this replaces the inbox's CSRF cookie on 127.0.0.1.
            self.send_header("Set-Cookie", f"orchestrator_csrf={forged}; Path=/; SameSite=Lax")
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *args: object) -> None:
            pass

    evil = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(f"{base}/?token={TOKEN}")  # the victim is logged in to the inbox
        page.goto(f"{base}/sessions/{sid}")
        responses: list[int] = []
        page.on(
            "response",
            lambda r: responses.append(r.status) if r.url.endswith("/answer") else None,
        )
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        page.wait_for_url(f"{base}/sessions/{sid}/answer")
        page.wait_for_load_state()
    finally:
        evil.shutdown()
    assert responses == [403]
    with Sessions(db_url) as sessions:
        doc = sessions.status(sid)
    assert doc["status"] == "paused" and doc["pending_question"] is not None


# A 300-character URL: one word that no line can hold, in a question, its reason, the
# task and a log line (issue 44: it widened the desktop inbox to 1710 px, a session page at
# 390 px to 1052 px).
LONG_URL = ("https://reports.example.com/exports/" + "segment-" * 40)[:292] + "/end.csv"

NO_SCROLL = "[document.documentElement.scrollWidth, window.innerWidth]"


def _widths(page: Any, url: str) -> tuple[int, int]:
    page.goto(url)
    scroll, inner = page.evaluate(NO_SCROLL)
    return int(scroll), int(inner)


def test_pages_fit_a_phone_and_a_long_url_wraps(
    server: tuple[str, Any], browser: Any, db_url: str, tmp_path: Path
) -> None:
    """At 390 px (and 320 and 430) the inbox, a session's page and an answer link's page
    scroll only down, with a 300-character URL in the question; at 1280 px the inbox
    too. On a phone each inbox row keeps what it says (urgency, time left, created)
    within the screen."""
    base, _app = server
    assert len(LONG_URL) == 300 and " " not in LONG_URL
    with Sessions(db_url) as sessions:
        doc = json.loads(
            scenario(
                {
                    "question": f"Should the export link to {LONG_URL} or to the page itself?",
                    "reason": f"The old link was {LONG_URL}",
                    "options": [
                        {"label": "The file", "description": LONG_URL},
                        {"label": "The page", "recommended": True},
                    ],
                },
                task=f"Export the reports to {LONG_URL}",
            )
        )
        doc["settings"] = {"timeout": 3600}  # a deadline: the row's time left
        long = sessions.start_scenario(json.dumps(doc, indent=2))["session_id"]
        for n in range(3):
            paused(sessions, task=f"Another export {n}")
        token = sessions.inbox.new_link(long)
    pages = {
        "inbox": f"{base}/",
        "session": f"{base}/sessions/{long}",
        "answer link": f"{base}/q/{token}",
    }
    page = browser.new_page()
    page.goto(f"{base}/?token={TOKEN}")
    for width in (320, 390, 430, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        for name, url in pages.items():
            if width == 1280 and name != "inbox":
                continue
            scroll, inner = _widths(page, url)
            if scroll > inner:
                page.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=True)
            assert scroll <= inner, f"{name} at {width} px is {scroll} px wide ({tmp_path})"
    # On a phone, what a row says is on the screen, not cut off to the right.
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(pages["inbox"])
    row = page.locator("table.inbox tbody tr").first
    for cell in ("urgency", "left", "created"):
        box = row.locator(f"td.{cell}").bounding_box()
        assert box is not None and box["width"] > 0, cell
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (cell, box)
    text = row.inner_text()
    assert "high" in text and "created" in text.lower()


def test_the_eval_report_reads_on_a_phone(browser: Any, tmp_path: Path) -> None:
    """The eval's HTML report at 390 px: no sideways scroll of the page (its wide tables
    scroll within their own box), the plot within the screen."""
    from orchestrator.evals.report import write_html
    from tests.test_eval import report_of

    path = tmp_path / "report.html"
    write_html(
        report_of(
            ("eval:oracle", True, True),
            ("eval:always-ask", True, True),
            ("eval:never-ask", False, False),
        ),
        path,
    )
    page = browser.new_page()
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        scroll, inner = _widths(page, path.as_uri())
        assert scroll <= inner, f"the report at {width} px is {scroll} px wide"
        box = page.locator("figure svg").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
