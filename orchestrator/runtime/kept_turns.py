"""Agent turns that finished while the database was away (issue 21): never paid twice.

When a finished turn cannot be recorded because the database refuses (server gone, disk
full, read-only), the driver first keeps it in a local file, then tries the (fenced)
record again until the database returns or its patience ends. The file stays until the
turn is recorded, so the next driver of the session on this machine records the kept turn
instead of calling the agent again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["KeptTurns", "PATIENCE_ENV"]

# Seconds a driver keeps trying to record a kept turn before it stops (exit 2, the turn
# stays kept for the next driver).
PATIENCE_ENV = "ORCHESTRATOR_RECORD_PATIENCE"
_DEFAULT_PATIENCE = 120.0


def _folder(url: str, session_id: str) -> Path:
    from platformdirs import user_data_dir

    database = hashlib.sha256(url.encode()).hexdigest()[:16]  # never the URL (a password)
    return (
        Path(user_data_dir("orchestrator", appauthor=False)) / "kept-turns" / database / session_id
    )


class KeptTurns:
    """The kept turns of one session of one database."""

    def __init__(self, url: str, session_id: str) -> None:
        self.folder = _folder(url, session_id)

    def _file(self, key: str) -> Path:
        return self.folder / f"{key.replace('/', '_')}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._file(key).read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def keep(self, key: str, record: dict[str, Any]) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._file(key)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, path)  # whole or absent
        return path

    def counts(self) -> dict[str, int]:
        """Kept turns by agent: a scripted backend resumes past them (they are replies
        given, to be recorded, not asked again)."""
        found: dict[str, int] = {}
        for path in self.folder.glob("*#*.json"):
            agent = path.stem.rsplit("#", 1)[0]
            found[agent] = found.get(agent, 0) + 1
        return found

    def forget(self, key: str) -> None:
        self._file(key).unlink(missing_ok=True)

    def record(
        self,
        key: str,
        agent: str,
        record: dict[str, Any],
        write: Callable[[], dict[str, Any]],
        classify: Callable[[BaseException], str | None],
    ) -> dict[str, Any]:
        """`write()` the turn; on a storage fault keep it and try again until the database
        returns (then forget it) or patience ends (StorageFailed; the turn stays kept)."""
        from orchestrator.errors import StorageFailed

        try:
            return self._written(key, write)
        except Exception as exc:
            if classify(exc) is None:
                raise
            first = exc
        path = self.keep(key, record)
        patience = float(os.environ.get(PATIENCE_ENV, _DEFAULT_PATIENCE))
        deadline = time.monotonic() + patience
        wait = 0.2
        while True:
            try:
                return self._written(key, write)
            except Exception as exc:
                message = classify(exc)
                if message is None:
                    raise
                if time.monotonic() >= deadline:
                    raise StorageFailed(
                        f"{message.rstrip('. ')}. The turn of {agent} ({key}) that finished "
                        f"meanwhile is kept in {path}: the next `orchestrator resume` (or a "
                        "worker) records it without calling the agent again"
                    ) from first
            time.sleep(wait)
            wait = min(wait * 2, 5.0)

    def _written(self, key: str, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        stored = write()
        self.forget(key)
        return stored
