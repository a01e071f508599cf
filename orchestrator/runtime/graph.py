"""The LangGraph graph: pm -> (gate <-> asker) -> developers (parallel, via Send, in waves of
non-overlapping file scopes) -> merge (into the session branch) -> pm review.

Building (`build_graph`) and running (`orchestrator.runtime.engine`) are kept apart. Graph state is
plain JSON (checkpoints stay free of pydantic); replies are rebuilt at the node edges.

Re-run safety: LangGraph re-runs a node from its first line after a crash or a resume.
Every side effect in a node is keyed in the store (agent replies by `<agent>#<call>`, gate
writes by the asking reply's key), so a re-run reads what the first run wrote instead of
calling an agent again or counting twice.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send, interrupt

from orchestrator.domain import gate
from orchestrator.domain.question import repair
from orchestrator.domain.replies import (
    AgentReply,
    Blocked,
    Complete,
    Done,
    NeedsClarification,
    Planned,
)
from orchestrator.domain.scopes import next_wave
from orchestrator.faults import crash_point
from orchestrator.runtime.developers import (
    check_summary,
    checks_failed,
    checks_passed,
    merge_failed,
)
from orchestrator.runtime.graph_state import (
    DeveloperInput,
    GraphState,
    RunContext,
    initial_state,
    task_board,
)

__all__ = ["GraphState", "RunContext", "build_graph", "compiled", "initial_state"]  # re-exported


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
    round_ = state.get("round", 0) + 1  # if this reply plans

    def mirror(reply: AgentReply, record: dict[str, Any]) -> dict[str, Any]:
        planned = isinstance(reply, Planned) and round_ <= ctx.max_rounds
        return {"plan": (round_, _plan(reply))} if planned else {}

    instruction = state.get("instructions", {}).get("pm")
    late = ctx.late_instruction()  # a late answer to reconcile (docs/late-answers.md)
    if late is not None:
        instruction = late if instruction is None else f"{instruction}\n\n{late}"
    told = late is not None and f"pm#{call}" not in ctx.recorded  # a re-run: told next turn
    key, reply, messages, _, _ = ctx.call(
        "pm",
        call,
        state,
        mirror=mirror,
        instruction=instruction,
        history=tuple(state.get("histories", {}).get("pm", [])),
    )
    if told:
        ctx.late_delivered(key, reply)
    update: dict[str, Any] = {"calls": {"pm": call}, "instructions": {"pm": None}}
    if messages:
        update["histories"] = {"pm": messages}
    if isinstance(reply, NeedsClarification):
        update["asks"] = {"pm": _ask("pm", key, reply)}
    elif isinstance(reply, Planned):
        if round_ > ctx.max_rounds:
            update["outcome"] = {
                "status": "failed",
                "error": f"the PM planned round {round_}, over max_rounds={ctx.max_rounds}",
            }
            return update
        update.update(round=round_, tasks=_plan(reply))
    elif isinstance(reply, Complete):
        update["outcome"] = {"status": "completed", "summary": reply.summary}
    return update


def developer(state: DeveloperInput, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """One developer's turn; where the session has checks, a DONE whose checks fail goes
    back to the same developer with their output (a call of its own, keyed as any), at
    most `max_check_attempts` times in all, then the task is BLOCKED with that output."""
    ctx = runtime.context
    arg = state
    task, round_, call = arg["task"], arg["round"], arg["call"]
    agent = f"developer-{task['number']}"
    attempts = ctx.workroom.max_check_attempts if ctx.workroom is not None else 1
    instruction, history = arg["instruction"], list(arg["history"])
    added: list[Any] = []
    attempt = 0
    while True:
        attempt += 1
        final = attempt >= attempts
        last = attempt if final else None

        def mirror(reply: AgentReply, record: dict[str, Any], last: int | None = last) -> Any:
            return {"task": (round_, task["number"], _result(reply, record, arg["files"], last))}

        key, reply, messages, _, turn = ctx.call(
            agent,
            call,
            {"round": round_, "tasks": arg["plan"], "clarification": arg["clarification"]},
            mirror=mirror,
            instruction=instruction,
            assignment=task,
            history=tuple(history),
        )
        history += messages
        added += messages
        checks = turn.get("checks")
        if isinstance(reply, Done) and checks and not checks_passed(checks) and not final:
            instruction = checks_failed(checks, attempt, attempts)
            call += 1
            continue
        break
    result = _result(reply, turn, arg["files"], last)
    asks: dict[str, Any] = {agent: None}
    if isinstance(reply, NeedsClarification):
        asks = {agent: _ask(agent, key, reply)}
    update: dict[str, Any] = {
        "calls": {agent: call},
        "results": {f"{round_}:{task['number']}": result},
        "asks": asks,
        "instructions": {agent: None},
    }
    if added:
        update["histories"] = {agent: added}
    return update


def _plan(reply: AgentReply) -> list[dict[str, Any]]:
    """The task board of a PLANNED reply."""
    assert isinstance(reply, Planned)
    return [
        {"number": n, "title": spec.title, "status": "pending"}
        | ({"description": spec.description} if spec.description else {})
        | ({"scope": list(spec.files)} if spec.files else {})
        for n, spec in enumerate(reply.tasks, start=1)
    ]


def _result(
    reply: AgentReply, turn: dict[str, Any], earlier: list[str], last: int | None = 1
) -> dict[str, Any]:
    """A developer's task result: status, summary or reason, every file it changed, and
    where the session has a repository its branch, last commit and check results. A DONE
    whose checks fail is still being worked on, or BLOCKED with their output when it was
    the last attempt (`last`: its number; None while attempts are left)."""
    result: dict[str, Any]
    checks = turn.get("checks")
    if isinstance(reply, Done) and checks and not checks_passed(checks):
        if last is not None:
            result = {"status": "blocked", "reason": checks_failed(checks, last, last)}
        else:
            result = {"status": "pending", "summary": reply.summary}
    elif isinstance(reply, Done):
        result = {"status": "done", "summary": reply.summary}
    elif isinstance(reply, Blocked):
        result = {"status": "blocked", "reason": reply.reason}
    else:
        result = {"status": "needs_clarification"}
    files = turn.get("files", [])
    changed = sorted(files) if "commit" in turn else sorted({*earlier, *files})
    result |= {"files": changed} if changed else {}
    if "commit" in turn:
        result |= {"branch": turn["branch"], "commit": turn["commit"]}
    if checks:
        result["checks"] = check_summary(checks)
    return result


def join(state: GraphState) -> dict[str, Any]:
    return {}


def merge(state: GraphState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The orchestrator merges, never an agent (contract section 9): the round's tasks
    that are done are merged into the session branch one at a time, in task order. A
    conflict, or checks that fail on the merged tree, send the task back to its developer
    (on the session branch's head) with what went wrong, at most `max_check_attempts`
    times in all; then the task is BLOCKED and the PM decides. Without a repository there
    is nothing to merge."""
    ctx = runtime.context
    if ctx.workroom is None:
        return {}
    round_ = state.get("round", 0)
    attempts = ctx.workroom.max_check_attempts
    results: dict[str, Any] = {}
    instructions: dict[str, Any] = {}
    for task in task_board(state):
        if task.get("status") != "done" or task.get("merged"):
            continue
        number = task["number"]
        agent = f"developer-{number}"
        key = f"{round_}:{number}"
        before = state.get("results", {}).get(key, {})
        failed_before = sum(
            1
            for m in ctx.merges.values()
            if m.get("round") == round_ and m.get("task") == number and m["outcome"] != "clean"
        )

        def shown(
            merge: dict[str, Any], before: dict[str, Any] = before, failed: int = failed_before
        ) -> Any:
            return _merged_result(before, merge, failed + (merge["outcome"] != "clean"), attempts)

        merge_ = ctx.merge_task(number, round_, state["calls"][agent], task["title"], shown)
        failed = failed_before + (merge_["outcome"] != "clean")
        results[key] = _merged_result(before, merge_, failed, attempts)
        if merge_["outcome"] != "clean" and failed < attempts:
            instructions[agent] = merge_failed(merge_, failed, attempts, merge_.get("change", ""))
    update: dict[str, Any] = {}
    if results:
        update["results"] = results
    if instructions:
        update["instructions"] = instructions
    return update


