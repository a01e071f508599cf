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

import os
import shlex
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.domain.replies import AgentReply, Blocked, Done, NeedsClarification
from orchestrator.errors import ClaimLost, ConfigError, RepositoryElsewhere
from orchestrator.faults import crash_point
from orchestrator.limits import clip
from orchestrator.runtime.worktrees import (
    Repository,
    Workbench,
    check_git_version,
    discover,
    fixture_repository,
)
from orchestrator.skills import Commands, Confinement, Desk, Limits, Sandbox, SandboxUnavailable
from orchestrator.skills.commands import LOG_OUTPUT_CHARS, NO_REPOSITORY
from orchestrator.skills.workspace import HOOK_FOLDERS

__all__ = [
    "prepare",
    "Workroom",
    "MergeRaced",
    "checks_failed",
    "checks_passed",
    "check_summary",
    "merge_failed",
    "CHECK_OUTPUT_CHARS",
]

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
    check_git_version()
    choice = str(settings.get("sandbox", "auto"))
    if checks and choice != "none":
        try:
            Sandbox.choose(choice)
        except SandboxUnavailable as exc:
            raise ConfigError(f"--check {checks[0]!r} cannot run: {exc.message}") from None
    bench = Workbench.create(session_id, repo, _data_dir() / "worktrees" / session_id)
    return {**bench.describe(), "dirty": repo.dirty}


