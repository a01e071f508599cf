"""The terminal UI: real pseudo-terminal runs of `orchestrator run --ui terminal` (pexpect),
the line-by-line fallback when stdin is a pipe, and the pieces that need no terminal."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import forkserver
import pexpect
import pytest
import yaml
from rich.console import Console

from orchestrator.cli.progress import Activity
from orchestrator.domain.question import UserReply
from orchestrator.present.render import summary_line
from tests.conftest import EXAMPLES, ROOT, cli

DOWN, UP, ENTER, SPACE, ESC, CTRL_C = "\x1b[B", "\x1b[A", "\r", " ", "\x1b", "\x03"
CTRL_X, CTRL_N = "\x18", "\x0e"
# Rendered by prompt_toolkit itself, so once seen the prompt is up and the tty is raw.
SELECT_READY, CHECKBOX_READY, TEXT_READY = "enter chooses", "space toggles", "enter sends"

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

COLUMNS = [
    {"label": "All visible columns", "description": "Exactly what the user sees"},
    {"label": "A fixed summary set", "description": "Date, account, amount and status"},
]


def scenario(tmp_path: Path, **question: Any) -> Path:
    """The PM asks `question`, then plans one task, a developer does it, the PM completes."""
    path = tmp_path / "scenario.yaml"
    document = {
        "task": "Add a CSV export to the reports page",
        "agents": {
            "pm": [
                {"status": "NEEDS_CLARIFICATION", **question},
                {"status": "PLANNED", "tasks": [{"title": "Export endpoint"}]},
                {"status": "COMPLETE", "summary": "CSV export shipped"},
            ],
            "developer": [{"status": "DONE", "summary": "endpoint added"}],
        },
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def spawn(args: list[str], tmp_path: Path) -> pexpect.spawn:
    """A real pseudo-terminal (30x100) running `python ARGS`; HOME is the test's temp dir."""
    # pexpect does not answer cursor position requests; without this prompt_toolkit waits
    # for the answer and then prints a warning about it.
    env = dict(
        os.environ,
        TERM="xterm",
        XDG_DATA_HOME=str(tmp_path / "data"),
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    child = forkserver.spawn_pty(
        args,
        cwd=str(ROOT),
        env=env,
        dimensions=(30, 100),
        encoding="utf-8",
        codec_errors="replace",
        timeout=30,
    )
    child.logfile_read = io.StringIO()
    return child


def run_at_terminal(script: Path, db: str, tmp_path: Path) -> pexpect.spawn:
    return spawn(
        ["-m", "orchestrator", "run", "--script", str(script), "--ui", "terminal", "--json"]
        + ["--db", db],
        tmp_path,
    )


def finish(child: pexpect.spawn) -> tuple[int, str]:
    """Wait for the end; the exit code and everything the terminal showed (no colours)."""
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, f"killed by signal {child.signalstatus}"
    return child.exitstatus, ANSI.sub("", child.logfile_read.getvalue())


def the_session(db: str) -> dict[str, Any]:
    listed = cli("list", "--json", db=db)
    assert listed.returncode == 0, listed.stderr
    (session,) = json.loads(listed.stdout)
    shown = cli("status", session["session_id"], "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    view: dict[str, Any] = json.loads(shown.stdout)
    return view


# -- at a real terminal -------------------------------------------------------------------


def test_single_select_moves_with_arrows_and_enter_chooses(tmp_path: Path, db_url: str) -> None:
    script = scenario(
        tmp_path,
        question="Which columns should the export contain?",
        kind="single_select",
        reason="The page shows 14 columns; some are internal.",
        context="The reports page, admins only",
        urgency="high",
        options=[{**COLUMNS[0], "recommended": True}, COLUMNS[1]],
    )
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(SELECT_READY)
    child.expect("esc: answer later")  # the line under the options: all of them are drawn
    shown = child.logfile_read.getvalue()
    for part in ("HIGH URGENCY", "The reports page, admins only", "14 columns", "(recommended)"):
        assert part in shown
    assert "Date, account, amount and status" in shown  # descriptions are listed
    child.send(DOWN)
    child.send(ENTER)
    code, shown = finish(child)

    assert code == 0, shown
    assert "✔ pm's question: A fixed summary set" in shown
    view = the_session(db_url)
    assert view["status"] == "completed"
    assert view["orchestrator_state"]["user_clarification_response"] == "A fixed summary set"


def test_enter_takes_the_recommended_option(tmp_path: Path, db_url: str) -> None:
    script = scenario(
        tmp_path,
        question="Which columns should the export contain?",
        kind="single_select",
        options=[COLUMNS[0], {**COLUMNS[1], "recommended": True}],
    )
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(SELECT_READY)
    child.send(ENTER)
    code, shown = finish(child)

    assert code == 0, shown
    assert the_session(db_url)["orchestrator_state"]["user_clarification_response"] == (
        "A fixed summary set"
    )


def test_multi_select_space_toggles_and_the_recommended_is_checked(
    tmp_path: Path, db_url: str
) -> None:
    script = scenario(
        tmp_path,
        question="Which columns should the export contain?",
        kind="multi_select",
        options=[{"label": "Date", "recommended": True}, {"label": "Account"}, {"label": "Amount"}],
    )
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(CHECKBOX_READY)
    child.send(DOWN + DOWN + SPACE)  # Date is pre-checked; add Amount
    child.send(ENTER)
    code, shown = finish(child)

    assert code == 0, shown
    assert "✔ pm's question: Date, Amount" in shown
    assert the_session(db_url)["orchestrator_state"]["user_clarification_response"] == (
        "Date, Amount"
    )


def test_free_text_does_not_take_an_empty_answer(tmp_path: Path, db_url: str) -> None:
    script = scenario(tmp_path, question="Which columns should the export contain?")
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(TEXT_READY)
    child.send(ENTER)
    child.expect("type an answer")  # the hint; the prompt stays open
    child.send("Date and amount")
    child.send(ENTER)
    code, shown = finish(child)

    assert code == 0, shown
    assert "✔ pm's question: Date and amount" in shown
    view = the_session(db_url)
    assert view["orchestrator_state"]["user_clarification_response"] == "Date and amount"


@pytest.mark.parametrize(
    ("kind", "ready", "key"),
    [
        ("single_select", SELECT_READY, CTRL_C),
        ("single_select", SELECT_READY, ESC),
        ("multi_select", CHECKBOX_READY, ESC),
        ("free_text", TEXT_READY, CTRL_C),
        ("free_text", TEXT_READY, ESC),
    ],
    ids=["select-ctrl-c", "select-esc", "checkbox-esc", "text-ctrl-c", "text-esc"],
)
def test_ctrl_c_and_esc_leave_the_question_open(
    tmp_path: Path, db_url: str, kind: str, ready: str, key: str
) -> None:
    options = {"options": COLUMNS} if kind != "free_text" else {}
    script = scenario(tmp_path, question="Which columns?", kind=kind, **options)
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(ready)
    child.send(key)
    code, shown = finish(child)

    assert code == 3, shown
    assert "⏸ pm's question: left open, to answer later" in shown
    assert "orchestrator resume " in shown  # the command that answers it
    view = the_session(db_url)
    assert view["status"] == "paused"
    assert view["pending_question"]["question"] == "Which columns?"


@pytest.mark.parametrize(
    ("kind", "ready", "keys"),
    [
        ("single_select", SELECT_READY, UP + ENTER),  # the last entry: cancel the session
        ("multi_select", CHECKBOX_READY, CTRL_X),
        ("free_text", TEXT_READY, CTRL_X),
    ],
    ids=["select-entry", "checkbox-ctrl-x", "text-ctrl-x"],
)
def test_cancelling_is_an_explicit_choice(
    tmp_path: Path, db_url: str, kind: str, ready: str, keys: str
) -> None:
    options = {"options": COLUMNS} if kind != "free_text" else {}
    script = scenario(tmp_path, question="Which columns?", kind=kind, **options)
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(ready)
    # Waited for, not looked up at once: the keys line may be drawn a moment after the prompt.
    child.expect(
        "Cancel the session" if kind == "single_select" else r"ctrl\+x: cancel the session"
    )
    child.send(keys)
    # Asked once more (issue 44, item 8): Esc is No, and the question is back.
    child.expect("Cancel the session\\? It stops for good")
    child.send(ESC)
    child.expect(ready)
    child.send(keys)
    child.expect("Cancel the session\\? It stops for good")
    child.send("y")
    code, shown = finish(child)

    assert code == 4, shown
    assert "✖ pm's question: cancelled" in shown
    view = the_session(db_url)
    assert view["status"] == "cancelled"
    assert view["pending_question"] is None


@pytest.mark.parametrize(
    ("kind", "ready", "keys"),
    [
        ("single_select", SELECT_READY, UP + UP + ENTER),  # above "Cancel the session"
        ("free_text", TEXT_READY, CTRL_N),
    ],
    ids=["select-entry", "text-ctrl-n"],
)
def test_the_prompt_declines_the_question(
    tmp_path: Path, db_url: str, kind: str, ready: str, keys: str
) -> None:
    """Issue 44, item 8: the terminal prompt had no Decline (only --decline did)."""
    options = {"options": COLUMNS} if kind != "free_text" else {}
    script = scenario(tmp_path, question="Which columns?", kind=kind, **options)
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(ready)
    child.send(keys)
    code, shown = finish(child)
    assert code == 0, shown
    view = the_session(db_url)
    assert view["status"] == "completed" and view["fallbacks_injected"] == 1
    assert view["orchestrator_state"]["clarification_resolved"]
    assert view["orchestrator_state"]["user_clarification_response"] is None


def test_esc_inside_other_goes_back_to_the_options(tmp_path: Path, db_url: str) -> None:
    script = scenario(
        tmp_path,
        question="Which columns should the export contain?",
        kind="single_select",
        allow_other=True,
        options=[{**COLUMNS[0], "recommended": True}, COLUMNS[1]],
    )
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(SELECT_READY)
    child.send(DOWN + DOWN + ENTER)  # Other
    child.expect("back to the options")
    child.send(ESC)
    child.expect(SELECT_READY)  # the options again
    child.send(DOWN + ENTER)  # the recommended one is preselected: down picks the second
    code, shown = finish(child)

    assert code == 0, shown
    assert "✔ pm's question: A fixed summary set" in shown
    assert the_session(db_url)["orchestrator_state"]["user_clarification_response"] == (
        "A fixed summary set"
    )


def test_ctrl_d_on_an_empty_answer_leaves_the_session_paused(tmp_path: Path, db_url: str) -> None:
    script = scenario(tmp_path, question="Which columns should the export contain?")
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(TEXT_READY)
    child.send("\x04")
    code, shown = finish(child)

    assert code == 3, shown
    assert "pm's question: no answer (input closed)" in shown
    view = the_session(db_url)
    assert view["status"] == "paused"
    assert view["pending_question"]["question"] == "Which columns should the export contain?"


@pytest.mark.parametrize(
    ("kind", "ready", "keys", "prompt", "stored"),
    [
        ("single_select", SELECT_READY, DOWN + DOWN + ENTER, "Your answer:", "Region only"),
        (
            "multi_select",
            CHECKBOX_READY,
            DOWN + DOWN + SPACE + ENTER,  # All visible columns is pre-checked
            "Your other answer:",
            "All visible columns, Region only",
        ),
    ],
    ids=["single_select", "multi_select"],
)
def test_other_opens_a_text_prompt(
    tmp_path: Path, db_url: str, kind: str, ready: str, keys: str, prompt: str, stored: str
) -> None:
    script = scenario(
        tmp_path,
        question="Which columns should the export contain?",
        kind=kind,
        allow_other=True,
        options=[{**COLUMNS[0], "recommended": True}, COLUMNS[1]],
    )
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(ready)
    child.expect("esc: answer later")  # the line under the options: all of them are drawn
    assert "Other (type an answer)" in child.logfile_read.getvalue()
    child.send(keys)
    child.expect(prompt)
    child.expect(TEXT_READY)
    child.send("Region only")
    child.send(ENTER)
    code, shown = finish(child)

    assert code == 0, shown
    assert f"✔ pm's question: {stored}" in shown
    assert the_session(db_url)["orchestrator_state"]["user_clarification_response"] == stored


ASK_UNTIL = """
import sys, time
from orchestrator.cli.terminal import ask
question = {"question": "Pick one?", "kind": "single_select", "asked_by": "developer-2",
            "options": [{"label": "A"}, {"label": "B"}]}
if sys.argv[1] == "field":
    question["deadline"] = sys.argv[2]
    reply = ask(question)
elif sys.argv[1] == "wait":
    reply = ask(question, deadline=time.time() + float(sys.argv[2]), keep_open=True)
else:
    reply = ask(question, deadline=time.time() + float(sys.argv[2]))
sys.stderr.write(f"RESULT {reply!r}\\n")
"""


@pytest.mark.parametrize("where", ["argument", "field"])
def test_a_passed_deadline_closes_the_prompt(tmp_path: Path, where: str) -> None:
    soon = "1.5" if where == "argument" else (datetime.now() + timedelta(seconds=1.5)).isoformat()
    child = spawn(["-c", ASK_UNTIL, where, soon], tmp_path)
    # (Under load the deadline may pass before the prompt is drawn: it closes all the same.)
    child.expect("developer-2's question: no answer before the deadline")
    child.expect("RESULT None")
    code, _ = finish(child)
    assert code == 0


def _seconds_left(drawn: str) -> int:
    """The countdown as a terminal shows it after `drawn`: the seconds in its line."""
    import pyte

    screen = pyte.Screen(100, 30)
    pyte.Stream(screen).feed(drawn)
    for line in screen.display:
        found = re.search(r"answer within (\d+)m (\d\d)s", line)
        if found:
            return int(found[1]) * 60 + int(found[2])
    raise AssertionError("no countdown on the screen:\n" + "\n".join(screen.display))


def _screen(drawn: str) -> str:
    """The terminal's screen after `drawn` (a terminal emulator applies partial redraws)."""
    import pyte

    screen = pyte.Screen(100, 30)
    pyte.Stream(screen).feed(drawn)
    return "\n".join(screen.display)


def _until_shown(child: pexpect.spawn, pattern: str) -> None:
    """Wait until the screen shows `pattern`, reading each redraw as it comes (an event,
    not a margin of time; pexpect's timeout only bounds a prompt that never draws it)."""
    while not re.search(pattern, _screen(child.logfile_read.getvalue())):
        child.expect(r"\S", timeout=60)


def test_the_time_left_counts_down_under_the_prompt(tmp_path: Path) -> None:
    """No key pressed, the countdown is redrawn on its own (only its changed digits): the
    test waits for the screen to show less time left, however slow the machine is."""
    child = spawn(["-c", ASK_UNTIL, "argument", "600"], tmp_path)
    child.expect(SELECT_READY)
    child.expect(r"answer within \d+m \d\ds \(then the prompt closes\)")
    first = _seconds_left(child.logfile_read.getvalue())
    while True:  # each redraw writes a digit; the screen is read after each
        child.expect(r"\d", timeout=60)
        later = _seconds_left(child.logfile_read.getvalue())
        assert later <= first, (first, later)  # it never counts up
        if later < first:
            break
    child.send(ENTER)
    child.expect("RESULT UserReply")
    assert finish(child)[0] == 0


def test_with_on_timeout_wait_the_prompt_stays_open_after_the_deadline(tmp_path: Path) -> None:
    child = spawn(["-c", ASK_UNTIL, "wait", "1"], tmp_path)
    # Under load the prompt may be drawn after the deadline already: either line will do.
    _until_shown(child, r"the deadline passed \d+s ago; the question is still open")
    assert child.isalive()  # past the deadline: the prompt is still there
    child.send(DOWN + ENTER)  # and still answers
    child.expect(r"RESULT UserReply\(action='answer', text=None, choices=\('B',\)")
    assert finish(child)[0] == 0


def test_the_deadline_line_says_what_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.cli import terminal

    monkeypatch.setattr(terminal.time, "time", lambda: 1000.0)
    assert terminal._Deadline(1299.4, keep_open=True).line() == (
        "⏳ answer within 4m 59s (then the question stays open)"
    )
    assert terminal._Deadline(1030, keep_open=False).line() == (
        "⏳ answer within 30s (then the prompt closes)"
    )
    assert terminal._Deadline(988, keep_open=True).line() == (
        "⌛ the deadline passed 12s ago; the question is still open"
    )
    assert terminal._Deadline(988, keep_open=False).line() == "⌛ the deadline passed"
    assert terminal._Deadline(None, keep_open=True).line() == ""


def test_a_session_with_on_timeout_wait_keeps_its_prompt_open(tmp_path: Path, db_url: str) -> None:
    script = scenario(tmp_path, question="Which columns?", kind="single_select", options=COLUMNS)
    child = spawn(
        ["-m", "orchestrator", "run", "--script", str(script), "--ui", "terminal", "--json"]
        + ["--timeout", "1", "--on-timeout", "wait", "--db", db_url],
        tmp_path,
    )
    child.expect(SELECT_READY)
    _until_shown(child, r"the deadline passed \d+s ago; the question is still open")
    child.send(ENTER)  # past the 1 s deadline, the prompt still answers
    code, shown = finish(child)
    assert code == 0, shown
    view = the_session(db_url)
    assert view["orchestrator_state"]["user_clarification_response"] == "All visible columns"
    # The deadline's passing is in the log, before the answer (issue 44, item 8).
    log = json.loads(cli("log", view["session_id"], "--json", db=db_url).stdout)
    kinds = [event["kind"] for event in log]
    assert kinds.count("timeout") == 1 and kinds.index("timeout") < kinds.index("answer")
    (timeout,) = [event for event in log if event["kind"] == "timeout"]
    assert timeout["policy"] == "wait"


# -- without a terminal -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "typed", "stored"),
    [
        ({"question": "Which columns?"}, "\n  \nDate and amount\n", "Date and amount"),
        ({"question": "Which columns?", "kind": "single_select", "options": COLUMNS}, "2\n", None),
        (
            {"question": "Which columns?", "kind": "multi_select", "options": COLUMNS},
            "nope\n1, a fixed summary set\n",
            "All visible columns, A fixed summary set",
        ),
    ],
    ids=["free_text", "single_select", "multi_select"],
)
def test_piped_stdin_is_asked_line_by_line_and_stdout_is_one_json_document(
    tmp_path: Path, db_url: str, question: dict[str, Any], typed: str, stored: str | None
) -> None:
    script = scenario(tmp_path, **question)
    done = forkserver.run(
        [sys.executable, "-m", "orchestrator", "run", "--script", str(script)]
        + ["--ui", "terminal", "--json", "--db", db_url],
        input=typed,
        timeout=60,
        cwd=ROOT,
    )

    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)  # exactly one document: nothing else on stdout
    answer = stored or COLUMNS[1]["label"]
    assert view["orchestrator_state"]["user_clarification_response"] == answer
    assert f"✔ pm's question: {answer}" in done.stderr


