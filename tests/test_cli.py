"""The command line through real processes: exit codes, JSON on stdout, bad input."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import forkserver
import pytest

from tests.conftest import EXAMPLES, ROOT, argv, invoke

TABLES = ("sessions", "orchestrator_state", "events", "checkpoints", "writes")


def dump(db_url: str) -> dict[str, list[Any]]:
    """Every row of our tables and LangGraph's, to prove a command changed nothing."""
    path = db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return {
            t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in TABLES if t in present
        }


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout)  # fails if stdout holds anything but one document


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def paused(db_url: str) -> str:
    result = invoke("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--json", db=db_url)
    assert result.returncode == 3, result.stderr
    return as_json(result)["session_id"]


def test_run_completed_exit_0_with_one_json_document(db_url: str) -> None:
    result = invoke(
        "run", "--script", str(EXAMPLES / "answered-question.yaml"), "--json", db=db_url
    )
    assert result.returncode == 0, result.stderr
    view = as_json(result)
    assert view["status"] == "completed"
    assert set(view) >= {
        "session_id",
        "status",
        "task",
        "orchestrator_state",
        "pending_question",
        "questions_surfaced",
        "fallbacks_injected",
        "tasks",
        "summary",
        "error",
    }
    assert view["tasks"] == [
        {
            "number": 1,
            "title": "Export endpoint",
            "status": "done",
            "summary": "GET /reports/export.csv streams the visible columns",
        },
        {
            "number": 2,
            "title": "Export button",
            "status": "done",
            "summary": "Export button added next to the filters",
        },
    ]
    assert "QUESTION pm asks: Which columns" in result.stderr  # progress goes to stderr
    assert "ANSWER (script): All visible columns" in result.stderr


