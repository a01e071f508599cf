"""Converters of public sets into eval cases (orchestrator.evals.convert), on hand-made
files in the published formats (tests/data: not the sets themselves)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.evals.cases import load_cases
from orchestrator.evals.convert import from_ambig_swe, from_lhaw, main, read_rows
from orchestrator.evals.runner import configs_for, run_eval

DATA = Path(__file__).resolve().parent / "data"


def test_lhaw_variants_become_cases_with_attribution() -> None:
    converted = from_lhaw(read_rows(DATA / "lhaw-sample.json"))
    payroll, weather = converted.cases
    assert payroll["task"].startswith("Compute each employee's payroll")
    assert "april-attendance-data.csv" in payroll["spec"]  # the original prompt
    critical, benign = payroll["blockers"]
    assert (critical["dimension"], critical["critical"]) == ("input", True)
    assert critical["answer"] == "april-attendance-data.csv"
    assert "april" in critical["keywords"] and "attendance" not in critical["keywords"]
    assert (benign["dimension"], benign["critical"]) == ("context", False)
    assert payroll["outcome"] == ["april-attendance-data.csv"]
    assert payroll["source"]["license"] == "CC BY 4.0"
    assert payroll["source"]["id"] == "finance_check_attendance_payroll_v1"
    assert weather["outcome"] == [] and not weather["blockers"][0]["critical"]
    # two outcome-critical removals cannot be recovered with one question: left out, said
    assert dict(converted.skipped) == {
        "more than one outcome-critical removal (one question a session)": 1
    }


def test_ambig_swe_rows_become_cases_whose_blocker_is_the_full_issue() -> None:
    converted = from_ambig_swe(read_rows(DATA / "ambig-swe-sample.jsonl"))
    (case,) = converted.cases
    assert case["task"] == "Rendering a widget with an empty label crashes."
    (blocker,) = case["blockers"]
    assert blocker["critical"] and blocker["answer"].startswith("Calling `Widget.render()`")
    assert "Hints: The capitalisation helper" in case["spec"]
    assert "widget.render()" in blocker["keywords"] and "text.py" in blocker["keywords"]
    assert case["source"] == {
        "dataset": "Ambig-SWE (cmu-lti/interactive-swe)",
        "license": "MIT",
        "url": "https://huggingface.co/datasets/cmu-lti/interactive-swe",
        "id": "example__widgets-101",
    }
    assert sum(converted.skipped.values()) == 1


def test_converted_cases_load_and_run(tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "lhaw.yaml"
    assert main(["--from", "lhaw", str(DATA / "lhaw-sample.json"), "-o", str(out)]) == 0
    assert out.read_text().startswith("# Converted from lhaw-sample.json")
    cases = load_cases([out])
    assert [c.source.license for c in cases if c.source] == ["CC BY 4.0"] * 2
    report = run_eval(cases, configs_for(["eval:never-ask", "eval:oracle"]), db=db_url)
    never, oracle = (part.total for part in report.configs)
    assert (oracle["recall"], oracle["outcome"]) == (1.0, 1.0)
    assert (never["recall"], never["outcome"]) == (0.0, 0.5)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json\n", "expected a JSON file or JSON Lines"),
        ("[1, 2]", "expected a list of JSON objects"),
        ("[]", "holds no rows"),
        ('[{"task_id": "x"}]', "no row of"),
    ],
)
def test_a_file_that_is_not_a_set_is_refused_with_exit_2(
    tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "rows.json"
    path.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.evals.convert", "--from", "lhaw", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and said in done.stderr and done.stdout == ""
