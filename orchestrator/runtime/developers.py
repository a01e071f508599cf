"""Developers that do the work (contract section 9): a worktree per task, a commit per
turn, commands in the sandbox, and checks that decide "done".

`prepare` runs when a session starts: it finds the repository (or makes one from a
scenario's `repo:` folder), records the base commit, and refuses what cannot work (checks
without a repository, or without a sandbox that runs). `Workroom` is what a drive uses:
for each developer turn it lays out the desk (the worktree reset to the turn's first
commit), then commits the turn and runs the checks.

Which commit a turn starts from is read from the store, never from the worktree: the
latest recorded turn of the same developer in the same round (its `commit`), else the
round's start. A crash between a commit and its record leaves an unrecorded commit on the
branch; the re-run resets the branch past it, so nothing half-done survives into it.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.domain.replies import AgentReply, Blocked, Done, NeedsClarification
from orchestrator.errors import ConfigError
from orchestrator.limits import clip
from orchestrator.runtime.worktrees import Repository, Workbench, discover, fixture_repository
from orchestrator.skills import Commands, Confinement, Desk, Limits, Sandbox, SandboxUnavailable
from orchestrator.skills.commands import LOG_OUTPUT_CHARS, NO_REPOSITORY

__all__ = ["prepare", "Workroom", "checks_failed", "CHECK_OUTPUT_CHARS"]

CHECK_OUTPUT_CHARS = 4_000  # of a check's output: what the task result and the PM see


def _data_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("orchestrator", appauthor=False))


def prepare(
    session_id: str,
    settings: Mapping[str, Any],
    *,
    workdir: Path | None = None,
    fixture: Path | None = None,
) -> dict[str, Any] | None:
    """The session's workbench (kept in its settings), or None without a repository.

    `workdir`: the folder the user named (a repository, or a folder in one); `fixture`: a
    scenario's `repo:` folder, copied into a new repository of the session's own.
    ConfigError when checks are asked for without a repository or a sandbox to run them.
    """
    repo: Repository | None
    if fixture is not None:
        repo = fixture_repository(fixture, _data_dir() / "repositories" / session_id)
    elif workdir is not None:
        repo = discover(workdir)
    else:
        repo = None
    checks = list(settings.get("checks") or [])
    if repo is None:
        if checks:
            raise ConfigError(f"--check {checks[0]!r}: {NO_REPOSITORY}")
        return None
    choice = str(settings.get("sandbox", "auto"))
    if checks and choice != "none":
        try:
            Sandbox.choose(choice)
        except SandboxUnavailable as exc:
            raise ConfigError(f"--check {checks[0]!r} cannot run: {exc.message}") from None
    bench = Workbench.create(session_id, repo, _data_dir() / "worktrees" / session_id)
    return {**bench.describe(), "dirty": repo.dirty}


@dataclass(frozen=True)
class Workroom:
    """One drive's view of a session's developers at work."""

    bench: Workbench
    sandbox: Sandbox | None
    refusal: str | None  # why commands are refused (the sandbox cannot run here)
    network: bool
    checks: tuple[str, ...]
    max_check_attempts: int

    @classmethod
    def of(cls, session_id: str, settings: Mapping[str, Any]) -> Workroom | None:
        """The workroom of a session with a repository (None without one)."""
        stored = settings.get("workbench")
        if not stored:
            return None
        bench = Workbench.from_settings(session_id, stored)
        gone = bench.reachable()
        if gone is not None:
            where = f"{stored.get('host') or 'its host'}:{stored['repository']}"
            raise ConfigError(
                f"{gone} (this is {socket.gethostname()}); run the session on from the "
                f"machine that has {where}"
            )
        limits = Limits(timeout=float(settings.get("command_timeout") or Limits.timeout))
        sandbox: Sandbox | None = None
        refusal = None
        try:
            sandbox = Sandbox.choose(str(settings.get("sandbox", "auto")), limits)
        except SandboxUnavailable as exc:
            refusal = exc.message
        return cls(
            bench,
            sandbox,
            refusal,
            bool(settings.get("allow_network")),
            tuple(settings.get("checks") or ()),
            int(settings.get("max_check_attempts") or 2),
        )

    # -- a turn ----------------------------------------------------------------------

    def start_of(self, agent: str, round_: int, recorded: Mapping[str, Mapping[str, Any]]) -> str:
        """The commit `agent`'s next turn in `round_` starts from (see the module doc)."""
        latest = (0, self.bench.base)
        for key, turn in recorded.items():
            name, _, call = key.rpartition("#")
            if name == agent and turn.get("round") == round_ and turn.get("commit"):
                latest = max(latest, (int(call), str(turn["commit"])))
        return latest[1]

    def desk(self, number: int, start: str) -> Desk:
        """Task `number`'s desk for a turn from `start`: its worktree reset to `start`."""
        path = self.bench.prepare(number, start)
        return Desk(path, self._commands(number), hooks=())

    def _commands(self, number: int) -> Commands:
        if self.sandbox is None:
            return Commands.refused(self.refusal or "commands cannot run here")
        home = self.bench.home(number)
        home.mkdir(parents=True, exist_ok=True)
        where = Confinement(
            worktree=self.bench.worktree(number),
            home=home,
            read_only=self.bench.read_only(number),
            network=self.network,
        )
        return Commands(self.sandbox, where)

    def commit(self, number: int, title: str, reply: AgentReply) -> str:
        """The turn's commit on the task's branch (message: title and the reply's gist)."""
        return self.bench.commit(number, turn_message(title, reply))

    def run_checks(self, number: int) -> list[dict[str, Any]]:
        """Run every check in the task's worktree, in the sandbox; their records."""
        commands = self._commands(number)
        results: list[dict[str, Any]] = []
        for check in self.checks:
            if commands.sandbox is None:
                results.append(
                    {"command": check, "exit_code": None, "passed": False, "sandbox": None,
                     "output": f"not run: {commands.refusal}", "duration_s": 0.0}
                )  # fmt: skip
                continue
            ran = commands.run(check)
            results.append({**ran.record(LOG_OUTPUT_CHARS), "passed": ran.passed})
        return results


