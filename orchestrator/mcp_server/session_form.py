"""A paused session's question as one MCP elicitation form, and the person's filled form
as the session API's reply (the `ask_session` tool).

One field per part (a question without parts is one field): a titled enum for single
select, an array of titled enums for multi select, a string for free text; a choice
question that allows an answer of one's own gets a second, text field for it. Every
field is optional: a part left empty is declined, so its askers proceed on their safe
default (the field's description names it); a form left empty declines the question. An
optional note goes with the whole answer. Elicitation forms are flat objects of
primitive fields (the MCP specification), hence one field, not one object, per part.

The reply is checked by the core's answer rule when the session API takes it, as every
door's is (`part N:` messages included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.api import Reply
from orchestrator.domain.reconcile import question_parts
from orchestrator.errors import InvalidAnswer

__all__ = ["NOTE_FIELD", "form_of", "reply_of"]

NOTE_FIELD = "note"


def _name(part: Mapping[str, Any], suffix: str = "") -> str:
    return f"part{part['part']}{suffix}"


def form_of(session_id: str, task: str, question: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The form's message and its requested schema."""
    parts = question_parts(question)
    properties: dict[str, Any] = {}
    for part in parts:
        askers = ", ".join(a for a in part.get("askers") or [] if a) or "an agent"
        title = part["question"] if len(parts) == 1 else f"{part['part']}. {part['question']}"
        default = part.get("default")
        hint = f"asked by {askers}; leave empty to proceed with " + (
            f"the default: {default}" if default else "the agents' own assumption"
        )
        properties[_name(part)] = {**_field(part, title), "description": hint}
        if part.get("kind", "free_text") != "free_text" and part.get("allow_other"):
            properties[_name(part, "_other")] = {
                "type": "string",
                "title": f"{part['part']}. Or an answer of your own",
                "description": "Instead of the options above.",
            }
    properties[NOTE_FIELD] = {
        "type": "string",
        "title": "Note (optional)",
        "description": "Anything the agents should know about your answer.",
    }
    what = "asks you one question" if len(parts) == 1 else f"asks you {len(parts)} questions"
    message = (
        f"Session {session_id} ({task}) {what}. Answer what you can; an empty field lets "
        "its askers proceed on their default. Decline to let every agent proceed on its "
        "default; cancel to answer later."
    )
    return message, {"type": "object", "properties": properties}


def _field(part: Mapping[str, Any], title: str) -> dict[str, Any]:
    kind = part.get("kind", "free_text")
    if kind == "free_text":
        return {"type": "string", "title": title}
    titled = [
        {
            "const": option["label"],
            "title": f"{option['label']} — {option['description']}"
            if option.get("description")
            else option["label"],
        }
        for option in part.get("options") or []
    ]
    if kind == "single_select":
        return {"type": "string", "title": title, "oneOf": titled}
    return {"type": "array", "title": title, "items": {"anyOf": titled}}


def reply_of(question: Mapping[str, Any], content: Mapping[str, Any]) -> Any:
    """The session API's Reply for an accepted form (the core checks it against the
    question when it is given, as every door's)."""
    note = content.get(NOTE_FIELD)
    note = note.strip() or None if isinstance(note, str) else None
    replies = [_part_reply(part, content) for part in question_parts(question)]
    if not question.get("parts"):
        (only,) = replies
        return Reply(action=only.action, text=only.text, choices=only.choices, note=note)
    return Reply(parts=tuple(replies), note=note)


def _part_reply(part: Mapping[str, Any], content: Mapping[str, Any]) -> Any:
    name = _name(part)
    value = content.get(name)
    other = content.get(_name(part, "_other"))
    own = other.strip() if isinstance(other, str) and other.strip() else None
    kind = part.get("kind", "free_text")
    if value is None or value == "" or value == []:
        picks: list[Any] = []
    elif kind == "free_text" or kind == "single_select":
        picks = [value]
    else:
        picks = value if isinstance(value, list) else [value]
    if not all(isinstance(pick, str) for pick in picks):
        expected = "a list of option labels" if kind == "multi_select" else "text"
        raise InvalidAnswer(f"the form's field {name} holds {value!r}; expected {expected}")
    picks = [pick.strip() for pick in picks if pick.strip()]
    if not picks and own is None:
        return Reply(action="decline")
    if kind == "free_text":
        return Reply(text=picks[0])
    return Reply(choices=tuple(picks), text=own)
