"""Shared pieces of the web tests: scenarios that pause, an app over a temp database."""

from __future__ import annotations

import socket
from typing import Any

TOKEN = "test-token-0123456789"
BASE = "http://127.0.0.1:8765"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scenario(question: dict[str, Any] | None = None, *, task: str = "Add a CSV export") -> str:
    """A scenario whose PM asks `question` (no scripted answer: it pauses), then finishes."""
    import json

    ask = {
        "status": "NEEDS_CLARIFICATION",
        "question": "Which columns should the export contain?",
        "kind": "single_select",
        "options": [
            {"label": "All visible columns", "description": "what the table shows now"},
            {"label": "A fixed summary set", "recommended": True},
        ],
        "reason": "The table has 40 columns; most users want a few.",
        "context": "reports page, CSV export",
        "urgency": "high",
    }
    ask.update(question or {})
    doc = {
        "task": task,
        "agents": {
            "pm": [
                ask,
                {"status": "PLANNED", "tasks": [{"title": "Export endpoint"}]},
                {"status": "COMPLETE", "summary": "CSV export shipped"},
            ],
            "developer": [{"status": "DONE", "summary": "endpoint added"}],
        },
    }
    return json.dumps(doc, indent=2)  # several lines: the text itself, not a path


def paused(sessions: Any, question: dict[str, Any] | None = None, **kw: Any) -> str:
    doc = sessions.start_scenario(scenario(question, **kw))
    assert doc["status"] == "paused", doc
    return str(doc["session_id"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
