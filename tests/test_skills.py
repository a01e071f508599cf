"""The workspace tools: happy paths, one result shape, refused escapes, registry, LangChain."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import orchestrator.skills.base
import orchestrator.skills.globs
import orchestrator.skills.workspace
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from orchestrator.skills import (
    WORKSPACE_TOOLS,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    Workspace,
    make_tools,
    register,
    registry,
)
from orchestrator.skills.files import MAX_LISTED, MAX_READ_BYTES, MAX_WRITE_BYTES
from pydantic import BaseModel, ConfigDict, Field


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a secret the tools must never reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret")
    return path


@pytest.fixture
def umask() -> Iterator[int]:
    """Run the test under umask 022 (the usual one), restoring the process's own after."""
    old = os.umask(0o022)
    yield 0o022
    os.umask(old)


@pytest.fixture
def context(root: Path) -> ToolContext:
    return ToolContext(workspace=Workspace(root), agent="developer-1")


@pytest.fixture
def tools(context: ToolContext) -> dict[str, Tool]:
    return {tool.name: tool for tool in make_tools(WORKSPACE_TOOLS, context)}


def call(tools: dict[str, Tool], name: str, **args: Any) -> ToolResult:
    return tools[name].invoke(args)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# --- happy paths -------------------------------------------------------------------------


def test_workspace_creates_its_root(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "a" / "b")
    assert workspace.root == (tmp_path / "a" / "b").resolve()
    assert workspace.root.is_dir()


def test_a_workspace_laid_out_again_keeps_its_real_root_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hundred developers lay out the same workspace at once: after the first, its real
    # path is not looked up again (no mkdir, no resolve) while the folder is the same one;
    # deleted, or pointed elsewhere through a symlink, it is made and resolved anew.
    first, second = tmp_path / "first", tmp_path / "second"
    second.mkdir()
    link = tmp_path / "link"
    link.symlink_to(first, target_is_directory=True)
    first.mkdir()
    plain = tmp_path / "plain"
    real_first, real_second, real_plain = (p.resolve() for p in (first, second, plain))
    assert Workspace(link).root == real_first

    resolved: list[Path] = []
    real_resolve = Path.resolve

    def counting(self: Path, strict: bool = False) -> Path:
        resolved.append(self)
        return real_resolve(self, strict=strict)

    monkeypatch.setattr(Path, "resolve", counting)
    assert Workspace(link).root == real_first and resolved == []

    link.unlink()
    link.symlink_to(second, target_is_directory=True)  # pointed elsewhere
    assert Workspace(link).root == real_second and resolved == [link]
    third = second.rename(tmp_path / "third")  # the same folder under another name
    link.unlink()
    link.symlink_to(third, target_is_directory=True)
    assert Workspace(link).root == real_second.with_name("third") and resolved == [link, link]

    assert Workspace(plain).root == real_plain
    plain.rmdir()  # deleted: made again
    assert Workspace(plain).root == real_plain and plain.is_dir()
    plain.rmdir()
    plain.write_text("not a folder")  # replaced by a file: refused, as the first time
    with pytest.raises(FileExistsError):
        Workspace(plain)

    # Kept for so many roots at most: emptied when full, then kept again.
    monkeypatch.setattr(orchestrator.skills.workspace, "_KEPT_ROOTS", 2)
    kept = orchestrator.skills.workspace._REAL_ROOTS
    for n in range(5):
        Workspace(tmp_path / f"many{n}")
        assert 1 <= len(kept) <= 2 and tmp_path / f"many{n}" in kept


