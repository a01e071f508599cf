"""Attacks on the developers' sandbox (contract section 9, docs/sandbox.md): an agent's
command runs through `run_command` in a task's worktree of a real repository and tries to
get out. Each attack is a test that fails when commands run unconfined (`--sandbox none`):
`test_the_attacks_need_the_sandbox` runs the escapes once more without it and sees them
succeed, so none of them passes for a reason other than bubblewrap.
"""

from __future__ import annotations

import json
import os
import random
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from orchestrator.skills import Confinement, Limits, Sandbox, Tool
from orchestrator.skills.sandbox import scrubbed_environment
from repos import commit_all, make_repo

from orchestrator.runtime.developers import Workroom
from orchestrator.runtime.worktrees import Workbench, discover, git


class Room:
    """A session's workroom with two tasks' worktrees, and their run_command tools."""

    def __init__(self, tmp_path: Path, sandbox: str = "auto", **settings: Any) -> None:
        self.repo = make_repo(tmp_path / "repo", {"app.py": "print('hi')\n"})
        repo = discover(self.repo)
        assert repo is not None
        bench = Workbench.create("s1", repo, tmp_path / "data" / "worktrees" / "s1")
        stored = {"workbench": bench.describe(), "sandbox": sandbox, **settings}
        room = Workroom.of("s1", stored)
        assert room is not None
        self.room = room
        self.desks = {n: room.desk(n, bench.base) for n in (1, 2)}

    def tool(self, number: int = 1) -> Tool:
        tools, _ = self.desks[number].tools(f"developer-{number}")
        return {t.name: t for t in tools}["run_command"]

    def run(self, command: str, number: int = 1, **args: Any) -> dict[str, Any]:
        result = self.tool(number).invoke({"command": command, **args})
        assert result.ok, result.error
        return {**result.data, "output": result.output}


@pytest.fixture
def room(tmp_path: Path) -> Room:
    return Room(tmp_path)


# -- writes outside the worktree ---------------------------------------------------------


def escapes(room: Room) -> dict[str, Path]:
    """Places an agent must not write, by name."""
    bench = room.room.bench
    return {
        "the user's tree": room.repo / "app.py",
        "another task's worktree": bench.worktree(2) / "app.py",
        "the real HOME": Path(os.environ["HOME"]) / "owned.txt",
        "/etc": Path("/etc/owned-by-agent"),
        "a git hook": bench.git_dir / "hooks" / "pre-commit",
        "git config": bench.git_dir / "config",
        "a ref": bench.git_dir / "refs" / "heads" / "main",
        "the worktree's .git file": bench.worktree(1) / ".git",
        "a hooks folder": bench.worktree(1) / ".githooks" / "pre-commit",
    }


def attack(room: Room, target: Path) -> str:
    """Append to `target` (and create it where it does not exist)."""
    return f"echo OWNED >> '{target}'"


def test_commands_cannot_write_outside_their_worktree(room: Room) -> None:
    (room.room.bench.worktree(1) / ".githooks").mkdir()
    (room.room.bench.worktree(1) / ".githooks" / "pre-commit").write_text("#!/bin/sh\n")
    targets = escapes(room)
    before = {name: p.read_bytes() if p.exists() else None for name, p in targets.items()}
    for name, target in targets.items():
        result = room.run(attack(room, target))
        # Refused, or (for a path under /tmp, where these tests keep everything) written
        # to the command's private /tmp, which is gone when it ends.
        if result["exit_code"] == 0:
            assert target.is_relative_to("/tmp") and not target.is_relative_to(
                room.room.bench.git_dir
            ), f"{name}: {result['output']}"
        else:  # read-only, or not even there (it lies outside what the command sees)
            assert any(
                why in result["output"] for why in ("Read-only file system", "nonexistent")
            ), f"{name}: {result['output']}"
    after = {name: p.read_bytes() if p.exists() else None for name, p in targets.items()}
    assert after == before
    # ...while its own worktree is writable, and so is its HOME.
    assert room.run("echo ok > mine.txt && echo x > $HOME/x && cat mine.txt")["output"].endswith(
        "ok\n"
    )


def test_a_command_cannot_make_git_run_code_outside(room: Room) -> None:
    """No hook, no config: our own commit of the turn runs none of what the agent wrote."""
    marker = room.room.bench.root / "hook-ran"
    hook = f"#!/bin/sh\ntouch '{marker}'\n"
    room.run(
        f"mkdir -p .githooks && printf '{hook}' > .githooks/pre-commit; "
        f"chmod +x .githooks/pre-commit; git config core.hooksPath .githooks"
    )
    git("config", "core.hooksPath", ".githooks", cwd=room.repo)  # the user's own setting
    room.room.commit(1, "t", _done())
    assert not marker.exists()


def _done() -> Any:
    from orchestrator.domain.replies import parse_reply

    return parse_reply("developer-1", {"status": "DONE", "summary": "s"})


