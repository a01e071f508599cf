"""The lean read door: `status`, `log` and `list` straight off a SQLite file with the
standard library alone, for the command line's fast path (orchestrator.cli.fastread).

The documents are those `Sessions.status`, `Sessions.log` and `Sessions.list` return;
`NeedsFullPath` says a read must go through `Sessions` instead (a database that is not at
our revision, a question whose deadline passed and is not applied yet).
"""

from orchestrator.store.lean_sql import LeanFile, NeedsFullPath, events, page, sqlite_file, status

__all__ = ["LeanFile", "NeedsFullPath", "sqlite_file", "status", "events", "page"]
