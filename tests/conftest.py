"""Shared fixtures: every test gets its own database and never sees the real home."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# -- no test reaches a real provider ---------------------------------------------------
#
# Every connection a test process (and the processes forked from it) opens goes to this
# machine: a loopback or local address, or a Unix socket. A name that is not this
# machine's is not even looked up. Anything else (a hosted model API, any host on the
# internet) is refused where the socket connects, under every HTTP client (httpx, the
# OpenAI and Anthropic SDKs, urllib, asyncio), and the test fails naming it, even where the
# code under test caught the refusal. `@pytest.mark.real_provider` lets a test out
# (tests/test_real_provider.py, which runs only with an API key).


class RealNetworkRefused(ConnectionRefusedError):
    """A test tried to reach a host that is not this machine."""


class _Guard:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.off = 0  # tests running under @pytest.mark.real_provider
        self.reached: list[str] = []
        self._local: set[str] | None = None
        self._own: set[str] | None = None
        self.resolve: Any = socket.getaddrinfo  # the unpatched one, once installed

    def local_names(self) -> set[str]:
        if self._local is None:
            names = {"localhost", socket.gethostname(), socket.getfqdn()}
            self._local = {n.lower() for n in names if n}
        return self._local

    def refuse(self, what: str) -> RealNetworkRefused:
        with self.lock:
            self.reached.append(what)
        return RealNetworkRefused(
            f"a test tried to reach {what}, which is not this machine: tests never call "
            "a real provider or the network (tests/conftest.py; pass a fake from "
            "orchestrator.testing, or mark the test real_provider)"
        )

    def host_ok(self, host: Any) -> bool:
        if self.off or host is None:
            return True
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        name = str(host).strip("[]").split("%")[0].lower()
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return name in self.local_names() or name.endswith(".localhost")
        if address.is_loopback or address.is_unspecified or address.is_link_local:
            return True
        return name in self.own_addresses()

    def own_addresses(self) -> set[str]:
        """This machine's own addresses (a test's server may listen on one)."""
        if self._own is None:
            try:
                found = self.resolve(socket.gethostname(), None)
            except OSError:
                found = []
            self._own = {str(info[4][0]).lower() for info in found}
        return self._own


def _install() -> _Guard:
    """Patch the socket module once per process (this file is imported both as `conftest`
    and as `tests.conftest`: one guard, whichever import runs first)."""
    installed: _Guard | None = getattr(socket, "_orchestrator_test_guard", None)
    if installed is not None:
        return installed
    guard = _Guard()
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo
    guard.resolve = real_getaddrinfo

    def checked(sock: socket.socket, address: Any) -> None:
        inet = sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
        if inet and not guard.host_ok(address[0]):
            raise guard.refuse(f"{address[0]}:{address[1]}")

    def connect(self: socket.socket, address: Any) -> None:
        checked(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        checked(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not guard.host_ok(host):
            raise guard.refuse(f"{host}:{port}")
        return real_getaddrinfo(host, port, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
    socket._orchestrator_test_guard = guard  # type: ignore[attr-defined]
    return guard


_guard = _install()


@pytest.fixture(autouse=True)
def no_real_provider(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if it tried to reach a host that is not this machine (see above)."""
    allowed = request.node.get_closest_marker("real_provider") is not None
    with _guard.lock:
        _guard.off += allowed
        before = len(_guard.reached)
    try:
        yield
    finally:
        with _guard.lock:
            _guard.off -= allowed
            reached = _guard.reached[before:]
    if reached:
        pytest.fail(
            f"this test tried to reach {', '.join(sorted(set(reached)))}: tests never call "
            "a real provider or the network (pass a fake from orchestrator.testing)",
            pytrace=False,
        )


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
    config.addinivalue_line(
        "markers", "real_provider: the test may reach a real model provider (needs its key)"
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
