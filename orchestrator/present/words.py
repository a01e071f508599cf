"""Times and internal words as people read them, for every door (web, command line, MCP).

The session object keeps its machine values (ISO 8601 times to the microsecond, `pm#3`,
`for_pm`, `part_cap`); what a person reads goes through these instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = [
    "parse_time",
    "moment",
    "clock_time",
    "ago",
    "span",
    "turn_name",
    "agent_name",
    "verdict_word",
    "source_word",
]


def parse_time(iso_time: str | None) -> datetime | None:
    """An ISO time as written by the contract (`…Z`), in UTC; None when there is none or
    it does not read as one."""
    if not iso_time:
        return None
    try:
        when = datetime.fromisoformat(iso_time.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def moment(iso_time: str | None) -> str:
    """'2026-11-27 11:48:13 UTC': to the second, the zone said ('' for none; a value that
    is not a time is shown as it is)."""
    when = parse_time(iso_time)
    if when is None:
        return iso_time or ""
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def clock_time(iso_time: str | None) -> str:
    """'11:48:13' (UTC): a log line's time of day."""
    when = parse_time(iso_time)
    return "" if when is None else when.strftime("%H:%M:%S")


def ago(iso_time: str | None, now: datetime | None = None) -> str:
    """'just now', '4 min ago', '3 h ago', '2 d ago', or 'in 5 min' for a time to come
    ('' for none)."""
    when = parse_time(iso_time)
    if when is None:
        return iso_time or ""
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    return "just now" if abs(seconds) < 10 else span(seconds)


def span(seconds: float) -> str:
    """'4 min ago' for a time that many seconds past, 'in 4 min' for one to come."""
    amount = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if amount >= size:
            text = f"{int(amount // size)} {unit}"
            break
    else:
        text = f"{int(amount)} s"
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def agent_name(agent: str | None) -> str:
    """'the PM', 'developer 2' ('an agent' for none)."""
    if not agent:
        return "an agent"
    if agent == "pm":
        return "the PM"
    name, _, number = agent.partition("-")
    return f"{name} {number}" if number.isdigit() else agent


def turn_name(key: str | None) -> str:
    """A recorded turn's key as people say it: 'pm#3' -> "the PM's turn 3",
    'developer-2#1' -> "developer 2's turn 1"; anything else as it is."""
    if not key:
        return ""
    agent, sep, call = key.partition("#")
    if not sep or not call.isdigit():
        return key
    return f"{agent_name(agent)}'s turn {call}"


_VERDICTS = {
    "contradicted": "contradicted",
    "confirmed": "confirmed",
    "for_pm": "for the PM to judge",
}


def verdict_word(verdict: str | None) -> str:
    """A late answer's verdict on an assumption: 'for_pm' -> 'for the PM to judge'."""
    return _VERDICTS.get(verdict or "", verdict or "")


_SOURCES = {
    "agent": "reported by the agent",
    "uncertainty": "not asked: low uncertainty",
    "hard_cap": "asked again after the fallback",
    "declined": "the question was declined",
    "timeout": "no answer in time",
    "part_cap": "one part too many for the question",
}


def source_word(source: str | None) -> str:
    """Where an assumption of the ledger comes from, in people's words ('part_cap' -> 'one
    part too many for the question')."""
    return _SOURCES.get(source or "", source or "")
