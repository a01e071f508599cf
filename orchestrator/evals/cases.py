"""Evaluation cases (docs/eval.md): read from YAML, validated as pydantic models.

A file holds one case (a mapping with `task`) or several (`cases: [...]`). Every malformed
file is named in one ConfigError, so that a team fixes its set in one go.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.errors import ConfigError

__all__ = [
    "Blocker",
    "EvalCase",
    "Solution",
    "Source",
    "CASE_DIR",
    "Dimension",
    "Matcher",
    "bundled",
    "load_cases",
    "named",
    "parse_cases",
    "question_text",
]

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

    @field_validator("keywords")
    @classmethod
    def _specific(cls, keywords: list[str]) -> list[str]:
        generic = sorted({k for k in keywords if k.strip().lower() in GENERIC_WORDS})
        if generic:
            raise ValueError(
                f"{', '.join(map(repr, generic))}: a word any question may contain, so every "
                "question would be about this blocker; give words that name its topic"
            )
        return keywords

    def asked_by(self, question: Mapping[str, Any]) -> bool:
        """Whether `question` names one of the keywords: at the start of a word, ignoring
        case (so `format` is not found in "information", and `authori` is in "authorise").
        Whether that makes the question *about* the blocker is the Matcher's call."""
        return bool(named(self.keywords, question_text(question)))


# In a case's checks, the folder of its case file (its hidden check scripts live there,
# outside the repository the developers see).
CASE_DIR = "{case_dir}"


class Solution(_Model):
    """What the reference policies' developer writes (they call no model): one file of the
    repository, where `{value}` stands for the critical blocker's answer when the user gave
    it, else for `guess` (what a developer assumes without asking)."""

    path: _Text
    content: _Text
    guess: str = ""


class Source(_Model):
    """Where a converted case comes from (the attribution its licence asks for)."""

    dataset: _Text
    id: _Text
    license: _Text
    url: str | None = None


class EvalCase(_Model):
    """A task as a user would type it, the hidden specification behind it, its blockers
    and the facts a correct outcome names. A case without blockers is a control.

    A case with `repo` (a folder, relative to the case file) runs in a new git repository
    made from it, with developers in worktrees; its `checks` run in the sandbox after a
    developer's DONE (contract section 9), and its outcome needs every task done, i.e.
    every check passed."""

    name: _Text
    task: _Text
    spec: _Text
    blockers: list[Blocker] = Field(default_factory=list)
    outcome: list[_Text] = Field(default_factory=list)
    repo: str | None = None
    checks: list[_Text] = Field(default_factory=list)
    solution: Solution | None = None
    source: Source | None = None

    @model_validator(mode="after")
    def _repository(self) -> EvalCase:
        if self.checks and self.repo is None:
            raise ValueError("checks run in the case's repository: give `repo` (a folder)")
        if self.solution is not None and self.repo is None:
            raise ValueError("a solution is written into the case's repository: give `repo`")
        return self

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

    def blocker_of(
        self, question: Mapping[str, Any], matcher: Matcher | None = None
    ) -> Blocker | None:
        """The blocker `question` is about (critical ones first), or None; `matcher`: the
        rules over the whole set (default: this case alone)."""
        return (matcher or Matcher([self])).blocker_of(self, question)


class Matcher:
    """Which blocker a question is about, by keywords, in a way a policy cannot game.

    A question is about a blocker when it is one specific question that names the
    blocker's keywords (whole words from their start, not substrings), and
    - it asks one thing: at most one interrogative clause and one question mark (a
      question that bundles several asks is about none of them: HiL-Bench counts each
      question once, against one blocker, so a bundle cannot collect several hits);
    - it names at most MAX_OTHER_KEYWORDS keywords of other blockers anywhere in the set
      (keyword stuffing names many).
    A question that is about no blocker lowers precision like any unneeded question.
    """

    MAX_OTHER_KEYWORDS = 2

    def __init__(self, cases: Iterable[EvalCase]) -> None:
        self.vocabulary = sorted(
            {k.lower() for case in cases for b in case.blockers for k in b.keywords}
        )

    def blocker_of(self, case: EvalCase, question: Mapping[str, Any]) -> Blocker | None:
        if not case.blockers or bundled(str(question.get("question") or "")):
            return None
        said = question_text(question)
        found = set(named(self.vocabulary, said))
        for blocker in sorted(case.blockers, key=lambda b: not b.critical):
            own = {k.lower() for k in blocker.keywords}
            if found & own and len(found - own) <= self.MAX_OTHER_KEYWORDS:
                return blocker
        return None


# Words any question may contain: never a keyword (they made "Which branch...?" a question
# about a language, and "Where does it run?" about a button).
_INTERROGATIVE = frozenset(
    re.findall(
        r"\w+",
        "what which where when who whom whose why how should shall do does did is are was "
        "were can could will would may might must have has",
    )
)
GENERIC_WORDS = _INTERROGATIVE | frozenset(
    re.findall(r"\w+", "a an and any anything else i if it know me of or that the this to you")
)
_CLAUSE = re.compile(r"[?;:]|,|\band\b|\bor\b|\balso\b", re.IGNORECASE)


def named(keywords: Iterable[str], said: str) -> list[str]:
    """The keywords `said` (lower-cased) names at the start of a word."""
    return [k for k in keywords if re.search(r"(?<![a-z0-9])" + re.escape(k.lower()), said)]


def bundled(text: str) -> bool:
    """Does a question's text ask several things (more than one question mark, or more
    than one clause that opens with an interrogative word)?"""
    if text.count("?") > 1:
        return True
    opening = [part.split()[0].lower() for part in _CLAUSE.split(text) if part.split()]
    return sum(1 for word in opening if word in _INTERROGATIVE) > 1


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
        if isinstance(entry, dict):
            entry = _in_folder(entry, Path(source).resolve().parent)
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


def _in_folder(entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A case's `repo` as a folder relative to its file (checked to be one), and
    `{case_dir}` in its checks as that file's folder (quoted for the shell)."""
    import shlex

    repo = entry.get("repo")
    if isinstance(repo, str) and repo.strip():
        found = folder / repo
        if not found.is_dir():
            raise ValueError(f"repo: {found} is not a folder (a path relative to the case file)")
        entry = {**entry, "repo": str(found)}
    checks = entry.get("checks")
    if isinstance(checks, list):
        quoted = shlex.quote(str(folder))
        entry = {
            **entry,
            "checks": [c.replace(CASE_DIR, quoted) if isinstance(c, str) else c for c in checks],
        }
    return entry


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
