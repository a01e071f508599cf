"""`resume ID --part N --answer X --part M --choice Y`: the options that answer each part of
a multi-part question, in the order given on the command line.

Click hands a command each option's values, but not how options of different names were
interleaved; `PartsCommand` reads that order from the arguments before Click parses them
(Click then parses and validates them as usual).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typer._click.core import Context  # Typer >= 0.24 carries its own Click
from typer._click.globals import get_current_context
from typer.core import TyperCommand, TyperOption

if TYPE_CHECKING:
    from orchestrator.domain.question import UserReply

__all__ = ["PartsCommand", "part_replies"]

_META = "orchestrator.part_args"
_ANSWERING = {"--part": "part", "--answer": "answer", "--choice": "choice", "--decline": "decline"}


class PartsCommand(TyperCommand):
    """A command that keeps the order of its --part/--answer/--choice/--decline options."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        takes_value = {
            name
            for param in self.params
            if isinstance(param, TyperOption) and not param.is_flag
            for name in (*param.opts, *param.secondary_opts)
        }
        ctx.meta[_META] = _scan(list(args), takes_value)
        return super().parse_args(ctx, args)


def _scan(args: list[str], takes_value: set[str]) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    at = 0
    while at < len(args):
        arg = args[at]
        if arg == "--":
            break
        name, eq, inline = arg.partition("=")
        if name in takes_value:
            value = inline if eq else (args[at + 1] if at + 1 < len(args) else None)
            at += 1 if eq else 2
            if name in _ANSWERING:
                found.append((_ANSWERING[name], value))
            continue
        if arg in _ANSWERING:
            found.append((_ANSWERING[arg], None))
        at += 1
    return found


def part_replies() -> tuple[UserReply, ...]:
    """The running command's replies, one per part, parts numbered from 1 with none left
    out (ConfigError else)."""
    from orchestrator.domain.question import UserReply
    from orchestrator.errors import ConfigError

    given: dict[int, dict[str, Any]] = {}
    current: int | None = None
    for kind, value in get_current_context().meta.get(_META, []):
        if kind == "part":
            if value is None or not value.strip().isdigit() or int(value) < 1:
                raise ConfigError(f"--part takes a part number from 1, got {value!r}")
            current = int(value)
            if current in given:
                raise ConfigError(f"--part {current} is given twice")
            given[current] = {"text": None, "choices": [], "decline": False}
        elif current is None:
            raise ConfigError(
                "with --part, each --answer, --choice or --decline follows the --part it answers"
            )
        elif kind == "answer":
            given[current]["text"] = value
        elif kind == "choice":
            given[current]["choices"].append(value)
        else:
            given[current]["decline"] = True
    missing = [n for n in range(1, max(given, default=0) + 1) if n not in given]
    if missing:
        raise ConfigError(f"answer every part: --part {missing[0]} is missing")
    replies = []
    for number in sorted(given):
        part = given[number]
        if part["decline"]:
            if part["text"] is not None or part["choices"]:
                raise ConfigError(f"--part {number}: --decline goes alone")
            replies.append(UserReply(action="decline"))
        elif part["text"] is None and not part["choices"]:
            raise ConfigError(f"--part {number} needs --answer, --choice or --decline")
        else:
            replies.append(UserReply(text=part["text"], choices=tuple(part["choices"])))
    return tuple(replies)
