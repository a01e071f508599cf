"""Shared fixtures: every test gets its own database and never sees the real home."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import forkserver
import pgcluster
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point HOME and the XDG dirs at a temp dir, and drop ORCHESTRATOR_DB."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)
    for key in list(os.environ):
        if key.endswith("_API_KEY"):
            monkeypatch.delenv(key)
    return home


# -- databases: SQLite everywhere; SQLite and PostgreSQL where a test says so ------------
#
# `@pytest.mark.backends()` on a module (pytestmark) or a test runs its `db_url` tests once
# per backend (ids `[sqlite]`, `[postgresql]`); `@pytest.mark.backends("sqlite")` keeps a
# test on one. Unmarked tests get SQLite only. See tests/pgcluster.py for the server.

BACKENDS = ("sqlite", "postgresql")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers per core. The tests wait on the processes they start, on
    leases and on the database more than they compute (on 2 cores: 141 s with 4 workers,
    188 s with 2). $PYTEST_XDIST_AUTO_NUM_WORKERS still wins."""
    return min(2 * (os.cpu_count() or 1), 8)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "backends(*names): run the test's db_url on these backends (default: all)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None or "db_backend" not in metafunc.fixturenames:
        return
    names = marker.args or BACKENDS
    metafunc.parametrize("db_backend", names, indirect=True, ids=list(names))


@pytest.fixture
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[pgcluster.Cluster]:
    """The suite's PostgreSQL server, started on first use (see tests/pgcluster.py)."""
    if not pgcluster.enabled():
        pytest.skip(f"{pgcluster.OPT_OUT}=0: PostgreSQL tests opted out")
    external = os.environ.get(pgcluster.URL_ENV)
    if external:
        cluster = pgcluster.Cluster(external)
    else:
        bin_dir = pgcluster.find_bin()
        if bin_dir is None:
            pytest.fail(pgcluster.INSTALL_HINT, pytrace=False)
        cluster = pgcluster.Cluster.start(bin_dir)
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with our schema and LangGraph's, made once per test process: a test's
    database is a copy (migrating a new file costs about 0.12 s, a copy about 1 ms)."""
    from orchestrator.runtime.checkpoints import checkpointer
    from orchestrator.store.db import open_engine

    path = tmp_path_factory.mktemp("template") / "migrated.db"
    open_engine(f"sqlite:///{path}").dispose()
    with checkpointer(f"sqlite:///{path}"):
        pass
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path


def _database(request: pytest.FixtureRequest, backend: str, path: Path, kind: str) -> Iterator[str]:
    if backend == "sqlite":
        if kind == "migrated":
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    cluster: pgcluster.Cluster = request.getfixturevalue("pg_cluster")
    with cluster.fresh(kind) as url:
        yield url


@pytest.fixture
def db_url(request: pytest.FixtureRequest, db_backend: str, tmp_path: Path) -> Iterator[str]:
    """A database of its own for this test, with the schema in place: a SQLite file or a
    PostgreSQL database, each a copy of a migrated template."""
    yield from _database(request, db_backend, tmp_path / "orchestrator.db", "migrated")


@pytest.fixture
def empty_db_url(request: pytest.FixtureRequest, db_backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all (for migration tests)."""
    yield from _database(request, db_backend, tmp_path / "empty.db", "empty")


@pytest.fixture
def store(db_url: str) -> Iterator[object]:
    from orchestrator.store import Store

    made = Store.open(db_url)
    yield made
    made.close()


def argv(*args: str, db: str | None = None) -> list[str]:
    """The command line of the real `orchestrator`, run as `python -m orchestrator`."""
    return [sys.executable, "-m", "orchestrator", *args, *(["--db", db] if db else [])]


def invoke(
    *args: str, db: str | None = None, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`orchestrator ARGS` in this process: the real entry (`run_cli`: parsing, usage errors,
    exit codes) under Typer's CliRunner isolation; stdin is not a terminal. About ten times
    faster than `cli`: use `cli` only where the process boundary is the point."""
    from typer.testing import CliRunner

    from orchestrator.cli import run_cli

    argv_ = [*args, *(["--db", db] if db else [])]
    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        code = run_cli(argv_)
        sys.stdout.flush()
        sys.stderr.flush()
        return subprocess.CompletedProcess(
            argv_, code, out.getvalue().decode(), err.getvalue().decode()
        )


def cli(
    *args: str, db: str | None = None, timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run the real `orchestrator` command in a process of its own (stdin is not a
    terminal), forked from the test fork server (tests/forkserver.py)."""
    return forkserver.run(argv(*args, db=db), timeout=timeout, cwd=ROOT, **kwargs)
