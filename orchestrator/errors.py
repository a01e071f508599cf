"""Every error the orchestrator raises on purpose, grouped by what happened.

    BaseException
    ├── Exception
    │   └── OrchestratorError             .message for the user, .code for machines
    │       ├── UserError                 the caller asked for something wrong; nothing changed
    │       │   ├── SessionNotFound
    │       │   ├── SessionNotWaiting
    │       │   ├── SessionBusy           another live process drives the session
    │       │   ├── InvalidAnswer
    │       │   ├── ScenarioError
    │       │   └── ConfigError           a bad option, setting or database URL
    │       │       └── RepositoryElsewhere
    │       ├── EnvironmentFailure        the environment failed, not the caller: try later
    │       │   ├── DatabaseUnavailable   the server cannot be reached
    │       │   └── StorageFailed         a full disk, a read-only file, a lock held too long
    │       ├── RunError                  the run failed: the session ends `failed`
    │       │   ├── ScriptExhausted
    │       │   ├── AgentReplyError
    │       │   └── TokenBudgetExceeded
    │       ├── AgentCallError            a model call failed: the session is stalled
    │       │   └── BudgetExceeded        ... by a budget: left for `resume`, not retried
    │       └── WorkerFailed
    └── DriveStopped                      this process must stop driving the session now
        ├── ClaimLost                     another command took it (or the lease lapsed)
        └── CancelRequested               `cancel` was asked for (the engine ends it)

`DriveStopped` derives from BaseException, as DBOS's cancellation does: an agent's or a
tool's `except Exception` cannot swallow it, so a drive that lost its claim or was
cancelled stops at the next point it is checked, whatever the code around that point
does. Code of ours that must handle it (the engine, the doors) names it.

Every class carries `code`, a stable machine-readable name (the CLI's JSON error
document shows it; the web API and MCP keep the fields and codes the contract fixes).
The edges turn these into exit codes and statuses (the CLI: exit 2 for UserError,
EnvironmentFailure and ClaimLost, 1 for the rest); anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

__all__ = [
    "OrchestratorError",
    "UserError",
    "SessionNotFound",
    "SessionNotWaiting",
    "SessionBusy",
    "ClaimLost",
    "InvalidAnswer",
    "ScenarioError",
    "ConfigError",
    "RepositoryElsewhere",
    "EnvironmentFailure",
    "DatabaseUnavailable",
    "StorageFailed",
    "RunError",
    "ScriptExhausted",
    "AgentReplyError",
    "AgentCallError",
    "BudgetExceeded",
    "BUDGET_PREFIX",
    "TokenBudgetExceeded",
    "DriveStopped",
    "CancelRequested",
    "WorkerFailed",
    "validation_text",
]


class OrchestratorError(Exception):
    """Base class: `message` is written for the user; `code` names the kind for machines."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UserError(OrchestratorError):
    """The caller used the tool wrongly; nothing was changed (exit code 2)."""

    code = "bad_input"


class SessionNotFound(UserError):
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        shown = repr(session_id[:80]) + (
            f"… ({len(session_id) - 80:,} more characters)" if len(session_id) > 80 else ""
        )
        super().__init__(
            f"no session with id {shown} in this database "
            "(see `orchestrator list`, or check --db / ORCHESTRATOR_DB)"
        )
        self.session_id = session_id


class SessionNotWaiting(UserError):
    """An answer, decline or cancel for a session that has no open question."""

    code = "session_not_waiting"


class SessionBusy(UserError):
    """Another live process holds the session (or just took it)."""

    code = "session_busy"


class DriveStopped(BaseException):
    """This process must stop driving its session at once (see the module's tree): not an
    Exception, so that no `except Exception` in an agent, a tool or a library between the
    point it is raised and the engine can swallow it. `message` and `code` as
    OrchestratorError's."""

    code = "drive_stopped"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ClaimLost(DriveStopped):
    """This process no longer holds the session it was driving (another command took it
    over, e.g. while this one was frozen past its lease, or a storage fault outlasted the
    lease). It stops at once: no agent call, no write, no checkpoint after the loss.

    `why` says how it was lost; `elsewhere` is False when no other process is known to
    drive the session (its lease could not be renewed), so that `resume` goes on. The
    session API says what is recorded (`answer_kept`: this command's answer is stored)
    and which command goes on (`then`). A door shows it as SessionBusy (exit 2, 409,
    `conflict`)."""

    code = "claim_lost"

    def __init__(
        self,
        session_id: str,
        why: str,
        *,
        elsewhere: bool = True,
        answer_kept: bool | None = None,
        then: str | None = None,
    ) -> None:
        super().__init__(
            f"session {session_id} is no longer driven by this process ({why}); it stopped "
            "without calling an agent or writing anything more. "
            + (then or f"See `orchestrator status {session_id}`")
        )
        self.session_id = session_id
        self.why = why
        self.elsewhere = elsewhere
        self.answer_kept = answer_kept


