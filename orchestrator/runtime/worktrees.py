"""A session's git side: its repository, the base commit, and a worktree per task.

Nothing here touches the user's branch, index or working tree: every change is made in a
worktree of ours, on refs of ours, through git with the worktree's git folder named
explicitly, so a `.git` file an agent changed could not point our commands elsewhere.

Names: the session's result is the branch `orchestrator/<session-id>`; task N's work is
`orchestrator/<session-id>/task-<N>`, kept as the ref `refs/orchestrator/<session-id>/
task-<N>` rather than under `refs/heads/`, because git cannot hold a branch
`orchestrator/<id>` and branches under `orchestrator/<id>/` at once (a ref is a file or a
folder, not both). Every git command takes the name as it is (`git log
orchestrator/<id>/task-1`: git looks in `refs/` before `refs/heads/`); the task worktrees
are detached at it.

A turn is a commit. Before a developer's turn its worktree is reset to the commit the
turn starts from (the previous turn's, or the round's start): whatever a crashed attempt
half-wrote is gone. After the turn, everything in the worktree is committed (ignored files
aside), with hooks off: an agent could have written a hook into the tree.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError, RunError
from orchestrator.skills.workspace import HOOK_FOLDERS

__all__ = [
    "Repository",
    "Workbench",
    "GitFailed",
    "discover",
    "fixture_repository",
    "git",
    "check_git_version",
]

# Our commits: who made them, and nothing of the user's configuration that runs code.
_IDENTITY = ("-c", "user.name=orchestrator", "-c", "user.email=orchestrator@localhost")
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false")
_GIT_ENV_DROPPED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
# Serialises our ref and worktree updates in one process (git's own locks refuse, rather
# than wait for, a concurrent `worktree add` on the same repository).
_GIT_LOCK = threading.Lock()


class GitFailed(RunError):
    """A git command of ours failed: the session fails with git's own words."""


def run_git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run git with none of the caller's GIT_DIR-style variables and no prompt; the
    completed process (whatever its exit code)."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROPPED}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"  # reads never refresh (write) the user's index
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise ConfigError(
            "git is not installed: developers that work in a repository need git"
        ) from None