@pytest.fixture
def home_with_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A user's home outside /tmp (the sandbox's /tmp is private anyway) holding a key."""
    import shutil

    home = Path(tempfile.mkdtemp(prefix="orchestrator-test-home-", dir="/var/tmp"))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(home)


def test_commands_cannot_read_the_users_home(room: Room, home_with_keys: Path) -> None:
    assert "PRIVATE KEY" not in room.run(f"cat {home_with_keys}/.ssh/id_ed25519")["output"]
    listing = room.run(f"ls -a {home_with_keys}")
    assert listing["exit_code"] == 0 and ".ssh" not in listing["output"]
    # The tools commands need are still there.
    assert room.run("python -c 'import sys; print(sys.version_info[0])'")["output"].endswith("3\n")


# -- the network -------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that would answer (outside the sandbox it does)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.sendall(b"hello")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def connect(port: int) -> str:
    return (
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', "
        f"{port}), timeout=5); print('GOT', s.recv(5))\""
    )


def test_commands_cannot_reach_the_network(room: Room, listener: int) -> None:
    result = room.run(connect(listener))
    assert result["exit_code"] != 0 and "GOT" not in result["output"]
    assert "Connection refused" in result["output"] or "unreachable" in result["output"]


def test_allow_network_lifts_only_the_network_rule(tmp_path: Path, listener: int) -> None:
    room = Room(tmp_path, allow_network=True)
    assert "GOT b'hello'" in room.run(connect(listener))["output"]
    assert room.run("echo x > /etc/owned")["exit_code"] != 0


# -- time, memory, disk, output ---------------------------------------------------------


def running(token: str) -> list[int]:
    """Processes on this machine whose command line holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_nothing_outlives_the_timeout(room: Room) -> None:
    """A plain sleep, and a child in a session of its own that ignores SIGTERM."""
    token, other = (f"{random.randint(1000, 9999)}.{random.randint(100, 999)}" for _ in "12")
    result = room.run(
        f"(setsid sh -c 'trap \"\" TERM; exec sleep {token}' &); sleep {other}", timeout_s=1
    )
    assert result["timed_out"] and result["exit_code"] is None
    assert "timed out" in result["output"]
    assert running(token) == [] and running(other) == []


def test_memory_and_file_size_are_capped(tmp_path: Path) -> None:
    sandbox = Sandbox.choose("auto", Limits(memory_bytes=512 * 1024**2, file_bytes=8 * 1024**2))
    (tmp_path / "wt").mkdir()
    where = Confinement(worktree=tmp_path / "wt", home=tmp_path / "home")
    memory = sandbox.run("python3 -c 'x = bytearray(1024**3); print(len(x))'", where)
    assert memory.exit_code != 0 and "MemoryError" in memory.stderr
    disk = sandbox.run("head -c 50000000 /dev/zero > big.bin", where)
    assert disk.exit_code == 128 + 25  # SIGXFSZ: the file size limit
    assert (tmp_path / "wt" / "big.bin").stat().st_size <= 8 * 1024**2


def test_a_flood_of_output_is_cut_and_the_turn_goes_on(room: Room) -> None:
    result = room.run("head -c 100000000 /dev/zero | tr '\\0' x; echo; echo THE-END")
    assert result["exit_code"] == 0 and result["cut"]
    assert result["output"].rstrip().endswith("THE-END")
    assert len(result["output"]) < 20_000


