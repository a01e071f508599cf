"""Human-readable text for events and sessions (stderr progress, non-JSON output)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.limits import clip
from orchestrator.present.printable import continued
from orchestrator.present.words import moment, parse_time, span, turn_name, verdict_word
from orchestrator.redact import mask_url

__all__ = [
    "event_line",
    "session_text",
    "question_text",
    "resume_hint",
    "list_table",
    "relative",
    "summary_line",
    "run_here_hint",
    "command_line",
    "driver_note",
    "WAITING_FOR_DRIVER",
    "usage_text",
]

# The one wording of a session that is answered and handed off (`waiting_for_driver`), on
# every door: status, list, log's pick-up line, resume --no-run, the web inbox and page.
WAITING_FOR_DRIVER = "answered, waiting for a driver"


def relative(iso_time: str | None, now: datetime | None = None) -> str:
    """An ISO time as people say it: '3 h ago', 'in 4 min', '' when there is none."""
    when = parse_time(iso_time)
    if when is None:
        return iso_time or ""
    return span(((now or datetime.now(UTC)) - when).total_seconds())


def driver_note(view: Mapping[str, Any]) -> str:
    """Why a running session has no driver, in the words every door uses ('' if it has
    one, or is not running)."""
    if view.get("stalled"):
        return f"stalled: {view.get('last_error') or 'no process drives it'}"
    if view.get("waiting_for_driver"):
        return WAITING_FOR_DRIVER
    return ""


def list_table(views: Sequence[Mapping[str, Any]], now: datetime | None = None) -> str:
    """Sessions as a table with a header: id, status, age, who asks, the question or the
    outcome, the deadline."""
    if not views:
        return "no sessions"
    header = ("ID", "STATUS", "AGE", "ASKS", "QUESTION / OUTCOME", "DEADLINE")
    rows = []
    for view in views:
        question = view.get("pending_question")
        if question:
            who, what = str(question.get("asked_by") or ""), str(question["question"])
            deadline = question.get("deadline")
            due = relative(deadline, now) if deadline else "none"
            if question.get("timed_out"):
                due = f"passed {relative(deadline, now)}"
        else:
            who, due = "", ""
            what = str(view.get("error") or view.get("summary") or view.get("task") or "")
            what = driver_note(view) or what
            if view.get("needs_review"):
                what = "NEEDS REVIEW (late answer): " + what
        rows.append(
            (
                str(view["session_id"]),
                str(view["status"]),
                relative(view.get("created_at"), now),
                who,
                clip(" ".join(what.split()), 60),
                due,
            )
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def question_text(question: Mapping[str, Any]) -> str:
    parts = question.get("parts") or []
    if len(parts) > 1:
        lines = [f"a question in {len(parts)} parts (answer each one):"]
        for part in parts:
            shown = question_text({**part, "asked_by": ", ".join(part["askers"]), "parts": []})
            lines.append(f"part {part['part']}: " + shown.replace("\n", "\n  "))
        if question.get("timed_out") or question.get("deadline"):
            lines += question_text({**question, "parts": []}).split("\n")[-1:]
        return "\n".join(lines)
    if parts and len(parts[0].get("askers", [])) > 1:
        question = {**question, "asked_by": ", ".join(parts[0]["askers"])}
    urgency = question.get("urgency", "medium")
    flag = f" [{urgency} urgency]" if urgency != "medium" else ""
    asker = question.get("asked_by", "an agent")

    def agents(text: str, size: int = 300) -> str:  # the agent's words, set apart
        return continued(clip(text, size), "    ")

    lines = [f"{asker} asks{flag}: {agents(question['question'], 1000)}"]
    if question.get("reason"):
        lines.append(f"  why: {agents(question['reason'])}")
    if question.get("context"):
        lines.append(f"  context: {agents(question['context'])}")
    for number, option in enumerate(question.get("options") or [], start=1):
        described = f" - {agents(option['description'])}" if option.get("description") else ""
        mark = " (recommended)" if option.get("recommended") else ""
        lines.append(f"  {number}. {agents(option['label'], 200)}{mark}{described}")
    if question.get("allow_other"):
        lines.append("  (or an answer of your own)")
    if question.get("default"):
        lines.append(f"  default if not answered: {agents(question['default'])}")
    if question.get("timed_out"):
        lines.append(
            f"  the deadline passed {relative(question.get('deadline'))} "
            f"({moment(question.get('deadline'))}); still answerable"
        )
    elif question.get("deadline"):
        lines.append(
            f"  answer by: {moment(question['deadline'])} ({relative(question['deadline'])})"
        )
    return "\n".join(lines)


def command_line(verb: str, session_id: str, db: str | None, *args: str) -> str:
    """`orchestrator VERB ID [--db URL] ARGS...` as one shell-quoted line to copy: with
    the database the command was given (its password masked), or none (the default, or
    $ORCHESTRATOR_DB, which the copied command reads again)."""
    argv = ["orchestrator", verb, session_id, *(["--db", mask_url(db)] if db else []), *args]
    return " ".join(shlex.quote(part) for part in argv)


def resume_hint(session_id: str, question: Mapping[str, Any], db: str | None) -> str:
    """The exact command that answers `question`."""
    parts = question.get("parts") or []
    if len(parts) > 1:
        how = [arg for part in parts for arg in ["--part", str(part["part"]), *_answer_args(part)]]
    else:
        how = _answer_args(question)
    return command_line("resume", session_id, db, *how)


def _answer_args(question: Mapping[str, Any]) -> list[str]:
    """Placeholders in the suggested command, never an option the user did not choose (a
    pasted command would send it); `--choice` takes a label or its number."""
    kind = question.get("kind", "free_text")
    if kind == "free_text":
        return ["--answer", "YOUR ANSWER"]
    if kind == "single_select" or len(question.get("options") or []) < 2:
        return ["--choice", "OPTION"]
    return ["--choice", "OPTION", "--choice", "ANOTHER"]


def run_here_hint(session_id: str, db: str | None) -> str:
    """The command that runs a session waiting for a driver on in this terminal."""
    return "or run it on here: " + command_line("resume", session_id, db)


def event_line(event: Mapping[str, Any], session_id: str | None = None) -> str:
    """One event for people; `session_id` names the session where it starts."""
    kind, agent = event["kind"], event.get("agent")
    if kind == "session_started":
        which = f"session {session_id}" if session_id else "session"
        return f"{which} started: {clip(event['task'])}" + _workbench_lines(
            event.get("settings") or {}
        )
    if kind == "agent_reply":
        return _reply_line(event) + _turn_detail(event)
    if kind == "question_surfaced":
        text = "QUESTION " + question_text({**event["question"], "asked_by": agent})
        if event.get("repaired"):
            text += "\n  (rebuilt locally: " + "; ".join(event["repaired"]) + ")"
        return text
    if kind == "assumption":
        return f"ASSUMPTION {agent}: {clip(event['assumption'])} (why: {clip(event['why'])})"
    if kind == "proceed":
        return f"{agent} asked with low uncertainty: not surfaced, proceeds with its default"
    if kind == "timeout":
        return f"the question's deadline passed (on-timeout: {event['policy']})"
    if kind == "question_held":
        return f"{agent} also asked ({event['question']}); held: one question per session"
    if kind == "answer":
        note = f" (note: {clip(event['note'])})" if event.get("note") else ""
        return f"ANSWER ({event.get('source', 'user')}): {clip(event['response'])}{note}"
    if kind == "decline":
        return "the question was declined; the asking agent proceeds on assumptions"
    if kind == "cancel":
        return "the session was cancelled"
    if kind == "cancel_requested":
        return "cancel requested: the session stops before its next agent call"
    if kind == "interrupted":
        return f"stopped: {clip(event.get('error', ''), 1000)}"
    if kind == "agent_failed":
        return f"{agent or 'an agent'}'s call failed: {clip(event.get('error', ''), 1000)}"
    if kind == "answer_delivered":
        return f"{agent} runs again with the answer"
    if kind == "fallback":
        why = {
            "declined": "question declined",
            "timeout": "no answer in time",
            "part_cap": "over the question's max_question_parts: takes its default",
        }.get(event.get("why", ""), "hard cap")
        return f"{agent}: auto-fallback sent ({why})"
    if kind == "gate_failed":
        return f"{agent} kept asking: {event['reason']}"
    if kind == "late_answer":
        return f"LATE ANSWER ({event.get('source', 'user')}): {clip(event['response'])}" + (
            " (" + late_tally(event.get("checks") or []) + ")" if event.get("checks") else ""
        )
    if kind == "reconciled":
        tasks = "; ".join(clip(t, 200) for t in event.get("tasks") or [])
        by = turn_name(event.get("by"))
        return f"late answer reconciled by {by}: {event['outcome']}" + (
            f" ({tasks})" if tasks else ""
        )
    if kind == "reconcile_failed":
        return (
            f"the reconciliation round failed: {clip(event.get('error') or '')}; the session "
            f"keeps its {event.get('kept', 'earlier')} result"
        )
    if kind == "command":
        return f"{agent}$ {clip(event['command'], 200)}  ->  " + _ran(event)
    if kind == "merge":
        task = f"task {event.get('task')} ({agent})"
        outcome = event.get("outcome")
        if outcome == "clean":
            return f"MERGE {task} into the session branch: clean, {str(event['commit'])[:12]}"
        if outcome == "conflict":
            files = ", ".join(clip(f, 200) for f in event.get("files") or [])
            return f"MERGE {task}: conflict in {files}; back to its developer"
        return f"MERGE {task}: the checks fail on the merged tree; back to its developer"
    if kind == "check":
        verdict = "passed" if event.get("passed") else "FAILED"
        return f"check {verdict} for {agent}: {clip(event['command'], 200)} ({_ran(event)})"
    if kind in ("notification_sent", "notification_failed"):
        about = {"question": "the question", "deadline": "the deadline's reminder"}.get(
            str(event.get("about")), str(event.get("about") or "a notification")
        )
        to = f"{about} to {event.get('target', '?')}"
        tries = event.get("attempts")
        after = f" after {tries} tr{'y' if tries == 1 else 'ies'}" if tries else ""
        if kind == "notification_sent":
            return f"notified: {to}"
        return f"notification FAILED: {to}{after}: {clip(event.get('error') or 'no reason given')}"
    if kind == "status":
        extra = event.get("summary") or event.get("error") or event.get("note") or ""
        driver = f" (by {clip(event['driver'], 200)})" if event.get("driver") else ""
        return f"session {event['status']}" + (f": {clip(extra, 1000)}" if extra else "") + driver
    return f"{kind} {agent or ''}".strip()


def _workbench_text(view: Mapping[str, Any]) -> list[str]:
    """Where a session's developers work: the repository, its base, each task's worktree."""
    bench = view.get("workbench")
    if not bench:
        return []
    ended = view["status"] in ("completed", "cancelled")
    lines = [
        f"  repository: {bench['repository']} (base {str(bench['base'])[:12]})",
        f"  sandbox: {bench['sandbox']}"
        + (", network allowed" if bench.get("allow_network") else ", no network")
        + (" (WARNING: commands run unconfined)" if bench["sandbox"] == "none" else ""),
    ]
    where = " (removed when the session ended; the branches stay)" if ended else ""
    lines.append(f"  worktrees: {bench['worktrees']}{where}")
    lines += [
        f"    task {t['number']}: branch {t['branch']}"
        + ("" if ended else f", worktree {t['worktree']}")
        for t in bench.get("tasks") or []
    ]
    if bench.get("branch"):
        lines.append(f"  the result: the branch {bench['branch']} (every task's work, merged)")
        if view["status"] == "completed":
            lines += [f"    see it:  {bench['see']}", f"    take it: {bench['take']}"]
    return lines


def _workbench_lines(settings: Mapping[str, Any]) -> str:
    """Where the developers work, from a session's settings (nothing without a repository)."""
    bench = settings.get("workbench")
    if not bench:
        return ""
    lines = (
        f"\n  developers work in git worktrees of {bench['repository']}, from "
        f"{str(bench['base'])[:12]} (HEAD)"
    )
    if bench.get("dirty"):
        lines += "; its uncommitted changes are not part of it"
    if settings.get("sandbox") == "none":
        lines += (
            "\n  WARNING: --sandbox none: commands and checks run unconfined, with your permissions"
        )
    return lines