def test_list_files_lists_files_sorted_and_relative(tools: dict[str, Tool], root: Path) -> None:
    for rel in ["src/b.py", "src/a.py", "README.md", "src/pkg/c.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / "empty-dir").mkdir()

    result = call(tools, "list_files")
    expected = ["README.md", "src/a.py", "src/b.py", "src/pkg/c.py"]
    assert result.ok
    assert result.data == {"files": expected}
    assert result.output == "\n".join(expected)

    under_src = call(tools, "list_files", path="src", pattern="*.py")
    assert under_src.data["files"] == ["src/a.py", "src/b.py"]
    assert call(tools, "list_files", path="./src/pkg").data["files"] == ["src/pkg/c.py"]


def test_list_files_on_an_empty_workspace(tools: dict[str, Tool]) -> None:
    result = call(tools, "list_files")
    assert result.ok and result.data == {"files": []}
    assert result.output == "no files match"


def test_list_files_is_capped_and_says_so(tools: dict[str, Tool], root: Path) -> None:
    for i in range(MAX_LISTED + 7):
        (root / f"f{i:04d}.txt").write_text("")
    result = call(tools, "list_files")
    assert result.ok
    assert len(result.data["files"]) == MAX_LISTED
    assert result.data["files"][0] == "f0000.txt"
    assert f"{MAX_LISTED} of {MAX_LISTED + 7} files shown" in result.output


def test_list_files_refuses_missing_directories_and_bad_patterns(
    tools: dict[str, Tool], root: Path
) -> None:
    (root / "file.txt").write_text("x")
    assert call(tools, "list_files", path="nope").error == "no such directory: 'nope'"
    assert call(tools, "list_files", path="file.txt").error == "no such directory: 'file.txt'"
    for pattern in ["", ".", "/etc/*", "../*", "a/../../*", "a**"]:
        result = call(tools, "list_files", pattern=pattern)
        assert not result.ok
        assert result.error is not None and result.error.startswith("bad pattern")


def test_read_file_returns_the_content(tools: dict[str, Tool], root: Path) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "note.md").write_text("héllo\n", encoding="utf-8")
    result = call(tools, "read_file", path="docs/note.md")
    assert result == ToolResult(
        tool="read_file", ok=True, output="héllo\n", data={"path": "docs/note.md", "bytes": 7}
    )


def test_read_file_refuses_directories_missing_big_and_binary_files(
    tools: dict[str, Tool], root: Path
) -> None:
    (root / "dir").mkdir()
    (root / "big.txt").write_bytes(b"x" * (MAX_READ_BYTES + 1))
    (root / "exact.txt").write_bytes(b"x" * MAX_READ_BYTES)
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")

    assert "is a directory" in (call(tools, "read_file", path="dir").error or "")
    assert call(tools, "read_file", path="missing.txt").error == "no such file: 'missing.txt'"
    big = call(tools, "read_file", path="big.txt")
    assert not big.ok and "256 KiB" in (big.error or "")
    assert call(tools, "read_file", path="exact.txt").ok
    assert "not UTF-8" in (call(tools, "read_file", path="image.png").error or "")


def test_write_file_creates_parents_and_writes(
    tools: dict[str, Tool], root: Path, context: ToolContext
) -> None:
    result = call(tools, "write_file", path="src/pkg/mod.py", content="print('é')\n")
    assert result == ToolResult(
        tool="write_file",
        ok=True,
        output="wrote 12 bytes to src/pkg/mod.py",
        data={"path": "src/pkg/mod.py", "bytes": 12},
    )
    assert (root / "src/pkg/mod.py").read_text(encoding="utf-8") == "print('é')\n"
    assert context.changed == {"src/pkg/mod.py"}


def test_write_file_replaces_atomically_and_keeps_the_mode(
    tools: dict[str, Tool], root: Path, umask: int
) -> None:
    target = root / "run.sh"
    target.write_text("old")
    target.chmod(0o755)
    assert call(tools, "write_file", path="run.sh", content="new").ok
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]  # no temp file left behind
    assert call(tools, "write_file", path="fresh.txt", content="").ok
    assert (root / "fresh.txt").stat().st_mode & 0o777 == 0o644


