"""The graph's state and each run's context: what nodes read, write, and are given.

Graph state is plain JSON plus LangChain messages (both checkpoint without warnings);
replies are rebuilt from it at the node edges. RunContext reaches the nodes through
LangGraph's runtime `context`, which is never checkpointed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypedDict

from langchain_core.messages import messages_from_dict, messages_to_dict

from orchestrator.domain import gate
from orchestrator.domain.replies import AgentReply, parse_reply
from orchestrator.errors import AgentCallError
from orchestrator.faults import crash_point
from orchestrator.runtime.agent import AgentBackend, AgentRequest, Clarification
from orchestrator.runtime.kept_turns import KeptTurns
from orchestrator.store import Claim, Store

if TYPE_CHECKING:
    from orchestrator.runtime.developers import Workroom

__all__ = [
    "GraphState",
    "DeveloperInput",
    "RunContext",
    "Call",
    "initial_state",
    "reconciling_state",
    "task_board",
    "SharedBoard",
]


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
    # The resolved question and answer, as context for every later agent call. A copy:
    # the gate itself always decides on the store's state, never on this.
    clarification: dict[str, Any] | None
    outcome: dict[str, Any] | None  # {"status": "completed"|"failed", "summary"|"error"}


class DeveloperInput(TypedDict):
    """What the fan-out `Send`s to one developer node."""

    task: dict[str, Any]
    round: int
    call: int
    instruction: str | None
    plan: list[dict[str, Any]]
    history: list[Any]  # this developer's conversation so far
    clarification: dict[str, Any] | None
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


def reconciling_state(reopened: dict[str, Any], late: dict[str, Any]) -> GraphState:
    """Where an ended session's reconciliation round starts (its checkpoints went with its
    end): the board and round it ended on, each agent's calls so far (so a re-run of the
    round replays its recorded turns), and the late answer as the clarification."""
    state = initial_state()
    state["round"] = int(reopened["round"])
    state["tasks"] = list(reopened.get("tasks") or [])
    state["calls"] = dict(reopened.get("calls") or {})
    question = late.get("question")
    if question:
        state["clarification"] = {"question": question, "response": late["response"]}
    return state


class Call(NamedTuple):
    """One agent call as the graph sees it (rebuilt from the store on a re-run): `turn` is
    the record as stored (its commit and check results among it)."""

    key: str
    reply: AgentReply
    messages: list[Any]
    files: list[str]
    turn: dict[str, Any]


@dataclass(frozen=True)
class RunContext:
    claim: Claim  # the right to drive this session: every write below is fenced by it
    task: str
    store: Store
    backend: AgentBackend
    max_rounds: int
    limits: gate.GateLimits  # the session's limits on its gate (its settings)
    # Called before every agent call: raises ClaimLost (the claim is gone) or
    # CancelRequested (`cancel` was asked), so neither lets another agent call start.
    before_call: Callable[[], None] | None = None
    activity: Any = None  # start(agent)/stop(agent): the CLI's progress line, if any
    # Turns recorded so far, by key; loaded once per drive (only the claim holder records).
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)
    spent: dict[str, int] = field(default_factory=dict)  # tokens_used(), kept up to date
    # A scenario's late answer that comes while the agents run (docs/late-answers.md).
    scripted_late: dict[str, Any] | None = None
    # A session this drive created: until its gate's first decision (`gate_reached`) it
    # has asked nothing, so it has no late answer to read.
    fresh: bool = False
    gate_reached: threading.Event = field(default_factory=threading.Event)
    # Developers in worktrees of the session's repository (runtime.developers); None: the
    # shared workspace, and no commands.
    workroom: Workroom | None = None
    # Merges recorded so far (the merge queue's state), by key, in order; loaded once per
    # drive and kept up to date, as `recorded` is.
    merges: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        return self.claim.session_id

    @cached_property
    def boards(self) -> SharedBoard:
        """The task board each call is shown, built once for the developers of one fan-out."""
        return SharedBoard()

    @cached_property
    def kept(self) -> KeptTurns:
        """The session's kept turns (its folder found once a drive, not once a call: a
        hundred developers start one after another under the GIL)."""
        return KeptTurns(self.store.url or "", self.session_id)

    def tokens_used(self) -> int:
        """Tokens the session's recorded turns used (for the agents' token budget): summed
        once from the turns loaded, then counted as turns are recorded (no pass per call)."""
        with _TOKENS_LOCK:
            if "tokens" not in self.spent:
                self.spent["tokens"] = sum(_tokens(turn) for turn in self.recorded.values())
            return self.spent["tokens"]

    def late_instruction(self) -> str | None:
        """The late answer the PM is to act on at its next turn, if any (a scenario's,
        scripted to come while the agents run, is recorded first)."""
        from orchestrator.store import gate_tx

        if self.fresh and not self.gate_reached.is_set():
            return None  # nothing asked yet: nothing answered late
        if self.scripted_late is not None:
            state = self.store.gate_state(self.session_id)
            if gate.defaults_taken(state.resolved, state.resolution) and not state.late:
                from orchestrator.scenario.steps import from_scripted

                reply = from_scripted(self.scripted_late)
                self.store.resolve(
                    self.session_id, self.claim.owner, reply, source="script", claim=self.claim
                )
        return gate_tx.for_pm(self.store, self.claim)

    def late_delivered(self, key: str, reply: AgentReply) -> None:
        """The PM's turn `key` was told the late answer and replied `reply`."""
        from orchestrator.store import gate_tx

        dumped = reply.model_dump(mode="json", exclude_none=True)
        gate_tx.delivered(self.store, self.claim, key, dumped)

    def call(
        self,
        agent: str,
        call: int,
        state: GraphState,
        *,
        mirror: Callable[[AgentReply, dict[str, Any]], dict[str, Any]] | None = None,
        **extra: Any,
    ) -> Call:
        """Call `agent` once per (agent, call): a re-run gets the recorded turn back.

        `mirror` turns the reply and its record (files, checks) into what the session row
        shows (the plan, a task's result); it is written in the same transaction as the
        reply. A developer of a session with a repository works in its worktree: reset to
        the turn's first commit before the call, committed after it, checked when DONE.
        """
        key = f"{agent}#{call}"
        stored = self.recorded.get(key)
        kept = self.kept
        kept.keep_room()
        if stored is None and (found := kept.get(key)) is not None:
            # Finished by an earlier driver while the database was away: recorded now
            # (fenced by our claim), never called again.
            shown = mirror(parse_reply(agent, found["reply"]), found) if mirror else {}
            stored = self._record(kept, key, agent, found, shown)
        if stored is None:
            known = state.get("clarification")
            clarification = Clarification(**known) if known else None
            request = AgentRequest(
                agent=agent,
                session_id=self.session_id,
                task=self.task,
                round=state.get("round", 0),
                call=call,
                clarification=clarification,
                tasks=self.boards.board(state),
                tokens_used=self.tokens_used(),
                **extra,
            )
            if self.before_call is not None:
                self.before_call()
            work = self._desk(agent, request)
            if work is not None:
                request = replace(request, desk=work[1])
            if self.activity is not None:
                self.activity.start(agent)
            try:
                turn = self.backend.respond(request)
            except AgentCallError as exc:
                exc.agent = exc.agent or agent  # for the stalled session's log
                raise
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
            if turn.usage:
                record["usage"] = dict(turn.usage)
            if turn.notes:
                record["notes"] = list(turn.notes)
            if turn.commands:
                record["commands"] = list(turn.commands)
            if work is not None:
                record.update(self._finish_turn(agent, request, turn.reply, work[0]))
            shown = mirror(turn.reply, record) if mirror else {}
            crash_point(f"reply_received:{key}")
            stored = self._record(kept, key, agent, record, shown)
            crash_point(f"reply_recorded:{key}")
        return Call(
            key,
            parse_reply(agent, stored["reply"]),
            messages_from_dict(stored.get("messages", [])),
            list(stored.get("files", [])),
            stored,
        )

    def _desk(self, agent: str, request: AgentRequest) -> tuple[tuple[str, str], Any] | None:
        """A developer's desk for this turn, its worktree reset to the turn's first commit
        (and that commit); None without a repository."""
        if self.workroom is None or not agent.startswith("developer-"):
            return None
        number = int(agent.rpartition("-")[2])
        start, work_base = self.workroom.start_of(agent, request.round, self.recorded, self.merges)
        return (start, work_base), self.workroom.desk(number, start)

    def merge_task(
        self,
        number: int,
        round_: int,
        call: int,
        title: str,
        mirror: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """Merge task `number`'s work of `call` into the session branch once: a re-run
        gets the recorded outcome back (and a merge whose branch moved but whose record
        was lost is found and recorded, not made again). `mirror` turns the outcome into
        the task's result on the session row, written with it."""
        assert self.workroom is not None
        key = f"merge:{round_}:{number}:{call}"
        if key in self.merges:
            return self.merges[key]
        theirs = self.recorded[f"developer-{number}#{call}"]["commit"]
        onto = self.workroom.session_head(self.merges)
        if self.before_call is not None:
            self.before_call()  # still ours (and not cancelled) before git is touched
        outcome = self.workroom.merge(self.session_id, number, title, onto, theirs)
        merge = {"round": round_, "task": number, "call": call, **outcome}
        if merge["outcome"] != "clean":
            merge["change"] = self.workroom.change_of(onto, theirs)
        stored = self.store.record_merge(
            self.claim,
            key,
            f"developer-{number}",
            merge,
            task=(round_, number, mirror(merge)),
        )
        crash_point(f"merge_recorded:{number}")
        self.merges[key] = stored
        return stored

    def _finish_turn(
        self, agent: str, request: AgentRequest, reply: AgentReply, starts: tuple[str, str]
    ) -> dict[str, Any]:
        """The turn committed on its branch (and checked, when DONE): what its record adds."""
        from orchestrator.domain.replies import Done

        assert self.workroom is not None
        number = int(agent.rpartition("-")[2])
        title = str((request.assignment or {}).get("title") or agent)
        crash_point(f"turn_ended:{agent}#{request.call}")  # files written, not committed
        commit = self.workroom.commit(number, title, reply)
        crash_point(f"turn_committed:{agent}#{request.call}")
        start, work_base = starts
        added: dict[str, Any] = {
            "round": request.round,
            "start": start,
            "work_base": work_base,
            "commit": commit,
            "branch": self.workroom.bench.branch(number),
            "files": self.workroom.bench.changed_files(work_base, commit),
        }
        if isinstance(reply, Done) and self.workroom.checks:
            added["checks"] = self.workroom.run_checks(number)
        return added

    def _record(
        self,
        kept: KeptTurns,
        key: str,
        agent: str,
        record: dict[str, Any],
        shown: dict[str, Any],
    ) -> dict[str, Any]:
        """Record a finished turn (fenced by the claim); while the database is away the
        turn is kept on disk and the record tried again (orchestrator.runtime.kept_turns)."""
        from orchestrator.store.connect import storage_failure

        stored = kept.record(
            key,
            agent,
            record,
            lambda: self.store.record_reply(self.claim, key, agent, record, **shown),
            storage_failure,
        )
        self.tokens_used()  # the sum so far, before this turn is in `recorded`
        with _TOKENS_LOCK:
            self.recorded[key] = stored
            self.spent["tokens"] += _tokens(stored)
        return stored


_TOKENS_LOCK = threading.Lock()


def _tokens(turn: dict[str, Any]) -> int:
    return int(turn.get("usage", {}).get("total_tokens", 0))


class SharedBoard:
    """The board of the last state it was asked for, kept while the next call's state
    holds the very same plan and results (the developers of one fan-out are each `Send`
    the same plan object): a hundred developers share one board, where each building its
    own made every developer's start grow with the number of tasks. The board's dicts are
    shared with it: read them, never change them."""

    def __init__(self) -> None:
        # (plan, results, round, board): the objects themselves are held, so that an
        # identity compared is never a freed object's address reused.
        self._last: tuple[Any, Any, Any, tuple[dict[str, Any], ...]] | None = None

    def board(self, state: GraphState) -> tuple[dict[str, Any], ...]:
        plan, results, round_ = state.get("tasks"), state.get("results"), state.get("round", 0)
        last = self._last  # one read: another thread may replace it meanwhile
        if last is not None and last[0] is plan and last[1] is results and last[2] == round_:
            return last[3]
        board = tuple(task_board(state))
        self._last = (plan, results, round_, board)
        return board


def task_board(state: GraphState) -> list[dict[str, Any]]:
    """The current round's tasks with each developer's latest result."""
    results = state.get("results", {})
    round_ = state.get("round", 0)
    return [{**t, **results.get(f"{round_}:{t['number']}", {})} for t in state.get("tasks", [])]
