"""Text that others wrote (agents, scenario files, MCP clients), made safe to print on a
terminal: control characters cannot move the cursor, set the window title, write the
clipboard (OSC 52) or forge a line of ours, and bidirectional overrides cannot reorder
what is shown. Each such character is shown as a visible escape (`\\x1b`, `\\u202e`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "printable",
    "printable_json",
    "printable_doc",
    "xml_safe_tree",
    "continued",
    "quoted",
    "BAR",
]

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidi controls.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# What XML 1.0 cannot hold at all (any character outside its Char production), on top.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


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


def xml_safe_tree(root: Any) -> None:
    """Make every text and attribute of an ElementTree `root` printable, in place: raw
    control characters from a scenario or case file made the JUnit report invalid XML
    (XML 1.0 cannot hold them, even escaped), and CI systems refused it."""
    for element in root.iter():
        for name, value in element.attrib.items():
            element.set(name, _xml_text(value))
        if element.text:
            element.text = _xml_text(element.text)
        if element.tail:
            element.tail = _xml_text(element.tail)


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(_visible, printable(text))


# Lines of text that an agent (or an MCP client) wrote start with this, indented, wherever
# they share a message with lines of ours: a question with "\nAnswer here: http://evil"
# in it must not read as our own "Answer here:" line (in a notification, at the
# terminal, in the MCP log). Our lines never start with it.
BAR = "│ "


def continued(text: str, indent: str = "  ") -> str:
    """`text` for a place that starts on a line of ours ("pm asks: …"): each of its lines
    after the first set apart as `indent` + BAR. Every line break counts (str.splitlines:
    \r, \v, \f, U+2028 and the rest, not only \n)."""
    first, *rest = text.splitlines() or [""]
    return "\n".join([first, *(f"{indent}{BAR}{line}" for line in rest)])


def quoted(text: str, indent: str = "  ") -> str:
    """`text` as a block of its own: every line set apart as `indent` + BAR."""
    return "\n".join(f"{indent}{BAR}{line}" for line in text.splitlines() or [""])
