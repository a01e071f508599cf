"""A session's workspace directory, and the checks that keep tools inside it."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

__all__ = ["Workspace", "ToolError", "CONTROL_FOLDERS", "HOOK_FOLDERS"]

# Version-control folders: what is written there runs as the user (git hooks, a
# `core.fsmonitor` command at the next `git status`, Mercurial hooks and extensions).
CONTROL_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", ".jj"})
# Characters that HFS+ ignores in names, so ".g\u200cit" is ".git" there (git's is_hfs_dotgit).
_IGNORED = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
# Folders of git hooks a repository can point git at (`core.hooksPath`) or a tool installs
# (husky): a hook written there runs as the user at their next commit, outside any sandbox.
HOOK_FOLDERS = (".githooks", ".husky")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


# A workspace's root as given -> its real path, and the directory both named when it was
# resolved (device, inode): see _real_root. Emptied when it reaches _KEPT_ROOTS roots (a
# worker that drives sessions for months lays out a workspace for each task of each).
_REAL_ROOTS: dict[Path, tuple[Path, tuple[int, int]]] = {}
_KEPT_ROOTS = 1024


def _real_root(root: Path) -> Path:
    """`root`'s real path, the directory made first if it is missing.

    Every developer turn lays out its workspace anew, and a hundred developers starting at
    once lay out the same one: a `mkdir` and a `resolve` (a system call per folder of the
    path, each handing the interpreter lock to another thread) are spent on an answer that
    has not changed. So the answer is kept, and given again while `root` and the kept real
    path still name the same directory (a `stat` each); a root deleted, replaced or pointed
    elsewhere since is made and resolved anew, as the first time. (A kept real path that
    has gained a symlink on the way still names that directory: the tools then refuse its
    paths as outside the workspace, and `open_dir` refuses to follow the link.)"""
    known = _REAL_ROOTS.get(root)
    if known is not None:
        real, directory = known
        if _directory(root) == directory and (real == root or _directory(real) == directory):
            return real
    root.mkdir(parents=True, exist_ok=True)
    real = root.resolve(strict=True)
    found = _directory(real)
    if found is not None:
        if len(_REAL_ROOTS) >= _KEPT_ROOTS:
            _REAL_ROOTS.clear()  # one step, no lock: the next layouts resolve again
        _REAL_ROOTS[root] = (real, found)
    return real


def _directory(path: Path) -> tuple[int, int] | None:
    """The directory `path` names (links followed), as (device, inode); None if none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


class ToolError(Exception):
    """A failure to report back to the model (not a crash); `message` is written for it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Workspace:
    """A directory the tools may read and write; every path a model gives goes through `resolve`."""

    def __init__(self, root: Path, *, hooks: tuple[str, ...] = ()) -> None:
        self.root = _real_root(root)
        # Folders (relative paths) whose files run as hooks (HOOK_FOLDERS and a
        # repository's own core.hooksPath): never written by the tools.
        self.hooks = frozenset(
            tuple(part.casefold() for part in Path(name).parts) for name in (*HOOK_FOLDERS, *hooks)
        )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str) -> Path:
        """The real path `path` names, refusing anything that leaves the workspace.

        The answer has every symlink followed; open it with `open_dir`, which follows none,
        so what the caller opens is what was checked.
        """
        if not path.strip():
            raise ToolError("the path is empty; give a path relative to the workspace, e.g. '.'")
        if "\0" in path:
            raise ToolError(f"{path!r} contains a NUL character")
        _check_lengths(path)
        outside = ToolError(
            f"{path!r} is outside the workspace: paths must be relative and stay inside it"
        )
        # Lexically first, so "/x" and "../x" are refused whatever exists on disk...
        if Path(path).anchor or Path(os.path.normpath(path)).parts[:1] == ("..",):
            raise outside
        # ...then for real, so a symlink that points out is refused too.
        try:
            real = (self.root / path).resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before 3.13)
            raise ToolError(f"cannot resolve {path!r}: a symlink loop?") from None
        if not real.is_relative_to(self.root):
            raise outside
        return real

    def is_dir(self, real: Path) -> bool:
        """Whether `real` (from `resolve`) is a directory; an OS error is a ToolError."""
        try:
            return real.is_dir()
        except OSError as e:
            raise ToolError(f"cannot look at {self.relative(real)!r}: {e.strerror}") from None

    def relative(self, path: Path) -> str:
        """`path` (inside the workspace) as the POSIX path the model uses; the root is '.'."""
        return path.relative_to(self.root).as_posix() or "."

    def check_writable(self, real: Path) -> None:
        """Refuse a write to `real` (from `resolve`) inside a version-control folder or a
        folder of git hooks."""
        parts = real.relative_to(self.root).parts
        folded = tuple(part.casefold().rstrip(". ") for part in parts)
        hooks = next((h for h in self.hooks if folded[: len(h)] == h), None)
        if hooks is not None:
            raise ToolError(
                f"{self.relative(real)!r} is in {'/'.join(hooks)!r}, a folder of git hooks: a hook "
                "written there runs on the user's machine at their next commit, so tools "
                "never write there; ask the user to change hooks themselves"
            )
        for name in parts:
            if _control_name(name):
                raise ToolError(
                    f"{self.relative(real)!r} is in {name!r}, a version-control folder: what "
                    "is written there (hooks, config) can run commands on the user's machine, "
                    f"so tools never write into {', '.join(sorted(CONTROL_FOLDERS))} (nor a "
                    "file of that name); write your files elsewhere in the workspace"
                )

    def open_dir(self, real: Path, *, create: bool = False) -> int:
        """A descriptor of the directory `real` (from `resolve`); the caller closes it.

        It is opened one folder at a time from the root without following any link, so a
        folder swapped for a symlink after `resolve` checked it is refused, never followed.
        `create` makes missing folders (mode 0o777 less the umask).
        """
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for name in real.relative_to(self.root).parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(name, fd):
                        raise self.swapped(real) from None
                    raise
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def swapped(self, real: Path) -> ToolError:
        """The error for a path that became a symlink between `resolve` and the open."""
        return ToolError(
            f"{self.relative(real)!r} changed while it was being opened (a folder or file on "
            "the way is now a symlink); nothing was read or written, try again"
        )


# What Linux (and macOS: 255 and 1024) allow; longer names fail with ENAMETOOLONG.
NAME_MAX = 255
PATH_MAX = 4096


def _check_lengths(path: str) -> None:
    """Refuse a name longer than a file system takes (in bytes, as the kernel counts)."""
    if len(path.encode("utf-8", "surrogateescape")) >= PATH_MAX:
        raise ToolError(
            f"the path is {len(path):,} characters long; a path has fewer than {PATH_MAX} bytes"
        )
    for part in path.split("/"):
        size = len(part.encode("utf-8", "surrogateescape"))
        if size > NAME_MAX:
            raise ToolError(
                f"the name {part[:40]!r}… in the path is {size} bytes long; a file or folder "
                f"name has at most {NAME_MAX} bytes"
            )


def _control_name(name: str) -> bool:
    """Whether `name` is a control folder's name in any case or spelling a file system folds."""
    folded = name.translate(_IGNORED).casefold().rstrip(". ")
    return folded in CONTROL_FOLDERS or folded == "git~1"  # "git~1": NTFS's short name


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