def test_paused_exit_3_prints_the_question_and_the_exact_resume_command(db_url: str) -> None:
    result = invoke("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), db=db_url)
    assert result.returncode == 3
    session_id = result.stdout.split()[1].rstrip(":")
    assert "How often should the digest be sent?" in result.stderr  # once, as it is surfaced
    assert "pm's question is above" in result.stdout
    assert f"orchestrator resume {session_id} --db {db_url} --answer 'YOUR ANSWER'" in result.stdout


def test_resume_answer_completes_and_status_list_log_answer(db_url: str, paused: str) -> None:
    result = invoke("resume", paused, "--answer", "Weekly", "--json", db=db_url)
    assert result.returncode == 0, result.stderr
    assert as_json(result)["orchestrator_state"]["user_clarification_response"] == "Weekly"
    status = invoke("status", paused, "--json", db=db_url)
    assert status.returncode == 0 and as_json(status)["status"] == "completed"
    listed = invoke("list", "--status", "completed", "--json", db=db_url)
    assert [s["session_id"] for s in as_json(listed)] == [paused]
    log = as_json(invoke("log", paused, "--json", db=db_url))
    kinds = [e["kind"] for e in log]
    assert kinds.count("question_surfaced") == 1 and kinds.count("answer") == 1
    assert kinds.index("question_surfaced") < kinds.index("answer")


def test_resume_without_answer_under_ui_none_exits_3_and_changes_nothing(
    db_url: str, paused: str
) -> None:
    before = dump(db_url)
    result = invoke("resume", paused, "--ui", "none", "--json", db=db_url)
    assert result.returncode == 3
    assert as_json(result)["pending_question"]["question"] == "How often should the digest be sent?"
    assert "How often should the digest be sent?" in result.stderr
    assert dump(db_url) == before


def test_failed_session_exits_1(db_url: str, tmp_path: Path) -> None:
    scenario = write(
        tmp_path, "task: t\nagents:\n  pm:\n    - status: PLANNED\n      tasks: [{title: a}]\n"
    )
    result = invoke("run", "--script", scenario, "--json", db=db_url)
    assert result.returncode == 1
    assert "ran out of replies for developer-1" in as_json(result)["error"]
    # status answers (exit 0) whatever the session's status
    assert invoke("status", as_json(result)["session_id"], db=db_url).returncode == 0


def test_unmet_expect_exits_1_with_a_readable_difference(db_url: str, tmp_path: Path) -> None:
    text = (
        (EXAMPLES / "hard-cap.yaml")
        .read_text()
        .replace("fallbacks_injected: 1", "fallbacks_injected: 0")
    )
    result = invoke("run", "--script", write(tmp_path, text), "--json", db=db_url)
    assert result.returncode == 1
    assert "expect.fallbacks_injected: expected 0, got 1" in result.stderr
    assert as_json(result)["status"] == "completed"


def test_cancel_exits_4(db_url: str, paused: str) -> None:
    result = invoke("resume", paused, "--cancel", "--json", db=db_url)
    assert result.returncode == 4
    assert as_json(result)["status"] == "cancelled"


def test_scripted_cancel_exits_4(db_url: str, tmp_path: Path) -> None:
    text = (EXAMPLES / "pause-and-resume.yaml").read_text() + "answers:\n  - {action: cancel}\n"
    assert invoke("run", "--script", write(tmp_path, text), db=db_url).returncode == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("resume", "nope", "--answer", "x"), "no session with id 'nope'"),
        (("status", "nope"), "no session with id 'nope'"),
        (("log", "nope"), "no session with id 'nope'"),
        (("resume", "{paused}", "--choice", "A"), "takes a free-text answer"),
        (("resume", "{paused}", "--answer", "  "), "the answer is empty"),
        (("resume", "{paused}", "--answer", "x", "--decline"), "at most one of"),
        (("run",), "nothing to run the agents with"),
        (("run", "do it"), "ORCHESTRATOR_MODEL=PROVIDER:NAME"),
        (("run", "do it", "--model", "groq:llama-3.1-8b"), "pip install langchain-groq"),
        (("run", "do it", "--model", "gpt-4o-mini"), "expected PROVIDER:NAME"),
        (("run", "do it", "--model", "nosuch:model"), "cannot use model 'nosuch:model'"),
        (("run", "--model", "openai:x"), "give the TASK"),
        (("run", "t", "--model", "openai:x", "--prompts", "nowhere"), "--prompts nowhere: not a"),
        (("run", "t", "--model", "openai:x", "--workdir", "README.md"), "is not a folder"),
        (("run", "--script", "examples/hard-cap.yaml", "--model", "openai:x"), "not both"),
        (("run", "--script", "missing.yaml"), "missing.yaml: no such scenario file"),
    ],
)
def test_bad_input_exits_2_names_the_problem_and_changes_nothing(
    db_url: str, paused: str, args: tuple[str, ...], message: str
) -> None:
    before = dump(db_url)
    result = invoke(*(a.format(paused=paused) for a in args), "--json", db=db_url)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert message in as_json(result)["error"]
    assert "Traceback" not in result.stderr
    assert dump(db_url) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "task: t\nagents:\n  pm:\n    - status: DONE\n      summary: s\n",
            "agents.pm[0]: status 'DONE' is not a reply this agent can give",
        ),
        (
            "task: t\nagents:\n  pm:\n    - status: COMPLETE\n      summary: s\nextra: 1\n",
            "extra: unknown key",
        ),
        ("task: t\nagents:\n  pm:\n    - status: PLANNED\n", "agents.pm[0].tasks: required key"),
        ("task: t\nagents:\n  pm: []\n  dev: []\n", "agents.dev: unknown agent"),
        (
            "task: t\nagents:\n  pm:\n    - status: NEEDS_CLARIFICATION\n      question: q\n"
            "      kind: single_select\n      options: [{label: A}, {label: B}]\nanswers: [C]\n",
            "answers[0]: 'C' is not one of the options",
        ),
        (
            "task: t\nagents:\n  pm:\n    - status: NEEDS_CLARIFICATION\n      question: q\n"
            "      uncertainty: 150\n",
            "agents.pm[0].uncertainty: Input should be less than or equal to 100",
        ),
        ("task: [unclosed\n", "invalid YAML"),
        ("- just a list\n", "expected a mapping"),
        (
            "task: t\nagents: {pm: []}\nexpect: {questions_surfaced: lots}\n",
            "expect.questions_surfaced",
        ),
    ],
)
def test_malformed_scenario_exits_2_with_file_path_and_expectation(
    db_url: str, paused: str, tmp_path: Path, text: str, message: str
) -> None:
    before = dump(db_url)
    scenario = write(tmp_path, text)
    result = invoke("run", "--script", scenario, db=db_url)
    assert result.returncode == 2, result.stderr
    assert f"{scenario}: " in result.stderr and message in result.stderr
    assert "Traceback" not in result.stderr
    assert dump(db_url) == before


