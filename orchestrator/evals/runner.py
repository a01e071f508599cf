"""Run every case with every configuration as a real session, each in a database of its
own, `jobs` at a time, and score it (orchestrator.evals.metrics)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.evals import REFERENCE_POLICIES
from orchestrator.evals.cases import EvalCase, Matcher
from orchestrator.evals.metrics import CaseResult, score_case, totals

__all__ = ["Config", "ConfigReport", "EvalReport", "run_eval", "configs_for", "check_configs"]


@dataclass(frozen=True)
class Config:
    """One column of a comparison: a model (or reference policy), a threshold, prompts."""

    model: str
    uncertainty_threshold: int | None = None
    prompts: Path | None = None

    @property
    def reference(self) -> bool:
        return self.model in REFERENCE_POLICIES

    @property
    def label(self) -> str:
        parts = [self.model]
        if self.uncertainty_threshold is not None:
            parts.append(f"threshold={self.uncertainty_threshold}")
        if self.prompts is not None:
            parts.append(f"prompts={self.prompts.name}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "model": self.model,
            "uncertainty_threshold": self.uncertainty_threshold,
            "prompts": str(self.prompts) if self.prompts else None,
        }


@dataclass(frozen=True)
class ConfigReport:
    config: Config
    results: tuple[CaseResult, ...]

    @property
    def total(self) -> dict[str, Any]:
        return totals(self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.config.to_json(),
            "total": self.total,
            "cases": [r.to_json() for r in self.results],
        }


@dataclass(frozen=True)
class EvalReport:
    configs: tuple[ConfigReport, ...]
    cases: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "seconds": round(self.seconds, 2),
            "configs": [c.to_json() for c in self.configs],
        }


def configs_for(
    models: Sequence[str],
    thresholds: Sequence[int] = (),
    prompts: Sequence[Path] = (),
) -> list[Config]:
    """Every model with every threshold and prompt folder (the reference policies ignore
    both: they run once each)."""
    configs: list[Config] = []
    for model in models:
        if model in REFERENCE_POLICIES:
            configs.append(Config(model))
            continue
        some_thresholds: list[int | None] = [*thresholds] or [None]
        some_prompts: list[Path | None] = [*prompts] or [None]
        for threshold in some_thresholds:
            for folder in some_prompts:
                configs.append(Config(model, threshold, folder))
    return list(dict.fromkeys(configs))


def run_eval(
    cases: Sequence[EvalCase],
    configs: Sequence[Config],
    *,
    jobs: int = 1,
    model_options: Mapping[str, Any] | None = None,
    db: str | None = None,
    user_model: str | None = None,
    on_result: Callable[[Config, CaseResult], None] | None = None,
    judge_model: str | None = None,
) -> EvalReport:
    """Run `cases` × `configs`. Every session goes to the database `db` when given (where
    `orchestrator list` and `log` read them afterwards), else to a SQLite file of its own in
    a temporary folder removed afterwards. A mistake (an unknown model) raises its
    UserError before any session starts. `user_model`: a chat model plays the user
    (orchestrator.evals.user.ModelUser) instead of the deterministic SimulatedUser;
    `judge_model`: a chat model judges what each question is about
    (orchestrator.evals.judge) instead of the keyword Matcher."""
    import time

    check_configs(configs, model_options, user_model)
    if judge_model is not None:
        _user_model(judge_model, model_options)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="orchestrator-eval-") as scratch:
        root = Path(scratch)
        # Migrated here, once: the jobs' threads never migrate (see _migrated).
        _migrated(db or f"sqlite:///{root / 'template.db'}")
        work = [(n, c, i, case) for n, c in enumerate(configs) for i, case in enumerate(cases)]
        matcher = Matcher(cases)  # keyword stuffing is judged against the whole set
        if judge_model is not None:
            from orchestrator.evals.judge import ModelJudge

            matcher = ModelJudge(cases, _user_model(judge_model, model_options))

        def one(item: tuple[int, Config, int, EvalCase]) -> CaseResult:
            number, config, index, case = item
            folder = root / f"{number + 1}" / f"{index + 1}"
            folder.mkdir(parents=True, exist_ok=True)
            url = db
            if url is None:
                _copy(root / "template.db", folder / "orchestrator.db")
                url = f"sqlite:///{folder / 'orchestrator.db'}"
            result = run_case(case, config, url, folder, model_options, user_model, matcher)
            if on_result is not None:
                on_result(config, result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            done = list(pool.map(one, work))
    by_config = [
        ConfigReport(c, tuple(r for (rn, *_), r in zip(work, done, strict=True) if rn == n))
        for n, c in enumerate(configs)
    ]
    return EvalReport(tuple(by_config), len(cases), time.monotonic() - started)


def check_configs(
    configs: Sequence[Config], model_options: Mapping[str, Any] | None, user_model: str | None
) -> None:
    """Every model, prompt folder and the user model, checked before any session starts
    (as `run` checks them before it writes): a mistake is one ConfigError, not one per
    case."""
    from orchestrator.agents.models import check_models
    from orchestrator.agents.prompts import check_prompts
    from orchestrator.errors import ConfigError
    from orchestrator.model_options import ModelOptions

    options = ModelOptions.checked(model_options)
    for config in configs:
        if config.reference:
            continue
        if config.model.startswith("eval:"):
            raise ConfigError(
                f"--model {config.model}: no such reference policy; choose from "
                + ", ".join(REFERENCE_POLICIES)
            )
        check_models({"pm": config.model, "developer": config.model}, options)
        if config.prompts is not None:
            check_prompts(config.prompts)
    if user_model is not None:
        _user_model(user_model, model_options)


def _user_model(spec: str, model_options: Mapping[str, Any] | None) -> Any:
    from orchestrator.agents.models import init_model
    from orchestrator.model_options import ModelOptions

    return init_model(spec, ModelOptions.of(model_options))


def _migrated(url: str) -> None:
    """`url` with the schema in place. Alembic's migration context is one per process, so
    the jobs' threads must not migrate at once: they share this database or start from a
    copy of it."""
    from orchestrator.api.database import upgrade

    upgrade(url)


def _copy(template: Path, target: Path) -> None:
    import sqlite3
    from contextlib import closing

    # SQLite's backup API: a consistent copy, also of the pages still in the WAL file.
    with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)


def run_case(
    case: EvalCase,
    config: Config,
    db: str,
    folder: Path,
    model_options: Mapping[str, Any] | None,
    user_model: str | None = None,
    matcher: Matcher | None = None,
) -> CaseResult:
    """One session of `case` with `config` in the database `db`; the developers' workspace
    in `folder`. `matcher` decides what a question is about, for the user and the score."""
    from orchestrator.api import AskUser, Sessions
    from orchestrator.evals.user import ModelUser, SimulatedUser

    settings: dict[str, Any] = {"timeout": None}
    if config.uncertainty_threshold is not None:
        settings["uncertainty_threshold"] = config.uncertainty_threshold
    judge = matcher or Matcher([case])
    user: AskUser = SimulatedUser(case, judge)
    if user_model is not None:
        user = ModelUser(case, _user_model(user_model, model_options))
    with Sessions(db, ask=user) as sessions:
        if config.reference:
            from orchestrator.agents.reference import ReferencePolicy

            critical = case.critical[0].model_dump() if case.critical else None
            policy = ReferencePolicy(config.model.removeprefix("eval:"), critical)
            doc = sessions.start(case.task, backend=policy, settings=settings)
        else:
            doc = sessions.start(
                case.task,
                models=config.model,
                settings=settings,
                prompts=config.prompts,
                workdir=folder / "workspace",
                model_options=model_options,
            )
        events = sessions.log(doc["session_id"])
    return score_case(case, dict(doc), [dict(e) for e in events], judge)
