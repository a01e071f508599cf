"""The error tree (orchestrator.errors): what each kind is, that a stopped drive cannot be
swallowed by an agent's or a tool's `except Exception`, and how the doors show it."""

from __future__ import annotations

import operator
import threading
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest
from orchestrator.agents.scripted import ScriptedBackend

from orchestrator import errors
from orchestrator.errors import (
    CancelRequested,
    ClaimLost,
    ConfigError,
    DatabaseUnavailable,
    DriveStopped,
    EnvironmentFailure,
    OrchestratorError,
    StorageFailed,
    UserError,
)
from orchestrator.runtime.engine import Engine
from orchestrator.scenario import Scenario
from orchestrator.store import Owner, Store
from orchestrator.store.owner import Claim

PLAN1 = {"status": "PLANNED", "tasks": [{"title": "one"}]}
COMPLETE = {"status": "COMPLETE", "summary": "shipped"}
DONE = {"status": "DONE", "summary": "done"}


def _classes() -> list[type[BaseException]]:
    found = [getattr(errors, name) for name in errors.__all__]
    return [kind for kind in found if isinstance(kind, type)]


def test_environment_failures_are_not_user_mistakes() -> None:
    for kind in (StorageFailed, DatabaseUnavailable):
        assert issubclass(kind, EnvironmentFailure) and issubclass(kind, OrchestratorError)
        assert not issubclass(kind, UserError) and not issubclass(kind, ConfigError)


def test_a_stopped_drive_is_no_exception_and_every_error_has_its_own_code() -> None:
    for kind in (ClaimLost, CancelRequested):
        assert issubclass(kind, DriveStopped) and not issubclass(kind, Exception)
    codes = Counter(kind.code for kind in _classes())  # type: ignore[attr-defined]
    assert [code for code, n in codes.items() if n > 1] == []
    assert all(code.isidentifier() and code.islower() for code in codes)
    assert StorageFailed("full").code == "storage_failed"
    assert ClaimLost("s1", "taken over").code == "claim_lost"


def test_the_docstring_draws_every_class_of_the_tree() -> None:
    drawn = errors.__doc__ or ""
    for kind in _classes():
        assert f"── {kind.__name__}" in drawn, kind.__name__


# -- LangGraph lets a BaseException out of a node unchanged ------------------------------


class _Stop(DriveStopped):
    pass


class _State(TypedDict):
    done: Annotated[list[str], operator.add]


def _graph(raising: str, saver: Any) -> Any:
    """start -> (one, two) in parallel -> end; `raising` raises _Stop inside a node whose
    own code swallows every Exception around the raise."""
    from langgraph.graph import END, START, StateGraph

    gate = threading.Barrier(2, timeout=30)  # both branches run at once

    def node(name: str) -> Any:
        def run(state: _State) -> dict[str, Any]:
            gate.wait()
            if name == raising:
                try:
                    raise _Stop("lost")
                except Exception:  # an agent's catch-all
                    pass
            return {"done": [name]}

        return run

    graph = StateGraph(_State)
    graph.add_node("one", node("one"))
    graph.add_node("two", node("two"))
    graph.add_edge(START, "one")
    graph.add_edge(START, "two")
    graph.add_edge("one", END)
    graph.add_edge("two", END)
    return graph.compile(checkpointer=saver)


@pytest.mark.parametrize("raising", ["one", "two"])  # the node run inline, and the one in a thread
@pytest.mark.parametrize("saved", [False, True])
def test_langgraph_propagates_a_stopped_drive_from_a_node(raising: str, saved: bool) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = _graph(raising, InMemorySaver() if saved else None)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(_Stop, match="lost"):
        graph.invoke({"done": []}, config, durability="exit" if saved else None)


# -- the engine: an agent's `except Exception` around the loss does not hide it ----------


def _driven(db_url: str, agents: dict[str, Any], hook: Any) -> tuple[Store, Engine, Any]:
    parsed = Scenario.model_validate({"task": "t", "agents": agents})
    store = Store.open(db_url)
    engine = Engine(store, db_url, owner=Owner())
    calls: list[str] = []
    after: list[str] = []

    class Swallowing(ScriptedBackend):
        """An agent whose code wraps a check of its drive in `except Exception: pass`."""

        def respond(self, request: Any) -> Any:
            calls.append(f"{request.agent}#{request.call}")
            generation = store.session(request.session_id).claim_generation
            mine = Claim(request.session_id, engine.owner, generation)
            try:  # noqa: SIM105  (the pattern under test, as agents write it)
                hook(request.session_id, mine)
            except Exception:  # what many agents and tools do
                pass
            after.append(request.agent)  # never reached once the drive is stopped
            return super().respond(request)

    backend = Swallowing(parsed.agents, replies_so_far={})
    backend.calls, backend.after = calls, after  # type: ignore[attr-defined]
    return store, engine, (parsed, backend)