def _ran(event: Mapping[str, Any]) -> str:
    """How a command or check ended, how long it took, and the sandbox that ran it."""
    if event.get("timed_out"):
        ended = "timed out"
    elif event.get("exit_code") is None:
        ended = "not run"
    else:
        ended = f"exit {event['exit_code']}"
    return f"{ended}, {float(event.get('duration_s') or 0):.2f} s, sandbox {event.get('sandbox')}"


def _reply_line(event: Mapping[str, Any]) -> str:
    agent, reply = event.get("agent"), event["reply"]
    status = reply["status"]
    if status == "PLANNED":
        titles = "; ".join(f"{n}. {clip(t['title'], 100)}" for n, t in enumerate(reply["tasks"], 1))
        return f"{agent} -> PLANNED: {clip(titles, 1000)}"
    if status == "NEEDS_CLARIFICATION":
        # The question itself is printed once: by its QUESTION line when it is
        # surfaced, by the held/fallback line otherwise.
        return f"{agent} -> NEEDS_CLARIFICATION"
    detail = reply.get("summary") or reply.get("reason") or ""
    return f"{agent} -> {status}: {clip(detail)}"


def _turn_detail(event: Mapping[str, Any]) -> str:
    """A chat model's turn: its tokens, and how its reply was read (what was ignored)."""
    usage = event.get("usage")
    tokens = (
        f"\n  tokens: {usage.get('input_tokens', 0):,} in, {usage.get('output_tokens', 0):,} out"
        f" ({_calls(usage.get('model_calls', 0))})"
        if usage
        else ""
    )
    notes = "".join(f"\n  note: {clip(note)}" for note in event.get("notes") or [])
    return tokens + notes


