"""The tree's own rules (CONTRIBUTING.md, "Where things live"), checked: no module over
400 lines, no two modules of one name, every server socket made in one place, and a
question's path no longer than it is now."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orchestrator
from tests.question_path import question_path

PACKAGE = Path(orchestrator.__file__).parent
MAX_LINES = 400
# The files a question's path runs through today (tests/question_path.py lists them); the
# goal is 8. A change that adds a hop fails here, and says which files it went through.
MAX_QUESTION_PATH = 10


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_passes_400_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"


def test_no_two_modules_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.name].append(str(path.relative_to(PACKAGE)))
    assert {name: where for name, where in by_name.items() if len(where) > 1} == {}


def test_every_server_listens_on_the_one_socket_maker() -> None:
    """`serve`, `mcp --http` and the one-shot page bind through
    orchestrator.web.protocol.listening_socket (connections without Nagle's delay): a
    socket made anywhere else is how the 40 ms stall came in."""
    makers = {
        str(p.relative_to(PACKAGE))
        for p in _modules()
        if "socket.socket(" in p.read_text(encoding="utf-8")
    }
    assert makers == {"web/protocol.py"}


def test_a_questions_path_runs_through_no_more_files_than_today(tmp_path: Path) -> None:
    files, plumbing = question_path(str(tmp_path))
    assert "domain/gate.py" in files and "store/gate_tx.py" in files  # the tracer sees it
    assert len(files) <= MAX_QUESTION_PATH, f"{len(files)} files: {files}"
    assert plumbing  # the SQL runner is run, and listed apart
