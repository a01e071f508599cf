"""The JSON documents every edge prints or serves (contract section 3), as TypedDicts:
the session, its open question, its owner, its events.

Plain dicts at run time (no pydantic: `status`, `list` and `log` stay cheap to start);
the types say what is there. Fields beyond the contract's are additions, never renames.
The open question is one type (`PendingQuestion`) from the store's view to every door:
what the engine asks with, what answer validation and the renderer read, and what
`pending_question` prints.
"""

from typing import Any, Literal, NotRequired, Required, TypedDict, get_args

__all__ = [
    "SessionStatus",
    "STATUSES",
    "StatusFilter",
    "STATUS_FILTERS",
    "filtered_status",
    "FINAL_STATUSES",
    "TO_MCP_CLIENT",
    "OptionDoc",
    "PendingQuestion",
    "OwnerRecord",
    "QuestionPartDoc",
    "OrchestratorStateDoc",
    "ExpectDoc",
    "SessionDoc",
    "EventDoc",
]

SessionStatus = Literal["running", "paused", "completed", "failed", "cancelled"]
STATUSES: tuple[str, ...] = get_args(SessionStatus)
# What a list takes as its status filter, on every door: a status, or "waiting": a question
# is open (a paused session, or a running one whose question is being asked right now, as
# an MCP client's provide_choice or ask_user while its tool call waits).
StatusFilter = Literal[SessionStatus, "waiting"]
STATUS_FILTERS: tuple[str, ...] = get_args(StatusFilter)


def filtered_status(status: str | None) -> str | None:
    """What the store's listing filters on for a list's filter: a session status, or
    "waiting", which the store reads as "a question is open" (store.views.WAITING_SQL,
    the one definition on every door; tests/test_open_question.py holds it to
    `GateState.waiting`)."""
    return status


# A `resume` document's mark: the answer it committed goes to the MCP client whose tool call
# waits on the question (that client's server ends the session); `resume` says so, exit 0.
TO_MCP_CLIENT = "answer_to_mcp_client"

# Ended: nothing drives the session again (a reconciliation round may reopen one that
# completed or failed, on purpose).
FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


class OptionDoc(TypedDict, total=False):
    label: Required[str]
    description: str | None
    recommended: bool


class PendingQuestion(TypedDict):
    """The open question: contract section 2's question object (a `Question` dump, its
    unset fields None) plus who asks, its deadline and whether it passed."""

    question: str
    kind: Literal["free_text", "single_select", "multi_select"]
    options: NotRequired[list[OptionDoc]]
    allow_other: NotRequired[bool]
    reason: NotRequired[str | None]
    context: NotRequired[str | None]
    default: NotRequired[str | None]
    urgency: NotRequired[Literal["low", "medium", "high"]]
    ambiguity: NotRequired[str | None]
    key: NotRequired[str | None]
    # A multi-part question's parts: each its own question object with `part`, `asked_by`,
    # `askers` and `keys` (docs/multi-part-questions.md).
    parts: NotRequired[list[dict[str, Any]]]
    asked_by: str
    deadline: str | None  # ISO 8601, or None for no deadline
    timed_out: bool


class OwnerRecord(TypedDict):
    """Who drives a running session, and when another process may take it over."""

    pid: int | None
    host: str | None
    lease_expires_at: str | None  # ISO 8601
    takeover_possible_in: float  # seconds; 0 when a takeover is possible now
    alive: bool


class QuestionPartDoc(TypedDict):
    """One part of a multi-part question with its own answer (docs/multi-part-questions.md)."""

    part: int
    question: str
    askers: list[str]
    response: str | None  # None while unanswered, or declined
    declined: bool


class OrchestratorStateDoc(TypedDict):
    clarification_used: bool
    clarification_resolved: bool
    clarification_question: str | None
    user_clarification_response: str | None
    answer_status: str | None
    answer_note: str | None
    parts: list[QuestionPartDoc] | None  # a multi-part question's parts; None without


class ExpectDoc(TypedDict):
    """A scenario's `expect`, once the session ended: did it hold, and what did not."""

    held: bool
    unmet: list[str]


class SessionDoc(TypedDict):
    session_id: str
    status: SessionStatus
    task: str
    orchestrator_state: OrchestratorStateDoc
    pending_question: PendingQuestion | None
    questions_surfaced: int
    fallbacks_injected: int
    tasks: list[dict[str, Any]]
    summary: str | None
    error: str | None
    round: int
    created_at: str | None
    updated_at: str | None
    stalled: bool  # running, but its driver failed (last_error) or is gone
    # running, answered and handed off (resume --no-run, Sessions.answer): a worker, serve
    # or resume runs it on. Shown as "answered, waiting for a driver"; never also stalled.
    waiting_for_driver: bool
    last_error: str | None
    owner: OwnerRecord | None
    cancel_requested: bool
    # tokens of the agents' recorded model calls: input_tokens, output_tokens, total_tokens,
    # model_calls, and the same per agent under `agents`; None when no model was called
    usage: dict[str, Any] | None
    assumptions: NotRequired[list[dict[str, Any]]]
    expect: NotRequired[ExpectDoc]


class EventDoc(TypedDict):
    time: str | None
    kind: str
    agent: str | None