def session_text(view: Mapping[str, Any], db: str | None = None) -> str:
    """The session for people. A question still waiting is left out: the answer hint
    that follows shows it (see output.answer_hint), so that it is printed once. `db`:
    the --db the command was given, repeated in the commands it suggests."""
    shown = view["status"] + (" (needs review)" if view.get("needs_review") else "")
    lines = [f"session {view['session_id']}: {shown}", f"  task: {clip(view['task'])}"]
    state = view["orchestrator_state"]
    if state["clarification_question"] and not view.get("pending_question"):
        lines.append(f"  question: {clip(state['clarification_question'])}")
        answer = state["user_clarification_response"]
        status = state.get("answer_status")
        if answer is not None:
            # A multi-part answer is one line per part: shown on one line, "1. …; 2. …".
            lines.append(f"  answer: {clip('; '.join(answer.splitlines()))}")
        elif status:
            lines.append(f"  answer: ({status})")
        if state.get("answer_note"):
            lines.append(f"  note: {clip(state['answer_note'])}")
    lines.append(
        f"  questions surfaced: {view['questions_surfaced']}, "
        f"fallbacks injected: {view['fallbacks_injected']}"
    )
    if view.get("usage"):
        lines.append("  " + usage_text(view["usage"]))
    for task in view.get("tasks") or []:
        files = f" (files: {', '.join(task['files'])})" if task.get("files") else ""
        lines.append(
            f"  task {task['number']} [{task['status']}] {clip(task['title'], 200)}{clip(files)}"
        )
        for check in task.get("checks") or []:
            verdict = "passed" if check.get("passed") else "FAILED"
            lines.append(f"    check {verdict}: {clip(check['command'], 200)}")
    lines += _workbench_text(view)
    if view.get("summary"):
        lines.append(f"  summary: {clip(view['summary'], 1000)}")
    if view.get("assumptions"):
        lines.append("  assumptions:")
        lines += [
            f"    - {a['agent']}: {clip(a['assumption'])} ({clip(a['why'])})"
            for a in view["assumptions"]
        ]
    if view.get("late_answer"):
        lines += late_lines(view, command_line("resume", view["session_id"], db, "--reconcile"))
    if view.get("error"):
        lines.append(f"  error: {clip(view['error'], 1000)}")
    if view.get("stalled"):
        why = f": {clip(view['last_error'], 1000)}" if view.get("last_error") else ""
        lines.append(f"  stalled (no process is driving it){why}")
        retry, stop = (command_line(verb, view["session_id"], db) for verb in ("resume", "cancel"))
        lines.append(f"  retry with: {retry}   stop with: {stop}")
    elif view.get("waiting_for_driver"):
        lines.append(
            f"  {WAITING_FOR_DRIVER} (orchestrator worker or orchestrator serve runs it on)"
        )
    elif view.get("cancel_requested"):
        lines.append("  cancel requested: it stops before its next agent call")
    return "\n".join(lines)


