"""A scenario's `expect` against how its session stands (plain data: no pydantic here).

Every unmet expectation is one line: `expect.<key>: expected …, got …`. Keys about the
question's asker and kind, and about events, read the session's log; pass it (or a
function that reads it) as `log`, it is only read when such a key is present.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.documents import ExpectDoc

__all__ = ["ENDED", "LOG_KEYS", "check_expect", "unmet_lines"]

# `expect` describes how a run ends; a pause is not an end, and a user's cancel is the
# user's call (exit 4), not the script's result.
ENDED = ("completed", "failed")

# Keys answered from the session's log rather than its session object.
LOG_KEYS = (
    "asked_by",
    "question_kind",
    "question_parts",
    "delivered",
    "events",
    "no_events",
    "merges",
)

Events = Sequence[Mapping[str, Any]]
Log = Events | Callable[[], Events] | None


def check_expect(expect: Mapping[str, Any], doc: Mapping[str, Any], log: Log = None) -> ExpectDoc:
    """Each unmet expectation as one line: the field, what was expected, what happened."""
    unmet = unmet_lines(expect, doc, log)
    return {"held": not unmet, "unmet": unmet}


def unmet_lines(
    expect: Mapping[str, Any], doc: Mapping[str, Any], log: Log = None, *, prefix: str = "expect"
) -> list[str]:
    """The unmet lines alone; `prefix` names where the expectation sits (`steps[2].expect`)."""
    unmet: list[str] = []

    def miss(field: str, wanted: Any, got: Any) -> None:
        unmet.append(f"{prefix}.{field}: expected {wanted}, got {got}")

    for field in ("status", "questions_surfaced", "fallbacks_injected", "summary"):
        wanted = expect.get(field)
        if wanted is not None and doc.get(field) != wanted:
            miss(field, repr(wanted), repr(doc.get(field)))
    needle = expect.get("error_contains")
    if needle is not None and needle not in (doc.get("error") or ""):
        unmet.append(f"{prefix}.error_contains: {needle!r} not in error {doc.get('error')!r}")
    needle = expect.get("error")
    if needle is not None and needle not in (doc.get("error") or ""):
        miss("error", f"an error containing {needle!r}", repr(doc.get("error")))

    state = doc.get("orchestrator_state") or {}
    needle = expect.get("question")
    question = state.get("clarification_question")
    if needle is not None and needle not in (question or ""):
        miss("question", f"a question containing {needle!r}", repr(question))
    wanted = expect.get("answer")
    if wanted is not None and state.get("user_clarification_response") != wanted:
        miss("answer", repr(wanted), repr(state.get("user_clarification_response")))
    wanted = expect.get("answer_status")
    if wanted is not None and (state.get("answer_status") or "none") != wanted:
        miss("answer_status", repr(wanted), repr(state.get("answer_status") or "none"))

    _late(expect, doc, miss)
    if "assumptions" in expect:
        _assumptions(expect["assumptions"], doc.get("assumptions") or [], miss)
    if "tasks" in expect:
        _tasks(expect["tasks"], doc.get("tasks") or [], miss)

    if any(key in expect for key in LOG_KEYS):
        events = list((log() if callable(log) else log) or [])
        _from_log(expect, doc, events, miss)
    return unmet


Miss = Callable[[str, Any, Any], None]


def _late(expect: Mapping[str, Any], doc: Mapping[str, Any], miss: Miss) -> None:
    late = doc.get("late_answer") or {}
    needle = expect.get("late_answer")
    if needle is not None and needle not in (late.get("response") or ""):
        miss("late_answer", f"a late answer containing {needle!r}", repr(late.get("response")))
    checks = late.get("checks") or []
    for field, got in (
        ("needs_review", bool(doc.get("needs_review"))),
        ("reconciled", late.get("reconciled") is not None),
        ("contradicted", sum(1 for c in checks if c.get("verdict") == "contradicted")),
    ):
        wanted = expect.get(field)
        if wanted is not None and got != wanted:
            miss(field, repr(wanted), repr(got))


def _assumptions(wanted: Any, actual: list[Mapping[str, Any]], miss: Miss) -> None:
    texts = [a.get("assumption", "") for a in actual]
    if isinstance(wanted, int):
        if len(texts) != wanted:
            miss("assumptions", f"{wanted} assumption(s)", f"{len(texts)}: {texts!r}")
        return
    for needle in [wanted] if isinstance(wanted, str) else wanted:
        if not any(needle in text for text in texts):
            miss("assumptions", f"an assumption containing {needle!r}", repr(texts))


def _tasks(wanted: Any, actual: list[Mapping[str, Any]], miss: Miss) -> None:
    if isinstance(wanted, int):
        if len(actual) != wanted:
            miss("tasks", f"{wanted} task(s)", f"{len(actual)}")
        return
    if len(actual) != len(wanted):
        titles = [t.get("title") for t in actual]
        miss("tasks", f"{len(wanted)} task(s)", f"{len(actual)}: {titles!r}")
    for index, (want, task) in enumerate(zip(wanted, actual, strict=False)):
        for key, value in want.items():
            if task.get(key) != value:
                miss(f"tasks[{index}].{key}", repr(value), repr(task.get(key)))


def _merges(wanted: list[Mapping[str, Any]], events: list[Mapping[str, Any]], miss: Miss) -> None:
    """The merges in the log, in order, against the expected ones (task and outcome, and
    the conflicted files where given)."""
    merges = [e for e in events if e.get("kind") == "merge"]
    got = [f"task {m.get('task')} {m.get('outcome')}" for m in merges]
    expected = [f"task {w['task']} {w['outcome']}" for w in wanted]
    if got != expected:
        miss("merges", expected, got)
        return
    for index, (want, merge) in enumerate(zip(wanted, merges, strict=True)):
        files = want.get("files")
        if files is not None and sorted(files) != sorted(merge.get("files") or []):
            miss(f"merges[{index}].files", sorted(files), sorted(merge.get("files") or []))


def _from_log(
    expect: Mapping[str, Any], doc: Mapping[str, Any], events: list[Mapping[str, Any]], miss: Miss
) -> None:
    if expect.get("merges") is not None:
        _merges(expect["merges"], events, miss)
    surfaced = next((e for e in events if e.get("kind") == "question_surfaced"), None)
    pending = doc.get("pending_question") or {}
    wanted = expect.get("asked_by")
    if wanted is not None:
        actual = surfaced.get("agent") if surfaced else pending.get("asked_by")
        if actual != wanted:
            miss("asked_by", repr(wanted), repr(actual) if actual else "no question surfaced")
    wanted = expect.get("question_kind")
    if wanted is not None:
        question = (surfaced or {}).get("question") or pending
        actual = question.get("kind") if question else None
        if actual != wanted:
            miss("question_kind", repr(wanted), repr(actual) if actual else "no question surfaced")
    wanted = expect.get("question_parts")
    if wanted is not None:
        question = (surfaced or {}).get("question") or pending
        actual = len(question.get("parts") or [question]) if question else 0
        if actual != wanted:
            miss("question_parts", repr(wanted), repr(actual))
    given = {e.get("agent"): str(e.get("response")) for e in events
             if e.get("kind") == "answer_delivered"}  # fmt: skip
    for agent, needle in (expect.get("delivered") or {}).items():
        if needle not in given.get(agent, ""):
            got = repr(given[agent]) if agent in given else "no answer delivered"
            miss(f"delivered.{agent}", f"an answer containing {needle!r}", got)
    for match in expect.get("events") or []:
        if not any(_matches(match, event) for event in events):
            kinds = list(dict.fromkeys(str(e.get("kind")) for e in events))
            miss("events", f"an event {_describe(match)}", f"none among {kinds}")
    for match in expect.get("no_events") or []:
        hits = [e for e in events if _matches(match, e)]
        if hits:
            who = ", ".join(f"{e.get('kind')} by {e.get('agent') or 'the session'}" for e in hits)
            miss("no_events", f"no event {_describe(match)}", f"{len(hits)} ({who})")


def _matches(match: str | Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    if isinstance(match, str):
        return event.get("kind") == match
    if event.get("kind") != match["kind"]:
        return False
    if match.get("agent") is not None and event.get("agent") != match["agent"]:
        return False
    text = match.get("text")
    return text is None or text in json.dumps(event, ensure_ascii=False, default=str)


def _describe(match: str | Mapping[str, Any]) -> str:
    if isinstance(match, str):
        return repr(match)
    words = [repr(match["kind"])]
    if match.get("agent"):
        words.append(f"by {match['agent']}")
    if match.get("text"):
        words.append(f"containing {match['text']!r}")
    return " ".join(words)
