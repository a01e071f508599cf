"""What real models send, and what happens to it.

First the reply contract on its own (orchestrator.agents.replies): every kind of reply a
model was seen to send, with the outcome it must have. Then the same kinds served by an
OpenAI-compatible stub server on 127.0.0.1 (tests/openai_stub.py) through the `openai`
provider, i.e. langchain-openai's and the openai package's real HTTP client: budgets,
timeouts, HTTP errors, reply modes, token usage, and a whole session with a question,
paused and resumed from the command line, on both backends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import forkserver
import pytest
from dbcheck import query
from orchestrator.agents.replies import (
    NO_SUMMARY,
    PLANNED_WITHOUT_TASKS,
    feedback,
    read_arguments,
    read_text,
)
from orchestrator.skills import DEVELOPER_TOOLS

from orchestrator import Sessions
from orchestrator.domain.question import UserReply
from orchestrator.domain.replies import Complete, NeedsClarification, Planned
from tests.openai_stub import (
    QUESTION,
    Stub,
    error,
    hang,
    serve,
    text,
    tool_call,
)

ROOT = Path(__file__).resolve().parent.parent
PLAN = {"status": "PLANNED", "tasks": [{"title": "Write the export"}]}
COMPLETE = {"status": "COMPLETE", "summary": "shipped"}
DONE = {"status": "DONE", "summary": "wrote it"}

# -- the reply contract: each kind a model sends, and what becomes of it -------------------


@pytest.mark.parametrize(
    ("given", "status", "noted"),
    [
        # fields of another status: ignored, noted
        ({**PLAN, "summary": "a plan"}, "PLANNED", "ignored summary (not part of a PLANNED"),
        ({**COMPLETE, "uncertainty": 10}, "COMPLETE", "ignored uncertainty"),
        ({**COMPLETE, "thoughts": "hmm"}, "COMPLETE", "ignored thoughts"),
        # nulls for what does not apply: dropped (not refused)
        ({**PLAN, "summary": None, "question": None, "options": None}, "PLANNED", None),
        # the status's case and spelling
        ({"status": "planned", "tasks": [{"title": "t"}]}, "PLANNED", "read status 'planned'"),
        ({**QUESTION, "status": "needs clarification"}, "NEEDS_CLARIFICATION", "read status"),
        ({**QUESTION, "status": "Needs-Clarification"}, "NEEDS_CLARIFICATION", "read status"),
        # wrappers, arguments as a JSON string
        ({"name": "submit_reply", "arguments": json.dumps(PLAN)}, "PLANNED", "unwrapped"),
        ({"name": "submit_reply", "arguments": COMPLETE}, "COMPLETE", "unwrapped"),
        ({"submit_reply": COMPLETE}, "COMPLETE", "unwrapped"),
        (
            {"type": "function", "function": {"name": "submit_reply", "arguments": COMPLETE}},
            "COMPLETE",
            "unwrapped",
        ),
        # blank assumptions (a small model's filler): dropped
        ({**COMPLETE, "assumptions": ["", " ", "kept"]}, "COMPLETE", "dropped 2 blank"),
        # a task's blank file names (SmolLM2's filler): dropped
        (
            {"status": "PLANNED", "tasks": [{"title": "t", "files": ["", "a.py"]}]},
            "PLANNED",
            "dropped blank file names",
        ),
        # options and tasks as plain strings
        ({"status": "PLANNED", "tasks": ["Write it"]}, "PLANNED", "plain text"),
        ({**QUESTION, "options": ["CSV", "S3"]}, "NEEDS_CLARIFICATION", "plain text"),
    ],
)
def test_recoverable_shapes_are_read_and_noted(
    given: dict[str, Any], status: str, noted: str | None
) -> None:
    reading = read_arguments("pm", given)
    assert reading.reply is not None, reading.problem
    assert reading.reply.status == status
    if noted is None:
        assert reading.notes == []
    else:
        assert any(noted in note for note in reading.notes), reading.notes
    assert all(str(a).strip() for a in getattr(reading.reply, "assumptions", []))


def test_what_is_validated_is_the_status_model_exactly() -> None:
    reading = read_arguments("pm", {**PLAN, "summary": "x", "uncertainty": 5})
    assert isinstance(reading.reply, Planned)
    assert reading.reply.model_dump(exclude_none=True) == {
        "status": "PLANNED",
        "tasks": [{"title": "Write the export"}],
        "assumptions": [],
    }
    asked = read_arguments("developer-1", {**QUESTION, "assumptions": ["a"]})
    assert isinstance(asked.reply, NeedsClarification)  # assumptions ignored, not refused
    assert any("ignored assumptions" in note for note in asked.notes)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"status": "PLANNED"}, PLANNED_WITHOUT_TASKS),
        ({"status": "PLANNED", "tasks": []}, PLANNED_WITHOUT_TASKS),
        ({"status": "PLANNED", "tasks": None, "summary": "all"}, PLANNED_WITHOUT_TASKS),
        ({"status": "DONE", "summary": "x"}, "status: 'DONE' is not a status you can give"),
        ({"status": "maybe"}, "give one of PLANNED, COMPLETE, NEEDS_CLARIFICATION"),
        ({"tasks": [{"title": "t"}]}, "status: missing"),
        ({"status": "NEEDS_CLARIFICATION", "uncertainty": 400}, "uncertainty: Input should"),
        ("not json {", "the arguments are not valid JSON"),
        (["a list"], "must be a JSON object"),
    ],
)
def test_the_rest_is_refused_with_a_problem_for_the_model(given: Any, problem: str) -> None:
    reading = read_arguments("pm", given)
    assert reading.reply is None
    assert problem in reading.problem
    assert "scenario" not in reading.problem


@pytest.mark.parametrize(
    ("written", "status", "noted"),
    [
        ('{"status": "COMPLETE", "summary": "ok"}', "COMPLETE", None),
        ('```json\n{"status": "COMPLETE", "summary": "ok"}\n```', "COMPLETE", "text around"),
        ('Here you go: {"status": "COMPLETE", "summary": "ok"} Cheers!', "COMPLETE", "around"),
        # two objects (a real llama.cpp reply): the first complete one, noted
        ('{"status": "COMPLETE", "summary": "a"}\n{"status": "PLANNED"}', "COMPLETE", "first of 2"),
        # braces in prose before the object do not derail the search
        ('I {think} so: {"status": "complete", "summary": "ok"}', "COMPLETE", "read status"),
    ],
)
def test_json_in_text_is_found(written: str, status: str, noted: str | None) -> None:
    reading = read_text("pm", written)
    assert reading.reply is not None, reading.problem
    assert reading.reply.status == status
    if noted:
        assert any(noted in note for note in reading.notes), reading.notes


def test_text_without_json_is_refused() -> None:
    assert read_text("pm", "Sure! I will plan it.").problem == "the reply contains no JSON object"


def test_feedback_speaks_the_models_mode() -> None:
    as_tool = feedback("pm", "tasks: missing", mode="tool")
    as_text = feedback("pm", "tasks: missing", mode="text")
    assert "Call the submit_reply tool once more" in as_tool
    assert "exactly one JSON object" in as_text and "submit_reply" not in as_text
    for said in (as_tool, as_text):
        assert '"status": "PLANNED" with tasks, assumptions?' in said
        assert "scenario" not in said


# -- through the real client, against the stub server -------------------------------------


@pytest.fixture
def stub() -> Iterator[Stub]:
    with serve() as running:
        yield running


def _sessions(db_url: str, answer: str | None = "CSV file") -> Sessions:
    ask = (lambda q: UserReply(choices=(answer,))) if answer else None
    return Sessions(db_url, ask=ask)


def _start(db_url: str, stub: Stub, tmp_path: Path, **options: Any) -> dict[str, Any]:
    return dict(
        _sessions(db_url).start(
            "Add a CSV export",
            models="openai:stub-model",
            workdir=tmp_path / "ws",
            model_options={"base_url": stub.url, **options},
        )
    )


def _log(db_url: str, session_id: str) -> list[dict[str, Any]]:
    return [dict(e) for e in Sessions(db_url).log(session_id)]


def test_a_session_completes_through_the_real_client(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    view = _start(db_url, stub, tmp_path, max_output_tokens=321)
    assert view["status"] == "completed", view
    assert view["orchestrator_state"]["user_clarification_response"] == "CSV file"
    first = stub.requests[0]
    assert first["model"] == "stub-model"
    # the limit in the field every OpenAI-compatible server honours (llama.cpp ignores
    # max_completion_tokens without an error, and generated until its context was full)
    assert first["max_tokens"] == 321 and "max_completion_tokens" not in first
    tools = [t["function"]["name"] for t in first["tools"]]
    assert tools == ["submit_reply"]
    # every call's usage is recorded, and summed per agent and per session
    assert view["usage"] == {
        "input_tokens": 480,
        "output_tokens": 120,
        "total_tokens": 600,
        "model_calls": 4,
        "agents": {
            "developer-1": {
                "input_tokens": 120,
                "output_tokens": 30,
                "total_tokens": 150,
                "model_calls": 1,
            },
            "pm": {"input_tokens": 360, "output_tokens": 90, "total_tokens": 450, "model_calls": 3},
        },
    }


def test_extra_fields_nulls_and_lowercase_status_are_accepted_and_logged(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(
        tool_call(
            {**QUESTION, "summary": None, "assumptions": ["x"], "status": "needs_clarification"}
        ),
        tool_call({**PLAN, "summary": "the plan", "options": None, "context": "c"}),
    )
    view = _start(db_url, stub, tmp_path)
    assert view["status"] == "completed", view
    replies = [e for e in _log(db_url, view["session_id"]) if e["kind"] == "agent_reply"]
    assert any("ignored context, summary" in n for n in replies[1]["notes"]), replies[1]
    assert any("read status 'needs_clarification'" in n for n in replies[0]["notes"])


@pytest.mark.parametrize(
    "served",
    [
        text('```json\n{"status": "PLANNED", "tasks": [{"title": "t"}]}\n```'),
        text('Sure. {"status": "PLANNED", "tasks": [{"title": "t"}]} Done.'),
        text('{"status": "PLANNED", "tasks": [{"title": "t"}]}\n{"status": "COMPLETE"}'),
        text('{"name": "submit_reply", "arguments": {"status": "PLANNED", "tasks": ["t"]}}'),
        tool_call(json.dumps({"name": "submit_reply", "arguments": PLAN})),
    ],
    ids=["fenced", "prose-around", "two-objects", "wrapper-in-text", "wrapper-in-tool-call"],
)
def test_recoverable_replies_are_used_without_a_retry(
    db_url: str, stub: Stub, tmp_path: Path, served: Any
) -> None:
    stub.queue(tool_call(QUESTION), served)
    view = _start(db_url, stub, tmp_path)
    assert view["status"] == "completed", view
    assert len(stub.requests) == 4  # ask, plan, developer, complete: nothing sent back


def test_an_invalid_text_reply_gets_text_feedback_and_a_tool_reply_tool_feedback(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(
        tool_call(QUESTION),
        text("I think we should plan it."),  # no JSON: feedback for text
        tool_call({"status": "PLANNED"}),  # no tasks: feedback for a tool call
    )
    view = _start(db_url, stub, tmp_path)
    assert view["status"] == "completed", view
    after_text = stub.requests[2]["messages"][-1]
    assert after_text["role"] == "user"
    assert "exactly one JSON object" in after_text["content"]
    after_tool = stub.requests[3]["messages"][-1]
    assert after_tool["role"] == "tool"
    assert PLANNED_WITHOUT_TASKS in after_tool["content"]
    assert "Call the submit_reply tool once more" in after_tool["content"]


def test_unknown_tools_count_as_invalid_replies(db_url: str, stub: Stub, tmp_path: Path) -> None:
    stub.queue(*[tool_call({"q": 1}, name="search_web")] * 3)
    view = _start(db_url, stub, tmp_path, max_retries=2)
    assert view["status"] == "failed"
    assert "pm gave no valid reply in 3 attempts" in view["error"]
    assert "'search_web', which is not a tool" in view["error"]
    # the failed turn is not recorded: its last reply is quoted in the error `log` shows
    assert 'its last reply: search_web({"q": 1})' in view["error"]
    shown = [e for e in _log(db_url, view["session_id"]) if "its last reply" in json.dumps(e)]
    assert shown, "the failed turn's reply is in the log"
    assert "There is no tool named 'search_web'" in stub.requests[1]["messages"][-1]["content"]
    # the failed turn's three calls are counted all the same
    assert view["usage"]["model_calls"] == 3 and view["usage"]["total_tokens"] == 450


def _failed_event(db_url: str, session_id: str) -> dict[str, Any]:
    return [e for e in _log(db_url, session_id) if e["kind"] == "agent_failed"][-1]


def _stalled(db_url: str, stub: Stub, tmp_path: Path, **options: Any) -> tuple[str, str]:
    from orchestrator.errors import AgentCallError

    with pytest.raises(AgentCallError) as raised:
        _start(db_url, stub, tmp_path, **options)
    session_id = raised.value.session_id
    assert session_id is not None
    assert f"try again with: orchestrator resume {session_id}" in raised.value.message
    view = Sessions(db_url).status(session_id)
    assert view["status"] == "running" and view["stalled"], view
    return session_id, str(view["last_error"])


def test_endless_tool_calls_hit_the_turn_budget_stalled_and_resumable(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(tool_call(QUESTION), tool_call(PLAN))
    stub.queue(*[tool_call({"path": "."}, name="list_files")] * 4)
    session_id, last_error = _stalled(db_url, stub, tmp_path, max_model_calls=4)
    assert "developer-1 made 4 model calls in one turn" in last_error
    assert "max_model_calls=4" in last_error
    # stored as a budget's kind: the worker's queue leaves it for `resume`
    assert query(db_url, "SELECT last_error_kind FROM sessions WHERE id = ?", session_id) == [
        ("budget_exceeded",)
    ]
    failed = _failed_event(db_url, session_id)
    assert failed["agent"] == "developer-1"
    assert failed["usage"]["model_calls"] == 4  # the failed turn's calls, counted
    spent = Sessions(db_url).status(session_id)["usage"]
    assert spent["agents"]["developer-1"]["model_calls"] == 4
    assert spent["model_calls"] == 6
    # resumable: the stub now answers, and the session completes (the PM not asked again)
    calls = len(stub.requests)
    view = _sessions(db_url).resume(session_id)
    assert view["status"] == "completed", view
    assert len(stub.requests) == calls + 2  # the developer's turn again, the PM's review


def test_too_many_tool_calls_in_a_turn_stall_the_session(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(tool_call(QUESTION), tool_call(PLAN))
    listing = ("list_files", {"path": "."})
    stub.queue(tool_call({"path": "."}, name="list_files", more=[listing] * 5))
    _, last_error = _stalled(db_url, stub, tmp_path, max_tool_calls=3)
    assert "called tools 4 times in one turn (max_tool_calls=3)" in last_error


def test_a_reply_that_never_ends_times_out(db_url: str, stub: Stub, tmp_path: Path) -> None:
    stub.queue(hang(60))
    session_id, last_error = _stalled(db_url, stub, tmp_path, call_timeout=1)
    assert "took longer than 1 s (call_timeout" in last_error
    assert "call_timeout" in _failed_event(db_url, session_id)["error"]
    # the call is counted, with the output the server may still generate for it
    usage = Sessions(db_url).status(session_id)["usage"]
    assert (usage["model_calls"], usage["output_tokens"]) == (1, 4096)


def test_openai_itself_gets_max_completion_tokens() -> None:
    from orchestrator.agents.models import call_kwargs

    from orchestrator.model_options import ModelOptions

    own = call_kwargs("openai", ModelOptions(base_url="https://api.openai.com/v1"))
    assert own["max_tokens"] == 4096 and "extra_body" not in own  # sent as max_completion_
    local = call_kwargs("openai", ModelOptions(base_url="http://127.0.0.1:8088/v1"))
    assert "max_tokens" not in local and local["extra_body"] == {"max_tokens": 4096}


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


@pytest.mark.parametrize("mode", ["json_schema", "tools"])
def test_the_schema_every_server_sees_suits_a_grammar_converter(
    db_url: str, stub: Stub, tmp_path: Path, mode: str
) -> None:
    """llama.cpp turns `$defs` names into grammar rules (`_Option` became `-Option` and the
    output ran unconstrained) and lets an object run on where extra properties are
    allowed: names of letters only, and no object open to more."""
    if mode == "json_schema":
        stub.queue(text(json.dumps(QUESTION)), text(json.dumps(PLAN)))
        stub.queue(text(json.dumps(DONE)), text(json.dumps(COMPLETE)))
    view = _start(db_url, stub, tmp_path, reply_mode=mode, max_output_tokens=512)
    assert view["status"] == "completed", view
    for request in (stub.requests[0], stub.requests[2]):  # the PM's, a developer's
        if mode == "json_schema":
            schema = request["response_format"]["json_schema"]["schema"]
        else:
            (schema,) = [
                t["function"]["parameters"]
                for t in request["tools"]
                if t["function"]["name"] == "submit_reply"
            ]
        assert request["max_tokens"] == 512
        names = list(schema.get("$defs", {}))
        assert all(name.isalpha() for name in names), names
        objects = [s for s in _walk(schema) if s.get("type") == "object"]
        assert objects and all(s.get("additionalProperties") is False for s in objects)


def _submit_schema(request: dict[str, Any], mode: str) -> dict[str, Any]:
    if mode == "json_schema":
        return dict(request["response_format"]["json_schema"]["schema"])
    (schema,) = [
        t["function"]["parameters"]
        for t in request["tools"]
        if t["function"]["name"] == "submit_reply"
    ]
    return dict(schema)


def _accepts(schema: dict[str, Any], reply: dict[str, Any]) -> bool:
    """Does one of the schema's status branches take `reply` (what a grammar built from
    it lets through: llama.cpp's converter reads the root anyOf before the properties)?"""
    import jsonschema

    return any(
        jsonschema.Draft202012Validator({**branch, "$defs": schema.get("$defs", {})}).is_valid(
            reply
        )
        for branch in schema["anyOf"]
    )


