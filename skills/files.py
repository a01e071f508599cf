"""The workspace file tools: list, read and write files inside the session's workspace.

Files are opened relative to a directory descriptor from `Workspace.open_dir` and never
through a link, so a path swapped for a symlink after its check is refused; a regular file
with more than one hard link may be a door to a file outside, so it is refused too.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from . import globs
from .base import Tool, ToolError, ToolResult, register
from .globs import MAX_PATTERN_CHARS, MAX_VISITED, parse_pattern
from .workspace import CONTROL_FOLDERS, Workspace

__all__ = [
    "WORKSPACE_TOOLS",
    "DEVELOPER_TOOLS",
    "EditFile",
    "ListFiles",
    "ReadFile",
    "WriteFile",
    "MAX_LISTED",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
]

WORKSPACE_TOOLS = ("list_files", "read_file", "write_file")
# A developer's tools (contract section 9): the file tools, an exact edit, and commands.
DEVELOPER_TOOLS = (*WORKSPACE_TOOLS, "edit_file", "run_command")
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
        f"workspace-relative paths, sorted; at most {MAX_LISTED} are shown, and a listing "
        f"stops after looking at {MAX_VISITED} entries. Symlinked folders are not entered."
    )

    class Input(_Args):
        path: str = Field(".", description="Directory to list, relative to the workspace.")
        pattern: str = Field(
            "**/*",
            description=(
                "Glob pattern under that directory, e.g. '*.py' or '**/*.md'; '**' is any "
                f"number of folders; at most {MAX_PATTERN_CHARS} characters."
            ),
        )

    def run(self, args: Input) -> ToolResult:
        workspace = self.context.workspace
        parts = parse_pattern(args.pattern)
        where = workspace.resolve(args.path)
        if not workspace.is_dir(where):
            raise ToolError(f"no such directory: {args.path!r}")
        try:
            found, complete = globs.walk(workspace, where, parts)
        except OSError as e:
            raise ToolError(f"cannot list {args.path!r}: {e.strerror}") from None
        files = sorted(workspace.relative(path) for path in found)
        shown = files[:MAX_LISTED]
        notes = []
        if len(files) > MAX_LISTED:
            notes.append(f"({MAX_LISTED} of {len(files)} files shown; narrow the path or pattern)")
        if not complete:
            notes.append(
                f"(stopped after looking at {globs.MAX_VISITED} entries, so files may be missing; "
                "narrow the path or pattern)"
            )
        output = "\n".join([*shown, *notes]) if files or notes else "no files match"
        return self.result(output, files=shown)


@register
class ReadFile(Tool):
    name = "read_file"
    description = (
        f"Read a UTF-8 text file of the workspace (at most {MAX_READ_BYTES // 1024} KiB); "
        "the output is its content. A file with several hard links is refused."
    )

    class Input(_Args):
        path: str = Field(description="File to read, relative to the workspace.")

    def run(self, args: Input) -> ToolResult:
        workspace = self.context.workspace
        target = workspace.resolve(args.path)
        rel = workspace.relative(target)
        if workspace.is_dir(target):
            raise ToolError(f"{rel!r} is a directory, not a file; use list_files")
        missing = ToolError(f"no such file: {args.path!r}")
        try:
            parent = workspace.open_dir(target.parent)
        except (FileNotFoundError, NotADirectoryError):
            raise missing from None
        except OSError as e:  # e.g. a folder without read permission
            raise ToolError(f"cannot read {rel!r}: {e.strerror}") from None
        try:
            fd = _open_no_link(workspace, target, parent, _READ)
        except FileNotFoundError:
            raise missing from None
        except OSError as e:
            raise ToolError(f"cannot read {rel!r}: {e.strerror}") from None
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{rel!r} is a directory, not a file; use list_files")
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{rel!r} is not a regular file")
            _refuse_hard_links(rel, info)
            if info.st_size > MAX_READ_BYTES:
                raise ToolError(
                    f"{rel!r} has {info.st_size} bytes; read_file reads at most "
                    f"{MAX_READ_BYTES} bytes ({MAX_READ_BYTES // 1024} KiB)"
                )
            try:
                raw = f.read(MAX_READ_BYTES + 1)
            except OSError as e:
                raise ToolError(f"cannot read {rel!r}: {e.strerror}") from None
        if len(raw) > MAX_READ_BYTES:  # it grew since fstat
            raise ToolError(f"{rel!r} has more than {MAX_READ_BYTES} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel!r} is not UTF-8 text") from None
        return self.result(text, path=rel, bytes=len(raw))


# O_NONBLOCK: a FIFO put in the file's place must not hang the read.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_no_link(workspace: Workspace, target: Path, parent: int, flags: int) -> int:
    """Open `target` (from `resolve`, so not a link) in its folder's descriptor `parent`."""
    try:
        return os.open(target.name, flags, dir_fd=parent)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink: it was swapped in
            raise workspace.swapped(target) from None
        raise