def test_the_environment_holds_no_secret(room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    monkeypatch.setenv("ORCHESTRATOR_DB", "postgresql://u:pw-secret@db/x")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:pw2-secret@db/x")
    output = room.run("env")["output"]
    assert "secret" not in output
    assert f"HOME={room.room.bench.home(1)}" in output


def test_scrubbed_environment_keeps_only_what_commands_need(tmp_path: Path) -> None:
    env = scrubbed_environment(
        tmp_path, {"PATH": "/usr/bin", "LANG": "C.UTF-8", "AWS_SECRET_ACCESS_KEY": "x", "X": "1"}
    )
    assert set(env) == {
        "PATH",
        "LANG",
        "HOME",
        "TMPDIR",
        "PYTHONDONTWRITEBYTECODE",
        "GIT_CONFIG_NOSYSTEM",
    }


# -- proof that the attacks test the sandbox ---------------------------------------------


def test_the_attacks_need_the_sandbox(tmp_path: Path, listener: int) -> None:
    """Unconfined (`--sandbox none`), the same escapes get through: the tests above fail
    for want of bubblewrap, not for another reason."""
    room = Room(tmp_path, sandbox="none")
    bench = room.room.bench
    assert room.run(attack(room, bench.worktree(2) / "app.py"))["exit_code"] == 0
    assert (bench.worktree(2) / "app.py").read_text().endswith("OWNED\n")
    assert room.run(attack(room, bench.git_dir / "hooks" / "pre-commit"))["exit_code"] == 0
    assert "GOT b'hello'" in room.run(connect(listener))["output"]
    assert room.run("echo x > $HOME/y")["exit_code"] == 0
    secret = Path(tempfile.mkdtemp(dir="/var/tmp")) / "key"
    secret.write_text("PRIVATE KEY")
    assert "PRIVATE KEY" in room.run(f"cat {secret}")["output"]
    secret.unlink()
    secret.parent.rmdir()
    assert room.run("ls")["output"].count("app.py") == 1


def test_a_configured_hooks_path_is_guarded_too(tmp_path: Path) -> None:
    """`core.hooksPath=tools/hooks`: the file tools refuse it and commands see it read-only."""
    repo = make_repo(tmp_path / "repo")
    (repo / "tools" / "hooks").mkdir(parents=True)
    (repo / "tools" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    commit_all(repo, "hooks")
    git("config", "core.hooksPath", "tools/hooks", cwd=repo)
    found = discover(repo)
    assert found is not None
    bench = Workbench.create("s2", found, tmp_path / "wt")
    room = Workroom.of("s2", {"workbench": bench.describe(), "sandbox": "auto"})
    assert room is not None
    tools, _ = room.desk(1, found.head).tools("developer-1")
    by_name = {t.name: t for t in tools}
    write = by_name["write_file"].invoke({"path": "tools/hooks/pre-commit", "content": "evil"})
    assert not write.ok and "hooks" in str(write.error)
    assert by_name["write_file"].invoke({"path": "tools/build.sh", "content": "ok"}).ok
    ran = by_name["run_command"].invoke({"command": "echo evil >> tools/hooks/pre-commit"})
    assert ran.data["exit_code"] != 0 and "Read-only" in ran.output
    assert (bench.worktree(1) / "tools" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\n"


# -- where bubblewrap cannot run ---------------------------------------------------------


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bwrap that cannot run here (as in a container without user namespaces)."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr("orchestrator.skills.sandbox.find_bwrap", lambda: str(fake))


def test_where_bubblewrap_cannot_run_commands_are_refused_saying_why(
    tmp_path: Path, no_bwrap: None
) -> None:
    room = Room(tmp_path)
    result = room.tool().invoke({"command": "echo hi"})
    assert not result.ok
    assert "cannot run here: bwrap: No permissions to create new namespace" in str(result.error)
    assert "--sandbox none" in str(result.error)


def test_checks_without_a_sandbox_refuse_the_session_before_it_starts(
    tmp_path: Path, no_bwrap: None
) -> None:
    from conftest import invoke
    from repos import scenario

    repo = make_repo(tmp_path / "repo")
    path = scenario(
        tmp_path,
        {
            "task": "t",
            "checks": ["true"],
            "agents": {"pm": [{"status": "COMPLETE", "summary": "s"}]},
        },
    )
    done = invoke(
        "run", "--script", str(path), "--workdir", str(repo), "--db", str(tmp_path / "o.db")
    )
    assert done.returncode == 2 and "cannot run" in done.stderr and "--sandbox none" in done.stderr
    assert json.loads(invoke("list", "--json", "--db", str(tmp_path / "o.db")).stdout) == []


def test_sandbox_none_is_shown_as_a_warning(tmp_path: Path) -> None:
    from conftest import invoke
    from repos import scenario

    repo = make_repo(tmp_path / "repo")
    path = scenario(
        tmp_path,
        {
            "task": "t",
            "agents": {
                "pm": [
                    {"status": "PLANNED", "tasks": [{"title": "a"}]},
                    {"status": "COMPLETE", "summary": "s"},
                ],
                "developer": [
                    {
                        "tools": [{"run_command": {"command": "true"}}],
                        "status": "DONE",
                        "summary": "s",
                    }
                ],
            },
        },
    )
    db = str(tmp_path / "o.db")
    done = invoke(
        "run", "--script", str(path), "--workdir", str(repo), "--sandbox", "none", "--db", db
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING: --sandbox none: commands and checks run unconfined" in done.stderr
    assert "sandbox none" in done.stderr  # the command's line names the sandbox that ran it
    assert "WARNING: commands run unconfined" in done.stdout


def test_a_check_kept_under_tmp_runs_in_the_sandbox(tmp_path: Path) -> None:
    """The sandbox gives commands a /tmp of their own, which hid a check script the user
    keeps under /tmp (an eval case's checks folder in a clone under /tmp: every check
    exited 2, "can't open file"). What a check names by absolute path is shown read-only;
    the agent's commands still cannot write it."""
    folder = Path(tempfile.mkdtemp(prefix="orch-check-", dir="/tmp"))
    try:
        script = folder / "check.py"
        script.write_text("print('the check ran')\n")
        room = Room(tmp_path, checks=[f"python3 -B {script}"])
        (result,) = room.room.run_checks(1)
        assert result["passed"], result
        assert "the check ran" in result["output"]
        attempt = room.run(f"echo changed > {script}")
        assert attempt["exit_code"] != 0
        assert script.read_text() == "print('the check ran')\n"
    finally:
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()
