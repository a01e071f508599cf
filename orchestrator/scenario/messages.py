"""Validation errors as people read them: one line per problem, the path inside the
document, what was wrong and what was expected (pydantic's words put in the file's terms)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

__all__ = ["format_validation_error"]


def _path(parts: tuple[Any, ...]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


# For `expect` keys that take one of several shapes: what to say when none fits.
_SHAPES = {
    "assumptions": "expected a count (0 or more), a text that must appear, or a list of texts",
    "tasks": "expected a count (0 or more) or a list of {number, title, status}",
    "events": "expected an event kind or {kind, agent, text}",
    "no_events": "expected an event kind or {kind, agent, text}",
}
_MEMBER_NAMES = {"str", "int", "float", "bool", "ChoicesAnswer", "TextAnswer", "ActionAnswer"}


def _is_tag(part: Any) -> bool:
    """A pydantic union-member tag in an error's location (e.g. 'NEEDS_CLARIFICATION',
    'str', 'list[str]', 'EventExpect'), not a key of the document."""
    return isinstance(part, str) and (
        part.isupper()
        or part in _MEMBER_NAMES
        or part[:1].isupper()
        or part.startswith(("function-", "constrained-", "list[", "dict["))
    )


def format_validation_error(exc: ValidationError, *, prefix: tuple[Any, ...] = ()) -> str:
    """One line per problem: the path inside the document, what was wrong, what was expected."""
    found: list[tuple[tuple[Any, ...], bool, str]] = []  # (path, from a union member, message)
    for error in exc.errors(include_url=False):
        loc = tuple(p for p in error["loc"] if not _is_tag(p))
        tagged = len(loc) != len(error["loc"])
        message = _plain(error)
        if len(loc) >= 2 and loc[0] == "answers" and isinstance(loc[1], int):
            loc, tagged, message = (
                loc[:2],
                False,
                ("expected an answer text, {choices: [label, ...]} or {action: decline | cancel}"),
            )
        elif error["type"] == "extra_forbidden":
            message = "unknown key (not part of the scenario format)"
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == "union_tag_invalid":
            expected = error.get("ctx", {}).get("expected_tags", "")
            tag = error.get("ctx", {}).get("tag")
            message = (
                f"status {tag!r} is not a reply this agent can give; expected one of {expected}"
            )
        elif message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
        found.append((loc, tagged, message))
    # A value that fits none of a union's shapes fails once per shape: keep the errors of
    # the shape that got furthest (a deeper path), and say once what was expected.
    deeper = [loc for loc, _, _ in found]
    kept = [
        (loc, tagged, message)
        for loc, tagged, message in found
        if not (tagged and any(len(o) > len(loc) and o[: len(loc)] == loc for o in deeper))
    ]
    lines = []
    for loc, tagged, message in kept:
        rivals = [m for lc, t, m in kept if lc == loc and t]
        if tagged and len(rivals) > 1:
            named = [p for p in loc if isinstance(p, str)]
            message = _SHAPES.get(named[-1] if named else "", " or ".join(rivals))
        lines.append(f"{_path(prefix + loc)}: {message}")
    return "\n".join(dict.fromkeys(lines))


# pydantic names its own model classes in some messages ("a valid dictionary or instance
# of TaskSpec"); users wrote YAML, not classes.
_INSTANCE_OF = re.compile(r" or (an )?instance of \w+")
_TYPE_WORDS = {
    "model_type": "expected a mapping (key: value)",
    "model_attributes_type": "expected a mapping (key: value)",
    "dict_type": "expected a mapping (key: value)",
    "list_type": "expected a list",
}


def _plain(error: Any) -> str:
    """pydantic's message for one error, in the scenario's terms."""
    if error["type"] == "greater_than_equal" and error.get("ctx", {}).get("ge") == 0:
        return f"expected a count (0 or more), got {error.get('input')!r}"
    if error["type"] in _TYPE_WORDS:
        got = type(error.get("input")).__name__
        got = {"str": "text", "dict": "a mapping", "list": "a list", "NoneType": "nothing"}.get(
            got, got
        )
        return f"{_TYPE_WORDS[error['type']]}, got {got}"
    return _INSTANCE_OF.sub("", str(error["msg"]))
