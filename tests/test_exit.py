"""How the `orchestrator` process ends (`orchestrator.cli.console`): without the
interpreter's teardown, but with everything a normal exit does that someone can see: the
exit status, every byte written, the atexit handlers, and a thread of the command's own
that is still working waited for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import forkserver

from tests.conftest import EXAMPLES, ROOT, cli

SCRIPT = """
import atexit, sys, threading
from pathlib import Path

out = Path(sys.argv.pop(1))
atexit.register(lambda: out.with_suffix(".atexit").write_text("ran"))
if sys.argv[1] == "--late-thread":
    sys.argv.pop(1)
    def late() -> None:  # finishes only once the main thread is done: still working at the end
        threading.main_thread().join()
        out.with_suffix(".thread").write_text("finished")
    threading.Thread(target=late).start()  # not a daemon: a normal exit waits for it
if sys.argv[1] == "--no-early-handlers":  # an interpreter without CPython's private hook
    sys.argv.pop(1)
    del atexit._run_exitfuncs
sys.argv[0] = "orchestrator"
from orchestrator.cli import console
console()
"""


def _script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "entry.py"
    path.write_text(SCRIPT)
    return forkserver.run([sys.executable, str(path), str(tmp_path / "out"), *args], cwd=ROOT)


def test_a_whole_session_document_reaches_a_pipe_and_the_status_is_kept(db_url: str) -> None:
    done = cli("run", "--script", str(EXAMPLES / "answered-question.yaml"), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # every byte, through to the closing brace
    assert document["status"] == "completed"
    bad = cli("status", "no-such-session", "--json", db=db_url)
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["exit_code"] == 2


def test_the_atexit_handlers_run_before_the_process_ends(tmp_path: Path) -> None:
    done = _script(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert (tmp_path / "out.atexit").read_text() == "ran"


def test_a_thread_of_the_command_still_working_is_waited_for(tmp_path: Path) -> None:
    done = _script(tmp_path, "--late-thread", "--version")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.thread").read_text() == "finished"
    assert (tmp_path / "out.atexit").read_text() == "ran"


def test_a_usage_error_exits_2_through_the_same_end(tmp_path: Path) -> None:
    done = _script(tmp_path, "run", "--no-such-option", "--json")
    assert done.returncode == 2
    assert "--no-such-option" in done.stderr
    assert json.loads(done.stdout)["exit_code"] == 2  # written, not flushed, by the command
    assert (tmp_path / "out.atexit").read_text() == "ran"


def test_without_a_way_to_run_the_handlers_early_the_usual_exit_runs_them(
    tmp_path: Path,
) -> None:
    done = _script(tmp_path, "--no-early-handlers", "--version")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.atexit").read_text() == "ran"
