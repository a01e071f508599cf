"""Storage faults at the session API: a full disk, a read-only file, a damaged file, a lock
held too long or a database server gone reach every door (the CLI, the web, MCP, the
suites, a Python program) as the same `StorageFailed`, with the same message, never as a
database driver's error. `Sessions` and `Inbox` are wrapped with `storage_faults`;
`answer`, `resume`, `run_on` and `reconcile` also say whether the answer is kept and which
command goes on (`raise_storage_failed`), as does a claim lost under them (`ClaimLost`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from orchestrator.errors import ClaimLost, ConfigError, OrchestratorError, StorageFailed

__all__ = ["storage_faults", "fault_message", "needs", "raise_storage_failed", "go_on_with"]

Kind = TypeVar("Kind", bound=type)


def fault_message(exc: BaseException) -> str | None:
    """What to tell the user for a storage fault (its cause and what to do), else None."""
    from orchestrator.store.connect import damaged_database, storage_failure

    return damaged_database(exc) or storage_failure(exc)


def needs(message: str) -> str:
    """A fault's message without its closing "then try again": what the storage needs,
    for a message that goes on to say what was already committed."""
    return message.rstrip(". ").removesuffix(", then try again")


def storage_faults(kind: Kind) -> Kind:
    """Wrap every public method, class method and property of the class `kind` so that a
    storage fault it meets (opening the database too) is raised as StorageFailed, naming
    the session when the method takes `session_id`. Our own errors and anything that is
    not a storage fault (a bug) pass through unchanged."""
    for name, member in list(vars(kind).items()):
        if name.startswith("_"):
            continue
        if inspect.isfunction(member):
            setattr(kind, name, _translated(member))
        elif isinstance(member, classmethod):
            setattr(kind, name, classmethod(_translated(member.__func__)))
        elif isinstance(member, property) and member.fget is not None:
            setattr(kind, name, property(_translated(member.fget), member.fset, member.fdel))
    return kind


def _translated(method: Callable[..., Any]) -> Callable[..., Any]:
    takes_id = list(inspect.signature(method).parameters)[1:2] == ["session_id"]

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OrchestratorError:
            raise
        except Exception as exc:
            message = fault_message(exc)
            if message is None:
                raise
            session_id = kwargs.get("session_id", args[0] if args else None)
            raise StorageFailed(message, session_id=session_id if takes_id else None) from exc

    return call


def raise_storage_failed(
    exc: Exception | ClaimLost,
    url: str,
    session_id: str,
    *,
    answered: bool | None,
    again: tuple[str, ...] = (),
) -> NoReturn:
    """Raise a storage fault met by `answer`, `resume`, `run_on` or `reconcile` (or a
    StorageFailed already raised under them) as the user's error, saying truthfully
    whether the answer is stored (`answered`: its transaction committed; None: no answer
    was given) and which command goes on, with the database `url` (masked) when it is not
    the default. Anything else is raised as it was."""
    if isinstance(exc, ClaimLost):
        raise _claim_lost(exc, url, session_id, answered) from exc
    message = fault_message(exc)
    if message is None:
        raise exc
    said, fix = message.rstrip(". "), needs(message)

    def command(verb: str, *args: str) -> str:
        return go_on_with(url, verb, session_id, *args)

    if answered:
        message = (
            f"{fix}. Your answer was kept: session {session_id} goes on from it with "
            f"{command('resume')} once the database works again"
        )
    elif answered is False:
        message = (
            f"{said}. Your answer was not recorded (if the fault came while it was being "
            f"committed, check with {command('status')}): give it again once the database "
            "works again"
        )
    else:
        then = f"then {command('resume', *again)} goes on where the session was"
        message = f"{fix}, {then}" if fix != said else f"{said}; {then}"
    raise StorageFailed(message, session_id=session_id, answer_kept=answered) from exc


def _claim_lost(exc: ClaimLost, url: str, session_id: str, answered: bool | None) -> ClaimLost:
    """A lost claim's error that says what is recorded and the one command that goes on:
    `resume` when no other process drives the session (its lease could not be renewed,
    e.g. a fault outlasted it), else `status`, which shows the process that does."""
    kept = "Your answer was kept: " if answered else ""
    if exc.elsewhere:
        then = f"{kept}{go_on_with(url, 'status', session_id)} shows where it is now"
    else:
        what = "from your answer" if answered else "where the session was"
        then = f"{kept}{go_on_with(url, 'resume', session_id)} goes on {what}"
    return ClaimLost(session_id, exc.why, elsewhere=exc.elsewhere, answer_kept=answered, then=then)


def go_on_with(url: str, verb: str, session_id: str, *args: str) -> str:
    """The command that goes on with `session_id`, quoted, naming the database `url`
    (masked) when it is not the default one."""
    from orchestrator.present.render import command_line
    from orchestrator.store.connect import resolve_url

    try:
        default = resolve_url(None)
    except ConfigError:  # ORCHESTRATOR_DB not a URL: the fault's message still stands
        default = None
    return f"`{command_line(verb, session_id, None if url == default else url, *args)}`"
