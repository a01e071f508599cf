"""Scenario files (contract section 4): task, scripted agents, scripted answers, expectations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.domain.question import Question, repair
from orchestrator.domain.replies import (
    DEVELOPER_REPLY,
    PM_REPLY,
    NeedsClarification,
)
from orchestrator.errors import ScenarioError
from orchestrator.limits import (
    MAX_ANSWER_CHARS,
    MAX_SCENARIO_BYTES,
    MAX_SCENARIO_DEPTH,
    MAX_SCENARIO_NODES,
    MAX_TASK_CHARS,
)
from orchestrator.scenario.messages import format_validation_error
from orchestrator.scenario.reading import parse_text
from orchestrator.scenario.steps import (
    AGENT_KEY,
    ChoicesAnswer,
    EventExpect,
    Expect,
    PartDecline,
    Step,
    TaskExpect,
    TextAnswer,
)
from orchestrator.settings import Settings

__all__ = [
    "Scenario",
    "ScriptedAnswer",
    "Expect",
    "Step",
    "TaskExpect",
    "EventExpect",
    "load_scenario",
    "without_tools",
    "parse_scenario",
    "format_validation_error",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ActionAnswer(_Model):
    action: Literal["decline", "cancel"]
    note: str | None = None


class PartsAnswer(_Model):
    """A multi-part question's answer: one entry per part, in part order (each validated
    at run time by its own part's rules)."""

    parts: Annotated[list[str | TextAnswer | ChoicesAnswer | PartDecline], Field(min_length=1)]
    note: str | None = None


ScriptedAnswer = str | TextAnswer | ChoicesAnswer | ActionAnswer | PartsAnswer


class LateAnswer(_Model):
    """The person's answer coming after the question was declined or timed out
    (docs/late-answers.md): `answer`, `choices` or `parts`, as an `answers` entry; `when`
    it comes: while the agents run (the PM's next turn) or once the session has ended;
    `reconcile`: an ended session is reconciled at once (`resume --reconcile`)."""

    answer: Annotated[str, Field(min_length=1)] | None = None
    choices: Annotated[list[str], Field(min_length=1)] | None = None
    parts: (
        Annotated[list[str | TextAnswer | ChoicesAnswer | PartDecline], Field(min_length=1)] | None
    ) = None
    when: Literal["running", "ended"] = "ended"
    reconcile: bool = False

    @model_validator(mode="after")
    def _one_answer(self) -> LateAnswer:
        given = [name for name in ("answer", "choices", "parts") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of `answer` (text), `choices` (option labels) or `parts` "
                f"(one entry per part); got {', '.join(given) or 'none'}"
            )
        if self.reconcile and self.when != "ended":
            raise ValueError("`reconcile: true` is for `when: ended` (a running PM is told itself)")
        return self


def without_tools(reply: dict[str, Any]) -> dict[str, Any]:
    """A scripted reply as the reply contract sees it (its `tools:` played before it)."""
    return {k: v for k, v in reply.items() if k != "tools"} if "tools" in reply else reply


def _check_tools(name: str, index: int, tools: Any) -> None:
    """A developer reply's `tools:` (contract section 9): a list of one-key mappings, each a
    developer tool's name with its arguments, checked as a model's call would be."""
    from orchestrator.skills import DEVELOPER_TOOLS, registry

    where = f"agents.{name}[{index}].tools"
    if name == "pm":
        raise ScenarioError(f"{where}: the PM has no tools; only developers run tools")
    if not isinstance(tools, list):
        raise ScenarioError(
            f"{where}: expected a list of tool calls, e.g. - run_command: {{command: make test}}"
        )
    known = registry()
    for position, call in enumerate(tools):
        if not isinstance(call, dict) or len(call) != 1:
            raise ScenarioError(
                f"{where}[{position}]: expected one tool name with its arguments, e.g. "
                "write_file: {path: a.py, content: ...}"
            )
        ((tool, args),) = call.items()
        if tool not in DEVELOPER_TOOLS:
            raise ScenarioError(
                f"{where}[{position}]: unknown tool {tool!r}; expected one of "
                f"{', '.join(DEVELOPER_TOOLS)}"
            )
        try:
            known[tool].Input.model_validate(args)
        except ValidationError as exc:
            raise ScenarioError(
                format_validation_error(
                    exc, prefix=("agents", name, index, "tools", position, tool)
                )
            ) from None


