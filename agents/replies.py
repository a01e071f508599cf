"""What a model sends, read into the reply contract: the one place that says what a chat
model's reply may look like.

The contract, said once:
- The model is shown one flat schema per role (`PmSubmit`, `DeveloperSubmit`): `status`
  and every field any status uses, each described with the status it belongs to. Hosted
  providers handle a flat object far better than a union of shapes (Anthropic refuses an
  `anyOf` at a tool schema's top level). A server that turns the schema into a grammar
  (llama.cpp, Ollama) gets the same object with one branch per status besides it
  (`shown_schema(by_status=True)`): there a flat object let `PLANNED` come without tasks.
- What is validated is the reply model of that status (orchestrator.domain.replies), exactly.
  Fields the schema offers that do not belong to the status (a `summary` with `PLANNED`,
  an `uncertainty` with `COMPLETE`), fields no status has, and nulls are dropped, each
  drop noted in the turn's record (`notes`, shown by `log`): a helpful model adds them all
  the time, and nothing in them changes what the reply means.
- Unambiguous shapes are normalised, also noted: the status's case and spelling
  (`needs clarification`), a `{name, arguments}` or `{"submit_reply": {...}}` wrapper,
  arguments given as a JSON string, options or tasks given as plain strings, and in text:
  fenced JSON, JSON with prose around it, the first of several objects.
- Anything else is refused with feedback written for the model (never the scenario
  format's words), in the mode the model used: a tool call gets "call submit_reply
  again", a text reply gets "reply with one JSON object".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.domain.replies import (
    Blocked,
    Complete,
    Done,
    NeedsClarification,
    Planned,
    parse_reply,
)

__all__ = [
    "SUBMIT",
    "NO_SUMMARY",
    "PLANNED_WITHOUT_TASKS",
    "PmSubmit",
    "DeveloperSubmit",
    "Reading",
    "read_arguments",
    "read_text",
    "feedback",
    "contract_summary",
    "submit_schema",
    "shown_schema",
]

SUBMIT = "submit_reply"
# What a PLANNED reply without tasks is told.
PLANNED_WITHOUT_TASKS = (
    "tasks: missing or empty; a PLANNED reply lists at least one task, e.g. "
    '"tasks": [{"title": "Add the export endpoint"}]. If you cannot plan without an '
    "answer, reply NEEDS_CLARIFICATION with a question; if the work is done, COMPLETE "
    "with a summary"
)
# The summary a DONE reply without one is given (noted in the turn's record).
NO_SUMMARY = "done (the developer gave no summary)"

_STATUS_MODELS: dict[str, type[BaseModel]] = {
    "NEEDS_CLARIFICATION": NeedsClarification,
    "PLANNED": Planned,
    "COMPLETE": Complete,
    "DONE": Done,
    "BLOCKED": Blocked,
}
_ROLE_STATUSES = {
    "pm": ("PLANNED", "COMPLETE", "NEEDS_CLARIFICATION"),
    "developer": ("DONE", "BLOCKED", "NEEDS_CLARIFICATION"),
}


def _role(agent: str) -> str:
    return "pm" if agent == "pm" else "developer"


def _fields(status: str) -> tuple[str, ...]:
    return tuple(name for name in _STATUS_MODELS[status].model_fields if name != "status")


# -- the schema the model is shown --------------------------------------------------------


# The schema the model is shown is one a grammar converter can take as it is: llama.cpp
# turns `$defs` names into grammar rules (a leading underscore became `-Option`, an invalid
# rule, and the output was not constrained at all), and a property it does not list would
# let the output run on; hence the titles and `additionalProperties: false` everywhere.
_SHOWN = ConfigDict(extra="forbid")


class Option(BaseModel):
    model_config = _SHOWN

    label: str
    description: str | None = None
    recommended: bool | None = Field(None, description="at most one option")


class Task(BaseModel):
    model_config = _SHOWN

    title: str
    description: str | None = None
    files: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None,
        description="the files (paths or globs) this task expects to change; tasks whose "
        "lists overlap run one after another, the others in parallel",
    )


class _Submit(BaseModel):
    model_config = _SHOWN

    question: str | None = Field(
        None, description="NEEDS_CLARIFICATION: one question, with its context"
    )
    kind: Literal["free_text", "single_select", "multi_select"] | None = Field(
        None, description="NEEDS_CLARIFICATION"
    )
    options: list[Option] | None = Field(
        None, description="NEEDS_CLARIFICATION: the choices, for selects"
    )
    allow_other: bool | None = Field(
        None, description="NEEDS_CLARIFICATION: accept an answer not in options"
    )
    reason: str | None = Field(
        None, description="NEEDS_CLARIFICATION: why a choice is needed; BLOCKED: why blocked"
    )
    context: str | None = Field(
        None, description="NEEDS_CLARIFICATION: what the user needs to know to answer"
    )
    default: str | None = Field(
        None, description="NEEDS_CLARIFICATION: the safe choice without an answer"
    )
    urgency: Literal["low", "medium", "high"] | None = Field(
        None, description="NEEDS_CLARIFICATION"
    )
    ambiguity: Literal["target", "action", "parameter", "intent"] | None = Field(
        None,
        description="NEEDS_CLARIFICATION: what is unclear: which target, which action, "
        "a missing value, intent",
    )
    uncertainty: int | None = Field(
        None,
        ge=0,
        le=100,
        description="NEEDS_CLARIFICATION: how unsure you are without an answer (0-100)",
    )
    assumptions: list[str] | None = Field(
        None, description="any status but NEEDS_CLARIFICATION: every assumption you made"
    )


class PmSubmit(_Submit):
    """Submit the PM's reply to the orchestrator."""

    status: Literal["NEEDS_CLARIFICATION", "PLANNED", "COMPLETE"]
    tasks: list[Task] | None = Field(
        None, min_length=1, description="PLANNED: the tasks (at least one)"
    )
    summary: str | None = Field(None, description="COMPLETE: what was delivered")