@pytest.mark.parametrize("mode", ["json_schema", "tools"])
def test_a_grammar_server_is_shown_a_branch_per_status_and_planned_needs_tasks(
    db_url: str, stub: Stub, tmp_path: Path, mode: str
) -> None:
    """SmolLM2 under llama.cpp's grammar sent PLANNED without tasks in 4 of 6 sessions:
    the flat object allowed it. A local server sees one branch per status, and the
    PLANNED branch requires at least one task."""
    if mode == "json_schema":
        stub.queue(text(json.dumps(QUESTION)), text(json.dumps(PLAN)))
        stub.queue(text(json.dumps(DONE)), text(json.dumps(COMPLETE)))
    view = _start(db_url, stub, tmp_path, reply_mode=mode)
    assert view["status"] == "completed", view
    pm = _submit_schema(stub.requests[0], mode)
    assert [b["properties"]["status"]["const"] for b in pm["anyOf"]] == [
        "PLANNED",
        "COMPLETE",
        "NEEDS_CLARIFICATION",
    ]
    assert _accepts(pm, PLAN) and _accepts(pm, QUESTION) and _accepts(pm, COMPLETE)
    assert not _accepts(pm, {"status": "PLANNED"})
    assert not _accepts(pm, {"status": "PLANNED", "tasks": []})
    assert not _accepts(pm, {"status": "PLANNED", "tasks": [{"title": "t"}], "summary": "s"})
    assert not _accepts(pm, {"status": "COMPLETE"})
    assert not _accepts(pm, {"status": "NEEDS_CLARIFICATION"})
    developer = _submit_schema(stub.requests[2], mode)
    assert _accepts(developer, DONE) and not _accepts(developer, PLAN)
    assert not _accepts(developer, {"status": "BLOCKED"})


