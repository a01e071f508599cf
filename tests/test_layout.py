"""The tree's own rules (CONTRIBUTING.md, "Where things live"), checked: no two modules of
one name, and every server socket made in one place. (A module's length and the files a
question's path crosses are no rules: modules are grouped by concern, at whatever size
that takes; `python tests/question_path.py` still lists the path, as information.)"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


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