class DeveloperSubmit(_Submit):
    """Submit the developer's reply to the orchestrator."""

    status: Literal["NEEDS_CLARIFICATION", "DONE", "BLOCKED"]
    summary: str | None = Field(None, description="DONE: what you did")


def submit_schema(agent: str) -> type[_Submit]:
    return PmSubmit if _role(agent) == "pm" else DeveloperSubmit


def shown_schema(agent: str, *, by_status: bool = False) -> dict[str, Any]:
    """The JSON schema of `agent`'s reply as a model is shown it: the flat object, and
    with `by_status` also an `anyOf` of one branch per status (`status` a const, the
    fields that status takes, the ones it needs required, PLANNED's tasks at least one).

    A grammar converter (llama.cpp's, which Ollama and llama-cpp-python use) reads the
    `anyOf` before the object's own properties, so the output takes one branch's shape; a
    validator reads both, which agree. Names stay letters only and every object closed
    (`additionalProperties: false`): see _SHOWN."""
    schema = submit_schema(agent).model_json_schema()
    if not by_status:
        return schema
    shown = schema["properties"]
    branches = []
    for status in _ROLE_STATUSES[_role(agent)]:
        model = _STATUS_MODELS[status]
        names = [name for name in _fields(status) if name in shown]
        properties: dict[str, Any] = {"status": {"const": status}}
        properties.update({name: _given(shown[name]) for name in names})
        needed = [n for n in names if model.model_fields[n].is_required() or n in _ASKS]
        branches.append(
            {
                "type": "object",
                "properties": properties,
                "required": ["status", *needed],
                "additionalProperties": False,
            }
        )
    return {**schema, "anyOf": branches}


# A question without its text is no question (the reply model takes it leniently, to
# repair it; the grammar need not let it be left out).
_ASKS = ("question",)


def _given(field_schema: dict[str, Any]) -> dict[str, Any]:
    """A flat schema's optional field (`anyOf: [X, null]`, default null) as X: in a
    status's branch a field is given or left out, never null."""
    options = [o for o in field_schema.get("anyOf", []) if o.get("type") != "null"]
    if len(options) != 1:
        return {k: v for k, v in field_schema.items() if k not in ("default", "title")}
    extra = {k: v for k, v in field_schema.items() if k == "description"}
    return {**options[0], **extra}