def test_write_file_limits_and_refusals(tools: dict[str, Tool], root: Path) -> None:
    # Under the character limit but over the byte limit once encoded.
    wide = "é" * (MAX_WRITE_BYTES // 2 + 1)
    result = call(tools, "write_file", path="big.txt", content=wide)
    assert not result.ok and "1 MiB" in (result.error or "")
    too_long = call(tools, "write_file", path="big.txt", content="x" * (MAX_WRITE_BYTES + 1))
    assert (too_long.error or "").startswith("invalid arguments:\ncontent:")
    assert call(tools, "write_file", path="exact.txt", content="x" * MAX_WRITE_BYTES).ok

    (root / "dir").mkdir()
    assert "is a directory" in (call(tools, "write_file", path="dir", content="x").error or "")
    (root / "file").write_text("x")
    under_a_file = call(tools, "write_file", path="file/child.txt", content="x")
    assert "a parent of it is a file" in (under_a_file.error or "")
    bad_text = call(tools, "write_file", path="s.txt", content="\ud800")
    assert (bad_text.error or "").startswith("invalid arguments:\ncontent: Input should be")
    assert not (root / "big.txt").exists() and not (root / "s.txt").exists()


# --- one result shape ----------------------------------------------------------------------


def test_every_tool_returns_the_same_result_shape(tools: dict[str, Tool]) -> None:
    results = [
        call(tools, "write_file", path="a.txt", content="hi"),
        call(tools, "read_file", path="a.txt"),
        call(tools, "list_files"),
        call(tools, "read_file", path="missing.txt"),
    ]
    for result in results:
        assert type(result) is ToolResult
        assert set(type(result).model_fields) == {"tool", "ok", "output", "data", "error"}
        text = json.loads(result.to_text())
        assert set(text) - {"error"} == {"tool", "ok", "output", "data"}
        assert ("error" in text) is (not result.ok)
    assert [r.tool for r in results] == ["write_file", "read_file", "list_files", "read_file"]
    assert results[0].data.keys() == results[1].data.keys() == {"path", "bytes"}
    assert json.loads(results[3].to_text())["error"] == "no such file: 'missing.txt'"
    assert "error" not in json.loads(results[0].to_text())


# --- invalid arguments ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "lines"),
    [
        ("read_file", {}, ["path: Field required"]),
        ("read_file", {"path": 3}, ["path: Input should be a valid string"]),
        ("read_file", {"path": "a", "mode": "r"}, ["mode: Extra inputs are not permitted"]),
        (
            "write_file",
            {"file": "a"},
            ["path: Field required", "content: Field required", "file: Extra inputs are not"],
        ),
        ("list_files", {"pattern": None}, ["pattern: Input should be a valid string"]),
    ],
)
def test_invalid_arguments_are_a_result_not_an_exception(
    tools: dict[str, Tool], name: str, args: dict[str, Any], lines: list[str]
) -> None:
    result = tools[name].invoke(args)
    assert not result.ok and result.output == "" and result.data == {}
    assert result.error is not None
    head, *problems = result.error.split("\n")
    assert head == "invalid arguments:"
    assert len(problems) == len(lines)
    for problem, line in zip(problems, lines, strict=True):
        assert problem.startswith(line)


def test_arguments_that_are_not_an_object(tools: dict[str, Tool]) -> None:
    result = tools["read_file"].invoke(["a.txt"])  # type: ignore[arg-type]
    assert (result.error or "").startswith("invalid arguments:\n(arguments): ")


# --- escapes ----------------------------------------------------------------------------------

ESCAPES = ["../x", "/etc/passwd", "a/../../x", "../outside/secret.txt", "..", "/"]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("name", ["read_file", "write_file", "list_files"])
def test_paths_leaving_the_workspace_are_refused(
    tools: dict[str, Tool], root: Path, outside: Path, name: str, path: str
) -> None:
    (root / "a").mkdir()
    before = snapshot(root.parent)
    args = {"path": path, "content": "pwned"} if name == "write_file" else {"path": path}
    result = tools[name].invoke(args)
    assert not result.ok
    assert result.error == (
        f"{path!r} is outside the workspace: paths must be relative and stay inside it"
    )
    assert snapshot(root.parent) == before


