"""`orchestrator eval`: the reference policies score exactly what they must on the shipped
set, the simulated user answers from the hidden specification, and a chat model reached
through the OpenAI stub server is scored like any other (no network, no hosted model)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator.evals.cases import EvalCase, load_cases, parse_cases
from orchestrator.evals.metrics import score_case, totals
from orchestrator.evals.runner import Config, configs_for, run_eval
from orchestrator.evals.user import DONT_KNOW, SimulatedUser
from tests.conftest import invoke
from tests.openai_stub import serve

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "examples" / "eval"
POLICIES = ("eval:never-ask", "eval:always-ask", "eval:oracle")

CASE: dict[str, Any] = {
    "name": "export",
    "task": "Add an export of the reports",
    "spec": "A CSV file, written by the export endpoint.",
    "blockers": [
        {
            "id": "storage",
            "fact": "Which storage should the export use?",
            "dimension": "goal",
            "critical": True,
            "answer": "A CSV file",
            "keywords": ["storage"],
            "options": ["CSV file", "S3 bucket"],
            "option": "CSV file",
        },
        {
            "id": "button",
            "fact": "Where does the button go?",
            "dimension": "context",
            "critical": False,
            "answer": "Next to the filters",
            "keywords": ["button"],
        },
    ],
    "outcome": ["export"],
}
CONTROL: dict[str, Any] = {
    "name": "control",
    "task": "Write the export to export.csv",
    "spec": "As said.",
    "outcome": ["export"],
}


def test_the_shipped_set_covers_every_dimension_critical_benign_and_controls() -> None:
    cases = load_cases([SHIPPED])
    assert len(cases) >= 30
    critical = [b for c in cases for b in c.critical]
    assert {b.dimension for b in critical} == {"goal", "constraint", "input", "context"}
    assert any(c.blockers and not c.critical for c in cases)  # benign only
    assert sum(c.is_control for c in cases) >= 5


def test_reference_policies_score_exactly_on_the_shipped_set(db_url: str) -> None:
    cases = load_cases([SHIPPED])
    critical = sum(1 for c in cases if c.critical)
    report = run_eval(cases, configs_for(POLICIES), jobs=2, db=db_url)
    never, always, oracle = (part.total for part in report.configs)
    assert (never["ask_rate"], never["recall"], never["ask_f1"]) == (0.0, 0.0, 0.0)
    assert never["over_ask_rate"] == 0.0 and never["timing"] is None
    assert never["outcome"] == round((len(cases) - critical) / len(cases), 4)
    assert (always["ask_rate"], always["precision"], always["recall"]) == (1.0, 0.0, 0.0)
    assert always["over_ask_rate"] == 1.0  # every control is over-asked
    assert always["ask_f1"] == 0.0 and always["timing"] == 0.0
    assert always["questions"] == len(cases)
    assert (oracle["precision"], oracle["recall"], oracle["ask_f1"]) == (1.0, 1.0, 1.0)
    assert oracle["over_ask_rate"] == 0.0 and oracle["timing"] == 0.0
    assert oracle["outcome"] == 1.0 and oracle["questions"] == critical
    assert all(t["failed"] == 0 and t["late_goal_questions"] == 0 for t in (never, always, oracle))


def test_the_simulated_user_answers_from_the_hidden_spec() -> None:
    (case,) = parse_cases(CASE, "export.yaml")
    user = SimulatedUser(case)
    select = {"question": "Which STORAGE?", "kind": "single_select"}
    offered = {**select, "options": [{"label": "S3 bucket"}, {"label": "csv file"}]}
    assert user(offered).choices == ("csv file",)
    assert user({"question": "Which storage?"}).text == "A CSV file"
    assert user({"question": "Where does the button go?"}).text == "Next to the filters"
    assert user({"question": "Anything else?"}).text == DONT_KNOW
    other = {"question": "Which colour?", "kind": "single_select", "options": [{"label": "red"}]}
    assert user(other).action == "decline"


def test_timing_is_the_share_of_the_plan_done_and_late_goal_questions() -> None:
    (case,) = parse_cases(CASE, "export.yaml")
    plan = {"kind": "agent_reply", "reply": {"status": "PLANNED", "tasks": [{"title": "a"}] * 4}}
    done = {"kind": "agent_reply", "reply": {"status": "DONE", "summary": "did the export"}}
    asked = {"kind": "question_surfaced", "question": {"question": "Which storage?"}}
    events = [plan, done, done, asked, done, done]  # asked after 2 of the 4 tasks
    doc = {"status": "completed", "tasks": [], "summary": "x", "session_id": "s-1"}
    result = score_case(case, doc, events)
    assert (result.timing, result.late_goal, result.outcome) == (2 / 4, 1, True)
    assert (result.precision, result.recall, result.ask_f1) == (1.0, 1.0, 1.0)
    assert result.to_json()["session_id"] == "s-1"
    assert result.to_json()["asked"] == ["Which storage?"]
    # a question before any plan, however many calls came before it, is at 0
    pm = {"kind": "agent_reply", "reply": {"status": "NEEDS_CLARIFICATION"}}
    early = score_case(case, doc, [pm, pm, pm, asked, plan, done])
    assert (early.timing, early.late_goal) == (0.0, 0)


@pytest.mark.parametrize(
    ("question", "about"),
    [
        ("Which storage should the export use?", "storage"),
        ("Where does the button go?", "button"),
        # keywords start a word (stems match, "buttons"), substrings do not
        ("Should I unbutton the restorage?", None),
        # one question bundling several asks is about none of them
        ("Which storage should I use, and where does the button go?", None),
        ("Which storage? Where does the button go?", None),
    ],
)
def test_a_question_is_about_a_blocker_only_when_it_asks_about_it(
    question: str, about: str | None
) -> None:
    (case,) = parse_cases(CASE, "export.yaml")
    found = case.blocker_of({"question": question})
    assert (found.id if found else None) == about


def test_generic_words_cannot_be_keywords() -> None:
    bad = {**CASE, "blockers": [{**CASE["blockers"][0], "keywords": ["storage", "which"]}]}
    with pytest.raises(ValueError, match="'which': a word any question may contain"):
        parse_cases(bad, "bad.yaml")


# A question asked in every case with no knowledge of it, the kinds: one bundling
# many topics, and one stuffed with every keyword of the set.
MULTI_TOPIC = (
    "Which branch should I use, what information must the output carry, where should it "
    "live and run, when does it trigger, how many items, and which names, limits, users, "
    "roles and defaults apply?"
)


def test_a_fixed_question_cannot_beat_never_ask(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orchestrator.agents.reference as reference

    cases = load_cases([SHIPPED])
    stuffed = "What about " + ", ".join(
        sorted({k for c in cases for b in c.blockers for k in b.keywords})
    )
    never = run_eval(cases, configs_for(["eval:never-ask"]), db=db_url).configs[0].total
    for question in (MULTI_TOPIC, stuffed, stuffed + "?"):
        monkeypatch.setattr(reference, "BROAD_QUESTION", question)
        gaming = run_eval(cases, configs_for(["eval:always-ask"]), db=db_url).configs[0].total
        assert gaming["questions"] == len(cases)  # it did ask, everywhere
        assert gaming["ask_f1"] <= never["ask_f1"], question
        assert gaming["outcome"] <= never["outcome"], question


def test_a_failed_session_is_a_failure_not_a_clean_control() -> None:
    (control,) = parse_cases(CONTROL, "control.yaml")
    (case,) = parse_cases(CASE, "export.yaml")
    failed = score_case(control, {"status": "failed", "error": "pm gave no valid reply"}, [])
    missed = score_case(case, {"status": "failed"}, [])
    assert failed.failed and failed.to_json()["over_ask_rate"] is None
    total = totals([failed, missed])
    assert total["over_ask_rate"] is None  # no control completed: nothing to say
    assert (total["failed"], total["failed_rate"], total["ask_f1"]) == (2, 1.0, 0.0)
    clean = score_case(control, {"status": "completed"}, [])
    assert totals([failed, clean])["over_ask_rate"] == 0.0


def test_cases_are_checked_and_every_malformed_file_is_named(tmp_path: Path) -> None:
    two = {**CASE, "blockers": [CASE["blockers"][0], {**CASE["blockers"][1], "critical": True}]}
    (tmp_path / "two.yaml").write_text(json.dumps(two))
    (tmp_path / "dim.yaml").write_text(json.dumps({**CONTROL, "blockers": [{"id": "x"}]}))
    result = invoke("eval", str(tmp_path), "--model", "eval:oracle", "--json")
    assert result.returncode == 2
    message = json.loads(result.stdout)["error"]
    assert "two.yaml" in message and "at most one blocker may be critical" in message
    assert "dim.yaml" in message and "blockers.0.dimension" in message


def test_an_unknown_reference_policy_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(json.dumps(CONTROL))
    result = invoke("eval", str(tmp_path), "--model", "eval:sometimes-ask")
    assert result.returncode == 2 and "eval:oracle" in result.stderr


def test_the_command_prints_json_junit_and_a_self_contained_html_report(
    tmp_path: Path, db_url: str
) -> None:
    import re

    from orchestrator.evals.report import DOCS

    (tmp_path / "cases.yaml").write_text(json.dumps({"cases": [CASE, CONTROL]}))
    html, junit = tmp_path / "out" / "report.html", tmp_path / "junit.xml"
    result = invoke(
        "eval", str(tmp_path / "cases.yaml"), "--model", "eval:oracle", "--model",
        "eval:always-ask", "--json", "--report", str(html), "--junit-xml", str(junit), db=db_url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    oracle, always = doc["configs"]
    assert oracle["label"] == "eval:oracle"
    for key in ("ask_rate", "precision", "recall", "ask_f1", "over_ask_rate", "outcome"):
        assert key in oracle["total"] and key in oracle["cases"][0]
    assert oracle["total"]["ask_f1"] == 1.0 and always["total"]["over_ask_rate"] == 1.0
    assert "eval:oracle" in result.stderr and "ask_f1" in result.stderr  # the table
    page = html.read_text()
    assert "<svg" in page and "eval:always-ask" in page
    assert "src=" not in page and "<link" not in page  # self-contained: no assets
    assert set(re.findall(r'href="([^"]+)"', page)) <= {"#figures", DOCS.as_uri()}
    xml = junit.read_text()
    assert xml.count("<testcase") == 4 and xml.count("<failure") == 2  # always-ask's two


@pytest.mark.parametrize("threshold", [None, 100])
def test_a_chat_model_through_the_openai_stub_is_scored(db_url: str, threshold: int | None) -> None:
    """The stub's session: the PM asks which storage (uncertainty 90), plans once answered,
    completes; every reply costs 120 + 30 tokens. With a threshold above its uncertainty the
    question is not asked, and the stub, which asks again after every fallback, fails."""
    cases = [EvalCase.model_validate(CASE), EvalCase.model_validate(CONTROL)]
    with serve() as stub:
        report = run_eval(
            cases,
            configs_for(["openai:stub"], [threshold] if threshold else []),
            model_options={"base_url": stub.url},
            db=db_url,
        )
    (part,) = report.configs
    assert part.config == Config("openai:stub", threshold)
    case, control = part.results
    total = part.total
    if threshold is None:
        assert stub.requests[0]["model"] == "stub"
        assert (case.precision, case.recall, case.ask_f1, case.timing) == (1.0, 1.0, 1.0, 0.0)
        assert (case.model_calls, case.tokens, case.outcome) == (4, 600, True)
        assert control.questions == 1 and total["over_ask_rate"] == 1.0
        assert (total["precision"], total["recall"]) == (0.5, 1.0)
        assert total["ask_f1"] == round(2 * 0.5 / 1.5, 4)
    else:
        assert total["questions"] == 0 and total["recall"] == 0.0
        # every session failed: a failure each, not two controls that "chose not to ask"
        assert total["over_ask_rate"] is None and total["failed"] == 2
        assert "max_fallbacks=2" in (case.error or "") and case.assumptions_matching == 2
    assert total["model_calls"] == case.model_calls + control.model_calls


def _proceeds_after_a_fallback(request: dict[str, Any]) -> Any:
    """The stub's session, except that the PM plans on its default when told to proceed
    with it (its question was below the threshold)."""
    from tests.openai_stub import play_session, tool_call

    last = str((request.get("messages") or [{}])[-1].get("content") or "")
    if "Proceed with your stated default" in last:
        return tool_call({"status": "PLANNED", "tasks": [{"title": "Write the export"}]})
    return play_session(request)


def test_thresholds_and_models_side_by_side_at_the_command_line(tmp_path: Path) -> None:
    """What a team runs to pick its threshold: the stub's question (uncertainty 90) is asked
    under threshold 50 and not under 95, beside a reference policy, in one command."""
    from tests.openai_stub import Stub

    (tmp_path / "cases.yaml").write_text(json.dumps({"cases": [CASE, CONTROL]}))
    with serve(Stub(_proceeds_after_a_fallback)) as stub:
        result = invoke(
            "eval", str(tmp_path), "--model", "openai:stub", "--model", "eval:oracle",
            "--uncertainty-threshold", "50", "--uncertainty-threshold", "95",
            "--base-url", stub.url, "-j", "2", "--json",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    labels = [c["label"] for c in json.loads(result.stdout)["configs"]]
    assert labels == ["openai:stub threshold=50", "openai:stub threshold=95", "eval:oracle"]
    low, high, oracle = (c["total"] for c in json.loads(result.stdout)["configs"])
    assert (low["recall"], low["over_ask_rate"], low["ask_f1"]) == (1.0, 1.0, 0.6667)
    assert (high["questions"], high["recall"], high["over_ask_rate"]) == (0, 0.0, 0.0)
    assert oracle["ask_f1"] == 1.0
    assert low["model_calls"] == 8 and low["tokens"] == 8 * 150  # two sessions of 4 calls
    table = result.stderr.splitlines()
    assert any(line.startswith("openai:stub threshold=95 ") for line in table)


def test_eval_takes_the_model_options_and_names_each_sessions_question(
    tmp_path: Path, db_url: str
) -> None:
    """--reply-mode, --call-timeout, --max-output-tokens reach the server; each case's
    session id and question are in the output, for `orchestrator log ID`."""
    from tests.openai_stub import QUESTION, Stub, text

    def respond(request: dict[str, Any]) -> Any:
        said = "\n".join(str(m.get("content") or "") for m in request["messages"])
        if "project manager" not in str(request["messages"][0].get("content")):
            return text(json.dumps({"status": "DONE", "summary": "exported"}))
        if "[done]" in said:
            return text(json.dumps({"status": "COMPLETE", "summary": "the export ships"}))
        if "The user answered" in said:
            return text(json.dumps({"status": "PLANNED", "tasks": [{"title": "Export"}]}))
        return text(json.dumps(QUESTION))

    (tmp_path / "cases.yaml").write_text(json.dumps({"cases": [CASE]}))
    with serve(Stub(respond)) as stub:
        result = invoke(
            "eval", str(tmp_path / "cases.yaml"), "--model", "openai:stub", "--base-url",
            stub.url, "--reply-mode", "json_schema", "--call-timeout", "30",
            "--max-output-tokens", "512", "--json", db=db_url,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first = stub.requests[0]
    assert first["response_format"]["type"] == "json_schema"
    assert first["max_tokens"] == 512 and "max_completion_tokens" not in first
    (case,) = json.loads(result.stdout)["configs"][0]["cases"]
    assert case["asked"] == [QUESTION["question"]] and case["recall"] == 1.0
    shown = invoke("log", case["session_id"], "--json", db=db_url)
    assert shown.returncode == 0 and QUESTION["question"] in shown.stdout
    assert case["session_id"] in result.stderr  # the progress line names it too


def test_a_judge_model_decides_what_a_question_is_about(db_url: str) -> None:
    """--judge-model: the judge is shown the blocker and the question, and its verdict is
    what counts (here it credits a question no keyword names), once per question."""
    from orchestrator.agents.reference import BROAD_QUESTION

    from tests.openai_stub import Stub, text

    def judge(request: dict[str, Any]) -> Any:
        said = str(request["messages"][-1]["content"])
        assert said.startswith("You judge questions")
        return text("YES" if "Which storage" in said and BROAD_QUESTION in said else "NO")

    cases = [EvalCase.model_validate(CASE)]
    with serve(Stub(judge)) as stub:
        report = run_eval(
            cases,
            configs_for(["eval:always-ask"]),
            model_options={"base_url": stub.url},
            db=db_url,
            judge_model="openai:judge",
        )
    (result,) = report.configs[0].results
    assert (result.hits, result.recall, result.outcome) == (1, 1.0, True)  # answered too
    assert len(stub.requests) == 1  # the user and the score heard one verdict
    keyword = run_eval(cases, configs_for(["eval:always-ask"]), db=db_url).configs[0]
    assert keyword.results[0].recall == 0.0  # without the judge: no keyword, no hit


def test_eval_names_a_bad_model_option(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(json.dumps(CONTROL))
    result = invoke("eval", str(tmp_path), "--model", "eval:oracle", "--reply-mode", "xml")
    assert result.returncode == 2 and "--reply-mode 'xml'" in result.stderr


def test_a_chat_model_can_play_the_user(db_url: str) -> None:
    """--user-model: the model sees the hidden specification and the blockers' answers; the
    option its reply names is the choice that goes through the door."""
    from tests.openai_stub import Stub, play_session, text

    def respond(request: dict[str, Any]) -> Any:
        system = str(request["messages"][0].get("content") or "")
        if system.startswith("You play the user"):
            return text("The CSV file, please.")
        return play_session(request)

    with serve(Stub(respond)) as stub:
        report = run_eval(
            [EvalCase.model_validate(CASE)],
            configs_for(["openai:stub"]),
            model_options={"base_url": stub.url},
            db=db_url,
            user_model="openai:stub",
        )
    (user_call,) = [r for r in stub.requests if "You play the user" in str(r["messages"][0])]
    assert "A CSV file, written by the export endpoint." in user_call["messages"][0]["content"]
    assert "Options: CSV file; S3 bucket" in user_call["messages"][1]["content"]
    (result,) = report.configs[0].results
    assert (result.recall, result.outcome, result.model_calls) == (1.0, True, 4)  # agents' only
    from orchestrator.api import Sessions

    with Sessions(db_url) as sessions:
        (session,) = sessions.list()
        (answer,) = [e for e in sessions.log(session["session_id"]) if e["kind"] == "answer"]
    assert answer["choices"] == ["CSV file"]


def test_a_reference_policy_is_rebuilt_from_what_the_store_keeps() -> None:
    """A session of `eval:oracle` continues in another process (`resume`, a worker) like any
    other: the backend comes back from its stored description, by the `eval` kind."""
    from orchestrator.agents.reference import ReferencePolicy

    from orchestrator.errors import ConfigError
    from orchestrator.runtime.backends import load_backend

    policy = ReferencePolicy("oracle", CASE["blockers"][0])
    rebuilt = load_backend(json.loads(json.dumps(policy.describe())), {})
    assert isinstance(rebuilt, ReferencePolicy) and rebuilt.describe() == policy.describe()
    with pytest.raises(ConfigError, match="eval:never-ask"):
        ReferencePolicy("sometimes-ask")


def test_a_deeply_nested_or_doubled_case_file_is_refused_not_crashed(tmp_path: Path) -> None:
    """Eval case files are read as scenarios are: nesting bounded before the parser (the
    C parser recurses per level), a key given twice refused."""
    from orchestrator.errors import ConfigError
    from orchestrator.evals.cases import load_cases

    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    twice = tmp_path / "twice.yaml"
    twice.write_text("task: one\ntask: two\n")
    with pytest.raises(ConfigError) as raised:
        load_cases([deep, twice])
    assert "deep.yaml: nested more than" in raised.value.message
    assert "twice.yaml: line 2: duplicate key 'task'" in raised.value.message


@pytest.mark.backends("postgresql")
def test_a_storage_fault_that_stops_eval_j2_names_every_session_and_resume_finishes_them(
    tmp_path: Path, db_url: str, pg_cluster: Any
) -> None:
    """Issue 50 (4) and 47 (3): PostgreSQL stops while `eval -j 2 --db` runs two sessions.
    The error named one session while two were left running, and they stayed in the user's
    database for good. Now it names every session the eval left unfinished and `--resume
    RUN`, which, once the server is back, runs the same two sessions on (a turn kept
    during the outage is recorded, not made again) and scores every case; nothing is left
    running. (The process stops at pm#2 of whichever job gets there first, and again if
    the other does; both jobs are usually inside a session by then.)"""
    import re
    import signal
    import time

    from tests.conftest import cli
    from tests.test_storage_faults import _stop_at, _stopped

    cases = tmp_path / "cases.yaml"
    cases.write_text(json.dumps({"cases": [CASE, {**CASE, "name": "b"}]}))
    command = ("eval", str(cases), "--model", "eval:always-ask", "-j", "2", "--json")
    process = _stop_at("reply_received:pm#2", *command, db=db_url, ORCHESTRATOR_RECORD_PATIENCE="0")
    pg_cluster.stop_server()
    try:  # the other job may reach the stop point too: it goes on each time
        deadline = time.monotonic() + 120
        while process.poll() is None:
            if _stopped(process) and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # it may end in between
                    os.kill(process.pid, signal.SIGCONT)
            assert time.monotonic() < deadline, "the eval did not end"
            time.sleep(0.05)  # a poll that also continues each stop: not a plain `until`
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        pg_cluster.start_server()
    assert process.returncode == 2, err
    assert "Traceback" not in err
    said = re.search(r"eval run ([0-9a-f]+): sessions kept in postgresql", err)
    assert said, err  # said where, and the run's id, before the first session
    run = said.group(1)
    error = json.loads(out)["error"]
    listed = json.loads(cli("list", "--json", db=db_url).stdout)
    left = [s["session_id"] for s in listed if s["status"] in ("running", "paused")]
    assert left, listed  # two, unless the other job's session was not created yet
    assert f"{len(left)} session" in error and all(sid in error for sid in left), error
    assert f"--resume {run}" in error
    again = cli(*command, "--resume", run, db=db_url)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert [c["case"] for c in report["configs"][0]["cases"]] == ["export", "b"]
    after = json.loads(cli("list", "--json", db=db_url).stdout)
    assert len(after) == 2 and {s["session_id"] for s in listed} <= {
        s["session_id"] for s in after
    }  # those it left were run on, not started anew
    assert {s["status"] for s in after} == {"completed"}, after


@pytest.mark.backends()
def test_an_eval_killed_mid_run_is_resumed_not_left_in_the_users_database(
    tmp_path: Path, db_url: str
) -> None:
    """Issue 47 (3): a kill -9 mid-eval left paused or running sessions in the user's
    database that no plain command finished (9 of 20 trials). The run's record names its
    sessions, so `eval --resume RUN` runs the one the kill cut off on (a takeover: its owner
    is dead) and scores every case; the database holds no session still running."""
    import re

    from tests.conftest import cli

    cases = tmp_path / "cases.yaml"
    cases.write_text(json.dumps({"cases": [CASE, CONTROL]}))
    command = ("eval", str(cases), "--model", "eval:oracle", "--json")
    killed = cli(*command, db=db_url, env={**os.environ, "ORCHESTRATOR_CRASH_AT": "gate_decided"})
    assert killed.returncode == -9, killed.stderr
    run = re.search(r"eval run ([0-9a-f]+):", killed.stderr)
    assert run, killed.stderr
    cut_off = json.loads(cli("list", "--json", db=db_url).stdout)
    assert [s["status"] for s in cut_off] == ["running"]  # the first case, cut off
    again = cli(*command, "--resume", run.group(1), db=db_url)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["configs"][0]["total"]["ask_f1"] == 1.0
    listed = json.loads(cli("list", "--json", db=db_url).stdout)
    assert {s["status"] for s in listed} == {"completed"}, listed
    assert cut_off[0]["session_id"] in {s["session_id"] for s in listed}
    assert len(listed) == 2


def test_junit_reports_stay_valid_xml_with_control_characters_in_case_files(
    tmp_path: Path, db_url: str
) -> None:
    """A case's name and the failure text came raw from the file: `\\x1b` or `\\x07` in
    them made the JUnit report invalid XML (an XML parser, and CI, refused it). Both
    reports (eval's and test's) show them as visible escapes."""
    import xml.etree.ElementTree as ET

    from orchestrator.suite.results import Malformed, Report, Result, junit_xml

    evil = "bell\x07 esc\x1b[2J nul\x00 ffff\uffff"
    (tmp_path / "cases.yaml").write_text(
        json.dumps({"cases": [{**CONTROL, "name": evil, "outcome": [evil]}]})
    )
    junit = tmp_path / "junit.xml"
    result = invoke(
        "eval", str(tmp_path / "cases.yaml"), "--model", "eval:always-ask",
        "--junit-xml", str(junit), db=db_url,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "bell\\x07 esc\\x1b[2J nul\\x00 ffff\\uffff"

    report = Report(
        results=(Result(name=f"a/{evil}.yaml", path="p", outcome="failed", unmet=(evil,)),),
        malformed=(Malformed(path="q", name="b.yaml", message=evil),),
    )
    root = ET.fromstring(junit_xml(report))
    assert "esc\\x1b[2J" in ET.tostring(root, encoding="unicode")


def report_of(*spots: tuple[str, bool, bool]) -> Any:
    """An eval report of one case per configuration: (model, asked about the blocker,
    outcome). Configurations given the same pair land on the same spot of the plot."""
    from orchestrator.evals.metrics import CaseResult
    from orchestrator.evals.runner import ConfigReport, EvalReport

    parts = []
    for model, asked, outcome in spots:
        result = CaseResult(
            case="export", control=False, status="completed", questions=int(asked),
            hits=int(asked), critical=1, found=int(asked), calls=3, done_before=0.0,
            late_goal=0, assumptions=0, assumptions_matching=0, outcome=outcome,
            missing=() if outcome else ("the " + "very-long-fact-" * 20,),
            model_calls=None, tokens=None,
        )  # fmt: skip
        parts.append(ConfigReport(Config(model), (result,)))
    return EvalReport(configs=tuple(parts), cases=1)


def test_the_html_report_keeps_every_dot_in_sight_and_explains_its_figures(
    tmp_path: Path,
) -> None:
    """Issue 44: one reference policy's dot hid another's; no figure was explained; the
    docs pointer was not a link; no phone layout. Markers on one spot are fanned out, each
    figure of the tables is defined, docs/eval.md is a link, and the page has a viewport
    and tables that scroll inside it (tests/test_web_browser.py opens it at 390 px)."""
    import math
    import re

    from orchestrator.evals.report import COLUMNS, DOCS, points, write_html

    report = report_of(
        ("eval:oracle", True, True),
        ("eval:always-ask", True, True),
        ("eval:never-ask", False, False),
        ("local:a", True, True),
        ("local:b", True, True),
    )
    placed = points(report)
    centres = [(cx, cy) for _, _, cx, cy in placed]
    for i, a in enumerate(centres):
        for b in centres[i + 1 :]:
            assert math.dist(a, b) >= 14, centres  # two markers of radius 7 do not overlap
    assert len({(x, y) for x, y, _, _ in placed}) == 2  # the figures' own spots are kept
    assert placed[2][:2] == placed[2][2:]  # a configuration alone stays on its spot
    path = tmp_path / "report.html"
    write_html(report, path)
    page = path.read_text()
    assert len(re.findall(r'<g class="point">', page)) == 5
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    explained = re.findall(r"<dt>([^<]+)</dt>", page)
    assert explained == [header for header, _, _ in COLUMNS]
    assert f'<a href="{DOCS.as_uri()}">docs/eval.md</a>' in page and DOCS.is_file()
    assert page.count('<div class="scroll"><table>') == 6  # the totals and each configuration
    assert "src=" not in page and "<link" not in page
    assert set(re.findall(r'href="([^"]+)"', page)) == {"#figures", DOCS.as_uri()}


def test_what_an_agent_wrote_is_escaped_in_the_html_report(tmp_path: Path) -> None:
    """The report is rendered from templates with autoescape: an agent's `<script>` in a
    failed session's error, a case's name or a missing fact is shown as text, never run."""
    import dataclasses

    from orchestrator.evals.report import write_html
    from orchestrator.evals.runner import ConfigReport, EvalReport

    evil = "<script>alert('x')</script>"
    base = report_of(("eval:oracle", True, True)).configs[0]
    result = dataclasses.replace(
        base.results[0],
        case=f"case {evil}",
        status="failed",
        error=f"pm said {evil}",
        missing=(f"fact {evil}",),
    )
    report = EvalReport(configs=(ConfigReport(base.config, (result,)),), cases=1)
    path = tmp_path / "report.html"
    write_html(report, path)
    page = path.read_text()
    assert "<script" not in page
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    assert f"case {escaped}" in page
    assert f"the session ended failed: pm said {escaped}" in page
    assert f"the outcome does not name: fact {escaped}" in page


def test_a_session_stalled_past_a_budget_is_scored_a_failure_and_the_eval_goes_on(
    db_url: str,
) -> None:
    """A local model too slow for --call-timeout stalled its session, and the whole eval
    stopped there (SmolLM2 on a loaded machine: 1 case of 6 run). The case is a failure;
    the next case runs."""
    from tests.openai_stub import hang

    cases = [EvalCase.model_validate(CASE), EvalCase.model_validate(CONTROL)]
    with serve() as stub:
        stub.queue(hang(30))
        report = run_eval(
            cases,
            configs_for(["openai:stub"]),
            model_options={"base_url": stub.url, "call_timeout": 1},
            db=db_url,
        )
    (part,) = report.configs
    stalled, control = part.results
    assert stalled.failed and stalled.status == "running" and not stalled.outcome
    assert "call_timeout" in (stalled.error or "")
    assert control.status == "completed"
    assert part.total["failed"] == 1