def contract_summary(agent: str) -> str:
    """One line per status: the fields that status takes (what is validated)."""
    lines = []
    for status in _ROLE_STATUSES[_role(agent)]:
        model = _STATUS_MODELS[status]
        names = [
            f"{name}{'' if model.model_fields[name].is_required() else '?'}"
            for name in _fields(status)
        ]
        lines.append(f'- "status": "{status}" with {", ".join(names)}')
    return "\n".join(lines) + "\n(? = optional; any other field is ignored)"


# -- reading ------------------------------------------------------------------------------


@dataclass
class Reading:
    """A reply read from a model: the validated reply, or the problem to send back; the
    notes say what was normalised or ignored on the way."""

    reply: Any = None
    problem: str = ""
    notes: list[str] = field(default_factory=list)


_STATUS_SPELLING = re.compile(r"[\s\-]+")
_WRAPPER_ARGS = ("arguments", "args", "parameters", "input")


def _unwrap(data: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`{name: submit_reply, arguments: {...}}`, `{function: {...}}`, `{submit_reply: {...}}`
    and arguments as a JSON string, down to the reply's own object."""
    for _ in range(3):
        if "status" in data:
            return data
        inner: Any = None
        if isinstance(data.get("function"), dict) and len(data) <= 3:
            inner = data["function"]
        elif SUBMIT in data and len(data) == 1:
            inner = data[SUBMIT]
        elif data.get("name", SUBMIT) == SUBMIT:
            for key in _WRAPPER_ARGS:
                if key in data and set(data) <= {"name", "type", "id", key}:
                    inner = data[key]
                    break
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except json.JSONDecodeError:
                return data
        if not isinstance(inner, dict):
            return data
        notes.append("unwrapped the reply from a tool-call wrapper")
        data = inner
    return data


def _status(value: Any, allowed: tuple[str, ...], notes: list[str]) -> Any:
    if not isinstance(value, str):
        return value
    spelled = _STATUS_SPELLING.sub("_", value.strip()).upper()
    if spelled != value and spelled in allowed:
        notes.append(f"read status {value!r} as {spelled!r}")
        return spelled
    return value


def _labels(items: Any, key: str, what: str, notes: list[str]) -> Any:
    """A list of plain strings as [{key: text}]."""
    if isinstance(items, list) and items and any(isinstance(i, str) for i in items):
        notes.append(f"read {what} given as plain text as {{{key}: ...}}")
        return [{key: i} if isinstance(i, str) else i for i in items]
    return items


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def read_arguments(agent: str, given: Any) -> Reading:
    """A reply from a tool call's arguments (or a JSON object the model wrote)."""
    notes: list[str] = []
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except json.JSONDecodeError as exc:
            return Reading(problem=f"the arguments are not valid JSON: {exc.msg}", notes=notes)
    if not isinstance(given, Mapping):
        return Reading(problem="the reply must be a JSON object with a status", notes=notes)
    data = _unwrap(dict(given), notes)
    allowed = _ROLE_STATUSES[_role(agent)]
    status = _status(data.get("status"), allowed, notes)
    if status is None:
        return Reading(problem=f"status: missing; give one of {', '.join(allowed)}", notes=notes)
    if status not in allowed:
        return Reading(
            problem=f"status: {status!r} is not a status you can give; "
            f"give one of {', '.join(allowed)}",
            notes=notes,
        )
    data = _drop_nulls(data)
    if isinstance(data.get("assumptions"), list):
        given = data["assumptions"]
        data["assumptions"] = [a for a in given if not (isinstance(a, str) and not a.strip())]
        if len(data["assumptions"]) < len(given):
            # SmolLM2 filled the list with "" (shown in the log as empty assumptions)
            notes.append(f"dropped {len(given) - len(data['assumptions'])} blank assumption(s)")
    if status == "DONE" and not str(data.get("summary") or "").strip():
        # A small model's DONE often comes without one; the work itself (files, commits,
        # checks) is on the board all the same, so a retry would only spend a call.
        data["summary"] = NO_SUMMARY
        notes.append("DONE without a summary: recorded as " + repr(NO_SUMMARY))
    if status == "PLANNED" and not data.get("tasks"):
        # What a small model sends most (4 of 6 SmolLM2 sessions ended on it): said
        # plainly, with what to send instead, rather than pydantic's "missing".
        return Reading(problem=PLANNED_WITHOUT_TASKS, notes=notes)
    keep = _fields(status)
    ignored = sorted(k for k in data if k != "status" and k not in keep)
    if ignored:
        notes.append(f"ignored {', '.join(ignored)} (not part of a {status} reply)")
    reply = {"status": status, **{k: v for k, v in data.items() if k in keep}}
    if "options" in reply:
        reply["options"] = _labels(reply["options"], "label", "options", notes)
    if "tasks" in reply:
        reply["tasks"] = _labels(reply["tasks"], "title", "tasks", notes)
        for task in reply["tasks"]:
            files = task.get("files") if isinstance(task, dict) else None
            if isinstance(files, list) and any(isinstance(f, str) and not f.strip() for f in files):
                # SmolLM2 sent "files": [""]: no file named, not a task to refuse
                task["files"] = [f for f in files if not (isinstance(f, str) and not f.strip())]
                notes.append("dropped blank file names from a task's files")
    try:
        return Reading(reply=parse_reply(agent, reply), notes=notes)
    except ValidationError as exc:
        return Reading(problem=_problems(exc, status), notes=notes)


def read_text(agent: str, text: str) -> Reading:
    """A reply the model wrote as text: its first complete JSON object, wherever it is."""
    found, count, broken = _first_object(text)
    if broken is not None and (found is None or "status" not in found):
        # The reply's own object is broken: an object nested in it (an option, a task) is
        # not the reply, and "status: missing" would tell the model the wrong thing.
        return Reading(problem=f"the reply's JSON object is not valid JSON: {broken}")
    if found is None:
        return Reading(problem="the reply contains no JSON object")
    reading = read_arguments(agent, found)
    if not _bare(text):
        reading.notes.insert(0, "read the JSON object out of the text around it")
    if count > 1:
        reading.notes.insert(0, f"used the first of {count} JSON objects")
    return reading


def _bare(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith("{") and stripped.endswith("}")


def _first_object(text: str) -> tuple[dict[str, Any] | None, int, str | None]:
    """The first JSON object in `text` (fences and prose around it allowed), how many
    complete top-level objects the text holds, and what was wrong with the first `{` that
    did not start one before it (None: nothing was)."""
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    count = 0
    broken: str | None = None
    position = text.find("{")
    while position >= 0:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            if first is None and broken is None and _looks_like_json(text, position):
                broken = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            count += 1
            if first is None:
                first = value
        position = text.find("{", end)
    return first, count, broken


def _looks_like_json(text: str, position: int) -> bool:
    """Does the `{` at `position` open a JSON object (a key in quotes follows), rather than
    braces in prose such as `{think}`?"""
    return text[position + 1 : position + 64].lstrip().startswith('"')


def _problems(exc: ValidationError, status: str) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        loc = [p for p in error["loc"] if p != status]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        where = where or "the reply"
        if error["type"] == "missing":
            lines.append(f"{where}: missing; a {status} reply needs it")
        elif error["type"] == "extra_forbidden":
            lines.append(f"{where}: not a field of a {status} reply")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}: {message}")
    return "\n".join(lines)


def feedback(agent: str, problem: str, *, mode: Literal["tool", "text"]) -> str:
    """What the model is told when its reply could not be used, in its own mode."""
    if mode == "tool":
        how = f"Call the {SUBMIT} tool once more, with these problems fixed."
    else:
        how = "Reply once more with exactly one JSON object, with these problems fixed."
    return (
        f"Your reply could not be used:\n{problem}\n{how}\n"
        f"The fields each status takes:\n{contract_summary(agent)}"
    )
