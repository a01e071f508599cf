"""One scenario in one child process, with its own fresh SQLite database.

The runner imports this module (and through it LangGraph, SQLAlchemy and the store)
before it forks the children, so every child starts warm, sharing nothing but code.
"""

from __future__ import annotations

import atexit
import gc
import shutil
import tempfile
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from orchestrator.api.running import load_runtime
from orchestrator.errors import EnvironmentFailure, UserError
from orchestrator.suite.results import Result

load_runtime()  # preloaded: the children start warm

__all__ = ["run_file", "child", "warm_up"]


_template: Path | None = None  # a migrated, empty database that children copy


def warm_up() -> None:
    """Do once, before forking, what every child would do first: load the migrations,
    compile the graph, and make an empty migrated database (with LangGraph's tables) for
    the children to copy instead of migrating their own. Leaves no thread running, so
    forking after it stays safe."""
    global _template
    if _template is not None and _template.exists():
        return
    from orchestrator.api.running import make_template

    folder = Path(tempfile.mkdtemp(prefix="orchestrator-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    make_template(f"sqlite:///{folder / 'template.db'}")
    _template = folder / "template.db"


def run_file(path: str, name: str, *, keep_on_failure: bool = True) -> Result:
    """Play the scenario at `path` in a fresh database; the database is deleted when it
    passed and kept (named in the result) when it did not, for `orchestrator log`."""
    from orchestrator.api import Sessions
    from orchestrator.scenario import load_scenario
    from orchestrator.suite.play import play

    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="orchestrator-test-"))
    db = folder / "orchestrator.db"
    if _template is not None:
        shutil.copyfile(_template, db)  # a fresh database, already migrated
    sessions = Sessions(f"sqlite:///{db}")
    keep = False
    try:
        try:
            played = play(load_scenario(path), sessions, source=name)
        except (UserError, EnvironmentFailure) as exc:
            keep = keep_on_failure
            return Result(
                name=name,
                path=path,
                outcome="error",
                seconds=time.perf_counter() - started,
                message=exc.message,
                database=str(db) if keep else None,
            )
        keep = keep_on_failure and not played.passed
        return Result(
            name=name,
            path=path,
            outcome="passed" if played.passed else "failed",
            seconds=time.perf_counter() - started,
            status=played.doc["status"],
            session_id=played.doc["session_id"],
            unmet=played.unmet,
            database=str(db) if keep else None,
        )
    finally:
        sessions.close()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def child(path: str, name: str, out: Connection) -> None:
    """The child process's entry point: play, send the result, exit. A bug in the run is
    reported as an `error` result with its traceback instead of stopping the suite."""
    # What the parent imported is never garbage: keep the collector off it (it would also
    # copy every inherited page), and on for what this run allocates. The CLI starts with
    # the collector off (see orchestrator.cli.main).
    gc.freeze()
    gc.enable()
    result: Any
    try:
        result = run_file(path, name)
    except BaseException:  # reported to the parent with its traceback, never swallowed
        result = Result(name=name, path=path, outcome="error", message=traceback.format_exc())
    out.send(result)
    out.close()
