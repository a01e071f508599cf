"""Evaluation cases (docs/eval.md): read from YAML, validated as pydantic models.

A file holds one case (a mapping with `task`) or several (`cases: [...]`). Every malformed
file is named in one ConfigError, so that a team fixes its set in one go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.errors import ConfigError

__all__ = ["Blocker", "EvalCase", "Dimension", "load_cases", "parse_cases", "question_text"]

Dimension = Literal["goal", "constraint", "input", "context"]
_Text = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Blocker(_Model):
    """One fact the task leaves out that the user knows."""

    id: _Text
    fact: _Text  # what is missing, as the question that would settle it
    dimension: Dimension
    critical: bool
    answer: _Text  # the user's answer (the hidden fact)
    keywords: Annotated[list[_Text], Field(min_length=1)]
    options: list[_Text] = Field(default_factory=list)
    option: str | None = None  # the right option label, when the question offers options

    @model_validator(mode="after")
    def _option_offered(self) -> Blocker:
        if self.option is not None and self.options and self.option not in self.options:
            raise ValueError(f"option {self.option!r} is not one of options {self.options}")
        return self

    def asked_by(self, question: Mapping[str, Any]) -> bool:
        """Whether `question` (a question object) is about this blocker: its text or one of
        its option labels names one of the keywords (ignoring case)."""
        said = question_text(question)
        return any(word.lower() in said for word in self.keywords)


class EvalCase(_Model):
    """A task as a user would type it, the hidden specification behind it, its blockers
    and the facts a correct outcome names. A case without blockers is a control."""

    name: _Text
    task: _Text
    spec: _Text
    blockers: list[Blocker] = Field(default_factory=list)
    outcome: list[_Text] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_critical(self) -> EvalCase:
        # The gate allows one question per session: a second critical blocker could never
        # be asked about, and every policy's recall would be capped below 1.
        if len(self.critical) > 1:
            raise ValueError("at most one blocker may be critical (one question per session)")
        ids = [b.id for b in self.blockers]
        if len(set(ids)) != len(ids):
            raise ValueError(f"blocker ids must be unique: {ids}")
        return self

    @property
    def critical(self) -> list[Blocker]:
        return [b for b in self.blockers if b.critical]

    @property
    def is_control(self) -> bool:
        return not self.blockers

    def blocker_of(self, question: Mapping[str, Any]) -> Blocker | None:
        """The blocker `question` is about (critical ones first), or None."""
        ordered = sorted(self.blockers, key=lambda b: not b.critical)
        return next((b for b in ordered if b.asked_by(question)), None)


def question_text(question: Mapping[str, Any]) -> str:
    """A question's words, lower-cased: its text and its option labels."""
    labels = [str(o.get("label", "")) for o in question.get("options") or []]
    return " ".join([str(question.get("question") or ""), *labels]).lower()


def parse_cases(data: Any, source: str) -> list[EvalCase]:
    """The cases in one file's data; raises ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("expected a mapping with `task`, or with `cases: [...]`")
    if "cases" in data:
        if set(data) != {"cases"} or not isinstance(data["cases"], list) or not data["cases"]:
            raise ValueError("`cases` must be the only key and a non-empty list")
        entries = data["cases"]
    else:
        entries = [data]
    stem = Path(source).stem
    cases = []
    for index, entry in enumerate(entries, 1):
        if isinstance(entry, dict) and "name" not in entry:
            entry = {**entry, "name": stem if len(entries) == 1 else f"{stem}[{index}]"}
        try:
            cases.append(EvalCase.model_validate(entry))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'case'}: "
                + str(e["msg"]).removeprefix("Value error, ")
                for e in exc.errors(include_url=False)
            )
            where = f"case {index}: " if len(entries) > 1 else ""
            raise ValueError(where + problems) from None
    return cases


def load_cases(paths: Iterable[Path]) -> list[EvalCase]:
    """Every case in `paths` (files, and folders searched for *.yaml / *.yml), in order.
    Raises ConfigError naming every malformed file, or when there is no case at all.
    Files are read as scenario files are (orchestrator.scenario.reading): a key given
    twice is refused, and nesting is bounded before the YAML parser sees it."""
    from orchestrator.errors import ScenarioError
    from orchestrator.scenario.reading import parse_text

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"{path}: no such file or folder")
    cases: list[EvalCase] = []
    problems: list[str] = []
    for file in files:
        try:
            document = parse_text(file, file.read_text(encoding="utf-8"))
            cases += parse_cases(document, str(file))
        except ScenarioError as exc:  # the reader's messages name the file already
            problems.append(exc.message)
        except (ValueError, UnicodeDecodeError) as exc:
            problems.append(f"{file}: {exc}")
    if problems:
        raise ConfigError("malformed eval cases:\n  " + "\n  ".join(problems))
    if not cases:
        raise ConfigError("no eval case found in " + ", ".join(str(p) for p in paths))
    names = [c.name for c in cases]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError("eval case names must be unique; repeated: " + ", ".join(repeated))
    return cases
