"""`orchestrator eval`: measure how well the agents ask (contract section 8, docs/eval.md).

Exit 0 when every session completed, 1 when any failed, 2 for bad input (a malformed case
file, an unknown reference policy, a model that cannot be loaded). With --json, stdout
holds one JSON document; the progress lines and the table go to stderr.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.options import (
    CallTimeoutOption,
    JsonOption,
    MaxOutputTokensOption,
    ReplyModeOption,
    ToolChoiceOption,
    TurnTimeoutOption,
)
from orchestrator.cli.output import emit, err, user_errors

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.evals.metrics import CaseResult
    from orchestrator.evals.runner import Config

__all__ = ["evaluate"]


def evaluate(
    cases: Annotated[
        list[Path],
        typer.Argument(
            metavar="CASES",
            help="Eval case files, and folders searched for *.yaml / *.yml (e.g. examples/eval).",
        ),
    ],
    model: Annotated[
        list[str],
        typer.Option(
            "--model",
            metavar="SPEC",
            help="PROVIDER:NAME of a chat model, or a reference policy: eval:never-ask, "
            "eval:always-ask, eval:oracle. Repeatable: the configurations side by side.",
        ),
    ],
    uncertainty_threshold: Annotated[
        list[int] | None,
        typer.Option(
            "--uncertainty-threshold",
            min=0,
            max=100,
            metavar="N",
            help="Questions less uncertain than N (0-100) are not asked. Repeatable: each "
            "value is a configuration of every chat model. Default: the session default.",
        ),
    ] = None,
    prompts: Annotated[
        list[Path] | None,
        typer.Option(
            "--prompts",
            metavar="DIR",
            help="A prompt folder (pm.md / developer.md). Repeatable, like the threshold.",
        ),
    ] = None,
    jobs: Annotated[
        int, typer.Option("-j", "--jobs", min=1, metavar="N", help="Sessions run at a time.")
    ] = 1,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="Base URL of an OpenAI-compatible or Ollama server for the chat models.",
        ),
    ] = None,
    reply_mode: ReplyModeOption = None,
    tool_choice: ToolChoiceOption = None,
    call_timeout: CallTimeoutOption = None,
    turn_timeout: TurnTimeoutOption = None,
    max_output_tokens: MaxOutputTokensOption = None,
    user_model: Annotated[
        str | None,
        typer.Option(
            "--user-model",
            metavar="PROVIDER:NAME",
            help="A chat model plays the user, from the hidden specification. Default: the "
            "deterministic simulated user.",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            metavar="PROVIDER:NAME",
            help="A chat model judges which blocker each question is about (its prompt: "
            "orchestrator/evals/judge.py). Default: the keyword matcher.",
        ),
    ] = None,
    junit_xml: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml", "--junit", metavar="FILE", help="Write a JUnit XML report to FILE."
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            "--html",
            metavar="FILE.html",
            help="Write a self-contained HTML report (Ask-F1 against outcome) to FILE.",
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help="Keep every session in this database (SQLAlchemy URL or SQLite file), for "
            "`orchestrator list` and `log`. Default: a database per session, removed after.",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="RUN",
            help="Go on with an interrupted eval run (the id it printed at its start; with "
            "the same --db): finished cases are scored as they ended, unfinished sessions "
            "run on without repeating an agent call, the rest run.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run eval cases with a simulated user and report how well the agents ask."""
    from orchestrator.cli.session_cmds import checked_model_options
    from orchestrator.errors import ConfigError
    from orchestrator.evals.cases import load_cases
    from orchestrator.evals.report import table, write_html, write_junit
    from orchestrator.evals.runner import check_configs, configs_for, run_eval

    with user_errors(as_json):
        loaded = load_cases(cases)
        configs = configs_for(model, uncertainty_threshold or (), prompts or ())
        for name, path in (("--junit-xml", junit_xml), ("--report", report)):
            if path is None:
                continue
            if path.is_dir():
                raise ConfigError(f"{name} {path}: is a folder; give a file name")
            try:  # before the run, not after it
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            except OSError as exc:
                raise ConfigError(f"{name} {path}: cannot write it ({exc})") from None
        given = checked_model_options(
            {
                "base_url": base_url,
                "reply_mode": reply_mode,
                "tool_choice": tool_choice,
                "call_timeout": call_timeout,
                "turn_timeout": turn_timeout,
                "max_output_tokens": max_output_tokens,
            }
        )
        options = {k: v for k, v in given.items() if v is not None} or None
        check_configs(configs, options, user_model)
        plural = "s" if len(configs) != 1 else ""
        err(f"{len(loaded)} cases × {len(configs)} configuration{plural} (-j {jobs})")
        done = run_eval(
            loaded,
            configs,
            jobs=jobs,
            model_options=options,
            db=db,
            user_model=user_model,
            on_result=_progress(),
            judge_model=judge_model,
            on_start=_where,
            resume=resume,
        )
    shown = table(done)
    if as_json:
        err(shown)
    if junit_xml is not None:
        write_junit(done, junit_xml)
        err(f"JUnit report: {junit_xml}")
    if report is not None:
        write_html(done, report)
        err(f"HTML report: {report}")
    emit(as_json, done.to_json(), shown)
    failed = any(r.status != "completed" for part in done.configs for r in part.results)
    raise typer.Exit(1 if failed else 0)


def _progress() -> Callable[[Config, CaseResult], None]:
    """One line on stderr per case as it ends (jobs end in any order)."""
    from orchestrator.limits import clip
    from orchestrator.present.printable import printable

    lock = threading.Lock()

    def shown(config: Config, result: CaseResult) -> None:
        ask_f1 = "-" if result.ask_f1 is None else f"{result.ask_f1:.2f}"
        line = (
            f"  {config.label}  {result.case}: {result.status}, {result.questions} question(s), "
            f"ask_f1 {ask_f1}, outcome {'yes' if result.outcome else 'no'}"
            f" (session {result.session_id})"
        )
        for asked in result.asked:
            line += f"\n    asked: {printable(clip(asked, 200))}"
        with lock:
            err(line)

    return shown


def _where(db: str | None, scratch: Path, run: str | None) -> None:
    """Say where the eval's sessions go, before the first one starts."""
    if db is None:
        err(f"sessions: one scratch database each, under {scratch} (removed at the end)")
        return
    from orchestrator.redact import mask_url

    err(
        f"eval run {run}: sessions kept in {mask_url(db)}; if it is interrupted, go on with "
        f"the same command and --resume {run}"
    )