def test_a_hosted_api_is_shown_the_flat_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anthropic refuses a tool schema with anyOf at its top level; OpenAI reads
    max_completion_tokens and constrains nothing in non-strict mode: both get the flat
    object, whose tasks still take at least one item when given."""
    from orchestrator.agents.models import grammar_server
    from orchestrator.agents.replies import shown_schema

    from orchestrator.model_options import ModelOptions

    assert not grammar_server("anthropic", ModelOptions())
    assert not grammar_server("openai", ModelOptions())
    assert not grammar_server("openai", ModelOptions(base_url="https://api.openai.com/v1"))
    assert grammar_server("openai", ModelOptions(base_url="http://127.0.0.1:8080/v1"))
    assert grammar_server("ollama", ModelOptions())
    flat = shown_schema("pm")
    assert "anyOf" not in flat
    (array,) = [o for o in flat["properties"]["tasks"]["anyOf"] if o["type"] == "array"]
    assert array["minItems"] == 1


def test_planned_without_tasks_is_sent_back_saying_what_to_send(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(text(json.dumps(QUESTION)), text('{"status": "PLANNED"}'))
    stub.queue(text(json.dumps(PLAN)), text(json.dumps(DONE)), text(json.dumps(COMPLETE)))
    view = _start(db_url, stub, tmp_path, reply_mode="json_schema")
    assert view["status"] == "completed", view
    told = stub.requests[2]["messages"][-1]["content"]
    assert "tasks: missing or empty; a PLANNED reply lists at least one task" in told
    assert "reply NEEDS_CLARIFICATION with a question" in told


def test_a_done_without_a_summary_is_accepted_and_noted(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(tool_call(QUESTION), tool_call(PLAN), tool_call({"status": "DONE"}))
    view = _start(db_url, stub, tmp_path)
    assert view["status"] == "completed", view
    assert view["tasks"][0]["summary"] == NO_SUMMARY
    noted = [e for e in _log(db_url, view["session_id"]) if e.get("agent") == "developer-1"]
    assert any("DONE without a summary" in " ".join(e.get("notes") or []) for e in noted)
    assert len(stub.requests) == 4  # no retry was spent on it


def test_a_refused_json_schema_is_asked_once_per_server(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    """What llama-cpp-python's server answers (HTTP 500, retried by the client), once: the
    next session on the same server sends json_object at once."""
    refusal = "('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"
    stub.queue(*[error(500, message=refusal)] * 3)
    replies = [text(json.dumps(r)) for r in (QUESTION, PLAN, DONE, COMPLETE)]
    stub.queue(*replies)
    assert _start(db_url, stub, tmp_path, reply_mode="json_schema")["status"] == "completed"
    stub.queue(*replies)
    assert _start(db_url, stub, tmp_path, reply_mode="json_schema")["status"] == "completed"
    kinds = [r["response_format"]["type"] for r in stub.requests]
    assert kinds == ["json_schema"] * 3 + ["json_object"] * 8


def test_a_broken_outer_object_is_named_not_a_nested_one_read() -> None:
    broken = '{"status": "PLANNED", "tasks": [{"title": "Write it"}] "assumptions": []}'
    reading = read_text("pm", broken)
    assert reading.reply is None
    assert "the reply's JSON object is not valid JSON: Expecting ',' delimiter" in reading.problem
    assert "status: missing" not in reading.problem


def test_a_turn_past_its_wall_time_stalls(db_url: str, stub: Stub, tmp_path: Path) -> None:
    stub.queue(hang(0.6, text("no json")), hang(0.6, text("no json")), hang(5))
    _, last_error = _stalled(db_url, stub, tmp_path, turn_timeout=1, max_retries=5)
    assert "turn_timeout" in last_error


def test_a_reply_cut_at_max_output_tokens_stalls(db_url: str, stub: Stub, tmp_path: Path) -> None:
    stub.queue(text('{"status": "PLANNED", "tasks": [{"title": "Wri', finish="length"))
    _, last_error = _stalled(db_url, stub, tmp_path, max_output_tokens=16)
    assert "cut at max_output_tokens=16" in last_error


def test_http_500_stalls_the_session_with_a_short_error_and_the_resume_command(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(*[error(500, message="upstream exploded " + "x" * 2000)] * 3)
    session_id, last_error = _stalled(db_url, stub, tmp_path)
    assert "Error code: 500" in last_error
    assert len(last_error) < 1000
    assert len(stub.requests) == 3  # the client's own two retries, then the failure
    view = _sessions(db_url).resume(session_id)  # the server is back
    assert view["status"] == "completed"


def test_429_with_retry_after_is_waited_out(db_url: str, stub: Stub, tmp_path: Path) -> None:
    stub.queue(error(429, retry_after="1", message="rate limited"))
    view = _start(db_url, stub, tmp_path)
    assert view["status"] == "completed", view
    assert stub.requests[0] == stub.requests[1]  # the same call, made again after the wait


def test_the_session_token_budget_fails_the_session(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    view = _start(db_url, stub, tmp_path, max_session_tokens=400)
    assert view["status"] == "failed"
    assert "the session used 450 tokens, its budget is max_session_tokens=400" in view["error"]
    assert view["usage"]["total_tokens"] == 450  # ask, plan, develop: the review never ran


def test_json_schema_mode_asks_for_structured_output(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(
        text(json.dumps(QUESTION)), text(json.dumps(PLAN)), text(json.dumps(DONE)), text("{}")
    )
    stub.queue(text(json.dumps(COMPLETE)))
    view = _start(db_url, stub, tmp_path, reply_mode="json_schema")
    assert view["status"] == "completed", view
    pm = stub.requests[0]
    assert pm["response_format"]["type"] == "json_schema"
    assert pm["response_format"]["json_schema"]["schema"]["properties"]["status"]["enum"] == [
        "NEEDS_CLARIFICATION",
        "PLANNED",
        "COMPLETE",
    ]
    assert "tools" not in pm  # the PM has no tools; developers keep their workspace tools
    developer = stub.requests[2]
    assert {t["function"]["name"] for t in developer["tools"]} == set(DEVELOPER_TOOLS)


def test_text_mode_binds_no_submit_tool_and_says_what_to_send(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(text(json.dumps(QUESTION)), text(json.dumps(PLAN)), text(json.dumps(DONE)))
    stub.queue(text(json.dumps(COMPLETE)))
    view = _start(db_url, stub, tmp_path, reply_mode="text")
    assert view["status"] == "completed", view
    assert "tools" not in stub.requests[0] and "response_format" not in stub.requests[0]
    assert "Reply with exactly one JSON object" in stub.requests[0]["messages"][-1]["content"]


def test_tool_choice_required_is_sent(db_url: str, stub: Stub, tmp_path: Path) -> None:
    view = _start(db_url, stub, tmp_path, tool_choice="required")
    assert view["status"] == "completed"
    assert stub.requests[0]["tool_choice"] == "required"


def test_bad_model_options_are_refused_before_anything_is_written(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    from orchestrator.errors import ConfigError

    for bad, said in [
        ({"call_timeout": 0}, "call_timeout"),
        ({"reply_mode": "xml"}, "reply_mode"),
        ({"base_url": "ftp://x"}, "expected an http:// or https:// URL"),
        ({"base_url": "http://me:secret@127.0.0.1/v1"}, "must not carry a user or password"),
    ]:
        with pytest.raises(ConfigError, match=said) as raised:
            _start(db_url, stub, tmp_path, **bad)
        assert "secret" not in raised.value.message
    assert Sessions(db_url).list() == []
    assert stub.requests == []


# -- the command line: `run --base-url`, a question, `resume`, on both backends -----------


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def _run_against(stub: Stub, tmp_path: Path, env: dict[str, str]) -> Any:
    """`orchestrator run "…" --model openai:stub-model --base-url STUB --json`."""
    workdir = str(tmp_path / "ws")
    return _cli(
        *("run", "Add a CSV export", "--model", "openai:stub-model", "--base-url", stub.url),
        *("--workdir", workdir, "--ui", "none", "--json"),
        env=env,
    )


@pytest.mark.backends()
def test_run_with_base_url_pauses_then_resume_completes(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    env = {**os.environ, "ORCHESTRATOR_DB": db_url}
    env.pop("OPENAI_API_KEY", None)  # a local server needs none
    started = _run_against(stub, tmp_path, env)
    assert started.returncode == 3, started.stderr
    paused = json.loads(started.stdout)
    assert paused["status"] == "paused"
    assert paused["pending_question"]["question"] == QUESTION["question"]
    assert paused["usage"]["model_calls"] == 1
    session_id = paused["session_id"]

    resumed = _cli("resume", session_id, "--choice", "CSV file", "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    done = json.loads(resumed.stdout)
    assert done["status"] == "completed"
    assert done["summary"] == "the export ships"
    assert done["usage"]["total_tokens"] == 600
    shown = _cli("status", session_id, env=env)
    assert "tokens: 600 (480 in, 120 out) in 4 model calls" in shown.stdout
    log = _cli("log", session_id, env=env)
    assert "tokens: 120 in, 30 out (1 model call)" in log.stdout


def test_cli_stall_names_the_session_and_keeps_the_resume_command(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(*[error(500, message="boom " + "y" * 3000)] * 3)
    env = {**os.environ, "ORCHESTRATOR_DB": db_url}
    failed = _run_against(stub, tmp_path, env)
    assert failed.returncode == 1, failed.stderr
    document = json.loads(failed.stdout)
    session_id = document["session_id"]
    assert document["error"].endswith(f"try again with: orchestrator resume {session_id}")
    assert f"orchestrator resume {session_id}" in failed.stderr


def test_cli_refuses_model_options_with_a_scenario(tmp_path: Path) -> None:
    refused = _cli(
        "run",
        "--script",
        str(ROOT / "examples" / "answered-question.yaml"),
        "--call-timeout",
        "5",
        env={**os.environ, "ORCHESTRATOR_DB": f"sqlite:///{tmp_path / 'x.db'}"},
    )
    assert refused.returncode == 2
    assert "--call-timeout is for chat-model agents" in refused.stderr
    assert not (tmp_path / "x.db").exists()


def test_cli_names_a_bad_model_option(tmp_path: Path) -> None:
    refused = _cli(
        "run",
        "task",
        "--model",
        "openai:x",
        "--reply-mode",
        "xml",
        env={**os.environ, "ORCHESTRATOR_DB": f"sqlite:///{tmp_path / 'x.db'}"},
    )
    assert refused.returncode == 2
    assert "--reply-mode 'xml'" in refused.stderr
    assert not (tmp_path / "x.db").exists()


def test_complete_reply_model_is_the_one_the_engine_sees() -> None:
    assert isinstance(read_arguments("pm", {**COMPLETE, "tasks": None}).reply, Complete)


def test_the_inbox_session_page_shows_the_token_usage(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from orchestrator.web import WebConfig, create_app
    from tests.web_support import BASE, TOKEN

    view = _start(db_url, stub, tmp_path)
    app = create_app(WebConfig(db=db_url, token=TOKEN))
    with TestClient(app, base_url=BASE) as client:
        page = client.get(f"/sessions/{view['session_id']}?token={TOKEN}")
        assert page.status_code == 200
        assert (
            "tokens: 600 (480 in, 120 out) in 4 model calls; developer-1 150, pm 450" in page.text
        )
        api = client.get(
            f"/api/sessions/{view['session_id']}", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert api.json()["usage"]["total_tokens"] == 600


def test_json_schema_mode_falls_back_to_json_object_where_the_server_wants_it(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    # what llama-cpp-python's server says to a json_schema response format
    refusal = "('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"
    stub.queue(error(400, message=refusal))
    stub.queue(text(json.dumps(QUESTION)), text(json.dumps(PLAN)), text(json.dumps(DONE)))
    stub.queue(text(json.dumps(COMPLETE)))
    view = _start(db_url, stub, tmp_path, reply_mode="json_schema")
    assert view["status"] == "completed", view
    assert stub.requests[0]["response_format"]["type"] == "json_schema"
    retried = stub.requests[1]["response_format"]
    assert retried["type"] == "json_object"
    assert retried["schema"]["properties"]["status"]["enum"][0] == "NEEDS_CLARIFICATION"
    assert all(r["response_format"]["type"] == "json_object" for r in stub.requests[1:])


def test_ollama_through_langchain_ollama(db_url: str, stub: Stub, tmp_path: Path) -> None:
    view = dict(
        _sessions(db_url).start(
            "Add a CSV export",
            models="ollama:stub-model",
            workdir=tmp_path / "ws",
            model_options={"base_url": stub.root, "max_output_tokens": 99},
        )
    )
    assert view["status"] == "completed", view
    first = stub.requests[0]
    assert first["model"] == "stub-model"
    assert first["options"]["num_predict"] == 99
    assert [t["function"]["name"] for t in first["tools"]] == ["submit_reply"]
    assert view["usage"]["total_tokens"] == 600


def test_ollama_json_schema_mode_sends_the_schema_as_format(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    stub.queue(text(json.dumps(QUESTION)), text(json.dumps(PLAN)), text(json.dumps(DONE)))
    stub.queue(text(json.dumps(COMPLETE)))
    view = dict(
        _sessions(db_url).start(
            "Add a CSV export",
            models="ollama:stub-model",
            workdir=tmp_path / "ws",
            model_options={"base_url": stub.root, "reply_mode": "json_schema"},
        )
    )
    assert view["status"] == "completed", view
    assert stub.requests[0]["format"]["properties"]["status"]["enum"][1] == "PLANNED"


def test_one_run_with_base_url_completes_a_session_with_a_question(
    db_url: str, stub: Stub, tmp_path: Path
) -> None:
    """`orchestrator run "…" --model openai:NAME --base-url URL`, the question answered
    at the prompt (a line on stdin): one command, completed."""
    env = {**os.environ, "ORCHESTRATOR_DB": db_url}
    done = forkserver.run(
        [sys.executable, "-m", "orchestrator", "run", "Add a CSV export"]
        + ["--model", "openai:stub-model", "--base-url", stub.url, "--ui", "terminal"]
        + ["--workdir", str(tmp_path / "ws"), "--json"],
        input="2\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed" and view["questions_surfaced"] == 1
    assert view["orchestrator_state"]["user_clarification_response"] == "S3 bucket"
    assert "pm asks: Which storage should the export use?" in done.stderr


def test_a_bad_base_url_in_the_environment_is_named_and_masked(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.errors import ConfigError

    monkeypatch.setenv("ORCHESTRATOR_BASE_URL", "ftp://me:hunter2@127.0.0.1/v1")
    with pytest.raises(ConfigError) as raised:
        Sessions(db_url).start("Add a CSV export", models="openai:x", workdir=tmp_path / "ws")
    assert "$ORCHESTRATOR_BASE_URL: expected an http:// or https:// URL" in raised.value.message
    assert "hunter2" not in raised.value.message
    assert Sessions(db_url).list() == []


def test_a_provider_error_quoting_the_api_key_is_kept_and_shown_masked(
    db_url: str, stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider that quotes the key in its error (\"Incorrect API key provided: …\") had
    it stored in the session's last_error and log, and printed."""
    key = "sk-test-0123456789abcdefghijklmnop"
    other = "not-key-shaped-but-secret-42"
    with monkeypatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", key)
        patch.setenv("MY_PROXY_TOKEN", other)
        stub.queue(*[error(401, message=f"Incorrect API key provided: {key}; proxy {other}")] * 3)
        session_id, last_error = _stalled(db_url, stub, tmp_path)
    assert "Incorrect API key provided: ***" in last_error, last_error
    everything = json.dumps([Sessions(db_url).status(session_id), Sessions(db_url).log(session_id)])
    assert key not in everything and other not in everything
    assert key[:12] not in everything  # not even its start
