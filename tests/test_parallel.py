"""Parallel means parallel (issue 48): a round's developers run up to the session's
`max_parallel` at once, not up to a thread pool's CPU-derived default, on every door that
starts a session and every driver that runs one on.

The parallelism is counted where the agents' calls arrive: the OpenAI-compatible stub
(tests/openai_stub.py) counts the requests it answers at once (`stub.peak`), and its
developers' replies wait until the expected number is in flight (`Team(together=...)`),
so no test times anything. Without the setting LangGraph's pool is min(32, CPU count + 4)
threads (six on two cores): the cases that ask for MANY agents at once fail without it on
any machine; the default case fails on machines of up to three cores, and the case of
three checks the cap itself (a bigger pool shows as a higher peak in most runs, not all:
whether a fourth request arrives before the first three are answered is a race).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, ROOT, invoke
from orchestrator.agents.scripted import ScriptedBackend

from orchestrator import Reply, Sessions
from orchestrator.runtime.engine import max_parallel
from orchestrator.runtime.worker_loop import run_worker
from orchestrator.settings import Settings
from tests.mcp_client import call, in_memory
from tests.openai_stub import Stub, Team, TeamApart, error, serve, serve_apart

PATIENCE = 30.0  # a guard for a failing run (the expected parallelism never comes)
MANY = 33  # more than any machine's default pool (ThreadPoolExecutor: at most 32)


@pytest.fixture
def stub() -> Iterator[Stub]:
    with serve() as running:
        yield running


def _start(db_url: str, stub: Stub | TeamApart, tmp_path: Path, **settings: Any) -> dict[str, Any]:
    with Sessions(db_url) as sessions:
        return dict(
            sessions.start(
                "Build the reports page",
                models="openai:stub-model",
                workdir=tmp_path / "ws",
                model_options={"base_url": stub.url},
                settings=settings,
            )
        )


@pytest.mark.parametrize(
    ("tasks", "given", "expected"),
    [(12, None, 8), (10, 3, 3), (MANY + 7, MANY + 7, MANY + 7)],
    ids=["default-8", "three", "many"],
)
def test_developers_run_up_to_max_parallel(
    db_url: str, stub: Stub, tmp_path: Path, tasks: int, given: int | None, expected: int
) -> None:
    Team(stub, tasks, together=expected, patience=PATIENCE)
    view = _start(db_url, stub, tmp_path, **({"max_parallel": given} if given else {}))
    assert view["status"] == "completed", view
    assert [t["status"] for t in view["tasks"]] == ["done"] * tasks
    assert stub.peak == expected  # never more, and (the replies wait for it) never fewer
    assert len(stub.requests) == tasks + 2  # plan, one call per developer, review


def test_a_stub_in_its_own_process_counts_what_it_answered(tmp_path: Path) -> None:
    # The latency benchmark's stub (benchmarks/latency.py): the same Team, answered from a
    # process of its own, its count read across the process boundary and started afresh.
    with serve_apart() as apart:
        apart.team(5, together=5, patience=PATIENCE)
        view = _start(f"sqlite:///{tmp_path / 'o.db'}", apart, tmp_path, max_parallel=5)
        assert view["status"] == "completed", view
        spans = apart.spans
        assert len(spans) == 5 + 2 and all(a <= b for a, b in spans)
        assert apart.peak == 5
        apart.team(1)
        assert (apart.peak, apart.spans) == (0, [])


@pytest.mark.backends()
def test_a_worker_runs_the_stored_max_parallel(db_url: str, stub: Stub, tmp_path: Path) -> None:
    team = Team(stub, MANY + 2, ask=True, together=MANY, patience=PATIENCE)
    paused = _start(db_url, stub, tmp_path, max_parallel=MANY)
    assert paused["status"] == "paused", paused
    stub.peak = 0
    with Sessions(db_url) as sessions:
        sessions.answer(paused["session_id"], Reply(choices=("CSV file",)))
    stats = run_worker(db_url, 1, idle_exit=0.5, poll=0.05)
    assert stats.ended == {"completed": 1}, stats
    assert stub.peak == team.together


def test_the_cli_takes_max_parallel_and_refuses_a_bad_one(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    Team(stub, MANY, together=MANY, patience=PATIENCE)
    env = {**os.environ}
    env.pop("OPENAI_API_KEY", None)
    ran = invoke(
        *("run", "Build it", "--model", "openai:stub-model", "--base-url", stub.url),
        *("--workdir", str(tmp_path / "ws"), "--max-parallel", str(MANY), "--json"),
        db=db_url,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "completed"
    assert stub.peak == MANY
    with Sessions(db_url) as sessions:
        assert sessions.settings(json.loads(ran.stdout)["session_id"])["max_parallel"] == MANY

    fresh = tmp_path / "fresh.db"
    for bad, said in [("0", "greater than or equal to 1"), ("1001", "less than or equal to 1000")]:
        refused = invoke("run", "Build it", "--model", "openai:x", "--max-parallel", bad,
                         db=f"sqlite:///{fresh}")  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert f"--max-parallel {int(bad)}: " in refused.stderr and said in refused.stderr
        assert not fresh.exists()  # nothing was written
    usage = invoke("run", "Build it", "--max-parallel", "many", db=f"sqlite:///{fresh}")
    assert usage.returncode == 2 and "--max-parallel" in usage.stderr
    assert "[default: 8]" in " ".join(invoke("run", "--help").stdout.split())


def test_a_scenario_sets_max_parallel_and_a_bad_one_names_its_path(
    db_url: str, tmp_path: Path
) -> None:
    text = (EXAMPLES / "answered-question.yaml").read_text()
    good = tmp_path / "good.yaml"
    good.write_text(text + "\nsettings:\n  max_parallel: 3\n")
    ran = invoke("run", "--script", str(good), "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    with Sessions(db_url) as sessions:
        assert sessions.settings(json.loads(ran.stdout)["session_id"])["max_parallel"] == 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(text + "\nsettings:\n  max_parallel: 0\n")
    fresh = tmp_path / "fresh.db"
    refused = invoke("run", "--script", str(bad), db=f"sqlite:///{fresh}")
    assert refused.returncode == 2
    assert "settings.max_parallel" in refused.stderr, refused.stderr
    assert not fresh.exists()


def test_mcp_start_session_takes_max_parallel(
    tmp_path: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from orchestrator.mcp_server import build_server

    Team(stub, MANY, together=MANY, patience=PATIENCE)
    monkeypatch.setenv("ORCHESTRATOR_BASE_URL", stub.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "mcp.db"

    async def main() -> list[Any]:
        async with in_memory(build_server(str(db))) as session:
            task = {"task": "Build it", "model": "openai:stub-model"}
            return [
                await call(session, "start_session", {**task, "max_parallel": 0}),
                await call(session, "start_session", {**task, "max_parallel": MANY}),
            ]

    refused, started = anyio.run(main)
    assert refused["ok"] is False and refused["error"]["code"] == "invalid_input"
    assert "max_parallel" in refused["error"]["message"]
    assert started["ok"] is True and started["data"]["status"] == "completed", started
    assert stub.peak == MANY


def test_scripted_agents_run_one_at_a_time_whatever_max_parallel_says() -> None:
    backend = ScriptedBackend({"pm": [], "developer": []}, replies_so_far={})
    assert max_parallel({"max_parallel": 50}, backend) == 1
    chat = type("Chat", (), {"sequential": False})()
    assert max_parallel({"max_parallel": 50}, chat) == 50
    assert max_parallel({}, chat) == Settings().max_parallel == 8  # a session stored before


def test_rate_limited_developers_back_off_and_the_session_completes(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    """Every developer's first call is refused with 429 and Retry-After, three times over
    (more than the client's own two retries): each backs off and goes on; none fails."""
    team = Team(stub, 6, together=6, patience=PATIENCE)
    limited: dict[str, int] = {}

    def responder(request: dict[str, Any]) -> Any:
        system = str(request["messages"][0].get("content") or "")
        if "project manager" not in system:
            said = str(request["messages"][-1].get("content") or "")
            refusals = limited.get(said, 0)
            if refusals < 3:
                limited[said] = refusals + 1
                return error(429, retry_after="0", message="rate limited")
        return team(request)

    stub.responder = responder
    view = _start(db_url, stub, tmp_path)
    assert view["status"] == "completed", view
    assert sorted(limited.values()) == [3] * 6
    assert stub.peak == 6


_FREEZE_PROBE = """
import gc, json, sys
from orchestrator import Sessions
from orchestrator.api.running import freeze_at_first_drive, load_runtime

load_runtime()
gc.freeze()  # what an edge does after its imports (orchestrator.cli.runs)
freeze_at_first_drive()


class LoadedBeforeTheDrive:  # stands for the provider a session's start imports
    pass


def tracked(obj):  # gc.get_objects() leaves out the frozen (permanent) generation
    return any(o is obj for o in gc.get_objects())


seen = {"before": tracked(LoadedBeforeTheDrive)}
with Sessions(sys.argv[1]) as api:
    api.start_scenario(sys.argv[2])

    class LoadedAfterIt:
        pass

    seen["first"] = tracked(LoadedBeforeTheDrive)
    api.start_scenario(sys.argv[2])
    seen["second"] = tracked(LoadedAfterIt)
print(json.dumps(seen))
"""


def test_the_first_drive_freezes_what_was_loaded_for_it_once(tmp_path: Path) -> None:
    """What a session's start loads after the edge froze its imports (the agents'
    provider) is frozen when the first drive starts, so that a full collection amid many
    developers' allocations does not traverse it (orchestrator.runtime.heap); once per
    process: what later sessions allocate stays collectable."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _FREEZE_PROBE,
            f"sqlite:///{tmp_path / 'f.db'}",
            str(EXAMPLES / "answered-question.yaml"),
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"before": True, "first": False, "second": True}