def turn_message(title: str, reply: AgentReply) -> str:
    """A turn's commit message: the task's title, then what the reply said."""
    if isinstance(reply, Done):
        gist = reply.summary
    elif isinstance(reply, Blocked):
        gist = f"blocked: {reply.reason}"
    elif isinstance(reply, NeedsClarification):
        gist = f"asks: {reply.question}"
    else:  # pragma: no cover (developers reply one of the three)
        gist = reply.status
    return f"{clip(title, 200)}\n\n{gist}\n"


def checks_passed(checks: list[dict[str, Any]] | None) -> bool:
    return all(check.get("passed") for check in checks or [])


def checks_failed(checks: list[dict[str, Any]], attempt: int, attempts: int) -> str:
    """What a developer is told when its work fails the checks (or why it is blocked)."""
    failed = [c for c in checks if not c.get("passed")]
    lines = [
        f"The checks failed on your work (attempt {attempt} of {attempts}); "
        + ("fix it and reply DONE again." if attempt < attempts else "the task is blocked.")
    ]
    for check in failed:
        ended = "timed out" if check.get("timed_out") else f"exit code {check.get('exit_code')}"
        output = str(check.get("output") or "")
        if len(output) > CHECK_OUTPUT_CHARS:
            output = "[…]\n" + output[-CHECK_OUTPUT_CHARS:]
        lines.append(f"$ {check['command']}\n({ended})\n{output}".rstrip())
    return "\n\n".join(lines)


def check_summary(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checks as a task's result shows them (the output's tail only)."""
    return [
        {
            "command": c["command"],
            "passed": bool(c.get("passed")),
            "exit_code": c.get("exit_code"),
            "duration_s": c.get("duration_s"),
            **(
                {"output": str(c.get("output") or "")[-CHECK_OUTPUT_CHARS:]}
                if not c.get("passed")
                else {}
            ),
        }  # fmt: skip
        for c in checks
    ]
