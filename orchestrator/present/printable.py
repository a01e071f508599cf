"""Text that others wrote (agents, scenario files, MCP clients), made safe to print on a
terminal: control characters cannot move the cursor, set the window title, write the
clipboard (OSC 52) or forge a line of ours, and bidirectional overrides cannot reorder
what is shown. Each such character is shown as a visible escape (`\\x1b`, `\\u202e`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["printable", "printable_json", "printable_doc"]

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidi controls.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every character that could drive a terminal shown as an escape."""
    return _UNSAFE.sub(_visible, text)


def printable_json(text: str) -> str:
    """A JSON text (json.dumps with ensure_ascii=False) with those characters written as
    JSON escapes (`\u001b`): the same document, safe to print. (Outside its strings a JSON
    text is ASCII, so only string contents change.)"""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def printable_doc(value: Any) -> Any:
    """A copy of a document (mappings, lists, strings) with every string `printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {key: printable_doc(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [printable_doc(item) for item in value]
    return value
