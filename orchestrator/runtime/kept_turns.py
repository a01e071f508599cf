"""Agent turns that finished while the database was away (issue 21): never paid twice.

When a finished turn cannot be recorded because the database refuses (server gone, disk
full, read-only), the driver first keeps it in a local file, then tries the (fenced)
record again until the database returns or its patience ends. The file stays until the
turn is recorded, so the next driver of the session on this machine records the kept turn
instead of calling the agent again.

The kept file must not fail for the reason the record did: a disk that holds both the
database and the user's data folder fills up for both at once (issue 47). So the folder
holds a reserve (`kept-turns/reserve`, 1 MiB, made before the agents run), given back to
the filesystem the moment a kept turn finds no space. A turn that still cannot be kept
(the reserve gone, a read-only folder) is held in this process's memory, and the driver
goes on trying to record or keep it, past its patience, until one of them works: it never
ends leaving a finished turn that is neither recorded nor kept.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.outages import Backoff

__all__ = ["KeptTurns", "PATIENCE_ENV", "RESERVE_BYTES", "reserve_path"]

log = logging.getLogger("orchestrator.runtime")

# Seconds a driver keeps trying to record a kept turn before it stops (exit 2, the turn
# stays kept for the next driver).
PATIENCE_ENV = "ORCHESTRATOR_RECORD_PATIENCE"
_DEFAULT_PATIENCE = 120.0
# Room kept free for kept turns (a turn's JSON: its reply, messages and notes).
RESERVE_BYTES = 1 << 20
_RESERVE_CHECK = 60.0  # seconds between a process's checks that the reserve is there
_reserve_lock = threading.Lock()
_reserve_checked: dict[Path, float] = {}


def _root() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("orchestrator", appauthor=False)) / "kept-turns"


def reserve_path() -> Path:
    """The file that keeps room for kept turns on the user data folder's filesystem."""
    return _root() / "reserve"


def _folder(url: str, session_id: str) -> Path:
    database = hashlib.sha256(url.encode()).hexdigest()[:16]  # never the URL (a password)
    return _root() / database / session_id


def _private_folder(folder: Path) -> None:
    """`folder` and the folders it needs, readable by their owner only (0700, whatever the
    umask): a kept turn holds what the agent wrote."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for made in reversed(missing):
        made.mkdir(mode=0o700, exist_ok=True)


def _ensure_reserve(root: Path) -> None:
    """Make the reserve if it is missing (checked at most once a minute per process);
    a disk already too full for it is left alone: the memory fallback still holds."""
    now = time.monotonic()
    with _reserve_lock:
        last = _reserve_checked.get(root)
        if last is not None and now - last < _RESERVE_CHECK:
            return
        _reserve_checked[root] = now
    reserve = root / "reserve"
    if reserve.exists():
        return
    temporary = root / f"reserve.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        _private_folder(root)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                # Real blocks, not a sparse file (posix_fallocate is not on macOS).
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            except (AttributeError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.write(fd, b"\0" * RESERVE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, reserve)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        log.debug("no reserve for kept turns in %s: %s", root, exc)


def _give_back_reserve(root: Path) -> bool:
    """Free the reserve's space for a kept turn; False when there was none to free."""
    try:
        (root / "reserve").unlink()
    except OSError:
        return False
    with _reserve_lock:
        _reserve_checked.pop(root, None)  # made again by the next drive that finds room
    return True


class KeptTurns:
    """The kept turns of one session of one database."""

    def __init__(self, url: str, session_id: str) -> None:
        self.folder = _folder(url, session_id)
        self.keep_room()

    def keep_room(self) -> None:
        """Make the reserve if it went (checked at most once a minute per process)."""
        _ensure_reserve(self.folder.parent.parent)

    def _file(self, key: str) -> Path:
        return self.folder / f"{key.replace('/', '_')}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._file(key).read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def keep(self, key: str, record: dict[str, Any]) -> Path:
        """Write the turn's file, whole or not at all; on a full disk the reserve is given
        back and the write tried once more. OSError when it still cannot be written."""
        try:
            return self._keep(key, record)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            if not _give_back_reserve(self.folder.parent.parent):
                raise
            return self._keep(key, record)

    def _keep(self, key: str, record: dict[str, Any]) -> Path:
        path = self._file(key)
        temporary = path.with_suffix(".tmp")
        try:
            _private_folder(self.folder)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(record))
                out.flush()
                os.fsync(out.fileno())  # the record that prevents paying twice
            os.replace(temporary, path)  # whole or absent
        except OSError:
            temporary.unlink(missing_ok=True)
            raise
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
        returns (then forget it) or patience ends (StorageFailed; the turn stays kept). A
        turn that cannot be kept either is held here, and both are tried until one works."""
        from orchestrator.errors import StorageFailed

        try:
            return self._written(key, write)
        except Exception as exc:
            if classify(exc) is None:
                raise
            first = exc
        path, unkept = self._kept(key, agent, record)
        patience = float(os.environ.get(PATIENCE_ENV, _DEFAULT_PATIENCE))
        deadline = time.monotonic() + patience
        backoff = Backoff(0.2, 5.0)
        said = False
        while True:
            try:
                return self._written(key, write)
            except Exception as exc:
                message = classify(exc)
                if message is None:
                    raise
                if path is None:
                    path, unkept = self._kept(key, agent, record, quiet=True)
                if time.monotonic() >= deadline:
                    if path is not None:
                        raise StorageFailed(
                            f"{message.rstrip('. ')}. The turn of {agent} ({key}) that "
                            f"finished meanwhile is kept in {path}: the next `orchestrator "
                            "resume` (or a worker) records it without calling the agent again"
                        ) from first
                    if not said:  # held in memory: ending now would pay for it twice
                        said = True
                        log.warning(
                            "%s. The turn of %s (%s) finished but can be neither recorded "
                            "nor kept in %s (%s): this process holds it and keeps trying "
                            "until the database or the disk has room again; stopping it "
                            "now would make the next run call %s again",
                            message.rstrip(". "), agent, key, self.folder, unkept, agent,
                        )  # fmt: skip
            time.sleep(backoff.next())

    def _kept(
        self, key: str, agent: str, record: dict[str, Any], *, quiet: bool = False
    ) -> tuple[Path | None, str | None]:
        """The kept file's path, or None and why it could not be written."""
        try:
            return self.keep(key, record), None
        except OSError as exc:
            if not quiet:
                log.warning(
                    "the turn of %s (%s) cannot be kept in %s (%s); this process holds it",
                    agent, key, self.folder, exc.strerror or exc,
                )  # fmt: skip
            return None, str(exc.strerror or exc)

    def _written(self, key: str, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        stored = write()
        self.forget(key)
        return stored
