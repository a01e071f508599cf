"""What a suite run is made of: the scenario files found, and how each one went."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["Item", "Malformed", "Result", "Report", "Outcome"]

Outcome = Literal["passed", "failed", "error", "skipped"]


@dataclass(frozen=True)
class Item:
    """A scenario file to run; `name` is how reports call it (its path from the current
    folder), `key` what `-k` matches (its path inside the folder that was given)."""

    path: str
    name: str
    key: str = ""


@dataclass(frozen=True)
class Malformed:
    """A file that looks like a scenario and does not validate (exit code 2)."""

    path: str
    name: str
    message: str
    key: str = ""


@dataclass(frozen=True)
class Result:
    """How one scenario went. `unmet`: one line per expectation that did not hold;
    `message`: why it could not run (a crash) or was skipped."""

    name: str
    path: str
    outcome: Outcome
    seconds: float = 0.0
    status: str | None = None
    session_id: str | None = None
    unmet: tuple[str, ...] = ()
    message: str | None = None
    database: str | None = None  # kept when the scenario did not pass, for `orchestrator log`


@dataclass(frozen=True)
class Report:
    """A whole run: results in collection order, the malformed files, the exit code."""

    results: tuple[Result, ...]
    malformed: tuple[Malformed, ...] = ()
    seconds: float = 0.0
    jobs: int = 1

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def exit_code(self) -> int:
        """2 when a file is malformed, else 1 when any scenario did not pass, else 0."""
        if self.malformed:
            return 2
        if any(r.outcome in ("failed", "error") for r in self.results):
            return 1
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "total": len(self.results) + len(self.malformed),
            "passed": self.count("passed"),
            "failed": self.count("failed"),
            "errors": self.count("error") + len(self.malformed),
            "skipped": self.count("skipped"),
            "seconds": round(self.seconds, 3),
            "jobs": self.jobs,
            "scenarios": [
                {**asdict(r), "unmet": list(r.unmet), "seconds": round(r.seconds, 3)}
                for r in self.results
            ],
            "malformed": [asdict(m) for m in self.malformed],
        }
