"""Run every case with every configuration as a real session, each in a database of its
own, `jobs` at a time, and score it (orchestrator.evals.metrics)."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
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
    on_start: Callable[[str | None, Path, str | None], None] | None = None,
    resume: str | None = None,
) -> EvalReport:
    """Run `cases` × `configs`. Every session goes to the database `db` when given (where
    `orchestrator list` and `log` read them afterwards), else to a SQLite file of its own in
    a temporary folder removed afterwards. A mistake (an unknown model) raises its
    UserError before any session starts. `user_model`: a chat model plays the user
    (orchestrator.evals.user.ModelUser) instead of the deterministic SimulatedUser;
    `judge_model`: a chat model judges what each question is about
    (orchestrator.evals.judge) instead of the keyword Matcher.
    `on_start(db, scratch, run)` is told where the sessions go before the first one starts,
    and with `db` the run's id (orchestrator.evals.ledger): `resume=RUN` goes on with that
    run, scoring the cases it finished, running on those it left unfinished (no agent
    call made again) and running the others.

    A failure of one job (a storage fault, say) stops the eval: no new session starts, the
    running ones finish, and the error names every session left unfinished and says how
    to go on (`resume`: no paused or running session is left for good)."""
    import time

    from orchestrator.evals.ledger import Ledger

    check_configs(configs, model_options, user_model)
    if judge_model is not None:
        _user_model(judge_model, model_options)
    if resume is not None and db is None:
        from orchestrator.errors import ConfigError

        raise ConfigError(
            "--resume goes with the --db the run kept its sessions in (without --db they "
            "were in scratch databases, removed when it ended)"
        )
    started = time.monotonic()
    ledger = None
    if db is not None:
        ledger = Ledger.resume(resume, db) if resume is not None else Ledger.new(db)
    with tempfile.TemporaryDirectory(prefix="orchestrator-eval-") as scratch:
        root = Path(scratch)
        if on_start is not None:
            on_start(db, root, ledger.run if ledger is not None else None)
        # Migrated here, once: the jobs' threads never migrate (see _migrated).
        _migrated(db or f"sqlite:///{root / 'template.db'}")
        work = [(n, c, i, case) for n, c in enumerate(configs) for i, case in enumerate(cases)]
        matcher = Matcher(cases)  # keyword stuffing is judged against the whole set
        if judge_model is not None:
            from orchestrator.evals.judge import ModelJudge

            matcher = ModelJudge(cases, _user_model(judge_model, model_options))
        runs = _Runs()

        def one(item: tuple[int, Config, int, EvalCase]) -> CaseResult | None:
            number, config, index, case = item
            if runs.stopping.is_set():  # another job met a fault: no new session
                return None
            folder = root / f"{number + 1}" / f"{index + 1}"
            folder.mkdir(parents=True, exist_ok=True)
            url = db
            if url is None:
                _copy(root / "template.db", folder / "orchestrator.db")
                url = f"sqlite:///{folder / 'orchestrator.db'}"
            mine: list[str] = []
            key = f"{config.label} | {case.name}"

            def created(session_id: str) -> None:
                if session_id not in mine:
                    mine.append(session_id)
                    runs.created(session_id)
                    if ledger is not None:
                        ledger.put(key, session_id)

            try:
                known = ledger.get(key) if ledger is not None else None
                result = None
                if known is not None:
                    created(known)
                    result = resume_case(case, url, known, model_options, user_model, matcher)
                if result is None:
                    mine.clear()
                    result = run_case(
                        case,
                        config,
                        url,
                        folder,
                        model_options,
                        user_model,
                        matcher,
                        on_created=created,
                        keep_repository=db is not None,
                    )
            except BaseException:
                runs.stopping.set()
                raise
            runs.finished(mine)
            if on_result is not None:
                on_result(config, result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(one, item) for item in work]
            try:
                wait(futures)
            except KeyboardInterrupt:  # Ctrl+C: the sessions running finish, none starts
                runs.stopping.set()
                for future in futures:
                    future.cancel()
                raise
        failures = [exc for f in futures if (exc := f.exception()) is not None]
        if failures:
            raise _stopped(failures, runs, db, ledger.run if ledger is not None else None)
        done = [f.result() for f in futures]
    by_config = [
        ConfigReport(
            c, tuple(r for (rn, *_), r in zip(work, done, strict=True) if rn == n and r is not None)
        )
        for n, c in enumerate(configs)
    ]
    return EvalReport(tuple(by_config), len(cases), time.monotonic() - started)


class _Runs:
    """The sessions an eval's jobs created, and whether the eval is stopping."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.ids: list[str] = []  # in the order they were created
        self.done: set[str] = set()  # those whose job ended without an error

    def created(self, session_id: str) -> None:
        with self.lock:
            self.ids.append(session_id)

    def finished(self, ids: list[str]) -> None:
        with self.lock:
            self.done.update(ids)

    def unfinished(self) -> list[str]:
        with self.lock:
            return [session_id for session_id in self.ids if session_id not in self.done]


