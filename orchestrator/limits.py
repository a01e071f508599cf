"""Size limits on what users hand in: one place, documented in docs/reference.md.

They keep one careless paste (a 10 MB answer, a 50 MB scenario) from bloating the
database, every checkpoint and the terminal; nothing legitimate comes near them.
"""

from __future__ import annotations

from orchestrator.errors import ConfigError

__all__ = [
    "MAX_TASK_CHARS",
    "MAX_ANSWER_CHARS",
    "MAX_SCENARIO_BYTES",
    "MAX_SCENARIO_DEPTH",
    "MAX_SCENARIO_NODES",
    "MAX_OPTIONS",
    "MAX_LABEL_CHARS",
    "check_length",
    "clip",
]

MAX_TASK_CHARS = 2_000  # a task, from the command line or a scenario
MAX_ANSWER_CHARS = 10_000  # an answer or a note, from the command line or a scenario
MAX_SCENARIO_BYTES = 1_000_000  # a scenario file
MAX_SCENARIO_DEPTH = 32  # nesting of mappings and lists in a scenario (real ones use ~6)
MAX_SCENARIO_NODES = 100_000  # values in a scenario, aliases counted each time they are used
MAX_OPTIONS = 50  # options of one question (from an MCP client)
MAX_LABEL_CHARS = 500  # an option's label


def check_length(what: str, value: str | None, limit: int) -> None:
    """Refuse `value` longer than `limit` characters, naming `what` and both sizes."""
    if value is not None and len(value) > limit:
        raise ConfigError(
            f"{what} is {len(value):,} characters long; at most {limit:,} are accepted"
        )


MAX_MESSAGE_CHARS = 1_500  # an error message as printed, whatever it quotes


def clip_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """At most `limit` characters, cut before a last line that names a command to run:
    that line is never cut ("try again with: orchestrator resume ID")."""
    head, _, last = message.rpartition("\n")
    if head and "orchestrator " in last and len(last) < limit // 2:
        return clip(head, limit - len(last)) + "\n" + last
    return clip(message, limit)


def clip(text: object, limit: int = 300) -> str:
    """`text` for human output: at most `limit` characters, the cut marked."""
    value = str(text)
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value) - limit:,} more characters)"
