"""A session's workspace directory, and the one check that keeps tools inside it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["Workspace", "ToolError"]


class ToolError(Exception):
    """A failure to report back to the model (not a crash); `message` is written for it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Workspace:
    """A directory the tools may read and write; every path a model gives goes through `resolve`."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root.resolve(strict=True)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str) -> Path:
        """The real path `path` names, refusing anything that leaves the workspace.

        The answer has every symlink followed, so what the caller opens is what was checked.
        """
        if not path.strip():
            raise ToolError("the path is empty; give a path relative to the workspace, e.g. '.'")
        if "\0" in path:
            raise ToolError(f"{path!r} contains a NUL character")
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

    def relative(self, path: Path) -> str:
        """`path` (inside the workspace) as the POSIX path the model uses; the root is '.'."""
        return path.relative_to(self.root).as_posix() or "."
