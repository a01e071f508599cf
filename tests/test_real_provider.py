"""Optional: one short session against a real provider, only when its key is present.

Runs when OPENAI_API_KEY is set and langchain-openai is installed (pip install '.[openai]');
ORCHESTRATOR_REAL_MODEL picks another model (e.g. anthropic:claude-haiku-4-5 with
ANTHROPIC_API_KEY). Skipped everywhere else, CI included: tests never need a key.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from orchestrator.domain.question import UserReply

SPEC = os.environ.get("ORCHESTRATOR_REAL_MODEL", "openai:gpt-4o-mini")
PROVIDER = SPEC.partition(":")[0]
KEY_VAR = f"{PROVIDER.upper()}_API_KEY"
# Read at import: the autouse fixture removes *_API_KEY from each test's environment.
KEY = os.environ.get(KEY_VAR)
PACKAGE = f"langchain_{PROVIDER}"

pytestmark = [
    pytest.mark.skipif(
        not KEY or importlib.util.find_spec(PACKAGE) is None,
        reason=f"needs {KEY_VAR} and {PACKAGE.replace('_', '-')}",
    ),
    pytest.mark.real_provider,  # out of the guard that refuses every other host (conftest)
]


def test_a_real_model_runs_a_session_to_the_end(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.agents.llm import LLMBackend

    from orchestrator.runtime.engine import Engine
    from orchestrator.store import Store

    assert KEY is not None
    monkeypatch.setenv(KEY_VAR, KEY)
    store = Store.open(db_url)
    backend = LLMBackend({"pm": SPEC, "developer": SPEC}, workdir=str(tmp_path / "ws"))
    session_id = Engine(store, db_url, ask_user=lambda q: UserReply(action="decline")).start(
        "Create a file hello.txt containing exactly the text: hello world",
        backend,
        {"max_rounds": 2, "max_fallbacks": 2},
    )
    view = store.view(session_id)
    assert view["status"] == "completed", view["error"]
    assert view["questions_surfaced"] <= 1
    assert (tmp_path / "ws" / "hello.txt").read_text().strip() == "hello world"
