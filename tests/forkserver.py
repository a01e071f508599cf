"""Real `orchestrator` processes without paying for the imports each time: a fork server.

Most of a test's `python -m orchestrator …` launch is spent importing LangGraph, SQLAlchemy
and Typer again (about 0.8 s each on a 2-core machine). Here one server process per test
process imports them once; each launch is a `fork()` of it that then runs the command as
`python -m orchestrator` would (`runpy`, the real `sys.argv`, environment, working
directory and standard streams, `SystemExit` and `atexit` as usual). The command is still
a process of its own: it can be killed with SIGKILL at a crash point, stopped, raced
against others, and it owns its sessions under its own PID.

`Popen` is `subprocess.Popen` with the fork server behind it for `argv(...)` command lines
(`[sys.executable, "-m", "orchestrator", …]`) and Python scripts (`[sys.executable,
"harness.py", …]`, run as `python harness.py` would). It falls back to a real exec where a fresh
interpreter could behave differently: a terminal on a standard stream, `pass_fds`, a
`preexec_fn`, another executable, or an environment that differs from the server's in what
is read at startup (`PYTHON*`, locale, `ORCHESTRATOR_SQLITE_BUSY_TIMEOUT`).
`ORCHESTRATOR_TEST_FORKSERVER=0` turns it off (every launch a real exec).

How a launch goes: the test connects to the server's Unix socket and sends the request
(JSON) with its three standard stream descriptors (SCM_RIGHTS). The server forks a reaper,
which forks the command, sends its PID back, waits for it and sends its wait status; the
test's `Popen` reads the PID in `_execute_child` and the status in `_try_wait`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import io
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Read once when the interpreter starts; a launch whose environment differs in these is exec'd.
STARTUP_ENV = ("PYTHON", "LC_", "LANG", "ORCHESTRATOR_SQLITE_BUSY_TIMEOUT")
# What a command imports (its own modules are loaded on demand; these are the expensive ones).
PRELOAD = (
    "orchestrator.cli.entry",
    "orchestrator.cli.fastread",
    "orchestrator.api",
    "orchestrator.api.sessions",
    "orchestrator.api.running",
    "orchestrator.api.database",
    "orchestrator.store.core",
    "orchestrator.store.lean_sql",
    "sqlalchemy.dialects.sqlite",
    "yaml",
    "platformdirs",
    "alembic.config",
    "langchain_core.tracers.context",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
    "orchestrator.runtime.engine",
    "orchestrator.runtime.graph",
    "orchestrator.runtime.checkpoints",
    "orchestrator.runtime.worker_loop",
    "orchestrator.store",
    "orchestrator.store.db",
    "orchestrator.store._pg",
    "orchestrator.agents.scripted",
    "orchestrator.agents.llm",
    "orchestrator.scenario.format",
    "orchestrator.suite.play",
    "orchestrator.web.app",
    "orchestrator.mcp_server.server",
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.postgres",
    "psycopg",
    "alembic.command",
    "uvicorn",
)
_HEADER = struct.Struct("!I")
_REPORT = struct.Struct("!cq")


def enabled() -> bool:
    return os.environ.get("ORCHESTRATOR_TEST_FORKSERVER", "1") != "0"


# -- the test's side ------------------------------------------------------------------------


class _Server:
    """The fork server of this test process, started on first use."""

    _lock = threading.Lock()
    _path: str | None = None
    _proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def address(cls) -> str:
        with cls._lock:
            if cls._path is None or cls._proc is None or cls._proc.poll() is not None:
                where = tempfile.mkdtemp(prefix="orch-fork-")
                path = os.path.join(where, "s")
                cls._proc = subprocess.Popen(
                    [sys.executable, __file__, path],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    cwd=ROOT,
                )
                assert cls._proc.stdout is not None
                ready = cls._proc.stdout.readline()  # after the imports
                if ready.strip() != b"ready":
                    raise RuntimeError(f"the test fork server did not start: {ready!r}")
                cls._path = path
                atexit.register(cls._proc.kill)
            return cls._path


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_ENV)}


class Popen(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen`; an `orchestrator` command line is forked from the fork server."""

    _zsock: socket.socket | None = None
    _controlling_tty = False  # a terminal on the streams: it becomes the command's (spawn_pty)

    def _execute_child(  # type: ignore[override]
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        *rest: Any,
    ) -> None:
        (_, _, _, p2cread, _, _, c2pwrite, _, errwrite) = rest[:9]
        start_new_session, process_group = rest[14], rest[15]
        gid, gids, uid, umask = rest[10:14]
        command = [os.fspath(a) for a in args] if not isinstance(args, str | bytes) else None
        environ = dict(os.environ if env is None else env)
        streams = [p2cread, c2pwrite, errwrite]
        forkable = (
            enabled()
            and command is not None
            and (
                command[:3] == [sys.executable, "-m", "orchestrator"]
                or (
                    len(command) > 1 and command[0] == sys.executable and command[1].endswith(".py")
                )
            )
            and executable is None
            and preexec_fn is None
            and not pass_fds
            and (gid, gids, uid, umask) == (None, None, None, -1)
            and process_group in (None, -1)
            and _startup_env(environ) == _startup_env(dict(os.environ))
            and (
                self._controlling_tty
                or not any(os.isatty(fd if fd != -1 else n) for n, fd in enumerate(streams))
            )
        )
        if not forkable:
            super()._execute_child(
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, *rest
            )  # type: ignore[misc]
            return
        request = json.dumps(
            {
                "args": command[1:],
                "env": environ,
                "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                "new_session": bool(start_new_session) or self._controlling_tty,
                "tty": self._controlling_tty,
            }
        ).encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(_Server.address())
        fds = [fd if fd != -1 else n for n, fd in enumerate(streams)]
        socket.send_fds(sock, [_HEADER.pack(len(request))], fds)
        sock.sendall(request)
        kind, pid = _REPORT.unpack(_recv_exact(sock, _REPORT.size))
        assert kind == b"P", kind
        self.pid = pid
        self._zsock = sock
        self._close_pipe_fds(*rest[3:9])  # type: ignore[attr-defined]  # as Popen's own does

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if self._zsock is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc,no-any-return]
        if wait_flags & os.WNOHANG and not select.select([self._zsock], [], [], 0)[0]:
            return (0, 0)
        kind, status = _REPORT.unpack(_recv_exact(self._zsock, _REPORT.size))
        assert kind == b"S", kind
        self._zsock.close()
        self._zsock = None
        self._forked_status = status
        return (self.pid, status)

    def _internal_poll(self, _deadstate: int | None = None, **_: Any) -> int | None:
        if self._zsock is None and not hasattr(self, "_forked_status"):
            return super()._internal_poll(_deadstate)  # type: ignore[misc,no-any-return]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                if self.returncode is None and self._zsock is not None:
                    pid, status = self._try_wait(os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)  # type: ignore[attr-defined]
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode


def run(
    args: list[str], *, input: str | None = None, timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(args, capture_output=True, text=True, …)` through `Popen`."""
    assert kwargs.pop("capture_output", True) and kwargs.pop("text", True), "captured text only"
    kwargs.setdefault("stdin", subprocess.PIPE if input is not None else subprocess.DEVNULL)
    with Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


class _TtyPopen(Popen):
    _controlling_tty = True


def spawn_pty(args: list[str], **kwargs: Any) -> Any:
    """`pexpect.spawn(sys.executable, args, …)`, the command forked from the fork server with
    a new pseudo-terminal as its controlling terminal (a real exec when turned off)."""
    import pexpect
    import ptyprocess

    class _ForkedPty(ptyprocess.PtyProcess):  # type: ignore[misc]
        popen: Popen

        def isalive(self) -> bool:
            code = None if self.terminated else self.popen.poll()
            if code is not None:
                self.terminated = True
                self.exitstatus = code if code >= 0 else None
                self.signalstatus = -code if code < 0 else None
                self.status = code
            return not self.terminated

        def wait(self) -> int | None:
            self.popen.wait()
            self.isalive()
            return self.exitstatus  # type: ignore[no-any-return]

    class _Spawn(pexpect.spawn):  # type: ignore[misc]
        def _spawnpty(self, argv: list[bytes | str], **options: Any) -> _ForkedPty:
            rows, cols = options.get("dimensions") or (24, 80)
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            command = [a.decode() if isinstance(a, bytes) else a for a in argv]
            command[0] = sys.executable  # pexpect resolved it through PATH
            try:
                popen = _TtyPopen(
                    command, stdin=slave, stdout=slave, stderr=slave,
                    cwd=options.get("cwd"), env=options.get("env"),
                )  # fmt: skip
            finally:
                os.close(slave)
            process = _ForkedPty(popen.pid, master)
            process.popen = popen
            return process

    spawner = _Spawn if enabled() else pexpect.spawn
    return spawner(sys.executable, args, **kwargs)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the test fork server closed the connection")
        data += chunk
    return data


# -- the server's side ----------------------------------------------------------------------


def _serve(path: str) -> dict[str, Any]:
    """Accept launches until killed; returns (in the forked command only) its request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reapers are reaped by the kernel
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = listener.accept()
        try:
            header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
            (size,) = _HEADER.unpack(header)
            request = json.loads(_recv_exact(conn, size))
        except (OSError, ValueError, struct.error):
            conn.close()
            continue
        if os.fork() == 0:  # the reaper
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            pid = os.fork()
            if pid == 0:  # the command
                _become(request, fds, conn)
                return request
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(_REPORT.pack(b"P", pid))
                _, status = os.waitpid(pid, 0)
                conn.sendall(_REPORT.pack(b"S", status))
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        conn.close()


def _become(request: dict[str, Any], fds: list[int], conn: socket.socket) -> None:
    """Turn this forked child into `python -m orchestrator ARGS` as it would start."""
    if request["new_session"]:
        os.setsid()
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
    if request["tty"]:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    conn.close()
    os.closerange(3, 65536)
    _fresh_stdio()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    args = request["args"]
    if args[0] == "-m":  # `python -m orchestrator` puts the working directory first
        sys.path[0] = request["cwd"]
        sys.argv = ["orchestrator", *args[2:]]
    else:  # `python script.py`: the script's directory
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        sys.argv = list(args)
    # Read at import: the crash and stop points this command is to hit.
    import importlib

    import orchestrator.faults

    importlib.reload(orchestrator.faults)


def _fresh_stdio() -> None:
    """sys.stdin, stdout and stderr as a starting interpreter makes them for the streams it
    was given: line-buffered on a terminal (stderr always), the same encoding and errors."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffered,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=fd == 2 or os.isatty(fd),
        )
        stream.mode = "r" if fd == 0 else "w"  # type: ignore[misc]
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _main(path: str) -> None:
    import importlib

    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if threading.active_count() != 1:
        raise SystemExit("the test fork server started a thread while importing; cannot fork")
    # The imported modules' objects are never garbage: keep them out of every collection, in
    # the commands too (without this a command spends 0.6 s collecting them as it exits).
    gc.collect()
    gc.freeze()
    request = _serve(path)
    import runpy

    if request["args"][0] == "-m":
        runpy.run_module("orchestrator", run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    _main(sys.argv[1])