class InvalidAnswer(UserError):
    """An answer that does not fit the question (e.g. a label that is not an option).

    The message is worded for the session API (its fields `answer`, `choices`, `note`);
    `fields` names the ones it is about, so that an edge with other names for them (the
    CLI's --answer, --choice) can add those at its edge."""

    code = "invalid_answer"

    def __init__(self, message: str, *, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


class ScenarioError(UserError):
    """A malformed scenario file: names the file, the path inside it and what was expected."""

    code = "invalid_scenario"


class ConfigError(UserError):
    """A bad option or setting (database URL, --ui value, ...)."""

    code = "invalid_config"


class RepositoryElsewhere(ConfigError):
    """A session whose developers work in a git repository this machine cannot see (a
    worker or `resume` on another host): it is left alone, nothing changed."""

    code = "repository_elsewhere"


class EnvironmentFailure(OrchestratorError):
    """Something outside the tool failed (the database, its disk): not the caller's
    mistake, and the same command may succeed once it is fixed. Nothing was changed unless
    the error says so (`answer_kept`). The CLI exits 2 for it, as for bad input."""

    code = "environment_failed"


class DatabaseUnavailable(EnvironmentFailure):
    """The database server cannot be reached now (down, restarting, refusing connections).

    Nothing was changed and the same command may succeed later; an edge that serves many
    requests (a worker, a web server) waits and tries again instead of giving up."""

    code = "database_unavailable"


class StorageFailed(EnvironmentFailure):
    """The database refused a write or a read for a reason outside the tool: a full disk,
    a read-only file or filesystem, a lock held too long, the server gone. The message
    names the cause and what to do; `session_id` and `answer_kept` say what it concerned
    and whether the user's answer is stored (None: not known, or no answer was given)."""

    code = "storage_failed"

    def __init__(
        self, message: str, *, session_id: str | None = None, answer_kept: bool | None = None
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.answer_kept = answer_kept


class RunError(OrchestratorError):
    """A session's run failed; the session is marked `failed` with this message."""

    code = "run_failed"

    # the tokens the failed turn spent, {agent: {input_tokens, ...}}: counted all the same
    usage: dict[str, dict[str, int]] | None = None


class ScriptExhausted(RunError):
    code = "script_exhausted"

    def __init__(self, agent: str, source: str, count: int) -> None:
        where = agent if source == agent else f"{agent} (from the shared {source!r} list)"
        super().__init__(
            f"the scenario ran out of replies for {where}: it has {count} "
            f"{'reply' if count == 1 else 'replies'} and call {count + 1} was made"
        )
        self.agent = agent
        self.count = count


class AgentReplyError(RunError):
    """An agent's reply was not valid for that agent (wrong status, missing field)."""

    code = "invalid_agent_reply"


class AgentCallError(OrchestratorError):
    """Calling an agent's model failed (network, auth, rate limit). Nothing was recorded
    for that call: the session stays resumable and `resume` makes the call again."""

    code = "agent_call_failed"

    agent: str | None = None  # which agent's call failed, once the engine knows
    session_id: str | None = None  # the session left stalled, once the engine knows
    usage: dict[str, dict[str, int]] | None = None  # the failed turn's tokens, by agent


class WorkerFailed(OrchestratorError):
    """A worker thread died of a bug outside any one session: the worker stops (exit 1)
    rather than serve on with fewer threads than asked, or none."""

    code = "worker_failed"


class BudgetExceeded(AgentCallError):
    """A model call or an agent turn went past one of its budgets (call_timeout,
    max_output_tokens, max_model_calls, max_tool_calls, turn_timeout): like any failed
    call, nothing of the turn is recorded and the session is stalled, resumable. Unlike a
    provider outage it is not retried by workers on their own (the same turn would spend
    the same again: the session's stored error kind is this `code`, which the queue
    skips), and `resume` retries it. The message starts with BUDGET_PREFIX."""

    code = "budget_exceeded"

    def __init__(self, message: str) -> None:
        if not message.startswith(BUDGET_PREFIX):
            message = BUDGET_PREFIX + message
        super().__init__(message)


BUDGET_PREFIX = "budget exceeded: "


class TokenBudgetExceeded(RunError):
    """The session used up its max_session_tokens: it ends `failed` (a budget is the
    user's decision, not an outage; `resume` would only spend more)."""

    code = "token_budget_exceeded"


class CancelRequested(DriveStopped):
    """`cancel` was asked of the session this process drives: it stops before the next
    agent call and ends the session `cancelled` (the engine catches this; it never reaches
    the user)."""

    code = "cancel_requested"


def validation_text(
    errors: Iterable[Mapping[str, Any]], *, skip: Container[str] = (), root: str = ""
) -> str:
    """Pydantic's errors as one line for the user, the same on every door that reads a
    model (the web API, MCP): one clause per problem, "where: what was expected", without
    pydantic's "Value error, " prefix. `skip`: location parts left out (a request's "body");
    `root`: the name of the whole input, for an error about all of it (missing, not an
    object), but not for the model's own checks, which name their fields."""
    clauses = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in skip)
        if not where and error.get("type") != "value_error":
            where = root
        what = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        clauses.append(f"{where}: {what}" if where else what)
    return "; ".join(clauses)