@pytest.mark.parametrize("name", ["read_file", "write_file", "list_files"])
def test_an_empty_path_is_refused(tools: dict[str, Tool], name: str) -> None:
    args = {"path": "", "content": "x"} if name == "write_file" else {"path": ""}
    assert "the path is empty" in (tools[name].invoke(args).error or "")


def test_paths_that_stay_inside_are_accepted(tools: dict[str, Tool], root: Path) -> None:
    assert call(tools, "write_file", path="./x.txt", content="1").ok
    assert call(tools, "write_file", path="a/../b.txt", content="2").ok
    assert call(tools, "read_file", path="sub/../x.txt").output == "1"
    assert snapshot(root) == {"x.txt": b"1", "b.txt": b"2"}


def test_symlinks_pointing_outside_are_refused(
    tools: dict[str, Tool], root: Path, outside: Path, context: ToolContext
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "dangling.txt").symlink_to(outside / "new.txt")
    before = snapshot(outside)

    attempts = [
        call(tools, "read_file", path="link.txt"),
        call(tools, "read_file", path="linkdir/secret.txt"),
        call(tools, "write_file", path="link.txt", content="pwned"),
        call(tools, "write_file", path="linkdir/secret.txt", content="pwned"),
        call(tools, "write_file", path="linkdir/new/deep.txt", content="pwned"),
        call(tools, "write_file", path="dangling.txt", content="pwned"),
        call(tools, "write_file", path="linkdir/../outside/new.txt", content="pwned"),
        call(tools, "list_files", path="linkdir"),
    ]
    for result in attempts:
        assert not result.ok
        assert "is outside the workspace" in (result.error or "")
    assert snapshot(outside) == before
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert context.changed == set()
    # Listing the workspace does not show what the links point at either.
    assert call(tools, "list_files").data["files"] == []


def test_symlinks_inside_the_workspace_work(
    tools: dict[str, Tool], root: Path, context: ToolContext
) -> None:
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("in")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    assert call(tools, "read_file", path="alias/f.txt").output == "in"
    written = call(tools, "write_file", path="alias/f.txt", content="out")
    assert written.data["path"] == "real/f.txt"  # the real file, which is what changed
    assert (root / "real" / "f.txt").read_text() == "out"
    assert context.changed == {"real/f.txt"}


def test_a_symlink_loop_is_a_tool_error(tools: dict[str, Tool], root: Path) -> None:
    (root / "loop").symlink_to(root / "loop")
    assert not call(tools, "read_file", path="loop").ok
    assert call(tools, "list_files").ok


# --- changed tracking ---------------------------------------------------------------------------


def test_changed_holds_the_paths_written_this_turn(
    tools: dict[str, Tool], root: Path, context: ToolContext
) -> None:
    (root / "seen.txt").write_text("x")
    call(tools, "read_file", path="seen.txt")
    call(tools, "list_files")
    assert context.changed == set()
    call(tools, "write_file", path="b.txt", content="1")
    call(tools, "write_file", path="./a/c.txt", content="2")
    call(tools, "write_file", path="b.txt", content="3")
    call(tools, "write_file", path="../nope.txt", content="4")
    assert context.changed == {"b.txt", "a/c.txt"}


# --- base class and registry -------------------------------------------------------------------


class _EchoInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="What to echo.")


