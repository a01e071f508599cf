"""Prompts: Markdown files in agents/prompts/, overridable from a folder of the user's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.runtime.agent import AgentRequest

__all__ = ["SHIPPED", "system_prompt", "turn_message", "check_prompts"]

SHIPPED = Path(__file__).resolve().parent / "prompts"


def system_prompt(role: str, override: Path | None = None) -> str:
    """`<role>.md` from `override` if it has one, else the shipped prompt."""
    for folder in (override, SHIPPED):
        if folder is not None and (folder / f"{role}.md").is_file():
            return (folder / f"{role}.md").read_text(encoding="utf-8")
    raise FileNotFoundError(f"no prompt for {role!r}")  # the shipped ones always exist


def check_prompts(folder: Path) -> None:
    if not folder.is_dir():
        raise ConfigError(f"--prompts {folder}: not a folder (expected pm.md and/or developer.md)")
    if not any((folder / f"{role}.md").is_file() for role in ("pm", "developer")):
        raise ConfigError(f"--prompts {folder}: has neither pm.md nor developer.md")


def turn_message(request: AgentRequest) -> str:
    """The user-side message for one call: what this agent needs to know now."""
    parts = [f"Session task: {request.task}"]
    if request.assignment is not None:
        parts.append(f"Your task (#{request.assignment['number']}): {request.assignment['title']}")
        if request.assignment.get("description"):
            parts.append(request.assignment["description"])
    if request.clarification is not None:
        answer = request.clarification.response
        parts.append(
            f"The user was asked: {request.clarification.question}\n"
            + (f"The user answered: {answer}" if answer is not None else "The user declined.")
        )
    if request.tasks:
        parts.append("Plan and results so far:\n" + _board_text(request.tasks))
    if request.instruction:
        parts.append(request.instruction)
    return "\n\n".join(parts)


# The last board rendered, with the tuple it was rendered from (held, so that its identity
# is never a freed tuple's address reused): the developers of one fan-out are given the
# same board (orchestrator.runtime.graph_state.SharedBoard) and render it once between them.
_last_board: tuple[tuple[dict[str, Any], ...], str] | None = None


def _board_text(tasks: tuple[dict[str, Any], ...]) -> str:
    global _last_board
    last = _last_board  # one read: another thread may replace it meanwhile
    if last is not None and last[0] is tasks:
        return last[1]
    text = _board(tasks)
    if type(tasks) is not tuple:  # a list may change under the same identity
        return text
    _last_board = (tasks, text)
    return text


# A task's keys that add nothing to its line: a plan's task has only these until its
# developer reports, and each developer of a hundred renders the whole plan.
_PLAIN = frozenset({"number", "title", "status", "description", "scope"})


def _board(tasks: tuple[dict[str, Any], ...]) -> str:
    lines = []
    for task in tasks:
        line = f"- #{task['number']} [{task.get('status', 'pending')}] {task['title']}"
        if task.keys() <= _PLAIN:
            lines.append(line)
            continue
        detail = task.get("summary") or task.get("reason")
        if detail:
            line += f": {detail}"
        if task.get("files"):
            line += f" (files changed: {json.dumps(task['files'])})"
        for check in task.get("checks") or []:
            verdict = "passed" if check.get("passed") else "FAILED"
            line += f"\n    check {verdict}: {check['command']}"
        merge = task.get("merge") or {}
        if merge.get("outcome") == "clean":
            line += f"\n    merged into the session branch ({str(merge['commit'])[:12]})"
        elif merge.get("outcome") == "conflict":
            line += f"\n    not merged: conflict in {json.dumps(merge.get('files') or [])}"
        elif merge.get("outcome") == "checks_failed":
            line += "\n    not merged: the checks fail on the merged tree"
        lines.append(line)
    return "\n".join(lines)
