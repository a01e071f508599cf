"""A throwaway PostgreSQL server for the test suite, and a fresh database per test.

One cluster per test process (under pytest-xdist: one per worker), started on first use in
a temp dir: a unix socket in that dir plus a free loopback port, fsync off (a crashed
*server* is never part of a test; killed clients are). The temp dir is in /dev/shm when
that is a tmpfs with room (else the usual temp dir): a database per test is a copy of
about 8 MB, which costs about 0.2 CPU-seconds on a disk-backed file system and about
0.02 s in memory. Every test that asks gets its own
database, copied from a template (CREATE DATABASE ... TEMPLATE: a file copy, fast) and
dropped afterwards; the cluster is stopped and its dir removed at the end of the session.

Environment:
    ORCHESTRATOR_TEST_POSTGRES=0      run no PostgreSQL test (an explicit opt-out: they
                                      are skipped and the summary says why)
    ORCHESTRATOR_TEST_POSTGRES_URL    use this server instead of starting one (a superuser
                                      URL, e.g. postgresql+psycopg://postgres@127.0.0.1/postgres)
    ORCHESTRATOR_PG_BIN               the folder holding initdb/pg_ctl (else PATH, else
                                      /usr/lib/postgresql/<newest>/bin)

Without the binaries (and without the opt-out) every PostgreSQL test fails with the
command that installs them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Cluster", "enabled", "find_bin", "free_port", "INSTALL_HINT", "OPT_OUT"]

OPT_OUT = "ORCHESTRATOR_TEST_POSTGRES"
URL_ENV = "ORCHESTRATOR_TEST_POSTGRES_URL"
INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found. Install them with\n"
    "    apt-get install postgresql-15      (Debian/Ubuntu; or your system's postgresql package)\n"
    "or point ORCHESTRATOR_PG_BIN at their folder, or ORCHESTRATOR_TEST_POSTGRES_URL at a "
    "server,\nor opt out explicitly with ORCHESTRATOR_TEST_POSTGRES=0."
)
USER = "postgres"  # the superuser initdb creates (whatever the OS user is)


def enabled() -> bool:
    return os.environ.get(OPT_OUT, "1").strip().lower() not in ("0", "false", "no", "off")


def find_bin() -> Path | None:
    """The folder with initdb and pg_ctl, or None."""
    explicit = os.environ.get("ORCHESTRATOR_PG_BIN")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(versions)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def scratch_parent() -> str | None:
    """/dev/shm when it is a writable tmpfs with at least 1 GiB free, else None (the usual
    temp dir). The server's files are thrown away at the end of the run either way."""
    shm = "/dev/shm"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            tmpfs = any(
                line.split()[1:3] == [shm, "tmpfs"] for line in mounts if line.count(" ") >= 2
            )
        room = os.statvfs(shm)
    except OSError:
        return None
    if tmpfs and os.access(shm, os.W_OK) and room.f_bavail * room.f_frsize >= 1 << 30:
        return shm
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A running server: `admin` runs SQL as the superuser; `database()` makes a test db."""

    def __init__(self, base_url: str, *, stop: tuple[list[str], Path] | None = None) -> None:
        from sqlalchemy.engine import make_url

        self.base = make_url(base_url)
        self._stop = stop  # (the command prefix to run as the server's user, data dir)
        self._names = itertools.count()
        self._prefix = f"orch_t{os.getpid()}_"
        self._templates: dict[str, str] = {}

    # -- starting and stopping ------------------------------------------------------------

    @classmethod
    def start(cls, bin_dir: Path) -> Cluster:
        root = Path(tempfile.mkdtemp(prefix="orch-pg-", dir=scratch_parent()))
        as_user: list[str] = []
        if os.geteuid() == 0:
            # initdb and postgres refuse to run as root: run them as the `postgres` user
            # (the package creates it), with the temp dir theirs.
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError(
                    "running as root and there is no `postgres` user to run the server "
                    "as; install the postgresql package (it creates one) or run as a user"
                ) from exc
            os.chown(root, entry.pw_uid, entry.pw_gid)
            as_user = ["runuser", "-u", "postgres", "--"]
        data = root / "data"
        port = free_port()
        run = lambda *cmd: subprocess.run(  # noqa: E731
            [*as_user, *cmd], check=True, capture_output=True, text=True, timeout=120
        )
        try:
            run(str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "-A", "trust",
                "--no-sync", "-E", "UTF8", "--locale=C")  # fmt: skip
            with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
                conf.write(
                    f"listen_addresses = '127.0.0.1'\nport = {port}\n"
                    f"unix_socket_directories = '{root}'\n"
                    "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                    "max_connections = 300\nshared_buffers = 64MB\n"
                )
            # Loopback: the superuser without a password, every other role with one (so a
            # test can see an authentication failure).
            (data / "pg_hba.conf").write_text(
                "local all all trust\n"
                f"host all {USER} 127.0.0.1/32 trust\n"
                "host all all 127.0.0.1/32 scram-sha-256\n",
                encoding="utf-8",
            )
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w",
                "-t", "60", "start")  # fmt: skip
        except subprocess.CalledProcessError as exc:
            log = root / "log"
            detail = log.read_text() if log.exists() else ""
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(
                f"could not start PostgreSQL: {exc.cmd}\n{exc.stderr}\n{detail}"
            ) from exc
        cluster = cls(
            f"postgresql+psycopg://{USER}@127.0.0.1:{port}/postgres",
            stop=([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data)], root),
        )
        cluster.port = port
        return cluster

    port: int = 0

    def cpu_seconds(self) -> float | None:
        """CPU seconds this server's processes have used so far: the postmaster, its live
        children and those it has reaped (Linux /proc; None where there is none).

        A consistent reading: a child reaped during the scan would be counted twice (live,
        then in the postmaster's cutime) or not at all, so the scan is taken again until
        the postmaster's reaped total is the same before and after it."""
        if self._stop is None:
            return None
        try:
            pid_file = self._stop[1] / "data" / "postmaster.pid"
            postmaster = int(pid_file.read_text().split()[0])
            for _ in range(20):
                reaped = self._reaped_ticks(postmaster)
                live = self._children_ticks(postmaster)
                if self._reaped_ticks(postmaster) == reaped:
                    return (live + reaped) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None
        return None

    @staticmethod
    def _stat(pid: int | str) -> list[str]:
        # After the command's closing parenthesis: [1] the parent; [11:15] utime, stime,
        # cutime, cstime (ticks).
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()

    def _reaped_ticks(self, postmaster: int) -> int:
        return sum(int(value) for value in self._stat(postmaster)[13:15])

    def _children_ticks(self, postmaster: int) -> int:
        """The postmaster's own CPU and its live children's (with what they reaped)."""
        total = sum(int(value) for value in self._stat(postmaster)[11:13])
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                fields = self._stat(entry.name)
            except OSError:  # gone meanwhile
                continue
            if int(fields[1]) == postmaster:
                total += sum(int(value) for value in fields[11:15])
        return total

    def restart(self) -> None:
        """Stop the server (fast: clients are cut off) and start it again on the same port."""
        assert self._stop is not None, "only a cluster this suite started can be restarted"
        pg_ctl, root = self._stop
        subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], check=True, capture_output=True)
        subprocess.run([*pg_ctl, "-l", str(root / "log"), "-w", "start"], check=True,
                       capture_output=True)  # fmt: skip

    def stop_server(self) -> None:
        assert self._stop is not None
        pg_ctl, _ = self._stop
        subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], check=True, capture_output=True)

    def start_server(self) -> None:
        assert self._stop is not None
        pg_ctl, root = self._stop
        subprocess.run([*pg_ctl, "-l", str(root / "log"), "-w", "start"], check=True,
                       capture_output=True)  # fmt: skip

    def close(self) -> None:
        for name in list(self._templates.values()):
            with contextlib.suppress(Exception):
                self.drop(name, template=True)
        if self._stop is not None:
            pg_ctl, root = self._stop
            subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True)
            shutil.rmtree(root, ignore_errors=True)

    # -- databases ------------------------------------------------------------------------

    def url(self, database: str) -> str:
        return self.base.set(database=database).render_as_string(hide_password=False)

    def admin(self, *statements: str) -> None:
        import psycopg

        conninfo = self.url(self.base.database or "postgres").replace("+psycopg", "", 1)
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def _template(self, kind: str) -> str:
        """A template database: `empty`, or `migrated` (our schema and LangGraph's)."""
        if kind not in self._templates:
            name = f"{self._prefix}tpl_{kind}"
            self.admin(f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
            if kind == "migrated":
                from orchestrator.runtime.checkpoints import checkpointer
                from orchestrator.store.db import open_engine

                open_engine(self.url(name)).dispose()
                with checkpointer(self.url(name)):
                    pass
            self._templates[kind] = name
        return self._templates[kind]

    def database(self, kind: str = "migrated") -> str:
        """A new database (a copy of the `kind` template); returns its URL."""
        template = self._template(kind)
        name = f"{self._prefix}{next(self._names)}"
        # The copy needs the template without connections: nothing keeps one open.
        for attempt in range(50):
            try:
                self.admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                break
            except Exception as exc:  # the template is briefly busy: try again
                if "is being accessed by other users" not in str(exc) or attempt == 49:
                    raise
                time.sleep(0.1)
        return self.url(name)

    def drop(self, url_or_name: str, *, template: bool = False) -> None:
        from sqlalchemy.engine import make_url

        name = make_url(url_or_name).database if "://" in url_or_name else url_or_name
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextlib.contextmanager
    def fresh(self, kind: str = "migrated") -> Iterator[str]:
        url = self.database(kind)
        try:
            yield url
        finally:
            self.drop(url)