class _Echo(Tool):
    name: ClassVar[str] = "echo"
    description: ClassVar[str] = "Echo the text, or fail when it is 'fail'."
    Input: ClassVar[type[BaseModel]] = _EchoInput

    def run(self, args: _EchoInput) -> ToolResult:
        if args.text == "fail":
            raise ToolError("asked to fail")
        if args.text == "bug":
            raise RuntimeError("a bug")
        return self.result(args.text, length=len(args.text))


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, type[Tool]]:
    """A registry copy for tests that register tools, so nothing leaks into other tests."""
    copy = dict(orchestrator.skills.base._REGISTRY)
    monkeypatch.setattr(orchestrator.skills.base, "_REGISTRY", copy)
    return copy


def test_tool_errors_become_results_and_bugs_propagate(context: ToolContext) -> None:
    echo = _Echo(context)
    assert echo.invoke({"text": "hi"}) == ToolResult(
        tool="echo", ok=True, output="hi", data={"length": 2}
    )
    assert echo.invoke({"text": "fail"}) == ToolResult(
        tool="echo", ok=False, output="", error="asked to fail"
    )
    with pytest.raises(RuntimeError, match="a bug"):
        echo.invoke({"text": "bug"})


def test_registry_knows_the_workspace_tools_and_hands_out_a_copy() -> None:
    known = registry()
    assert set(WORKSPACE_TOOLS) <= set(known)
    known.clear()
    assert set(WORKSPACE_TOOLS) <= set(registry())


def test_register_refuses_a_duplicate_name(own_registry: dict[str, type[Tool]]) -> None:
    register(_Echo)
    assert register(_Echo) is _Echo  # the same class again is harmless

    class Impostor(_Echo):
        name: ClassVar[str] = "read_file"

    with pytest.raises(ValueError, match="'read_file' is already registered"):
        register(Impostor)
    assert own_registry["read_file"].__name__ == "ReadFile"


def test_register_refuses_malformed_tools(own_registry: dict[str, type[Tool]]) -> None:
    class Spaced(_Echo):
        name: ClassVar[str] = "has spaces"

    with pytest.raises(TypeError, match="name must match"):
        register(Spaced)


def test_make_tools_shares_the_context_and_refuses_unknown_names(
    context: ToolContext, own_registry: dict[str, type[Tool]]
) -> None:
    register(_Echo)
    made = make_tools(["echo", "read_file"], context)
    assert [tool.name for tool in made] == ["echo", "read_file"]
    assert all(tool.context is context for tool in made)
    with pytest.raises(
        KeyError, match="unknown tool 'grep'; known tools: echo, edit_file, list_files"
    ):
        make_tools(["read_file", "grep"], context)
    with pytest.raises(ValueError, match="listed twice"):
        make_tools(["echo", "echo"], context)


# --- LangChain ------------------------------------------------------------------------------------


def test_as_langchain_converts_to_an_openai_tool(tools: dict[str, Tool]) -> None:
    for name in WORKSPACE_TOOLS:
        spec = convert_to_openai_tool(tools[name].as_langchain())
        function = spec["function"]
        assert spec["type"] == "function"
        assert function["name"] == name
        assert function["description"] == tools[name].description
        properties = function["parameters"]["properties"]
        assert all(p.get("description") for p in properties.values())
    write = convert_to_openai_tool(tools["write_file"].as_langchain())["function"]
    assert write["parameters"]["required"] == ["path", "content"]
    listing = convert_to_openai_tool(tools["list_files"].as_langchain())["function"]
    assert "required" not in listing["parameters"]


def test_langchain_tool_returns_text_for_every_outcome(tools: dict[str, Tool], root: Path) -> None:
    write = tools["write_file"].as_langchain()
    read = tools["read_file"].as_langchain()
    listing = tools["list_files"].as_langchain()

    ok = json.loads(write.invoke({"path": "a.txt", "content": "hi"}))
    assert ok == {
        "tool": "write_file",
        "ok": True,
        "output": "wrote 2 bytes to a.txt",
        "data": {"path": "a.txt", "bytes": 2},
    }
    assert json.loads(listing.invoke({}))["data"] == {"files": ["a.txt"]}
    bad_args = json.loads(read.invoke({"paht": "a.txt"}))
    assert bad_args["ok"] is False
    assert bad_args["error"].startswith("invalid arguments:\npath: Field required")
    refused = json.loads(read.invoke({"path": "../x"}))
    assert refused["ok"] is False and "outside the workspace" in refused["error"]