def test_answer_to_a_session_that_is_not_waiting_exits_2(db_url: str, paused: str) -> None:
    assert invoke("resume", paused, "--answer", "Weekly", db=db_url).returncode == 0
    before = dump(db_url)
    result = invoke("resume", paused, "--answer", "Daily", db=db_url)
    assert result.returncode == 2
    assert "completed" in result.stderr and "not waiting" in result.stderr
    assert dump(db_url) == before


def test_list_on_an_empty_database_prints_an_empty_list(db_url: str) -> None:
    result = invoke("list", "--json", db=db_url)
    assert result.returncode == 0 and as_json(result) == []


def test_list_is_newest_first(db_url: str, paused: str) -> None:
    second = invoke("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--json", db=db_url)
    listed = as_json(invoke("list", "--json", db=db_url))
    assert [s["session_id"] for s in listed] == [as_json(second)["session_id"], paused]


def test_environment_variable_and_default_database(isolated_home: Path, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "ORCHESTRATOR_DB": str(tmp_path / "env.db")}
    result = invoke("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--json", env=env)
    assert result.returncode == 0 and (tmp_path / "env.db").exists()
    default = invoke("list", "--json")  # no --db, no env: the user data dir under our fake HOME
    assert default.returncode == 0 and as_json(default) == []
    assert not list(isolated_home.rglob("orchestrator.db"))  # reading creates nothing
    started = invoke("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--json")
    assert started.returncode == 0, started.stderr
    assert list(isolated_home.rglob("orchestrator.db"))  # run creates the default, folders too


def test_db_upgrade(db_url: str) -> None:
    result = invoke("db", "upgrade", "--json", db=db_url)
    from orchestrator.store.schema import HEAD_REVISION

    assert result.returncode == 0 and as_json(result)["revision"] == HEAD_REVISION


def test_bad_database_url_exits_2(tmp_path: Path) -> None:
    result = invoke("list", db="nosuchdialect://x")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "nosuchdialect" in result.stderr


