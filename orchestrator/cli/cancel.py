"""`orchestrator cancel ID`: stop a session that has not ended (contract section 3)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.options import DbOption, JsonOption
from orchestrator.cli.output import emit, user_errors
from orchestrator.cli.runs import sessions_for
from orchestrator.present.render import session_text

__all__ = ["cancel", "clean"]


def cancel(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to stop.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop a session that has not ended; exit 0 once the stop is recorded.

    A waiting session, or one whose process is gone, is cancelled at once; one whose
    process lives stops before its next agent call."""
    with user_errors(as_json, session_id):
        view = sessions_for(db, session_id=session_id).cancel(session_id)
    text = session_text(view, db)
    if view.get("cancel_requested"):
        text += "\n  the session stops before its next agent call"
    emit(as_json, view, text)


def clean(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to clean up.")],
    branches: Annotated[
        bool,
        typer.Option(
            "--branches",
            help="Delete its branches too: each task's and the session branch "
            "orchestrator/ID (the result). Without it they stay.",
        ),
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove what an ended session left in its git repository: its worktrees (and, with
    --branches, its branches). A session that has not ended is refused (exit 2)."""
    with user_errors(as_json, session_id):
        done = sessions_for(db, session_id=session_id).clean(session_id, branches=branches)
    lines = [f"session {session_id}: cleaned in {done['repository']}"]
    lines += [f"  removed worktree {path}" for path in done["worktrees_removed"]]
    lines += [f"  deleted branch {name}" for name in done["branches_deleted"]]
    if done["branches_kept"]:
        lines.append(
            "  kept the branches (--branches deletes them): " + ", ".join(done["branches_kept"])
        )
    if len(lines) == 1:
        lines.append("  nothing was left to remove")
    emit(as_json, done, "\n".join(lines))
