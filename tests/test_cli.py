"""The command line through real processes: exit codes, JSON on stdout, bad input."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT, argv, cli

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
    result = cli("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--json", db=db_url)
    assert result.returncode == 3, result.stderr
    return as_json(result)["session_id"]


def test_run_completed_exit_0_with_one_json_document(db_url: str) -> None:
    result = cli("run", "--script", str(EXAMPLES / "answered-question.yaml"), "--json", db=db_url)
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
    result = cli("run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), db=db_url)
    assert result.returncode == 3
    session_id = result.stdout.split()[1].rstrip(":")
    assert "How often should the digest be sent?" in result.stdout
    assert f"orchestrator resume {session_id} --db {db_url} --answer 'YOUR ANSWER'" in result.stdout


def test_resume_answer_completes_and_status_list_log_answer(db_url: str, paused: str) -> None:
    result = cli("resume", paused, "--answer", "Weekly", "--json", db=db_url)
    assert result.returncode == 0, result.stderr
    assert as_json(result)["orchestrator_state"]["user_clarification_response"] == "Weekly"
    status = cli("status", paused, "--json", db=db_url)
    assert status.returncode == 0 and as_json(status)["status"] == "completed"
    listed = cli("list", "--status", "completed", "--json", db=db_url)
    assert [s["session_id"] for s in as_json(listed)] == [paused]
    log = as_json(cli("log", paused, "--json", db=db_url))
    kinds = [e["kind"] for e in log]
    assert kinds.count("question_surfaced") == 1 and kinds.count("answer") == 1
    assert kinds.index("question_surfaced") < kinds.index("answer")


def test_resume_without_answer_under_ui_none_exits_3_and_changes_nothing(
    db_url: str, paused: str
) -> None:
    before = dump(db_url)
    result = cli("resume", paused, "--ui", "none", "--json", db=db_url)
    assert result.returncode == 3
    assert as_json(result)["pending_question"]["question"] == "How often should the digest be sent?"
    assert "How often should the digest be sent?" in result.stderr
    assert dump(db_url) == before


def test_failed_session_exits_1(db_url: str, tmp_path: Path) -> None:
    scenario = write(
        tmp_path, "task: t\nagents:\n  pm:\n    - status: PLANNED\n      tasks: [{title: a}]\n"
    )
    result = cli("run", "--script", scenario, "--json", db=db_url)
    assert result.returncode == 1
    assert "ran out of replies for developer-1" in as_json(result)["error"]
    # status answers (exit 0) whatever the session's status
    assert cli("status", as_json(result)["session_id"], db=db_url).returncode == 0


def test_unmet_expect_exits_1_with_a_readable_difference(db_url: str, tmp_path: Path) -> None:
    text = (
        (EXAMPLES / "hard-cap.yaml")
        .read_text()
        .replace("fallbacks_injected: 1", "fallbacks_injected: 0")
    )
    result = cli("run", "--script", write(tmp_path, text), "--json", db=db_url)
    assert result.returncode == 1
    assert "expect.fallbacks_injected: expected 0, got 1" in result.stderr
    assert as_json(result)["status"] == "completed"


def test_cancel_exits_4(db_url: str, paused: str) -> None:
    result = cli("resume", paused, "--cancel", "--json", db=db_url)
    assert result.returncode == 4
    assert as_json(result)["status"] == "cancelled"


def test_scripted_cancel_exits_4(db_url: str, tmp_path: Path) -> None:
    text = (EXAMPLES / "pause-and-resume.yaml").read_text() + "answers:\n  - {action: cancel}\n"
    assert cli("run", "--script", write(tmp_path, text), db=db_url).returncode == 4


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
    result = cli(*(a.format(paused=paused) for a in args), "--json", db=db_url)
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
    result = cli("run", "--script", scenario, db=db_url)
    assert result.returncode == 2, result.stderr
    assert f"{scenario}: " in result.stderr and message in result.stderr
    assert "Traceback" not in result.stderr
    assert dump(db_url) == before


def test_answer_to_a_session_that_is_not_waiting_exits_2(db_url: str, paused: str) -> None:
    assert cli("resume", paused, "--answer", "Weekly", db=db_url).returncode == 0
    before = dump(db_url)
    result = cli("resume", paused, "--answer", "Daily", db=db_url)
    assert result.returncode == 2
    assert "completed" in result.stderr and "not waiting" in result.stderr
    assert dump(db_url) == before


def test_list_on_an_empty_database_prints_an_empty_list(db_url: str) -> None:
    result = cli("list", "--json", db=db_url)
    assert result.returncode == 0 and as_json(result) == []


def test_list_is_newest_first(db_url: str, paused: str) -> None:
    second = cli("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--json", db=db_url)
    listed = as_json(cli("list", "--json", db=db_url))
    assert [s["session_id"] for s in listed] == [as_json(second)["session_id"], paused]


def test_environment_variable_and_default_database(isolated_home: Path, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "ORCHESTRATOR_DB": str(tmp_path / "env.db")}
    result = cli("run", "--script", str(EXAMPLES / "hard-cap.yaml"), "--json", env=env)
    assert result.returncode == 0 and (tmp_path / "env.db").exists()
    default = cli("list", "--json")  # no --db, no env: the user data dir under our fake HOME
    assert default.returncode == 0 and as_json(default) == []
    assert not list(isolated_home.rglob("orchestrator.db"))  # read commands create nothing


def test_db_upgrade(db_url: str) -> None:
    result = cli("db", "upgrade", "--json", db=db_url)
    from orchestrator.store.schema import HEAD_REVISION

    assert result.returncode == 0 and as_json(result)["revision"] == HEAD_REVISION


def test_bad_database_url_exits_2(tmp_path: Path) -> None:
    result = cli("list", db="nosuchdialect://x")
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
    result = cli("--help")
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
    result = subprocess.run(
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
    chosen = subprocess.run(
        command, input="2\n", capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert chosen.returncode == 0, chosen.stderr
    assert as_json(chosen)["orchestrator_state"]["user_clarification_response"] == "Beta"
    closed = subprocess.run(
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
    result = cli("run", "--script", str(EXAMPLES / example), "--ui", "none", "--json", db=db_url)
    expected = 3 if example in PAUSING_EXAMPLES else 0
    assert result.returncode == expected, result.stderr
    assert as_json(result)["status"] == ("paused" if expected == 3 else "completed")
