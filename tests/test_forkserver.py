"""The test fork server (tests/forkserver.py) gives what a fresh `python -m orchestrator`
gives: the same output and exit code, its own process, environment, directory and stdin."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import forkserver
import pytest
from conftest import EXAMPLES, ROOT, argv

pytestmark = pytest.mark.skipif(not forkserver.enabled(), reason="the fork server is turned off")


def _exec(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload,no-any-return]


def test_a_forked_command_prints_and_exits_as_an_execd_one(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    for args in (
        ["--help"],
        ["run", "--script", str(EXAMPLES / "pause-and-resume.yaml"), "--ui", "none"],
        ["status", "no-such-session"],
        ["resume", "x", "--answer", "a", "--choice", "b"],
    ):
        forked = forkserver.run(argv(*args, db=db), cwd=ROOT)
        assert isinstance(forked, subprocess.CompletedProcess)
        execd = _exec(argv(*args, db=f"sqlite:///{tmp_path / 'e.db'}"), cwd=ROOT)
        assert forked.returncode == execd.returncode, (args, forked.stderr, execd.stderr)

        def same(text: str) -> str:
            # Session ids and the database path differ between the two runs.
            return re.sub(r"\b[0-9a-f]{12}\b", "ID", text.replace("o.db", "e.db"))

        assert same(forked.stdout) == same(execd.stdout), args
        assert same(forked.stderr) == same(execd.stderr), args
        assert "Traceback" not in forked.stderr


def test_a_forked_command_is_a_process_of_its_own(tmp_path: Path) -> None:
    """Its own PID (not the server's, not ours), killed by SIGKILL as any process is; the
    environment, working directory and stdin it was given."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import os, sys, time\n"
        "print(os.getpid(), os.getcwd(), os.environ.get('PROBE'), sys.stdin.read(), flush=True)\n"
        "time.sleep(float(sys.argv[1]))\n"  # the point: alive until it is killed
    )
    done = forkserver.run(
        [sys.executable, str(script), "0"], input="from stdin", cwd=tmp_path,
        env={**os.environ, "PROBE": "given"},
    )  # fmt: skip
    pid, cwd, probe, stdin = done.stdout.split(maxsplit=3)
    assert done.returncode == 0 and int(pid) != os.getpid()
    assert (cwd, probe, stdin.strip()) == (str(tmp_path), "given", "from stdin")

    slow = forkserver.Popen(
        [sys.executable, str(script), "60"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert slow.stdout is not None
    assert int(slow.stdout.readline().split()[0]) == slow.pid
    assert slow.poll() is None
    os.kill(slow.pid, signal.SIGKILL)
    assert slow.wait(timeout=120) == -signal.SIGKILL  # killed, not its 60 s sleep's end
    slow.stdout.close()


def test_what_a_fresh_interpreter_could_do_differently_is_execd(tmp_path: Path) -> None:
    """A startup variable that differs from the server's: a real exec (its `sys.flags` shows
    the variable took effect, which a fork of the server could not)."""
    env = {**os.environ, "PYTHONOPTIMIZE": "1"}
    code = tmp_path / "flags.py"
    code.write_text("import sys\nprint(sys.flags.optimize)\n")
    done = forkserver.run([sys.executable, str(code)], env=env)
    assert done.stdout.strip() == "1"