def test_langchain_tool_call_gives_a_tool_message(tools: dict[str, Tool], root: Path) -> None:
    (root / "a.txt").write_text("hi")
    read = tools["read_file"].as_langchain()

    def tool_call(args: dict[str, Any]) -> ToolMessage:
        message = read.invoke({"name": "read_file", "args": args, "id": "c1", "type": "tool_call"})
        assert isinstance(message, ToolMessage) and message.tool_call_id == "c1"
        return message

    good = tool_call({"path": "a.txt"})
    assert good.status == "success" and json.loads(str(good.content))["output"] == "hi"
    bad_calls: list[dict[str, Any]] = [{"path": 1}, {"path": "nope.txt"}]
    for args in bad_calls:
        failed = tool_call(args)
        assert failed.status == "error" and json.loads(str(failed.content))["ok"] is False


# --- trust boundaries (issue 20) -------------------------------------------------------------

CONTROL_WRITES = [
    ".git/config",
    ".git/hooks/pre-commit",
    ".git",  # a `.git` file ("gitdir: ...") points git at another repository
    "sub/.git",
    "sub/.git/config",
    ".GIT/config",  # the same folder on a case-insensitive file system
    ".Git/hooks/post-checkout",
    ".git./config",  # Windows drops the trailing dot
    "git~1/config",  # NTFS's short name of .git
    ".g\u200cit/config",  # HFS+ ignores the zero-width non-joiner
    "gitdir/config",  # a symlink to .git
    "sub/../.git/hooks/pre-commit",
    ".hg/hgrc",
    ".jj/repo/config.toml",
]


@pytest.mark.parametrize("path", CONTROL_WRITES)
def test_writes_into_version_control_folders_are_refused(
    tools: dict[str, Tool], root: Path, context: ToolContext, path: str
) -> None:
    # The attack: with --workdir on a repository, a `core.fsmonitor` line in .git/config
    # runs a command at the user's next `git status`.
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git\n")
    (root / "gitdir").symlink_to(root / ".git", target_is_directory=True)
    before = snapshot(root)

    payload = "[core]\n\tfsmonitor = touch /tmp/pwned\n"
    result = call(tools, "write_file", path=path, content=payload)
    assert not result.ok
    assert "a version-control folder" in (result.error or "")
    assert "can run commands on the user's machine" in (result.error or "")
    assert snapshot(root) == before
    assert sorted(p.name for p in (root / ".git").iterdir()) == ["config", "hooks"]
    assert context.changed == set()


def test_names_that_only_look_like_git_can_be_written(tools: dict[str, Tool]) -> None:
    for path in [".gitignore", ".github/workflows/ci.yml", "a.git/x", "git/config", "x.hg"]:
        assert call(tools, "write_file", path=path, content="x").ok, path


def test_write_file_describes_the_refused_folders(tools: dict[str, Tool]) -> None:
    assert ".git" in tools["write_file"].description
    assert "hard links" in tools["write_file"].description


def _counting_scandir(monkeypatch: pytest.MonkeyPatch, limit: int) -> list[int]:
    """Count os.scandir calls; past `limit` raise, so a runaway walk fails fast, not slowly."""
    calls = [0]
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        calls[0] += 1
        if calls[0] > limit:
            raise AssertionError(f"more than {limit} directory scans")
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    return calls