def test_read_commands_do_not_import_langgraph(db_url: str, paused: str) -> None:
    # pydantic is not in the list: Typer (0.29) imports it itself.
    probe = (
        "import sys\n"
        "from orchestrator.cli import app\n"
        "for args in (['status', sys.argv[1]], ['list'], ['log', sys.argv[1]]):\n"
        "    try:\n"
        "        app(args + ['--json', '--db', sys.argv[2]])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), exc.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'langgraph', 'langchain_core',"
        " 'alembic', 'yaml'})\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, paused, db_url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stderr


def test_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.returncode == 0
    for command in ("run", "resume", "status", "list", "log", "db"):
        assert command in result.stdout


def test_ui_terminal_prompts_for_the_answer_on_stderr(db_url: str) -> None:
    command = argv(
        "run",
        "--script",
        str(EXAMPLES / "pause-and-resume.yaml"),
        "--ui",
        "terminal",
        "--json",
        db=db_url,
    )
    result = forkserver.run(
        command, input="Weekly\n", capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "your answer" in result.stderr
    assert as_json(result)["orchestrator_state"]["user_clarification_response"] == "Weekly"


def test_ui_terminal_select_by_number_and_eof_leaves_it_paused(db_url: str, tmp_path: Path) -> None:
    text = (
        "task: t\nagents:\n  pm:\n    - status: NEEDS_CLARIFICATION\n      question: Which?\n"
        "      kind: single_select\n      options: [{label: Alpha}, {label: Beta}]\n"
        "    - status: COMPLETE\n      summary: ok\n"
    )
    scenario = write(tmp_path, text)
    command = argv("run", "--script", scenario, "--ui", "terminal", "--json", db=db_url)
    chosen = forkserver.run(
        command, input="2\n", capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert chosen.returncode == 0, chosen.stderr
    assert as_json(chosen)["orchestrator_state"]["user_clarification_response"] == "Beta"
    closed = forkserver.run(
        command, input="", capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert closed.returncode == 3, closed.stderr
    assert as_json(closed)["status"] == "paused"


PAUSING_EXAMPLES = {"pause-and-resume.yaml", "choose-at-the-terminal.yaml"}


@pytest.mark.backends()
@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_shipped_example_runs_as_documented(db_url: str, example: str) -> None:
    """The examples (the contract's own among them) keep working; those that ask with no
    scripted answer pause (exit 3) under --ui none, the others meet their `expect`."""
    result = invoke("run", "--script", str(EXAMPLES / example), "--ui", "none", "--json", db=db_url)
    expected = 3 if example in PAUSING_EXAMPLES else 0
    assert result.returncode == expected, result.stderr
    assert as_json(result)["status"] == ("paused" if expected == 3 else "completed")


# -- sharp edges (issue 8): the process boundary matters for these -------------------------


def test_a_closed_pipe_never_stops_the_session(db_url: str) -> None:
    """`orchestrator run ... 2>&1 | head -2`: the reader goes away after two lines; the
    session still runs to its end and the exit code is the session's."""
    command = argv("run", "--script", str(EXAMPLES / "answered-question.yaml"), db=db_url)
    proc = forkserver.Popen(
        [*command, "--ui", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    first = [proc.stdout.readline(), proc.stdout.readline()]
    proc.stdout.close()  # like `head -2` exiting
    assert proc.wait(timeout=120) == 0
    assert re.match(rb"session [0-9a-f]+ started: ", first[0]), first
    listed = as_json(invoke("list", "--json", db=db_url))
    assert [s["status"] for s in listed] == ["completed"]


def test_a_closed_stdout_under_json_keeps_the_exit_code(db_url: str) -> None:
    proc = forkserver.Popen(
        argv("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--json", db=db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 3  # paused, as without the pipe
    assert [s["status"] for s in as_json(invoke("list", "--json", db=db_url))] == ["paused"]


def test_arguments_that_are_not_utf8_exit_2(db_url: str, paused: str) -> None:
    before = dump(db_url)
    command = [os.fsencode(a) for a in argv("resume", paused, "--json", db=db_url)]
    result = subprocess.run(
        [*command, b"--answer", b"caf\xe9"], capture_output=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr and b"not valid UTF-8" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2
    assert dump(db_url) == before


def test_a_users_own_agents_package_does_not_break_the_cli(tmp_path: Path, db_url: str) -> None:
    for name in ("agents", "skills", "migrations"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('the user’s own')\n")
    script = Path(sys.executable).parent / "orchestrator"
    result = subprocess.run(
        [str(script), "run", "--script", str(EXAMPLES / "answered-question.yaml")]
        + ["--json", "--db", db_url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert as_json(result)["status"] == "completed"


def test_version_help_and_plain_orchestrator_exit_0() -> None:
    from orchestrator import __version__

    version = invoke("--version")
    assert version.returncode == 0 and __version__ in version.stdout
    plain = invoke()
    assert plain.returncode == 0 and "Commands" in plain.stdout and plain.stderr == ""
    short = invoke("run", "-h")
    assert short.returncode == 0 and "--script" in short.stdout
    assert "[default: 5]" in short.stdout  # the Settings defaults, shown one way
    shown = " ".join(short.stdout.replace("│", " ").split())  # the help, unwrapped
    for default in ("[default: tools]", "[default: 180]", "[default: 4096]", "[default: 12]"):
        assert default in shown, default  # and the chat-model options' defaults the same way
    assert invoke("db").returncode == 0


def test_shell_completion_completes_commands() -> None:
    env = {
        **os.environ,
        "_ORCHESTRATOR_COMPLETE": "complete_bash",
        "COMP_WORDS": "orchestrator li",
        "COMP_CWORD": "1",
    }
    script = str(Path(sys.executable).parent / "orchestrator")
    result = subprocess.run([script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0 and result.stdout.split() == ["list"]
    assert "--install-completion" in invoke("--help").stdout


# -- sharp edges, in-process (tests.test_bad_input.invoke: the entry point, no process) ------


@pytest.mark.parametrize(
    ("pick", "label"),
    [("2", "Per IP address"), ("per ip ADDRESS", "Per IP address"), ("Both", "Both")],
)
def test_choice_takes_a_label_or_a_number(db_url: str, pick: str, label: str) -> None:
    from tests.test_bad_input import invoke

    scenario = str(EXAMPLES / "choose-at-the-terminal.yaml")
    session = invoke("run", "--script", scenario, "--json", "--db", db_url).document()
    result = invoke("resume", session["session_id"], "--choice", pick, "--json", "--db", db_url)
    assert result.code == 0, result.stderr
    state = result.document()["orchestrator_state"]
    assert state["user_clarification_response"] == label
    assert state["answer_status"] == "selected"


def test_a_mistyped_choice_lists_the_options_and_the_closest(db_url: str) -> None:
    from tests.test_bad_input import invoke

    scenario = str(EXAMPLES / "choose-at-the-terminal.yaml")
    session = invoke("run", "--script", scenario, "--json", "--db", db_url).document()
    before = dump(db_url)
    result = invoke("resume", session["session_id"], "--choice", "Per IP adress", "--db", db_url)
    assert result.code == 2
    assert "1. Per API key; 2. Per IP address; 3. Both" in result.stderr
    assert "Did you mean 'Per IP address'?" in result.stderr
    assert "--answer" in result.stderr  # the question allows an answer of one's own
    assert dump(db_url) == before
    own = invoke("resume", session["session_id"], "--answer", "Per tenant", "--db", db_url)
    assert own.code == 0, own.stderr


def test_list_is_a_table_and_waiting_means_paused(db_url: str, paused: str) -> None:
    from tests.test_bad_input import invoke

    invoke("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--db", db_url)
    table = invoke("list", "--db", db_url).stdout.splitlines()
    assert table[0].split() == [
        "ID",
        "STATUS",
        "AGE",
        "ASKS",
        "QUESTION",
        "/",
        "OUTCOME",
        "DEADLINE",
    ]
    row = next(line for line in table if line.startswith(paused))
    assert "paused" in row and "s ago" in row and "pm" in row and "How often" in row
    assert "in 4 min" in row or "in 5 min" in row
    waiting = invoke("list", "--status", "waiting", "--json", "--db", db_url).document()
    assert [s["session_id"] for s in waiting] == [paused]
    assert waiting[0]["created_at"].endswith("Z")  # ISO in JSON


def test_relative_times() -> None:
    from datetime import UTC, datetime

    from orchestrator.present.render import relative

    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    assert relative("2026-01-02T09:00:00Z", now) == "3 h ago"
    assert relative("2026-01-02T12:04:30Z", now) == "in 4 min"
    assert relative("2025-12-30T12:00:00Z", now) == "3 d ago"
    assert relative("2026-01-02T11:59:58Z", now) == "2 s ago"
    assert relative(None, now) == ""


def test_status_of_a_paused_session_prints_the_answer_command(db_url: str, paused: str) -> None:
    from tests.test_bad_input import invoke

    shown = invoke("status", paused, "--db", db_url)
    assert shown.code == 0
    assert f"orchestrator resume {paused} --db {db_url} --answer 'YOUR ANSWER'" in shown.stdout
    assert shown.stdout.count("How often should the digest be sent?") == 1


def test_run_ui_none_prints_the_question_once(db_url: str) -> None:
    from tests.test_bad_input import invoke

    result = invoke("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--db", db_url)
    assert result.code == 3
    assert (result.stdout + result.stderr).count("How often should the digest be sent?") == 1
    assert "orchestrator resume" in result.stdout


def test_unmet_expect_is_in_the_json_document(db_url: str, tmp_path: Path) -> None:
    from tests.test_bad_input import invoke

    text = (
        (EXAMPLES / "hard-cap.yaml")
        .read_text()
        .replace("fallbacks_injected: 1", "fallbacks_injected: 0")
    )
    result = invoke("run", "--script", write(tmp_path, text), "--json", "--db", db_url)
    assert result.code == 1
    outcome = result.document()["expect"]
    assert outcome["held"] is False
    assert outcome["unmet"] == ["expect.fallbacks_injected: expected 0, got 1"]
    held = invoke("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--json", "--db", db_url)
    assert held.code == 0 and held.document()["expect"] == {"held": True, "unmet": []}


def test_cancel_command_stops_a_waiting_session(db_url: str, paused: str) -> None:
    from tests.test_bad_input import invoke

    result = invoke("cancel", paused, "--json", "--db", db_url)
    assert result.code == 0, result.stderr
    assert result.document()["status"] == "cancelled"
    again = invoke("cancel", paused, "--json", "--db", db_url)
    assert again.code == 2 and "cancelled" in again.document()["error"]


def test_a_stalled_session_says_how_to_retry_or_stop() -> None:
    from orchestrator.present.render import event_line, list_table, session_text

    view = {
        "session_id": "abc123",
        "status": "running",
        "task": "Add a health endpoint",
        "orchestrator_state": {"clarification_question": None},
        "pending_question": None,
        "questions_surfaced": 0,
        "fallbacks_injected": 0,
        "stalled": True,
        "last_error": "openai: connection refused",
        "created_at": "2026-01-01T00:00:00Z",
    }
    text = session_text(view)
    assert "stalled (no process is driving it): openai: connection refused" in text
    assert "retry with: orchestrator resume abc123   stop with: orchestrator cancel abc123" in text
    # Given --db, the commands name it (its password masked) so that they run as printed.
    url = "postgresql://bob:hunter2@db.example/orch"
    text = session_text(view, url)
    masked = "--db 'postgresql://bob:***@db.example/orch'"
    assert f"retry with: orchestrator resume abc123 {masked}" in text
    assert f"stop with: orchestrator cancel abc123 {masked}" in text and "hunter2" not in text
    late = {"response": "Redis", "needs_review": True, "reconciled": None, "checks": []}
    ended = view | {"status": "completed", "stalled": False, "needs_review": True}
    text = session_text(ended | {"late_answer": late}, url)
    assert f"reconcile with: orchestrator resume abc123 {masked} --reconcile" in text
    assert "stalled: openai: connection refused" in list_table([view])
    failed = {"kind": "agent_failed", "agent": "pm", "error": "connection refused"}
    assert event_line(failed) == "pm's call failed: connection refused"


def test_install_hints_work_from_where_the_user_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from orchestrator import install_hints

    monkeypatch.chdir(ROOT)
    in_checkout = install_hints.install_extra("openai")
    assert in_checkout.endswith("install -e '.[openai]'")
    monkeypatch.chdir(tmp_path)
    assert install_hints.install_extra("openai").endswith(f"install -e '{ROOT}[openai]'")
    monkeypatch.setattr(install_hints, "_checkout", lambda: None)  # installed from PyPI
    assert install_hints.install_extra("openai") == "pip install 'gated-orchestrator[openai]'"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'name = "{install_hints.DISTRIBUTION}"' in pyproject


def test_a_session_run_on_elsewhere_meanwhile_is_exit_2_not_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import typer

    from orchestrator.cli.output import finish

    view = {"session_id": "abc", "status": "running", "stalled": False}
    with pytest.raises(typer.Exit) as raised:
        finish(True, view, None)
    assert raised.value.exit_code == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["exit_code"] == 2 and "another process" in out.err


def test_people_facing_times_and_words_are_for_people(tmp_path: Path) -> None:
    """Issue 44, item 8: `status` and `log` showed raw ISO times with microseconds
    (`2026-11-27T11:52:29.601146Z`) and internal words (`for_pm`, `pm#3`)."""
    db = str(tmp_path / "words.db")
    ran = invoke("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--ui", "none",
                 "--timeout", "600", db=db)  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    sid = as_json(invoke("list", "--json", db=db))[0]["session_id"]
    iso = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|\.\d{6}")
    status = invoke("status", sid, db=db).stdout
    assert re.search(r"answer by: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in \d+ min\)", status)
    assert not iso.search(status), status
    assert invoke("resume", sid, "--decline", db=db).returncode == 0
    late = invoke("resume", sid, "--answer", "Weekly", db=db).stdout
    assert "for the PM to judge: pm: " in late and "for_pm" not in late, late
    log = invoke("log", sid, db=db).stdout
    assert not iso.search(log), log
    assert re.match(
        rf"session {sid}, started \d+ s ago \(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", log
    )