def _merged_result(
    before: dict[str, Any], merge: dict[str, Any], failed: int, attempts: int
) -> dict[str, Any]:
    """A task's result once the merge queue has tried it."""
    shown = {"outcome": merge["outcome"]}
    if merge["outcome"] == "clean":
        shown["commit"] = merge["commit"]
        return {**before, "merged": True, "merge": shown}
    if merge.get("files"):
        shown["files"] = merge["files"]
    if merge.get("checks"):
        shown["checks"] = check_summary(merge["checks"])
    if failed >= attempts:
        reason = merge_failed(merge, failed, attempts, "")
        return {**before, "status": "blocked", "reason": reason, "merge": shown}
    return {**before, "status": "pending", "merge": shown}


def gate_node(state: GraphState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    ctx.gate_reached.set()
    sid, store = ctx.session_id, ctx.store
    asks = sorted(state.get("asks", {}).values(), key=lambda a: gate.ask_order(a["agent"]))
    events = [_gate_ask(a) for a in asks]
    decisions: list[gate.Decision]
    if len(asks) > 1 and ctx.limits.max_question_parts > 1:
        # One round's asks, decided together: they may become one multi-part question.
        decisions = store.gate_round(
            ctx.claim,
            [(e, a["question"], a.get("repaired")) for e, a in zip(events, asks, strict=True)],
            ctx.limits,
        )
    else:
        decisions = [
            store.gate_ask(ctx.claim, event, a["question"], ctx.limits, repaired=a.get("repaired"))
            for event, a in zip(events, asks, strict=True)
        ]
    crash_point("gate_decided")
    waiting = [a["agent"] for a, d in zip(asks, decisions, strict=True) if _waits(d)]
    if waiting:
        # The question itself is in the store (the engine reads it from there); the
        # interrupt only stops the run here until the answer is committed.
        interrupt({"session_id": sid, "waiting": waiting})
        # Reached only when resumed while the store still has no answer. The engine
        # resumes the graph after the answer commits, and this node then re-runs from
        # the top and decides C/D instead, so getting here is a bug, not a user error.
        raise RuntimeError(f"session {sid}: the gate was resumed without a stored answer")
    update: dict[str, Any] = {"asks": {a["agent"]: None for a in asks}, "instructions": {}}
    persisted = store.gate_state(sid)
    if persisted.resolved and persisted.question is not None:
        update["clarification"] = {"question": persisted.question, "response": persisted.response}
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


def _gate_ask(ask: dict[str, Any]) -> gate.Ask:
    question = ask["question"]
    return gate.Ask(
        ask["agent"],
        ask["key"],
        question["question"],
        uncertainty=ask.get("uncertainty"),
        default=question.get("default"),
        kind=question.get("kind", "free_text"),
        options=tuple(str(o["label"]) for o in question.get("options") or ()),
    )


def _waits(decision: gate.Decision) -> bool:
    return isinstance(decision, gate.Surface | gate.Wait)


def after_pm(state: GraphState) -> Any:
    if state.get("outcome"):
        return END
    if "pm" in state.get("asks", {}):
        return "gate"
    return _developers(state, _wave(state))


def after_join(state: GraphState) -> str:
    return "gate" if state.get("asks") else "merge"


def after_merge(state: GraphState) -> Any:
    """Tasks the merge sent back go to their developers again; then the round's next
    wave (tasks whose file scopes overlap run one after another); then the PM reviews."""
    back = sorted(
        int(agent.rpartition("-")[2])
        for agent in state.get("instructions", {})
        if agent.startswith("developer-")
    )
    if back:
        return _developers(state, back)
    wave = _wave(state)
    return _developers(state, wave) if wave else "pm"


def _wave(state: GraphState) -> list[int]:
    """The round's tasks to run next (orchestrator.domain.scopes): every task without a
    result yet whose file scope overlaps no earlier task still to run."""
    round_ = state.get("round", 0)
    results = state.get("results", {})
    tasks = [{"number": t["number"], "files": t.get("scope")} for t in state.get("tasks", [])]
    done = {t["number"] for t in tasks if f"{round_}:{t['number']}" in results}
    return next_wave(tasks, done)


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
    board = {t["number"]: t for t in task_board(state)}
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
                clarification=state.get("clarification"),
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
    graph.add_node("merge", merge)
    graph.add_edge(START, "pm")
    graph.add_conditional_edges("pm", after_pm, ["gate", "developer", END])
    graph.add_edge("developer", "join")
    graph.add_conditional_edges("join", after_join, ["gate", "merge"])
    graph.add_conditional_edges("merge", after_merge, ["pm", "developer"])
    graph.add_conditional_edges("gate", after_gate, ["pm", "developer", END])
    return graph


_COMPILED: Any = None


def compiled(checkpointer: Any) -> Any:
    """The compiled graph bound to `checkpointer`; compiled once per process."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = build_graph().compile()
    return _COMPILED.copy(update={"checkpointer": checkpointer})