def _stopped(
    failures: list[BaseException], runs: _Runs, db: str | None, run: str | None
) -> BaseException:
    """The error that stops the eval: the first failure, naming every session the eval
    left unfinished (not one of them: with `-j N` several jobs meet one fault) and the
    command that goes on with them: the same eval with `--resume RUN` (in the user's
    database, `--db`), or the same eval again (scratch databases are removed with it)."""
    from orchestrator.api.storage_errors import fault_message
    from orchestrator.errors import StorageFailed

    first = failures[0]
    if fault_message(first) is None:
        return first  # not a storage fault (a bug keeps its traceback): as it was
    fix = _root_fault(first).rstrip(". ").removesuffix(", then try again")
    unfinished = _unfinished(runs.unfinished(), db)
    left = f"{_count(unfinished)} did not finish ({', '.join(unfinished)})" if unfinished else ""
    if db is None:
        where = "; they were in its scratch databases, removed with them" if left else ""
        then = "run it again once the database works"
    else:
        where = ""
        then = (
            f"once the database works, the same command with --resume {run} scores the "
            "finished cases as they ended and runs the others on, repeating no agent call"
        )
    stopped = f"The eval stopped: {left}{where}; {then}" if left else f"The eval stopped; {then}"
    return StorageFailed(f"{fix}. {stopped}")


def _root_fault(exc: BaseException) -> str:
    """The fault itself (a full disk, a server gone), without what one session's error
    added to it (its `resume` command: the eval ends its sessions instead)."""
    from orchestrator.api.storage_errors import fault_message

    said = fault_message(exc) or ""
    cause = exc.__cause__
    while cause is not None:
        said = fault_message(cause) or said
        cause = cause.__cause__
    return said


def _count(ids: list[str]) -> str:
    return f"{len(ids)} session{'s' if len(ids) != 1 else ''}"


def _unfinished(ids: list[str], db: str | None) -> list[str]:
    """The sessions of `ids` that have not ended (in a scratch database, `db` None: all of
    them; in `db`, those it does not show ended, or cannot say)."""
    if db is None or not ids:
        return list(ids)
    from orchestrator.api import Sessions
    from orchestrator.documents import FINAL_STATUSES
    from orchestrator.errors import OrchestratorError

    left = []
    with Sessions(db) as sessions:
        for session_id in ids:
            try:
                if sessions.status(session_id)["status"] in FINAL_STATUSES:
                    continue
            except OrchestratorError:  # the database still away: not known to have ended
                pass
            left.append(session_id)
    return left


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