def _calls(count: int) -> str:
    return f"{count} model call" + ("" if count == 1 else "s")


def usage_text(usage: Mapping[str, Any]) -> str:
    """'tokens: 1,234 (1,000 in, 234 out) in 5 model calls; pm 800, developer-1 434'."""
    agents = ", ".join(
        f"{agent} {counts.get('total_tokens', 0):,}"
        for agent, counts in (usage.get("agents") or {}).items()
    )
    return (
        f"tokens: {usage.get('total_tokens', 0):,} ({usage.get('input_tokens', 0):,} in, "
        f"{usage.get('output_tokens', 0):,} out) in {_calls(usage.get('model_calls', 0))}"
        + (f"; {agents}" if agents else "")
    )


def answer_hint(view: Mapping[str, Any], db: str | None, *, question_shown: bool = False) -> str:
    """'waiting for an answer' with the question (unless shown already) and the command."""
    question = view["pending_question"]
    asked = (
        f"{question.get('asked_by') or 'an agent'}'s question is above"
        if question_shown
        else question_text(question)
    )
    return (
        f"waiting for an answer. {asked}\n"
        f"answer with:\n  {resume_hint(view['session_id'], question, db)}"
    )


def summary_line(
    question: Mapping[str, Any],
    reply: Any,
    *,
    closed: bool = False,
    left: bool = False,
) -> str:
    """The one line left on the terminal after the question: what was answered, or why not.

    `reply` (a UserReply) None means no answer: the user left it for later (`left`), the
    input ended (`closed`), or the deadline passed.
    """
    whose = f"{question.get('asked_by') or 'the agent'}'s question"
    if reply is None:
        if left:
            return f"⏸ {whose}: left open, to answer later"
        return f"⌛ {whose}: " + (
            "no answer (input closed)" if closed else "no answer before the deadline"
        )
    if reply.action == "cancel":
        return f"✖ {whose}: cancelled"
    if reply.action == "decline":
        return f"✔ {whose}: declined"
    answer = [*reply.choices, *([reply.text] if reply.text is not None else [])]
    return f"✔ {whose}: {', '.join(answer)}"


