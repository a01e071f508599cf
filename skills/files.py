"""The workspace file tools: list, read and write files inside the session's workspace."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .base import Tool, ToolError, ToolResult, register

__all__ = [
    "WORKSPACE_TOOLS",
    "ListFiles",
    "ReadFile",
    "WriteFile",
    "MAX_LISTED",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
]

WORKSPACE_TOOLS = ("list_files", "read_file", "write_file")
MAX_LISTED = 500
MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 1024 * 1024


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@register
class ListFiles(Tool):
    name = "list_files"
    description = (
        "List the files (not directories) under a directory of the workspace, as "
        f"workspace-relative paths, sorted; at most {MAX_LISTED} are shown."
    )

    class Input(_Args):
        path: str = Field(".", description="Directory to list, relative to the workspace.")
        pattern: str = Field(
            "**/*", description="Glob pattern under that directory, e.g. '*.py' or '**/*.md'."
        )

    def run(self, args: Input) -> ToolResult:
        workspace = self.context.workspace
        where = workspace.resolve(args.path)
        if not where.is_dir():
            raise ToolError(f"no such directory: {args.path!r}")
        pattern = Path(args.pattern)
        bad = ToolError(f"bad pattern {args.pattern!r}: use a relative glob without '..'")
        if not pattern.parts or pattern.anchor or ".." in pattern.parts:
            raise bad
        try:
            matches = list(where.glob(args.pattern))
        except ValueError:  # pathlib's "Invalid pattern", e.g. 'a**'
            raise bad from None
        files = sorted(
            workspace.relative(match) for match in matches if _inside_file(match, workspace.root)
        )
        shown = files[:MAX_LISTED]
        if not files:
            output = "no files match"
        elif len(files) > MAX_LISTED:
            note = f"({MAX_LISTED} of {len(files)} files shown; narrow the path or pattern)"
            output = "\n".join([*shown, note])
        else:
            output = "\n".join(shown)
        return self.result(output, files=shown)


def _inside_file(path: Path, root: Path) -> bool:
    """Whether `path` is a file whose real location is inside `root` (so it can be read)."""
    try:
        return path.is_file() and path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop
        return False


@register
class ReadFile(Tool):
    name = "read_file"
    description = (
        f"Read a UTF-8 text file of the workspace (at most {MAX_READ_BYTES // 1024} KiB); "
        "the output is its content."
    )

    class Input(_Args):
        path: str = Field(description="File to read, relative to the workspace.")

    def run(self, args: Input) -> ToolResult:
        workspace = self.context.workspace
        target = workspace.resolve(args.path)
        rel = workspace.relative(target)
        if target.is_dir():
            raise ToolError(f"{rel!r} is a directory, not a file; use list_files")
        if not target.is_file():
            raise ToolError(f"no such file: {args.path!r}")
        try:
            size = target.stat().st_size
            if size > MAX_READ_BYTES:
                raise ToolError(
                    f"{rel!r} has {size} bytes; read_file reads at most "
                    f"{MAX_READ_BYTES} bytes ({MAX_READ_BYTES // 1024} KiB)"
                )
            raw = target.read_bytes()
        except OSError as e:
            raise ToolError(f"cannot read {rel!r}: {e.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel!r} is not UTF-8 text") from None
        return self.result(text, path=rel, bytes=len(raw))


@register
class WriteFile(Tool):
    name = "write_file"
    description = (
        "Write a UTF-8 text file of the workspace, replacing it if it exists and creating "
        "missing directories (at most 1 MiB)."
    )

    class Input(_Args):
        path: str = Field(description="File to write, relative to the workspace.")
        # Characters; the byte limit after encoding is checked in `run`.
        content: str = Field(
            max_length=MAX_WRITE_BYTES, description="The whole new content of the file."
        )

    def run(self, args: Input) -> ToolResult:
        workspace = self.context.workspace
        target = workspace.resolve(args.path)
        rel = workspace.relative(target)
        if target.is_dir():
            raise ToolError(f"{rel!r} is a directory, not a file")
        data = args.content.encode("utf-8")  # pydantic already refused lone surrogates
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(
                f"content has {len(data)} bytes; write_file writes at most "
                f"{MAX_WRITE_BYTES} bytes (1 MiB)"
            )
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(target, data)
        except (FileExistsError, NotADirectoryError):
            raise ToolError(f"cannot write {rel!r}: a parent of it is a file") from None
        except OSError as e:
            raise ToolError(f"cannot write {rel!r}: {e.strerror}") from None
        self.context.changed.add(rel)
        return self.result(f"wrote {len(data)} bytes to {rel}", path=rel, bytes=len(data))


def _write_atomically(target: Path, data: bytes) -> None:
    """Replace `target` with `data` so a reader sees the old or the new file, never half."""
    # The temp file is in the target's directory: os.replace is atomic only within one
    # file system, and it is durable before it takes the target's name.
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; keep an existing file's mode, else an ordinary one.
        mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