def _refuse_hard_links(rel: str, info: os.stat_result) -> None:
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise ToolError(
            f"{rel!r} has {info.st_nlink} hard links: another name of it may be outside "
            "the workspace, so the tools neither read nor write it"
        )


@register
class WriteFile(Tool):
    name = "write_file"
    description = (
        "Write a UTF-8 text file of the workspace, replacing it if it exists and creating "
        "missing directories (at most 1 MiB). Refused: paths inside a version-control "
        f"folder ({', '.join(sorted(CONTROL_FOLDERS))}), and files with several hard links."
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
        workspace.check_writable(target)
        if workspace.is_dir(target):
            raise ToolError(f"{rel!r} is a directory, not a file")
        data = args.content.encode("utf-8")  # pydantic already refused lone surrogates
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(
                f"content has {len(data)} bytes; write_file writes at most "
                f"{MAX_WRITE_BYTES} bytes (1 MiB)"
            )
        try:
            parent = workspace.open_dir(target.parent, create=True)
            try:
                _write_atomically(workspace, target, parent, data)
            finally:
                os.close(parent)
        except (FileExistsError, NotADirectoryError):
            raise ToolError(f"cannot write {rel!r}: a parent of it is a file") from None
        except IsADirectoryError:
            raise ToolError(f"{rel!r} is a directory, not a file") from None
        except OSError as e:
            raise ToolError(f"cannot write {rel!r}: {e.strerror}") from None
        self.context.changed.add(rel)
        return self.result(f"wrote {len(data)} bytes to {rel}", path=rel, bytes=len(data))


@register
class EditFile(Tool):
    name = "edit_file"
    description = (
        "Replace an exact text in a UTF-8 file of the workspace: `old` must occur exactly "
        "once in the file (include enough lines around it to make it unique); it is "
        "replaced by `new`. Refused, with the reason, when `old` is not found or is found "
        "more than once. Use write_file to create a file."
    )

    class Input(_Args):
        path: str = Field(description="File to edit, relative to the workspace.")
        old: str = Field(min_length=1, description="The exact text to replace (once).")
        new: str = Field(max_length=MAX_WRITE_BYTES, description="The text to put instead.")

    def run(self, args: Input) -> ToolResult:
        workspace = self.context.workspace
        reader = ReadFile(self.context).invoke({"path": args.path})
        if not reader.ok:
            raise ToolError(reader.error or f"cannot read {args.path!r}")
        text = reader.output
        found = text.count(args.old)
        rel = str(reader.data.get("path", args.path))
        if found == 0:
            raise ToolError(
                f"`old` was not found in {rel!r}: it must match the file's text exactly "
                "(spaces, indentation and line ends included); read_file shows the text"
            )
        if found > 1:
            raise ToolError(
                f"`old` occurs {found} times in {rel!r}: include more of the lines around "
                "it so that it occurs exactly once"
            )
        content = text.replace(args.old, args.new, 1)
        workspace.check_writable(workspace.resolve(args.path))
        writer = WriteFile(self.context).invoke({"path": args.path, "content": content})
        if not writer.ok:
            raise ToolError(writer.error or f"cannot write {rel!r}")
        line = text[: text.index(args.old)].count("\n") + 1
        return self.result(f"edited {rel} at line {line}", path=rel, line=line)


def _write_atomically(workspace: Workspace, target: Path, parent: int, data: bytes) -> None:
    """Replace `target` in the folder `parent` so a reader sees the old or the new file."""
    rel = workspace.relative(target)
    try:
        old: os.stat_result | None = os.stat(target.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None:
        if stat.S_ISLNK(old.st_mode):  # `resolve` followed every link, so this one is new
            raise workspace.swapped(target)
        if stat.S_ISDIR(old.st_mode):
            raise IsADirectoryError
        _refuse_hard_links(rel, old)
    # The temp file is in the target's folder: os.replace is atomic only within one file
    # system, and the data is durable before it takes the target's name. A new file gets
    # 0o666 less the umask, as any program's would; a replaced one keeps its permissions.
    temp = f".{target.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temp, _CREATE, 0o666, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                os.fchmod(f.fileno(), old.st_mode & 0o777)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target.name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        os.unlink(temp, dir_fd=parent)
        raise


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