# -- a late answer (docs/late-answers.md): the status block and the log's tally -----------


def late_tally(checks: list[Mapping[str, Any]]) -> str:
    """'1 contradicted, 2 confirmed': a late answer's judged assumptions, counted."""
    counts: dict[str, int] = {}
    for check in checks:
        counts[check["verdict"]] = counts.get(check["verdict"], 0) + 1
    order = ("contradicted", "for_pm", "confirmed")
    return ", ".join(f"{counts[v]} {verdict_word(v)}" for v in order if counts.get(v))


def late_lines(view: Mapping[str, Any], reconcile: str) -> list[str]:
    """A late answer: what it said, each assumption it was held against, what became of
    it; `reconcile`: the command that reconciles it, for one that needs review."""
    late = view["late_answer"]
    lines = [f"  late answer ({late.get('source', 'user')}): {clip(late['response'])}"]
    for check in late.get("checks") or []:
        tasks = f" [tasks {', '.join(map(str, check['tasks']))}]" if check.get("tasks") else ""
        verdict = verdict_word(check["verdict"])
        lines.append(f"    - {verdict}: {check['agent']}: {clip(check['assumption'])}{tasks}")
    done = late.get("reconciled")
    if done and done.get("outcome") == "failed":
        lines += [
            f"  the reconciliation round failed: {clip(done.get('error') or '')}",
            f"  the session keeps its {done.get('kept', 'earlier')} result; act on the late "
            "answer in a new session (`orchestrator run`), or take the result as it is",
        ]
    elif done:
        tasks = "; ".join(clip(t, 200) for t in done.get("tasks") or [])
        lines.append(
            f"  reconciled by {turn_name(done['by'])}: {done['outcome']}"
            + (f" ({tasks})" if tasks else "")
        )
    elif view.get("needs_review"):
        lines.append(f"  NEEDS REVIEW: reconcile with: {reconcile}")
    elif late.get("needs_review") and view["status"] == "running":
        lines.append(
            "  the PM is told on its next turn"
            if late.get("policy") == "reconcile" or late.get("reopened")
            else "  recorded only (on_late_answer: record)"
        )
    return lines
