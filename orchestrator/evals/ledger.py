"""An eval run's record of its sessions, so that an interrupted `orchestrator eval --db`
goes on (`--resume RUN`) instead of leaving paused or running sessions behind.

One JSON file per run in the user data folder (`eval-runs/RUN.json`): the database it
ran in (a hash: never the URL, which may hold a password) and, per configuration and case,
the session that ran it. It is written as each session is created (whole or not at all),
so a kill -9 leaves a record of every session it started.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import uuid
from pathlib import Path

from orchestrator.errors import ConfigError

__all__ = ["Ledger"]

log = logging.getLogger("orchestrator.eval")

_RUN_ID = re.compile(r"^[0-9a-f]{8,32}$")


def _folder() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("orchestrator", appauthor=False)) / "eval-runs"


def _database(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:16]


class Ledger:
    """The sessions of one eval run in one database, by `key` (configuration and case)."""

    def __init__(self, run: str, url: str, sessions: dict[str, str]) -> None:
        self.run = run
        self.url = url
        self.sessions = sessions
        self.path = _folder() / f"{run}.json"
        self._lock = threading.Lock()

    @classmethod
    def new(cls, url: str) -> Ledger:
        ledger = cls(uuid.uuid4().hex[:12], url, {})
        ledger._write()
        return ledger

    @classmethod
    def resume(cls, run: str, url: str) -> Ledger:
        """The ledger of run `run`; ConfigError when there is none for this database."""
        if not _RUN_ID.match(run):
            raise ConfigError(
                f"--resume {run[:40]!r}: not an eval run id (the hexadecimal id `orchestrator "
                "eval --db` printed at its start)"
            )
        path = _folder() / f"{run}.json"
        try:
            found = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(
                f"--resume {run}: no eval run with that id on this machine ({path} does not "
                "exist); it is the id `orchestrator eval --db` printed at its start"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"--resume {run}: its record {path} is damaged ({exc})") from None
        if found.get("database") != _database(url):
            raise ConfigError(
                f"--resume {run}: that run kept its sessions in another database; give the "
                "--db it ran with"
            )
        return cls(run, url, {str(k): str(v) for k, v in dict(found.get("sessions", {})).items()})

    def get(self, key: str) -> str | None:
        with self._lock:
            return self.sessions.get(key)

    def put(self, key: str, session_id: str) -> None:
        with self._lock:
            self.sessions[key] = session_id
            try:
                self._write()
            except OSError as exc:  # the run goes on; only its resumption is at stake
                log.warning("cannot record eval run %s in %s: %s", self.run, self.path, exc)

    def _write(self) -> None:
        missing = [p for p in (self.path.parent, *self.path.parent.parents) if not p.exists()]
        for folder in reversed(missing):
            folder.mkdir(mode=0o700, exist_ok=True)  # the owner's alone, as the database's
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        record = {"run": self.run, "database": _database(self.url), "sessions": self.sessions}
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(record, indent=1))
        os.replace(temporary, self.path)  # whole or absent
