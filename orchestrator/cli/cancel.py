"""`orchestrator cancel ID`: stop a session that has not ended (contract section 3)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.commands import DbOption, JsonOption, app
from orchestrator.cli.output import emit, user_errors
from orchestrator.cli.render import session_text
from orchestrator.cli.runs import sessions_for

__all__ = ["cancel"]


@app.command()
def cancel(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to stop.")],
    note: Annotated[
        str | None, typer.Option("--note", metavar="TEXT", help="Why (kept in the log).")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop a session that has not ended; exit 0 once the stop is recorded."""
    with user_errors(as_json):
        from orchestrator.limits import MAX_ANSWER_CHARS, check_length

        check_length("the --note", note, MAX_ANSWER_CHARS)
        view = sessions_for(db, session_id=session_id).cancel(session_id, note=note)
    emit(as_json, view, session_text(view))