def resume_case(
    case: EvalCase,
    db: str,
    session_id: str,
    model_options: Mapping[str, Any] | None,
    user_model: str | None = None,
    matcher: Matcher | None = None,
) -> CaseResult | None:
    """Score `case` from the session an interrupted run of it left in `db`: as it ended,
    or run on first (a paused one's question answered by the simulated user, a running
    one whose eval is gone taken over; its recorded turns are not made again). None when
    the session was cancelled (an eval stopped by a fault cancels what it leaves): the case
    runs anew."""
    from orchestrator.api import AskUser, Sessions
    from orchestrator.documents import FINAL_STATUSES
    from orchestrator.evals.user import ModelUser, SimulatedUser

    judge = matcher or Matcher([case])
    user: AskUser = SimulatedUser(case, judge)
    if user_model is not None:
        user = ModelUser(case, _user_model(user_model, model_options))
    with Sessions(db, ask=user) as sessions:
        doc = sessions.status(session_id)
        if doc["status"] == "cancelled":
            return None
        if doc["status"] not in FINAL_STATUSES:
            doc = _scored_if_stalled(sessions, lambda: sessions.resume(session_id))
        events = sessions.log(session_id)
    return score_case(case, dict(doc), [dict(e) for e in events], judge)


def _scored_if_stalled(sessions: Any, drive: Callable[[], Any]) -> Any:
    """The session document `drive` (a start or resume) ends with. A session a model call
    left stalled past one of its budgets (call_timeout, max_output_tokens, ...: the
    model's own doing) is scored as it stands, a failure, and the eval goes on (`resume`
    can still run it on); any other failed call (the provider down, a bad key) stops the
    eval, as before."""
    from orchestrator.errors import BudgetExceeded

    try:
        return drive()
    except BudgetExceeded as exc:
        if exc.session_id is None:
            raise
        return sessions.status(exc.session_id)


def run_case(
    case: EvalCase,
    config: Config,
    db: str,
    folder: Path,
    model_options: Mapping[str, Any] | None,
    user_model: str | None = None,
    matcher: Matcher | None = None,
    *,
    on_created: Callable[[str], None] | None = None,
    keep_repository: bool = True,
) -> CaseResult:
    """One session of `case` with `config` in the database `db`; the developers' workspace
    in `folder`. `matcher` decides what a question is about, for the user and the score;
    `on_created(session_id)` is told once the session exists. A case with `repo` runs in a
    new repository made from it (in the user's data folder, as a scenario's `repo:`),
    removed afterwards unless `keep_repository` (the eval keeps its sessions: `--db`)."""
    from orchestrator.api import AskUser, Sessions
    from orchestrator.evals.user import ModelUser, SimulatedUser

    settings: dict[str, Any] = {"timeout": None}
    if case.checks:
        settings["checks"] = list(case.checks)
    fixture = Path(case.repo) if case.repo is not None else None
    if config.uncertainty_threshold is not None:
        settings["uncertainty_threshold"] = config.uncertainty_threshold
    judge = matcher or Matcher([case])
    user: AskUser = SimulatedUser(case, judge)
    if user_model is not None:
        user = ModelUser(case, _user_model(user_model, model_options))

    def heard(session_id: str, _event: Any) -> None:
        if on_created is not None:
            on_created(session_id)

    with Sessions(db, ask=user, on_event=heard) as sessions:
        if config.reference:
            from orchestrator.agents.reference import ReferencePolicy

            critical = case.critical[0].model_dump() if case.critical else None
            solution = case.solution.model_dump() if case.solution else None
            policy = ReferencePolicy(config.model.removeprefix("eval:"), critical, solution)
            doc = _scored_if_stalled(
                sessions,
                lambda: sessions.start(
                    case.task, backend=policy, settings=settings, fixture=fixture
                ),
            )
        else:
            doc = _scored_if_stalled(
                sessions,
                lambda: sessions.start(
                    case.task,
                    models=config.model,
                    settings=settings,
                    prompts=config.prompts,
                    workdir=folder / "workspace",
                    model_options=model_options,
                    fixture=fixture,
                ),
            )
        events = sessions.log(doc["session_id"])
    result = score_case(case, dict(doc), [dict(e) for e in events], judge)
    if fixture is not None and not keep_repository:
        _remove_repository(doc)
    return result


def _remove_repository(doc: Mapping[str, Any]) -> None:
    """Remove the repository a case's session was given (a copy of the case's `repo`,
    named after the session), once its scratch database is going too."""
    import shutil

    bench = doc.get("workbench") or {}
    repository = Path(str(bench.get("repository") or ""))
    if repository.name == doc.get("session_id") and repository.is_dir():
        shutil.rmtree(repository, ignore_errors=True)
