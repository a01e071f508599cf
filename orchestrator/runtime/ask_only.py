"""A question an MCP client asked (`provide_choice`, `ask_user`): a session that runs no
agent. What `resume` does with one once it is answered."""

from __future__ import annotations

import time
from typing import Any

from orchestrator.documents import TO_MCP_CLIENT
from orchestrator.store import Claim, Store

__all__ = ["ended_by_asker", "end", "ASKER_GRACE_SECONDS"]

# How long `resume --answer` waits for a live MCP server to end the question it answered.
ASKER_GRACE_SECONDS = 15.0


def ended_by_asker(store: Store, session_id: str) -> dict[str, Any]:
    """The answer went to an MCP client's question whose server lives: that server returns
    it to the waiting tool call and ends the session; wait (briefly) for it."""
    give_up = time.monotonic() + ASKER_GRACE_SECONDS
    view = store.view(session_id)
    while view["status"] == "running" and time.monotonic() < give_up:
        time.sleep(0.05)
        view = store.view(session_id)
    return {**view, TO_MCP_CLIENT: True}


def end(store: Store, claim: Claim) -> dict[str, Any]:
    """An MCP client's question runs no agent: answered (or resolved by its deadline), it
    is over. Its server, if it still waits, reads the answer from the session."""
    state = store.gate_state(claim.session_id)
    summary = {
        "declined": "declined",
        "timeout": "no answer before the deadline",
    }.get(state.resolution or "", f"answered: {state.response}")
    store.release(claim, "completed", summary=summary)
    return store.view(claim.session_id)
