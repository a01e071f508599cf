"""Human-readable text for events and sessions (stderr progress, non-JSON output)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["event_line", "session_text", "question_text", "resume_hint"]


def question_text(question: Mapping[str, Any]) -> str:
    urgency = question.get("urgency", "medium")
    flag = f" [{urgency} urgency]" if urgency != "medium" else ""
    lines = [f"{question.get('asked_by', 'an agent')} asks{flag}: {question['question']}"]
    if question.get("reason"):
        lines.append(f"  why: {question['reason']}")
    if question.get("context"):
        lines.append(f"  context: {question['context']}")
    for number, option in enumerate(question.get("options") or [], start=1):
        described = f" - {option['description']}" if option.get("description") else ""
        mark = " (recommended)" if option.get("recommended") else ""
        lines.append(f"  {number}. {option['label']}{mark}{described}")
    if question.get("allow_other"):
        lines.append("  (or an answer of your own)")
    if question.get("default"):
        lines.append(f"  default if not answered: {question['default']}")
    if question.get("timed_out"):
        lines.append(f"  the deadline passed ({question.get('deadline')}); still answerable")
    elif question.get("deadline"):
        lines.append(f"  answer by: {question['deadline']}")
    return "\n".join(lines)


def resume_hint(session_id: str, question: Mapping[str, Any], db: str | None) -> str:
    """The exact command that answers `question`."""
    base = ["orchestrator", "resume", session_id]
    if db:
        base += ["--db", db]
    kind = question.get("kind", "free_text")
    labels = [o["label"] for o in question.get("options") or []]
    if kind == "free_text":
        how = base + ["--answer", "YOUR ANSWER"]
    elif kind == "single_select":
        how = base + ["--choice", labels[0] if labels else "LABEL"]
    else:
        how = base + [arg for label in labels[:2] for arg in ("--choice", label)]
    return " ".join(shlex.quote(part) for part in how)


def event_line(event: Mapping[str, Any]) -> str:
    kind, agent = event["kind"], event.get("agent")
    if kind == "session_started":
        return f"session started: {event['task']}"
    if kind == "agent_reply":
        reply = event["reply"]
        status = reply["status"]
        if status == "PLANNED":
            titles = "; ".join(f"{n}. {t['title']}" for n, t in enumerate(reply["tasks"], 1))
            return f"{agent} -> PLANNED: {titles}"
        detail = reply.get("question") or reply.get("summary") or reply.get("reason") or ""
        return f"{agent} -> {status}: {detail}"
    if kind == "question_surfaced":
        text = "QUESTION " + question_text({**event["question"], "asked_by": agent})
        if event.get("repaired"):
            text += "\n  (rebuilt locally: " + "; ".join(event["repaired"]) + ")"
        return text
    if kind == "assumption":
        return f"ASSUMPTION {agent}: {event['assumption']} (why: {event['why']})"
    if kind == "proceed":
        return f"{agent} asked with low uncertainty: not surfaced, proceeds with its default"
    if kind == "timeout":
        return f"the question's deadline passed (on-timeout: {event['policy']})"
    if kind == "question_held":
        return f"{agent} also asked ({event['question']}); held: one question per session"
    if kind == "answer":
        note = f" (note: {event['note']})" if event.get("note") else ""
        return f"ANSWER ({event.get('source', 'user')}): {event['response']}{note}"
    if kind == "decline":
        return "the question was declined; the asking agent proceeds on assumptions"
    if kind == "cancel":
        return "the session was cancelled"
    if kind == "answer_delivered":
        return f"{agent} runs again with the answer"
    if kind == "fallback":
        why = {"declined": "question declined", "timeout": "no answer in time"}.get(
            event.get("why", ""), "hard cap"
        )
        return f"{agent}: auto-fallback sent ({why})"
    if kind == "gate_failed":
        return f"{agent} kept asking: {event['reason']}"
    if kind == "status":
        extra = event.get("summary") or event.get("error") or event.get("note") or ""
        return f"session {event['status']}" + (f": {extra}" if extra else "")
    return f"{kind} {agent or ''}".strip()


def session_text(view: Mapping[str, Any]) -> str:
    lines = [f"session {view['session_id']}: {view['status']}", f"  task: {view['task']}"]
    state = view["orchestrator_state"]
    if state["clarification_question"]:
        lines.append(f"  question: {state['clarification_question']}")
        answer = state["user_clarification_response"]
        status = state.get("answer_status")
        if answer is not None:
            lines.append(f"  answer: {answer}")
        elif status:
            lines.append(f"  answer: ({status})")
        if state.get("answer_note"):
            lines.append(f"  note: {state['answer_note']}")
    lines.append(
        f"  questions surfaced: {view['questions_surfaced']}, "
        f"fallbacks injected: {view['fallbacks_injected']}"
    )
    for task in view.get("tasks") or []:
        files = f" (files: {', '.join(task['files'])})" if task.get("files") else ""
        lines.append(f"  task {task['number']} [{task['status']}] {task['title']}{files}")
    if view.get("summary"):
        lines.append(f"  summary: {view['summary']}")
    if view.get("assumptions"):
        lines.append("  assumptions:")
        lines += [
            f"    - {a['agent']}: {a['assumption']} ({a['why']})" for a in view["assumptions"]
        ]
    if view.get("error"):
        lines.append(f"  error: {view['error']}")
    return "\n".join(lines)