def test_piped_stdin_that_ends_leaves_the_session_paused(tmp_path: Path, db_url: str) -> None:
    script = scenario(tmp_path, question="Which columns?")
    done = cli("run", "--script", str(script), "--ui", "terminal", "--json", db=db_url)

    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["status"] == "paused"
    assert "no answer (input closed)" in done.stderr


# -- pieces -------------------------------------------------------------------------------

QUESTION = {"question": "Which columns?", "asked_by": "pm"}


@pytest.mark.parametrize(
    ("reply", "closed", "line"),
    [
        (
            UserReply(choices=("All visible columns",)),
            False,
            "✔ pm's question: All visible columns",
        ),
        (UserReply(choices=("Date", "Amount")), False, "✔ pm's question: Date, Amount"),
        (UserReply(text="only the date"), False, "✔ pm's question: only the date"),
        (UserReply(action="decline"), False, "✔ pm's question: declined"),
        (UserReply(action="cancel"), False, "✖ pm's question: cancelled"),
        (None, False, "⌛ pm's question: no answer before the deadline"),
        (None, True, "⌛ pm's question: no answer (input closed)"),
    ],
)
def test_summary_line(reply: UserReply | None, closed: bool, line: str) -> None:
    assert summary_line(QUESTION, reply, closed=closed) == line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def terminal_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=80), out


