"""Developers that run code: what the worktrees and the sandbox cost, as ratios in one run.

    .venv/bin/python benchmarks/developers.py            (part of `make bench`)
    .venv/bin/python benchmarks/developers.py --quick    fewer repetitions

Rows (medians of interleaved runs; nothing is asserted):
- sandbox: `run_command`'s sandbox (bubblewrap, limits, output readers) starting `true`,
  against a plain `subprocess.run(["/bin/sh", "-c", "true"])`;
- worktree: laying out a task's worktree (`Workbench.prepare`: worktree add, checkout,
  reset, clean) in repositories of 1,000 and 10,000 files, against `git worktree add`
  alone;
- merge: the merge path per task (without checks) against `git merge --no-ff` of the same
  branches, one after another, in a worktree;
- turn: a one-task scripted session whose developer writes a file, with a repository
  (worktree reset, commit, the commit's diff, events) against the same session in the
  shared workspace, in one process.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _interleaved(runs: int, *calls: Callable[[], object]) -> list[list[float]]:
    """Each call timed `runs` times, taking turns, so load hits them alike."""
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(runs):
        for index, call in enumerate(calls):
            started = time.perf_counter()
            call()
            times[index].append(time.perf_counter() - started)
    return times


def _row(name: str, ours: list[float], base: list[float], baseline: str) -> None:
    a, b = _median(ours), _median(base)
    print(
        f"{name:<34} {a * 1000:9.1f} ms   {baseline:<28} {b * 1000:9.1f} ms   ratio {a / b:5.2f}x"
    )


def _repo(path: Path, files: int) -> Path:
    path.mkdir(parents=True)
    for index in range(files):
        folder = path / f"pkg{index % 50}"
        folder.mkdir(exist_ok=True)
        (folder / f"m{index}.py").write_text(f"X = {index}\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "files"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def sandbox_row(tmp: Path, runs: int) -> None:
    from orchestrator.skills import Confinement, Sandbox, SandboxUnavailable

    try:
        sandbox = Sandbox.choose("bwrap")
    except SandboxUnavailable as exc:
        print(f"sandbox: skipped ({exc.message})")
        return
    where = Confinement(worktree=tmp / "wt", home=tmp / "home")
    where.worktree.mkdir()
    ours, plain = _interleaved(
        runs,
        lambda: sandbox.run("true", where),
        lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True),
    )
    _row("sandboxed `true` (bwrap)", ours, plain, "plain subprocess")
    unconfined = Sandbox.choose("none")
    none, plain = _interleaved(
        runs,
        lambda: unconfined.run("true", where),
        lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True),
    )
    _row("`true` with --sandbox none", none, plain, "plain subprocess")


def worktree_row(tmp: Path, files: int, runs: int) -> None:
    from orchestrator.runtime.worktrees import Workbench, discover, git

    repo = _repo(tmp / f"repo{files}", files)
    found = discover(repo)
    assert found is not None
    counter = iter(range(10**6))

    def ours() -> None:
        bench = Workbench.create(f"b{next(counter)}", found, tmp / f"wt{files}" / "ours")
        bench.prepare(1, found.head)
        shutil.rmtree(bench.root)
        git("worktree", "prune", cwd=found.git_dir)

    def plain() -> None:
        where = tmp / f"wt{files}" / "plain"
        git("worktree", "add", "-q", "-f", "--detach", str(where), found.head, cwd=repo)
        shutil.rmtree(where)
        git("worktree", "prune", cwd=found.git_dir)

    mine, bare = _interleaved(runs, ours, plain)
    _row(f"task worktree, {files:,} files", mine, bare, "`git worktree add` alone")


def merge_row(tmp: Path, tasks: int) -> None:
    """The merge path per task (merge-tree, commit-tree, the compare-and-swap, and the
    changed files), against `git merge --no-ff` of the same branches in a worktree."""
    from orchestrator.runtime.developers import Workroom
    from orchestrator.runtime.worktrees import Workbench, discover, git

    repo = _repo(tmp / "merge-repo", 1_000)
    found = discover(repo)
    assert found is not None
    bench = Workbench.create("m", found, tmp / "merge-wt")
    room = Workroom.of("m", {"workbench": bench.describe(), "sandbox": "none"})
    assert room is not None
    tips = {}
    for n in range(1, tasks + 1):
        (bench.prepare(n, found.head) / f"pkg{n % 50}" / f"m{n}.py").write_text(f"X = -{n}\n")
        tips[n] = bench.commit(n, f"task {n}")
    onto = found.head
    started = time.perf_counter()
    for n in range(1, tasks + 1):
        onto = room.merge("m", n, f"task {n}", onto, tips[n])["commit"]
    ours = (time.perf_counter() - started) / tasks
    plain = tmp / "merge-plain"
    git("worktree", "add", "-q", "--detach", str(plain), found.head, cwd=repo)
    started = time.perf_counter()
    for n in range(1, tasks + 1):
        git("-c", "user.name=b", "-c", "user.email=b@b", "merge", "-q", "--no-ff",
            "--no-edit", tips[n], cwd=plain)  # fmt: skip
    base = (time.perf_counter() - started) / tasks
    _row(f"merge a task ({tasks} tasks, 1,000 files)", [ours], [base], "`git merge --no-ff`")


def turn_row(tmp: Path, runs: int) -> None:
    import yaml

    from orchestrator import Sessions

    repo = _repo(tmp / "turn-repo", 100)
    scenario = {
        "task": "t",
        "agents": {
            "pm": [
                {"status": "PLANNED", "tasks": [{"title": "one"}]},
                {"status": "COMPLETE", "summary": "s"},
            ],
            "developer": [
                {
                    "tools": [{"write_file": {"path": "a.txt", "content": "x"}}],
                    "status": "DONE",
                    "summary": "s",
                }
            ],
        },
    }
    path = tmp / "turn.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with Sessions(f"sqlite:///{tmp / 'turn.db'}") as sessions:
        sessions.start_scenario(path)  # warm-up: imports, the graph
        with_repo, shared = _interleaved(
            runs,
            lambda: sessions.start_scenario(path, workdir=repo),
            lambda: sessions.start_scenario(path),
        )
    _row("session, 1 turn in a worktree", with_repo, shared, "same, shared workspace")


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    runs = 5 if quick else 30
    print(f"python {sys.version.split()[0]}; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-dev-") as name:
        tmp = Path(name)
        os.environ["XDG_DATA_HOME"] = str(tmp / "data")  # worktrees of the sessions go here
        sandbox_row(tmp, runs)
        for files in (1_000, 10_000):
            worktree_row(tmp, files, max(3, runs // 5))
        merge_row(tmp, 5 if quick else 20)
        turn_row(tmp, max(3, runs // 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