def git(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    """Run git; its stdout, stripped. GitFailed (with stderr) when it fails and `check`."""
    done = run_git(*args, cwd=cwd)
    if check and done.returncode != 0:
        raise GitFailed(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Repository:
    """A git repository found from a folder: where it is, its HEAD, and whether its working
    tree has changes that are not committed (they are not part of the base)."""

    toplevel: Path
    git_dir: Path  # the common git folder (`.git` of the main working tree)
    head: str
    dirty: bool


# `git merge-tree --write-tree` (a merge without a checkout) came with git 2.38.
MIN_GIT = (2, 38)


def check_git_version() -> None:
    """ConfigError unless git can merge without a checkout (2.38 or newer)."""
    out = git("version")  # "git version 2.39.5" (vendors add suffixes)
    numbers = out.split()[2].split(".") if len(out.split()) > 2 else []
    try:
        found = tuple(int(n) for n in numbers[:2])
    except ValueError:
        return  # an unusual version string: let git itself say what it cannot do
    if found < MIN_GIT:
        raise ConfigError(
            f"developers in a git repository need git {MIN_GIT[0]}.{MIN_GIT[1]} or newer "
            f"(the orchestrator merges their branches with `git merge-tree --write-tree`, "
            f"without a checkout); this is {out}. Upgrade git, or run without --workdir in "
            "a repository (the developers then share a folder)"
        )


def discover(folder: Path) -> Repository | None:
    """The repository `folder` lies in, or None. ConfigError for one without a commit."""
    if not folder.is_dir():
        return None
    inside = git("rev-parse", "--is-inside-work-tree", cwd=folder, check=False)
    if inside != "true":
        return None
    toplevel = Path(git("rev-parse", "--show-toplevel", cwd=folder)).resolve()
    common = Path(git("rev-parse", "--git-common-dir", cwd=folder))
    git_dir = (folder / common).resolve() if not common.is_absolute() else common.resolve()
    head = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=folder, check=False)
    if not head:
        raise ConfigError(
            f"{toplevel} is a git repository without a commit: commit something first "
            "(the developers start from HEAD)"
        )
    dirty = bool(git("status", "--porcelain", "--untracked-files=normal", cwd=toplevel))
    return Repository(toplevel, git_dir, head, dirty)


def fixture_repository(source: Path, target: Path) -> Repository:
    """A new git repository at `target` holding a copy of the folder `source` in one
    commit (a scenario's `repo:`), so a scenario runs the same anywhere."""
    if not source.is_dir():
        raise ConfigError(f"repo: {source} is not a folder")
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    git("init", "-q", "-b", "main", cwd=target)
    git("add", "-A", cwd=target)
    git(*_IDENTITY, *_NO_HOOKS, "commit", "-q", "--no-verify", "-m", "scenario fixture", cwd=target)
    found = discover(target)
    assert found is not None
    return found


@dataclass(frozen=True)
class Workbench:
    """A session's repository and worktrees, as kept in its settings (`describe()`)."""

    session_id: str
    repository: Path
    git_dir: Path
    base: str
    root: Path  # the folder that holds this session's worktrees
    host: str

    @classmethod
    def create(cls, session_id: str, repo: Repository, root: Path) -> Workbench:
        return cls(session_id, repo.toplevel, repo.git_dir, repo.head, root, socket.gethostname())

    @classmethod
    def from_settings(cls, session_id: str, stored: Mapping[str, Any]) -> Workbench:
        return cls(
            session_id,
            Path(stored["repository"]),
            Path(stored["git_dir"]),
            str(stored["base"]),
            Path(stored["worktrees"]),
            str(stored.get("host") or ""),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "repository": str(self.repository),
            "git_dir": str(self.git_dir),
            "base": self.base,
            "worktrees": str(self.root),
            "host": self.host,
        }

    def reachable(self) -> str | None:
        """None when this machine sees the repository, else why not."""
        if not (self.git_dir / "HEAD").is_file():
            return (
                f"the session's repository {self.repository} (on {self.host or 'its host'}) "
                "is not on this machine"
            )
        return None

    # -- names ----------------------------------------------------------------------

    def branch(self, number: int) -> str:
        """Task `number`'s work, as git commands take it (see the module doc)."""
        return f"orchestrator/{self.session_id}/task-{number}"

    def ref(self, number: int) -> str:
        return f"refs/{self.branch(number)}"

    def worktree(self, number: int) -> Path:
        return self.root / f"task-{number}"

    def home(self, number: int) -> Path:
        """The task's own HOME and TMPDIR (outside its worktree: never committed)."""
        return self.root / f".home-{number}"

    # -- turns ----------------------------------------------------------------------

    def prepare(self, number: int, start: str) -> Path:
        """Task `number`'s worktree, reset to the commit `start` with every file not in
        that commit removed, and its ref moved back to `start`: a turn starts from
        exactly `start` (an unrecorded commit of a killed attempt is left behind)."""
        path = self.worktree(number)
        with _GIT_LOCK:
            if not (path / ".git").is_file():
                self.root.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    shutil.rmtree(path)  # a half-made worktree of a crashed run
                    git("worktree", "prune", cwd=self.git_dir)
                git("worktree", "add", "-q", "-f", "--detach", str(path), start, cwd=self.git_dir)
                git("update-ref", self.ref(number), start, cwd=self.git_dir)
                return path  # new: exactly `start`, nothing else in it
        work = self._git_of(path)
        git(*work, "checkout", "-q", "-f", "--detach", start, cwd=path)
        git(*work, "reset", "-q", "--hard", start, cwd=path)
        git(*work, "clean", "-q", "-ffdx", "-e", ".git", cwd=path)
        git("update-ref", self.ref(number), start, cwd=self.git_dir)
        return path

    def commit(self, number: int, message: str) -> str:
        """Commit everything in task `number`'s worktree (hooks off) and move its ref
        there; the new commit."""
        path = self.worktree(number)
        work = self._git_of(path)
        git(*work, "add", "-A", cwd=path)
        git(
            *work, *_IDENTITY, *_NO_HOOKS, "commit", "-q", "--allow-empty", "--no-verify",
            "-m", message, cwd=path,
        )  # fmt: skip
        head = git(*work, "rev-parse", "HEAD", cwd=path)
        git("update-ref", self.ref(number), head, cwd=self.git_dir)
        return head

    def changed_files(self, start: str, end: str) -> list[str]:
        """Files that differ between two commits (a turn's or a task's changes)."""
        out = git("diff", "--name-only", "-z", start, end, cwd=self.git_dir)
        return sorted(name for name in out.split("\0") if name)

    def hook_folders(self) -> tuple[str, ...]:
        """Folders of the tree (relative paths) whose files run as git hooks:
        HOOK_FOLDERS, and the repository's own `core.hooksPath` when it points inside."""
        configured = git("config", "--get", "core.hooksPath", cwd=self.git_dir, check=False)
        extra = []
        if configured and not os.path.isabs(configured):
            inside = os.path.normpath(configured)
            if inside not in (".", "..") and not inside.startswith("../"):
                extra.append(Path(inside).as_posix())
        return tuple(dict.fromkeys([*HOOK_FOLDERS, *extra]))

    def read_only(self, number: int) -> tuple[Path, ...]:
        """What commands may not write: the repository's git folder, the worktree's `.git`
        file, and the hooks folders a repository can point git at."""
        path = self.worktree(number)
        guarded = [self.git_dir, path / ".git"]
        guarded += [path / name for name in self.hook_folders()]
        return tuple(guarded)

    def _git_of(self, path: Path) -> Sequence[str]:
        """`--git-dir`/`--work-tree` for our commands in `path`, from the worktree's admin
        folder that git made (checked to point back at `path`, never taken on trust)."""
        admin = self.git_dir / "worktrees"
        for candidate in sorted(admin.iterdir()) if admin.is_dir() else ():
            try:
                back = Path((candidate / "gitdir").read_text().strip())
            except OSError:
                continue
            if back == path / ".git":
                return ("--git-dir", str(candidate), "--work-tree", str(path))
        raise GitFailed(f"the worktree {path} is not registered with {self.git_dir}")

    # -- the merge queue (runtime.developers.Workroom.merge) --------------------------

    @property
    def session_branch(self) -> str:
        """The session's result: every task's work merged, one at a time."""
        return f"orchestrator/{self.session_id}"

    def head(self, branch: str) -> str | None:
        found = git(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
            cwd=self.git_dir, check=False,
        )  # fmt: skip
        return found or None

    def parents(self, commit: str) -> list[str]:
        return git("rev-list", "--parents", "-n", "1", commit, cwd=self.git_dir).split()[1:]

    def merge_tree(self, onto: str, theirs: str) -> tuple[str | None, list[str]]:
        """Merge `theirs` into `onto` without a checkout: (the tree, []) when clean,
        (None, the conflicted files) when not."""
        done = run_git(
            "merge-tree", "--write-tree", "--name-only", "--no-messages", onto, theirs,
            cwd=self.git_dir,
        )  # fmt: skip
        lines = done.stdout.splitlines()
        if done.returncode == 0 and lines:
            return lines[0], []
        if done.returncode == 1 and lines:
            return None, sorted({line for line in lines[1:] if line})
        raise GitFailed(f"git merge-tree failed: {done.stderr.strip()[-2000:]}")

    def merge_commit(self, tree: str, onto: str, theirs: str, message: str) -> str:
        return git(
            *_IDENTITY, "commit-tree", tree, "-p", onto, "-p", theirs, "-m", message,
            cwd=self.git_dir,
        )  # fmt: skip

    def advance(self, branch: str, new: str, old: str | None) -> bool:
        """Move `branch` to `new` only if it is at `old` (None: only if it does not exist):
        git's compare-and-swap, the merge queue's fence between processes."""
        expected = old or "0" * 40
        return (
            run_git(
                "update-ref", f"refs/heads/{branch}", new, expected, cwd=self.git_dir
            ).returncode
            == 0
        )

    def integration(self, commit: str) -> Path:
        """The integration worktree (detached) at `commit`, where merged trees are checked."""
        path = self.root / "integration"
        with _GIT_LOCK:
            if not (path / ".git").is_file():
                self.root.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    shutil.rmtree(path)
                    git("worktree", "prune", cwd=self.git_dir)
                git("worktree", "add", "-q", "-f", "--detach", str(path), commit, cwd=self.git_dir)
                return path
        work = self._git_of(path)
        git(*work, "checkout", "-q", "-f", "--detach", commit, cwd=path)
        git(*work, "clean", "-q", "-ffdx", cwd=path)
        return path

    # -- the end ---------------------------------------------------------------------

    def remove_worktrees(self) -> list[str]:
        """Remove this session's worktrees (their branches stay); the paths removed."""
        removed: list[str] = []
        if not self.root.is_dir():
            return removed
        with _GIT_LOCK:
            for path in sorted([*self.root.glob("task-*"), self.root / "integration"]):
                if not path.exists():
                    continue
                git("worktree", "remove", "--force", str(path), cwd=self.git_dir, check=False)
                if path.exists():
                    shutil.rmtree(path, ignore_errors=True)
                removed.append(str(path))
            git("worktree", "prune", cwd=self.git_dir, check=False)
            shutil.rmtree(self.root, ignore_errors=True)
        return removed

    def branches(self) -> list[str]:
        """This session's branch and task refs, as git commands take them."""
        out = git(
            "for-each-ref",
            "--format=%(refname)",
            f"refs/heads/{self.session_branch}",
            f"refs/orchestrator/{self.session_id}/",
            cwd=self.git_dir,
            check=False,
        )
        return [
            line.removeprefix("refs/heads/").removeprefix("refs/")
            for line in out.splitlines()
            if line
        ]

    def delete_branches(self) -> list[str]:
        found = self.branches()
        for name in found:
            full = f"refs/heads/{name}" if name == self.session_branch else f"refs/{name}"
            git("update-ref", "-d", full, cwd=self.git_dir, check=False)
        return found