def test_activity_names_the_running_agents_and_how_long_they_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    console, out = terminal_console()
    clock = Clock()
    with Activity(console, clock=clock) as activity:
        assert activity.text() == ""
        activity.start("developer-1")
        clock.now += 3
        activity.start("developer-2")
        clock.now += 9
        assert activity.text() == "developer-1, developer-2 working · 12s"
        activity.stop("developer-1")
        clock.now += 63
        assert activity.text() == "developer-2 working · 1m 12s"
        activity.stop("developer-2")
        assert activity.text() == ""
    assert "developer-1, developer-2 working" in out.getvalue()
    assert capsys.readouterr().out == ""  # the console's file only, never stdout


def test_activity_prints_nothing_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    activity = Activity(Console(file=out, force_terminal=False))
    activity.start("pm")
    assert activity.text().startswith("pm working")
    activity.stop("pm")
    activity.close()
    assert out.getvalue() == ""
    assert capsys.readouterr() == ("", "")


def test_activity_is_safe_to_use_from_many_threads() -> None:
    console, _ = terminal_console()
    activity = Activity(console)

    def work(n: int) -> None:
        for _ in range(20):
            activity.start(f"developer-{n}")
            time.sleep(0.001)
            activity.stop(f"developer-{n}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not any(thread.is_alive() for thread in threads), "deadlocked"
    activity.close()
    assert activity.text() == ""


def test_ctrl_c_at_a_line_by_line_prompt_leaves_the_question_open(
    tmp_path: Path, db_url: str
) -> None:
    import signal

    script = scenario(tmp_path, question="Which columns?")
    proc = forkserver.Popen(
        [sys.executable, "-m", "orchestrator", "run", "--script", str(script)]
        + ["--ui", "terminal", "--json", "--db", db_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        # A suite started in the background (`make test &`) runs with SIGINT ignored, and a
        # child inherits that: Python then installs no KeyboardInterrupt handler at all.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    seen = ""
    while "your answer: " not in seen:
        seen += proc.stderr.read(1)
    proc.send_signal(signal.SIGINT)
    # stdin stays open until the process is gone: communicate() would close it at once,
    # and the prompt could see the end of input before the signal (a different outcome).
    proc.wait(timeout=60)
    assert proc.stdout is not None and proc.stdin is not None
    out, rest = proc.stdout.read(), proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 3, seen + rest
    assert "left open, to answer later" in rest
    assert json.loads(out)["status"] == "paused"


def test_a_three_part_question_is_answered_one_part_after_another(
    tmp_path: Path, db_url: str
) -> None:
    """examples/multi-part-question.yaml with max_question_parts 3 and no scripted answer:
    the terminal asks part 1 (a select), part 2 and part 3 (free text), one after another,
    then reviews the answers (part 2 changed there), and commits one answer with a part
    per asker."""
    document = yaml.safe_load((EXAMPLES / "multi-part-question.yaml").read_text())
    document["settings"]["max_question_parts"] = 3
    del document["answers"], document["expect"]
    script = tmp_path / "three.yaml"
    script.write_text(yaml.safe_dump(document))
    child = run_at_terminal(script, db_url, tmp_path)
    child.expect(SELECT_READY)  # part 1: Redis (the first option) or Memcached
    child.send(DOWN + ENTER)
    child.expect(TEXT_READY)  # part 2
    child.send("us-east" + ENTER)
    child.expect(TEXT_READY)  # part 3
    child.send("5" + ENTER)
    child.expect("Review your answers")  # Send, then "Change part N" for each part
    child.expect(SELECT_READY)
    child.send(DOWN + DOWN + ENTER)
    child.expect(TEXT_READY)  # part 2 again
    child.send("ap-south" + ENTER)
    child.expect("Review your answers")
    child.expect(SELECT_READY)
    child.send(ENTER)  # "Send the 3 answers" is the first entry
    code, shown = finish(child)

    assert code == 0, shown
    assert "Change part 2: Which region do we deploy to? → us-east" in shown
    assert "Change part 2: Which region do we deploy to? → ap-south" in shown
    assert "part 1" in shown and "part 3" in shown
    state = the_session(db_url)["orchestrator_state"]
    assert state["user_clarification_response"] == "1. Memcached\n2. ap-south\n3. 5"


def test_esc_at_the_review_leaves_the_whole_question_open(tmp_path: Path) -> None:
    document = yaml.safe_load((EXAMPLES / "multi-part-question.yaml").read_text())
    del document["answers"], document["expect"]
    script = tmp_path / "two.yaml"
    script.write_text(yaml.safe_dump(document))
    db = f"sqlite:///{tmp_path / 'review.db'}"
    child = run_at_terminal(script, db, tmp_path)
    child.expect(SELECT_READY)
    child.send(ENTER)
    child.expect(TEXT_READY)
    child.send("us-east" + ENTER)
    child.expect("Review your answers")
    child.expect(SELECT_READY)
    child.send(ESC)
    code, shown = finish(child)
    assert code == 3, shown  # paused
    assert "the 2-part question: left open, to answer later (nothing was sent)" in shown
    session = the_session(db)
    assert session["status"] == "paused"
    assert session["orchestrator_state"]["user_clarification_response"] is None
    # The answers typed are not lost (issue 44, item 8): the command that sends them.
    sid = session["session_id"]
    sends = f"to send them: orchestrator resume {sid} --db {db} --part 1 --choice Redis "
    assert sends + "--part 2 --answer us-east" in " ".join(shown.split()), shown


def test_a_terminal_gone_at_the_review_leaves_the_question_open(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal closing at the multi-part review (prompt_toolkit raises EOFError)
    leaves the whole question open, as at a part's own prompt: nothing is sent and the
    run goes on to pause, instead of a traceback ending it."""
    from orchestrator.cli import terminal

    def gone(*_args: Any) -> Any:
        raise EOFError

    monkeypatch.setattr(terminal, "_run", gone)
    parts = [{"part": 1, "question": "Which cache?"}, {"part": 2, "question": "Which region?"}]
    replies = [UserReply(choices=("Redis",)), UserReply(text="us-east")]
    question = {"question": "two parts", "parts": parts}
    picked = terminal._review(question, parts, replies, terminal._Deadline(None, False))
    assert picked is terminal._LEAVE
    assert "left open, to answer later (nothing was sent)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("typed", "stored", "own"),
    [("Bth\n3\n", ("Both",), None), ("Bth\nBth\n", (), "Bth"), ("Neither\n", (), "Neither")],
    ids=["typo-then-its-number", "typo-given-again", "far-from-every-option"],
)
def test_a_typo_of_an_option_is_asked_about_before_it_is_ones_own_answer(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    typed: str,
    stored: tuple[str, ...],
    own: str | None,
) -> None:
    """Issue 44, item 8: stdin a pipe, a question that allows an answer of one's own:
    "Bth" was taken as the answer unasked. Now it is asked about ("did you mean"), and
    kept as one's own only when typed again; a text like no option is taken at once."""
    from orchestrator.cli.terminal import ask_by_line

    read, write = os.pipe()
    os.write(write, typed.encode())
    os.close(write)
    with os.fdopen(read) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        reply = ask_by_line(
            {
                "question": "Per key, per IP, or both?",
                "kind": "single_select",
                "options": [{"label": "Per key"}, {"label": "Per IP"}, {"label": "Both"}],
                "allow_other": True,
                "asked_by": "developer-1",
            },
            None,
        )
    assert reply == UserReply(choices=stored, text=own)
    asked = "did you mean 'Both' (3)? Type 3 to choose it, or type 'Bth' again"
    assert (asked in capsys.readouterr().err) == typed.startswith("Bth")