def named_paths(commands: Sequence[str]) -> tuple[Path, ...]:
    """The existing files and folders the user's check commands name by absolute path:
    shown to commands read-only, so that a check kept outside the repository runs in the
    sandbox wherever it lies (one under /tmp was hidden by the sandbox's own /tmp)."""
    found: list[Path] = []
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        found += [Path(w) for w in words if os.path.isabs(w) and os.path.exists(w)]
    return tuple(dict.fromkeys(found))


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
            raise RepositoryElsewhere(
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

    def start_of(
        self,
        agent: str,
        round_: int,
        recorded: Mapping[str, Mapping[str, Any]],
        merges: Mapping[str, Mapping[str, Any]],
    ) -> tuple[str, str]:
        """The commit `agent`'s next turn in `round_` starts from, and the commit its work
        on the task started from (what its changes are counted against): its latest
        recorded turn's in this round, unless it has none yet or its work went back from a
        failed merge since; then the session branch's head (see the module doc)."""
        number = int(agent.rpartition("-")[2])
        latest: tuple[int, str, str] | None = None
        for key, turn in recorded.items():
            name, _, call = key.rpartition("#")
            if name == agent and turn.get("round") == round_ and turn.get("commit"):
                found = (int(call), str(turn["commit"]), str(turn.get("work_base") or ""))
                latest = max(latest or found, found)
        went_back = latest is not None and any(
            m.get("round") == round_
            and m.get("task") == number
            and m.get("outcome") != "clean"
            and int(m.get("call") or 0) >= latest[0]
            for m in merges.values()
        )
        if latest is None or went_back:
            head = self.session_head(merges)
            return head, head
        return latest[1], latest[2] or self.bench.base

    def session_head(self, merges: Mapping[str, Mapping[str, Any]]) -> str:
        """Where the session branch is, as the store knows it: the last clean merge's
        commit, else the base."""
        head = self.bench.base
        for merge in merges.values():  # in the order they were recorded
            if merge.get("outcome") == "clean":
                head = str(merge["commit"])
        return head

    def desk(self, number: int, start: str) -> Desk:
        """Task `number`'s desk for a turn from `start`: its worktree reset to `start`."""
        path = self.bench.prepare(number, start)
        return Desk(path, self._commands(number), hooks=self.bench.hook_folders())

    def _commands(self, number: int) -> Commands:
        return self._commands_in(
            self.bench.worktree(number),
            self.bench.home(number),
            self.bench.read_only(number) + named_paths(self.checks),
        )

    def _commands_in(self, path: Path, home: Path, read_only: tuple[Path, ...]) -> Commands:
        if self.sandbox is None:
            return Commands.refused(self.refusal or "commands cannot run here")
        home.mkdir(parents=True, exist_ok=True)
        where = Confinement(worktree=path, home=home, read_only=read_only, network=self.network)
        return Commands(self.sandbox, where)

    def commit(self, number: int, title: str, reply: AgentReply) -> str:
        """The turn's commit on the task's branch (message: title and the reply's gist)."""
        return self.bench.commit(number, commit_message(title, reply))

    def run_checks(self, number: int) -> list[dict[str, Any]]:
        """Run every check in the task's worktree, in the sandbox; their records."""
        return self._checks(self._commands(number))

    def _checks(self, commands: Commands) -> list[dict[str, Any]]:
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

    # -- the merge queue -------------------------------------------------------------

    def merge(
        self, session_id: str, number: int, title: str, onto: str, theirs: str
    ) -> dict[str, Any]:
        """Merge task `number`'s work (`theirs`) into the session branch, which the store
        says is at `onto`: conflicts found without a checkout, the merge built and checked
        in the integration worktree, and the branch moved only if it is still at `onto`.
        The outcome, to be recorded: clean (with the commit), conflict (with the files),
        or checks_failed (with the checks)."""
        bench = self.bench
        branch = bench.session_branch
        outcome: dict[str, Any] = {"onto": onto, "merged": theirs}
        current = bench.head(branch)
        if current is None:  # made at the base, once
            current = onto if bench.advance(branch, onto, None) else bench.head(branch)
        if current != onto:
            if bench.parents(str(current)) == [onto, theirs]:
                # Merged and moved by a drive that was killed before it recorded it.
                files = bench.changed_files(onto, str(current))
                return {**outcome, "outcome": "clean", "commit": current, "files": files}
            raise MergeRaced(
                session_id,
                f"the session branch {branch} is at {str(current)[:12]}, not at {onto[:12]} "
                "where this drive expected it: another process merged first, or it was "
                "moved outside the orchestrator",
            )
        tree, conflicts = bench.merge_tree(onto, theirs)
        if tree is None:
            return {**outcome, "outcome": "conflict", "files": conflicts}
        commit = bench.merge_commit(tree, onto, theirs, f"Merge task {number}: {clip(title, 200)}")
        crash_point(f"merge_committed:{number}")
        if self.checks:
            path = bench.integration(commit)
            checks = self._checks(
                self._commands_in(path, bench.root / ".home-integration", (
                    bench.git_dir, path / ".git", *(path / h for h in HOOK_FOLDERS)))
            )  # fmt: skip
            if not checks_passed(checks):
                return {**outcome, "outcome": "checks_failed", "checks": checks}
            outcome["checks"] = checks
        if not bench.advance(branch, commit, onto):
            raise MergeRaced(
                session_id, f"the session branch {branch} moved while task {number} was merged"
            )
        crash_point(f"merge_advanced:{number}")
        return {
            **outcome,
            "outcome": "clean",
            "commit": commit,
            "files": bench.changed_files(onto, commit),
        }

    def change_of(self, onto: str, theirs: str, chars: int = 6_000) -> str:
        """What a task changed since it parted from `onto` (a diff, cut to `chars`)."""
        from orchestrator.runtime.worktrees import git

        diff = git("diff", "--no-color", f"{onto}...{theirs}", cwd=self.bench.git_dir, check=False)
        return diff if len(diff) <= chars else diff[:chars] + "\n[… the rest of the diff is cut …]"


class MergeRaced(ClaimLost):
    """The session branch was not where this drive expected it: it stops, as any drive
    that lost its claim does, and writes nothing more."""


def commit_message(title: str, reply: AgentReply) -> str:
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


def merge_failed(merge: Mapping[str, Any], attempt: int, attempts: int, change: str) -> str:
    """What a developer is told when its work did not merge (or why its task is blocked)."""
    if merge.get("outcome") == "conflict":
        what = (
            "Your work could not be merged into the session branch: it conflicts with work "
            f"merged before it, in {', '.join(merge.get('files') or []) or 'some files'}."
        )
    else:
        what = checks_failed(list(merge.get("checks") or []), attempt, attempts).replace(
            "The checks failed on your work", "The checks failed on the merged tree"
        )
    if attempt >= attempts:
        return f"{what}\nThe task is blocked after {attempt} attempts to merge it."
    return (
        f"{what}\n(attempt {attempt} of {attempts}) Your worktree now starts from the session "
        "branch's head, with the work merged so far: do your task again on top of it and "
        "reply DONE. What you changed before:\n" + change
    )