@pytest.mark.backends()
def test_a_claim_lost_inside_an_agents_catch_all_still_stops_the_drive(db_url: str) -> None:
    taken: list[Claim] = []

    def lose(session_id: str, mine: Claim) -> None:
        with store.writing() as tx:  # the lease runs out while the agent works
            tx.run("UPDATE sessions SET lease_expires_at = 0.0 WHERE id = :id", {"id": session_id})
        taken.append(store.claim(session_id, Owner()))
        store.check_fence(mine)  # the point where this drive learns it lost the session

    store, engine, (parsed, backend) = _driven(
        db_url, {"pm": [PLAN1, COMPLETE], "developer": [DONE]}, lose
    )
    with pytest.raises(ClaimLost, match="no longer driven by this process"):
        engine.start(parsed.task, backend, parsed.session_settings())
    assert backend.calls == ["pm#1"] and backend.after == []  # stopped at the check
    (session_id,) = [view["session_id"] for view in store.list_views()]
    events = Counter(event["kind"] for event in store.events(session_id))
    assert events["agent_reply"] == 0  # nothing of the turn was recorded
    view = store.view(session_id)
    assert view["status"] == "running" and view["owner"]["alive"]
    assert store.session(session_id).owner == taken[0].owner.id  # the taker's, untouched


@pytest.mark.backends()
def test_a_cancel_inside_an_agents_catch_all_still_ends_the_session_cancelled(
    db_url: str,
) -> None:
    def cancel(session_id: str, mine: Claim) -> None:
        assert store.cancel(session_id) == "cancel_requested"  # its driver lives: asked
        store.check_call(mine)  # what the driver checks before acting

    store, engine, (parsed, backend) = _driven(db_url, {"pm": [PLAN1, COMPLETE]}, cancel)
    session_id = engine.start(parsed.task, backend, parsed.session_settings())
    assert backend.calls == ["pm#1"] and backend.after == []
    view = store.view(session_id)
    assert view["status"] == "cancelled", view
    assert Counter(event["kind"] for event in store.events(session_id))["agent_reply"] == 0


# -- the doors show a lost claim as a conflict, with its code where the contract allows ---


def test_the_cli_shows_a_lost_claim_as_exit_2_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    import typer

    from orchestrator.cli.output import user_errors

    with pytest.raises(typer.Exit) as exited, user_errors(True, "s1"):
        raise ClaimLost("s1", "its claim was taken over")
    assert exited.value.exit_code == 2
    document = json.loads(capsys.readouterr().out)
    assert document["exit_code"] == 2 and document["code"] == "claim_lost"
    assert document["session_id"] == "s1" and "no longer driven" in document["error"]


def test_the_cli_shows_a_storage_fault_as_exit_2_and_a_database_away_without_the_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    import typer

    from orchestrator.cli.output import user_errors

    with pytest.raises(typer.Exit) as exited, user_errors(True, "s1"):
        raise StorageFailed("the disk is full", session_id="s1", answer_kept=True)
    assert exited.value.exit_code == 2
    document = json.loads(capsys.readouterr().out)
    assert document["code"] == "storage_failed" and document["answer_kept"] is True
    with pytest.raises(typer.Exit) as exited, user_errors(True, "s1"):
        raise DatabaseUnavailable("cannot reach the PostgreSQL server")
    assert exited.value.exit_code == 2
    document = json.loads(capsys.readouterr().out)
    assert document["code"] == "database_unavailable" and "session_id" not in document


def test_the_web_and_mcp_show_a_lost_claim_as_a_conflict() -> None:
    from orchestrator.mcp_server.envelope import from_exception
    from orchestrator.web.http_errors import ApiError, conflict_if_lost, status_of

    lost = ClaimLost("s1", "its claim was taken over")
    assert status_of(lost) == 409
    with pytest.raises(ApiError) as raised, conflict_if_lost():
        raise lost
    assert raised.value.status == 409 and "no longer driven" in raised.value.message
    result = from_exception("answer_session", lost)
    assert result.structured_content["error"]["code"] == "conflict"  # type: ignore[index]
    assert status_of(StorageFailed("full")) == 503