def test_repeated_double_stars_do_not_multiply_the_walk(
    tools: dict[str, Tool], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 12 folders, 3 deep: pathlib's glob took 13.4 s on such a tree with ten '**'.
    for top in "abc":
        for mid in "xyz":
            (root / top / mid).mkdir(parents=True)
            (root / top / mid / "f.txt").write_text("x")
    (root / "top.txt").write_text("x")
    expected = call(tools, "list_files", pattern="**/*.txt").data["files"]
    assert len(expected) == 10

    calls = _counting_scandir(monkeypatch, limit=100)
    result = call(tools, "list_files", pattern="/".join(["**"] * 10 + ["*.txt"]))
    assert result.ok and result.data["files"] == expected
    assert calls[0] == 13  # each folder scanned once: the root and its 12 folders
    calls[0] = 0
    assert call(tools, "list_files", pattern="**/x/**/**/*.txt").data["files"] == [
        "a/x/f.txt",
        "b/x/f.txt",
        "c/x/f.txt",
    ]
    assert calls[0] <= 13


def test_a_pattern_that_cannot_match_deeper_stops_the_walk(
    tools: dict[str, Tool], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.py").write_text("x")
    (root / "a" / "b" / "deep.py").write_text("x")
    calls = _counting_scandir(monkeypatch, limit=100)
    assert call(tools, "list_files", pattern="*.py").data["files"] == ["top.py"]
    assert calls[0] == 1


def test_oversized_patterns_are_refused(tools: dict[str, Tool]) -> None:
    long = call(tools, "list_files", pattern="*" * 257)
    assert long.error == "the pattern has 257 characters; at most 256"
    deep = call(tools, "list_files", pattern="/".join(["*"] * 17))
    assert deep.error == "the pattern has 17 parts between '/'; at most 16"
    # Repeated '**' count once, so this one is within the limit.
    assert call(tools, "list_files", pattern="/".join(["**"] * 40 + ["*"])).ok


def test_a_walk_stops_after_visiting_max_entries_and_says_so(
    tools: dict[str, Tool], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orchestrator.skills.globs, "MAX_VISITED", 10)
    for i in range(30):
        (root / f"f{i:02d}.txt").write_text("")
    result = call(tools, "list_files")
    assert result.ok
    assert len(result.data["files"]) == 10  # one per entry visited
    assert result.output.endswith(
        "(stopped after looking at 10 entries, so files may be missing; narrow the path or pattern)"
    )
    (root / "sub").mkdir()
    empty = call(tools, "list_files", path="sub")
    assert empty.ok and empty.output == "no files match"


def test_a_hard_link_to_a_file_outside_is_refused(
    tools: dict[str, Tool], root: Path, outside: Path, context: ToolContext
) -> None:
    root.mkdir(exist_ok=True)
    os.link(outside / "secret.txt", root / "hard.txt")
    read = call(tools, "read_file", path="hard.txt")
    assert not read.ok and "top secret" not in read.output
    assert read.error == (
        "'hard.txt' has 2 hard links: another name of it may be outside the workspace, "
        "so the tools neither read nor write it"
    )
    written = call(tools, "write_file", path="hard.txt", content="pwned")
    assert not written.ok and "2 hard links" in (written.error or "")
    assert (outside / "secret.txt").read_text() == "top secret"
    assert (root / "hard.txt").read_text() == "top secret"
    assert context.changed == set()


def _swap_after_resolve(
    monkeypatch: pytest.MonkeyPatch, name: Path, to: Path, *, is_dir: bool
) -> None:
    """Make `name` a symlink to `to` right after `resolve` checked the path: the race."""
    resolve = Workspace.resolve

    def racing(self: Workspace, path: str) -> Path:
        real = resolve(self, path)
        name.rename(name.with_name(name.name + ".moved"))
        name.symlink_to(to, target_is_directory=is_dir)
        return real

    monkeypatch.setattr(Workspace, "resolve", racing)


@pytest.mark.parametrize("name", ["read_file", "write_file"])
def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(
    tools: dict[str, Tool],
    root: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "secret.txt").write_text("harmless")
    _swap_after_resolve(monkeypatch, root / "dir", outside, is_dir=True)
    args = {"path": "dir/secret.txt", "content": "pwned"}
    result = tools[name].invoke(args if name == "write_file" else {"path": args["path"]})
    assert not result.ok and "top secret" not in result.output
    assert result.error == (
        "'dir' changed while it was being opened (a folder or file on the way is "
        "now a symlink); nothing was read or written, try again"
    )
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret"


@pytest.mark.parametrize("name", ["read_file", "write_file"])
def test_a_file_swapped_for_a_symlink_after_the_check_is_refused(
    tools: dict[str, Tool],
    root: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    root.mkdir(exist_ok=True)
    (root / "f.txt").write_text("harmless")
    _swap_after_resolve(monkeypatch, root / "f.txt", outside / "secret.txt", is_dir=False)
    args = {"path": "f.txt", "content": "pwned"} if name == "write_file" else {"path": "f.txt"}
    result = tools[name].invoke(args)
    assert not result.ok and "top secret" not in result.output
    assert "changed while it was being opened" in (result.error or "")
    assert (outside / "secret.txt").read_text() == "top secret"


def test_write_file_respects_the_umask(tools: dict[str, Tool], root: Path) -> None:
    old = os.umask(0o077)
    try:
        assert call(tools, "write_file", path="new/private.txt", content="x").ok
    finally:
        os.umask(old)
    assert (root / "new" / "private.txt").stat().st_mode & 0o777 == 0o600
    assert (root / "new").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    "path",
    ["a" * 256, "sub/" + "é" * 128, "a/" * 2100 + "x"],
    ids=["256-byte-name", "256-bytes-in-utf8", "path-past-PATH_MAX"],
)
@pytest.mark.parametrize("name", ["read_file", "write_file", "list_files"])
def test_a_name_too_long_is_a_tool_error(
    tools: dict[str, Tool], root: Path, name: str, path: str
) -> None:
    """A 256-byte name raised ENAMETOOLONG from Path.is_dir(), uncaught: `run` crashed
    with a traceback and the worker lost its threads. Now the model reads why."""
    args = {"path": path, "content": "x"} if name == "write_file" else {"path": path}
    result = tools[name].invoke(args)
    assert not result.ok
    assert "bytes long" in (result.error or "") or "characters long" in (result.error or "")
    assert snapshot(root) == {}


def test_any_os_error_of_a_tool_is_a_result_naming_no_host_path(
    tools: dict[str, Tool], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the file system refuses (here EACCES from a stat) goes to the model as
    the tool's error, without the host's absolute path."""
    import errno

    with monkeypatch.context() as patch:
        patch.setattr(
            Path,
            "is_dir",
            lambda self: (_ for _ in ()).throw(
                PermissionError(errno.EACCES, "Permission denied", str(self))
            ),
        )
        for name in ("read_file", "write_file", "list_files"):
            args = {"path": "x", "content": "1"} if name == "write_file" else {"path": "x"}
            result = tools[name].invoke(args)
            assert not result.ok and "Permission denied" in (result.error or ""), result
            assert str(root) not in (result.error or "")

    class Failing(Tool):
        name = "failing"
        description = "raises an OSError nobody worded"

        class Input(BaseModel):
            pass

        def run(self, args: Any) -> ToolResult:
            raise OSError(errno.EIO, "Input/output error", str(root / "secret"))

    failed = Failing(tools["read_file"].context).invoke({})
    assert failed == ToolResult(
        tool="failing", ok=False, output="", error="failing failed: Input/output error"
    )


def test_edit_file_with_a_name_too_long_is_a_tool_error(context: ToolContext) -> None:
    from orchestrator.skills.files import EditFile

    result = EditFile(context).invoke({"path": "a" * 256, "old": "x", "new": "y"})
    assert not result.ok and "bytes long" in (result.error or "")
