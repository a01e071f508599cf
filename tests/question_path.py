"""The package files a question's path runs through, from an agent's NEEDS_CLARIFICATION
to the asker re-run with the answer: `python tests/question_path.py` lists them.

Traced, not read: a session with a question runs in-process under a profiler, and every
package function called while one of the path's entry points is on the stack names its
file. The entries: the graph turning a reply into an ask and deciding it (`graph._ask`,
`graph.gate_node`), and the answer coming in (`Sessions.answer`, `Store.answer`). Shared
plumbing that every path runs through (the SQL runner, the clock, crash points, the
storage-fault wrapper around `Sessions`) is listed apart.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import orchestrator

ROOT = Path(orchestrator.__file__).parent
ENTRIES = {
    ("runtime/graph.py", "_ask"),
    ("runtime/graph.py", "gate_node"),
    ("api/sessions.py", "answer"),
    ("store/core.py", "answer"),
}
# (api/storage_errors.py: the wrapper around every `Sessions` method that raises a storage
# fault as StorageFailed; it runs around every call, on every path, like the SQL runner.)
PLUMBING = {"store/sql.py", "domain/clock.py", "faults.py", "api/storage_errors.py"}
SCENARIO = Path(__file__).resolve().parents[1] / "examples" / "pause-and-resume.yaml"


def question_path(db_folder: str) -> tuple[list[str], list[str]]:
    """(the path's files, the plumbing it also ran), package-relative, sorted."""
    from orchestrator import Reply, Sessions

    prefix = f"{ROOT}{os.sep}"
    seen: Counter[str] = Counter()
    entered: list[bool] = []

    def profile(frame: object, event: str, _arg: object) -> None:
        code = frame.f_code  # type: ignore[attr-defined]
        if event == "call":
            name = code.co_filename[len(prefix) :] if code.co_filename.startswith(prefix) else ""
            entered.append((name, code.co_name) in ENTRIES)
            if name and any(entered):
                seen[name] += 1
        elif event == "return" and entered:
            entered.pop()

    with Sessions(f"sqlite:///{db_folder}/path.db") as sessions:
        sys.setprofile(profile)
        try:
            doc = sessions.start_scenario(str(SCENARIO))
            sessions.answer(doc["session_id"], Reply(text="Weekly, on Monday mornings"))
            doc = sessions.run_on(doc["session_id"])
        finally:
            sys.setprofile(None)
    assert doc["status"] == "completed", doc
    return sorted(set(seen) - PLUMBING), sorted(set(seen) & PLUMBING)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        files, plumbing = question_path(folder)
    print(f"{len(files)} files on a question's path:")
    print("\n".join(f"  orchestrator/{name}" for name in files))
    print(f"plumbing also run: {', '.join(plumbing)}")