class Scenario(_Model):
    task: Annotated[str, Field(min_length=1)]

    @field_validator("task")
    @classmethod
    def _task(cls, task: str) -> str:
        if not task.strip():
            raise ValueError(
                "the task is blank; expected what the agents should do, e.g. "
                "'Add a CSV export to the reports page'"
            )
        return task

    agents: dict[str, list[dict[str, Any]]]
    # A folder (relative to the scenario file) copied into a new git repository for the
    # session: developers work in worktrees of it and run commands (contract section 9).
    repo: Annotated[str, Field(min_length=1)] | None = None
    # Shell commands that decide "done" (as --check); the same as `settings: {checks: ...}`.
    checks: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    answers: list[ScriptedAnswer] = Field(default_factory=list)
    late_answer: LateAnswer | None = None
    expect: Expect | None = None
    settings: Settings = Field(default_factory=Settings)
    steps: list[Step] = Field(default_factory=list)

    @field_validator("agents")
    @classmethod
    def _agents(cls, agents: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        if "pm" not in agents:
            raise ValueError("the scenario needs scripted replies for 'pm'")
        for name, replies in agents.items():
            if not AGENT_KEY.match(name):
                raise ScenarioError(
                    f"agents.{name}: unknown agent; expected 'pm', 'developer' or "
                    "'developer-N' (N = task number from 1)"
                )
            adapter = PM_REPLY if name == "pm" else DEVELOPER_REPLY
            for index, reply in enumerate(replies):
                if isinstance(reply, dict) and "tools" in reply:
                    _check_tools(name, index, reply["tools"])
                try:
                    adapter.validate_python(without_tools(reply))
                except ValidationError as exc:
                    raise ScenarioError(
                        format_validation_error(exc, prefix=("agents", name, index))
                    ) from None
        return agents

    def session_settings(
        self,
        *,
        source: str | None = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        """What the store keeps for a scripted session (options given on the CLI win)."""
        if self.checks and overrides.get("checks") is None:
            overrides = {**overrides, "checks": list(self.checks)}
        settings: dict[str, Any] = self.settings.merged(**overrides).model_dump()
        settings["answers"] = [a if isinstance(a, str) else a.model_dump() for a in self.answers]
        if self.late_answer is not None:
            settings["late_answer"] = self.late_answer.model_dump(exclude_none=True)
        if self.expect is not None:
            settings["expect"] = self.expect.model_dump(exclude_none=True)
        if source is not None:
            settings["scenario"] = source
        return settings

    def questions(self) -> list[Question]:
        """Every question the script can surface, as the user would see it (repaired)."""
        found = []
        for name, replies in self.agents.items():
            adapter = PM_REPLY if name == "pm" else DEVELOPER_REPLY
            for reply in replies:
                parsed = adapter.validate_python(without_tools(reply))
                if isinstance(parsed, NeedsClarification):
                    found.append(repair(parsed, name)[0])
        return found


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a YAML or JSON scenario; any problem is a ScenarioError (exit 2)."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SCENARIO_BYTES + 1)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file: {exc.strerror}") from None
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError(_too_big(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the scenario as UTF-8"
        ) from None
    return parse_scenario(text, path)


def _too_big(path: Path) -> str:
    return (
        f"{path}: the scenario file is larger than {MAX_SCENARIO_BYTES:,} bytes, the limit "
        "for scenario files"
    )


def parse_scenario(text: str, path: str | Path = "<scenario>") -> Scenario:
    """Validate a scenario given as YAML or JSON text; `path` names it in messages (a
    `.json` suffix parses it as JSON, anything else as YAML, which JSON also is)."""
    path = Path(path)
    if len(text) > MAX_SCENARIO_BYTES:
        raise ScenarioError(_too_big(path))
    data = parse_text(path, text)
    _check_shape(path, data)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else type(data).__name__
        raise ScenarioError(
            f"{path}: (top level): expected a mapping with 'task' and 'agents', got {got}"
        )
    try:
        scenario = Scenario.model_validate(data)
    except ScenarioError as exc:
        raise ScenarioError(_prefix_lines(path, exc.message)) from None
    except ValidationError as exc:
        nested = [
            e for e in exc.errors() if isinstance(e.get("ctx", {}).get("error"), ScenarioError)
        ]
        if nested:
            raise ScenarioError(_prefix_lines(path, nested[0]["ctx"]["error"].message)) from None
        raise ScenarioError(_prefix_lines(path, format_validation_error(exc))) from None
    _check_answers(path, scenario)
    return scenario


def _prefix_lines(path: Path, message: str) -> str:
    return "\n".join(f"{path}: {line}" for line in message.splitlines())


def _check_shape(path: Path, data: Any) -> None:
    """Refuse documents nested deeper, or with more values, than any scenario needs (an
    alias used many times counts each time: the checks below would walk it each time)."""
    stack = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_SCENARIO_NODES:
            raise ScenarioError(
                f"{path}: more than {MAX_SCENARIO_NODES:,} values; a scenario needs far fewer"
            )
        if isinstance(value, dict | list):
            if depth > MAX_SCENARIO_DEPTH:
                raise ScenarioError(
                    f"{path}: nested more than {MAX_SCENARIO_DEPTH} levels deep; "
                    "a scenario needs fewer than 10"
                )
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


def _check_sizes(path: Path, scenario: Scenario) -> None:
    if len(scenario.task) > MAX_TASK_CHARS:
        raise ScenarioError(
            f"{path}: task: {len(scenario.task):,} characters; at most {MAX_TASK_CHARS:,}"
        )
    for index, whole in enumerate(scenario.answers):
        for answer in whole.parts if isinstance(whole, PartsAnswer) else [whole]:
            _check_size(path, index, answer)


def _check_size(
    path: Path, index: int, answer: str | TextAnswer | ChoicesAnswer | ActionAnswer | PartDecline
) -> None:
    texts = (
        [answer]
        if isinstance(answer, str)
        else [answer.answer]
        if isinstance(answer, TextAnswer)
        else list(answer.choices)
        if isinstance(answer, ChoicesAnswer)
        else []
    )
    note = None if isinstance(answer, str | PartDecline) else answer.note
    for text in [*texts, *([note] if note else [])]:
        if len(text) > MAX_ANSWER_CHARS:
            raise ScenarioError(
                f"{path}: answers[{index}]: {len(text):,} characters; at most {MAX_ANSWER_CHARS:,}"
            )
    if any(not text.strip() for text in texts):
        raise ScenarioError(
            f"{path}: answers[{index}]: the answer is empty; expected the answer text, "
            "an option's label, {choices: [label, ...]} or {action: decline}"
        )


def _check_answers(path: Path, scenario: Scenario) -> None:
    """A scripted select answer must be an option of some question the script can ask."""
    _check_sizes(path, scenario)
    questions = scenario.questions()
    given: list[tuple[str, ScriptedAnswer]] = [
        (f"answers[{index}]", answer) for index, answer in enumerate(scenario.answers)
    ]
    for index, step in enumerate(scenario.steps):
        if step.answer is not None:
            given.append((f"steps[{index}].answer", step.answer))
        elif step.choices is not None:
            _check_step_choices(f"{path}: steps[{index}].choices", step.choices, questions)
    late = scenario.late_answer
    if late is not None and late.answer is not None:
        given.append(("late_answer.answer", late.answer))
    elif late is not None and late.choices is not None:
        _check_step_choices(f"{path}: late_answer.choices", late.choices, questions)
    for place, answer in given:
        where = f"{path}: {place}"
        if isinstance(answer, ActionAnswer | PartsAnswer):
            continue  # a part's answer is checked against its part when it is asked
        if isinstance(answer, TextAnswer):
            answer = answer.answer
        if not questions:
            raise ScenarioError(f"{where}: no agent in the scenario asks a question to answer")
        if isinstance(answer, ChoicesAnswer):
            multi = [q for q in questions if q.kind == "multi_select"]
            if not multi:
                raise ScenarioError(
                    f"{where}: 'choices' answers a multi_select question, and no agent asks one"
                )
            if not any(set(answer.choices) <= set(q.labels) for q in multi):
                labels = sorted({label for q in multi for label in q.labels})
                raise ScenarioError(
                    f"{where}: {answer.choices} are not options of the question; "
                    f"expected labels from {labels}"
                )
        elif all(q.kind != "free_text" and not q.allow_other for q in questions) and not any(
            answer in q.labels for q in questions
        ):
            labels = sorted({label for q in questions for label in q.labels})
            raise ScenarioError(
                f"{where}: {answer!r} is not one of the options; expected one of {labels}"
            )


def _all_options(choices: list[str], labels: list[str]) -> bool:
    """Every one of `choices` is an option (the one answer rule: orchestrator.domain.question),
    also where the question allows an answer of one's own: that one is a step's `answer`."""
    from orchestrator.domain.question import option_label
    from orchestrator.errors import InvalidAnswer

    try:
        for choice in choices:
            option_label(choice, list(labels))
    except InvalidAnswer:
        return False
    return True


def _check_step_choices(where: str, choices: list[str], questions: list[Question]) -> None:
    """A step's `choices` (like `resume --choice`) picks options of a select question."""
    selects = [q for q in questions if q.kind != "free_text"]
    if not selects:
        raise ScenarioError(f"{where}: 'choices' answers a select question, and no agent asks one")
    fits = [
        q
        for q in selects
        if (q.kind == "multi_select" or len(choices) == 1) and _all_options(choices, q.labels)
    ]
    if not fits:
        labels = sorted({label for q in selects for label in q.labels})
        raise ScenarioError(
            f"{where}: {choices} do not fit the question; expected "
            f"{'one label' if all(q.kind == 'single_select' for q in selects) else 'labels'} "
            f"from {labels}"
        )
