"""The LangGraph graph: pm -> (gate <-> asker) -> developers (parallel, via Send) -> pm review.

Building (`build_graph`) and running (`orchestrator.engine`) are kept apart. Graph state is
plain JSON (checkpoints stay free of pydantic); replies are rebuilt at the node edges.

Re-run safety: LangGraph re-runs a node from its first line after a crash or a resume.
Every side effect in a node is keyed in the store (agent replies by `<agent>#<call>`, gate
writes by the asking reply's key), so a re-run reads what the first run wrote instead of
calling an agent again or counting twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, TypedDict

from langchain_core.messages import messages_from_dict, messages_to_dict
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send, interrupt

from orchestrator import gate
from orchestrator._faults import crash_point
from orchestrator.agent import AgentBackend, AgentRequest, Clarification
from orchestrator.questions import repair
from orchestrator.replies import (
    AgentReply,
    Blocked,
    Complete,
    Done,
    NeedsClarification,
    Planned,
    parse_reply,
)
from orchestrator.store import Store

__all__ = ["GraphState", "RunContext", "build_graph", "compiled", "initial_state"]


def _merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Dict merge where a None value removes the key."""
    merged = dict(left or {})
    for key, value in (right or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def _append(
    left: dict[str, list[Any]] | None, right: dict[str, list[Any]] | None
) -> dict[str, list[Any]]:
    """Per-agent lists that only grow (each agent's chat history)."""
    merged = dict(left or {})
    for key, value in (right or {}).items():
        merged[key] = [*merged.get(key, []), *value]
    return merged


class GraphState(TypedDict, total=False):
    round: int
    tasks: list[dict[str, Any]]  # the current round's plan (written by pm only)
    calls: Annotated[dict[str, int], _merge]  # agent -> calls made so far
    results: Annotated[dict[str, dict[str, Any]], _merge]  # "round:N" -> developer result
    asks: Annotated[dict[str, dict[str, Any]], _merge]  # agent -> open NEEDS_CLARIFICATION
    instructions: Annotated[dict[str, str], _merge]  # agent -> message for its next call
    histories: Annotated[dict[str, list[Any]], _append]  # agent -> LangChain messages
    outcome: dict[str, Any] | None  # {"status": "completed"|"failed", "summary"|"error"}


class DeveloperInput(TypedDict):
    """What the fan-out `Send`s to one developer node."""

    task: dict[str, Any]
    round: int
    call: int
    instruction: str | None
    plan: list[dict[str, Any]]
    history: list[Any]  # this developer's conversation so far
    files: list[str]  # workspace files this developer changed in earlier calls


def initial_state() -> GraphState:
    return {
        "round": 0,
        "tasks": [],
        "calls": {},
        "results": {},
        "asks": {},
        "instructions": {},
        "histories": {},
    }


class Call(NamedTuple):
    """One agent call as the graph sees it (rebuilt from the store on a re-run)."""

    key: str
    reply: AgentReply
    messages: list[Any]
    files: list[str]


@dataclass(frozen=True)
class RunContext:
    session_id: str
    task: str
    store: Store
    backend: AgentBackend
    max_rounds: int
    max_fallbacks: int
    uncertainty_threshold: int = gate.DEFAULT_UNCERTAINTY_THRESHOLD
    timeout: float | None = None  # seconds a surfaced question waits for its answer
    activity: Any = None  # start(agent)/stop(agent): the CLI's progress line, if any

    def call(self, agent: str, call: int, state: GraphState, **extra: Any) -> Call:
        """Call `agent` once per (agent, call): a re-run gets the recorded turn back."""
        key = f"{agent}#{call}"
        stored, persisted = self.store.recorded_reply(self.session_id, key)
        if stored is None:
            clarification = None
            if persisted.resolved and persisted.question is not None:
                clarification = Clarification(persisted.question, persisted.response)
            request = AgentRequest(
                agent=agent,
                session_id=self.session_id,
                task=self.task,
                round=state.get("round", 0),
                call=call,
                clarification=clarification,
                tasks=tuple(_task_board(state)),
                **extra,
            )
            if self.activity is not None:
                self.activity.start(agent)
            try:
                turn = self.backend.respond(request)
            finally:
                if self.activity is not None:
                    self.activity.stop(agent)
            record: dict[str, Any] = {
                "reply": turn.reply.model_dump(mode="json", exclude_none=True)
            }
            if turn.messages:
                record["messages"] = messages_to_dict(list(turn.messages))
            if turn.files:
                record["files"] = sorted(turn.files)
            stored = self.store.record_reply(self.session_id, key, agent, record)
            crash_point(f"reply_recorded:{key}")
        return Call(
            key,
            parse_reply(agent, stored["reply"]),
            messages_from_dict(stored.get("messages", [])),
            list(stored.get("files", [])),
        )


def _task_board(state: GraphState) -> list[dict[str, Any]]:
    """The current round's tasks with each developer's latest result."""
    results = state.get("results", {})
    round_ = state.get("round", 0)
    return [{**t, **results.get(f"{round_}:{t['number']}", {})} for t in state.get("tasks", [])]


def _ask(agent: str, key: str, reply: NeedsClarification) -> dict[str, Any]:
    question, repaired = repair(reply, agent)
    return {
        "agent": agent,
        "key": key,
        "question": question.model_dump(mode="json", exclude_none=True),
        "uncertainty": reply.uncertainty,
        "repaired": repaired,
    }


def pm(state: GraphState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    call = state.get("calls", {}).get("pm", 0) + 1
    key, reply, messages, _ = ctx.call(
        "pm",
        call,
        state,
        instruction=state.get("instructions", {}).get("pm"),
        history=tuple(state.get("histories", {}).get("pm", [])),
    )
    update: dict[str, Any] = {"calls": {"pm": call}, "instructions": {"pm": None}}
    if messages:
        update["histories"] = {"pm": messages}
    if isinstance(reply, NeedsClarification):
        update["asks"] = {"pm": _ask("pm", key, reply)}
    elif isinstance(reply, Planned):
        round_ = state.get("round", 0) + 1
        if round_ > ctx.max_rounds:
            update["outcome"] = {
                "status": "failed",
                "error": f"the PM planned round {round_}, over max_rounds={ctx.max_rounds}",
            }
            return update
        tasks = [
            {"number": n, "title": spec.title, "status": "pending"}
            | ({"description": spec.description} if spec.description else {})
            for n, spec in enumerate(reply.tasks, start=1)
        ]
        ctx.store.set_tasks(ctx.session_id, round_, tasks)
        update.update(round=round_, tasks=tasks)
    elif isinstance(reply, Complete):
        update["outcome"] = {"status": "completed", "summary": reply.summary}
    return update


def developer(state: DeveloperInput, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    arg = state
    task, round_, call = arg["task"], arg["round"], arg["call"]
    agent = f"developer-{task['number']}"
    key, reply, messages, files = ctx.call(
        agent,
        call,
        {"round": round_, "tasks": arg["plan"]},
        instruction=arg["instruction"],
        assignment=task,
        history=tuple(arg["history"]),
    )
    result: dict[str, Any]
    asks: dict[str, Any] = {agent: None}
    if isinstance(reply, Done):
        result = {"status": "done", "summary": reply.summary}
    elif isinstance(reply, Blocked):
        result = {"status": "blocked", "reason": reply.reason}
    else:
        assert isinstance(reply, NeedsClarification)
        result = {"status": "needs_clarification"}
        asks = {agent: _ask(agent, key, reply)}
    changed = sorted({*arg["files"], *files})
    if changed:
        result["files"] = changed
    ctx.store.update_task(ctx.session_id, round_, task["number"], **result)
    update: dict[str, Any] = {
        "calls": {agent: call},
        "results": {f"{round_}:{task['number']}": result},
        "asks": asks,
        "instructions": {agent: None},
    }
    if messages:
        update["histories"] = {agent: messages}
    return update


def join(state: GraphState) -> dict[str, Any]:
    return {}


def gate_node(state: GraphState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    sid, store = ctx.session_id, ctx.store
    asks = sorted(state.get("asks", {}).values(), key=lambda a: gate.ask_order(a["agent"]))
    decisions = [
        store.gate_ask(
            sid,
            gate.Ask(
                a["agent"],
                a["key"],
                a["question"]["question"],
                uncertainty=a.get("uncertainty"),
                default=a["question"].get("default"),
            ),
            a["question"],
            max_fallbacks=ctx.max_fallbacks,
            uncertainty_threshold=ctx.uncertainty_threshold,
            timeout=ctx.timeout,
            repaired=a.get("repaired"),
        )
        for a in asks
    ]
    crash_point("gate_decided")
    if any(isinstance(d, gate.Surface | gate.Wait) for d in decisions):
        interrupt(store.view(sid)["pending_question"])
        # Reached only when resumed while the store still has no answer. The engine
        # resumes the graph after the answer commits, and this node then re-runs from
        # the top and decides C/D instead, so getting here is a bug, not a user error.
        raise RuntimeError(f"session {sid}: the gate was resumed without a stored answer")
    update: dict[str, Any] = {"asks": {a["agent"]: None for a in asks}, "instructions": {}}
    for decision in decisions:
        if isinstance(decision, gate.Fail):
            update["outcome"] = {"status": "failed", "error": decision.reason}
        elif isinstance(decision, gate.Rerun):
            update["instructions"][decision.agent] = (
                "The user answered your clarification question.\n"
                f"Question: {decision.question}\nAnswer: {decision.response}"
            )
        elif isinstance(decision, gate.Fallback | gate.Proceed):
            update["instructions"][decision.agent] = decision.message
    return update


def after_pm(state: GraphState) -> Any:
    if state.get("outcome"):
        return END
    if "pm" in state.get("asks", {}):
        return "gate"
    return _developers(state, [t["number"] for t in state.get("tasks", [])])


def after_join(state: GraphState) -> str:
    return "gate" if state.get("asks") else "pm"


def after_gate(state: GraphState) -> Any:
    if state.get("outcome"):
        return END
    instructions = state.get("instructions", {})
    if "pm" in instructions:
        return "pm"
    numbers = [int(agent.split("-")[1]) for agent in instructions]
    return _developers(state, sorted(numbers))


def _developers(state: GraphState, numbers: list[int]) -> list[Send]:
    by_number = {t["number"]: t for t in state.get("tasks", [])}
    board = {t["number"]: t for t in _task_board(state)}
    histories = state.get("histories", {})
    calls, instructions = state.get("calls", {}), state.get("instructions", {})
    return [
        Send(
            "developer",
            DeveloperInput(
                task=by_number[n],
                round=state.get("round", 0),
                call=calls.get(f"developer-{n}", 0) + 1,
                instruction=instructions.get(f"developer-{n}"),
                plan=state.get("tasks", []),
                history=histories.get(f"developer-{n}", []),
                files=board[n].get("files", []),
            ),
        )
        for n in numbers
    ]


def build_graph() -> StateGraph[GraphState, RunContext, GraphState, GraphState]:
    """The graph's shape. Nodes get the session's RunContext from LangGraph's runtime
    `context` (never checkpointed), so one compiled graph serves every session."""
    graph = StateGraph(GraphState, context_schema=RunContext)
    graph.add_node("pm", pm)
    graph.add_node("developer", developer, input_schema=DeveloperInput)
    graph.add_node("join", join)
    graph.add_node("gate", gate_node)
    graph.add_edge(START, "pm")
    graph.add_conditional_edges("pm", after_pm, ["gate", "developer", END])
    graph.add_edge("developer", "join")
    graph.add_conditional_edges("join", after_join, ["gate", "pm"])
    graph.add_conditional_edges("gate", after_gate, ["pm", "developer", END])
    return graph


_COMPILED: Any = None


def compiled(checkpointer: Any) -> Any:
    """The compiled graph bound to `checkpointer`; compiled once per process."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = build_graph().compile()
    return _COMPILED.copy(update={"checkpointer": checkpointer})
