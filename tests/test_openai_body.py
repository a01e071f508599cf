"""A chat request's messages and tools go to the server as the plain JSON they are, past
the openai client's per-call parameter walk (orchestrator.agents.openai_body), and the
body on the wire is the same, byte for byte, as the client's own."""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx2
import openai_stub
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from orchestrator.agents import openai_body
from orchestrator.agents.models import init_model
from pydantic import BaseModel

from orchestrator.model_options import ModelOptions


@tool
def read_file(path: str, start: int = 0) -> str:
    """Read a file of the workspace."""
    return path


@tool
def write_files(files: list[dict[str, str]], note: str | None = None) -> str:
    """Write files: each {"path": ..., "text": ...}."""
    return note or ""


CONVERSATION = [
    SystemMessage("You are a developer. Reply with the submit tool."),
    HumanMessage([{"type": "text", "text": "Your task (#1): the reports page ✓"}]),
    AIMessage(
        "",
        tool_calls=[{"id": "call_1", "name": "read_file", "args": {"path": "a.py", "start": 2}}],
    ),
    ToolMessage("print('hi')\n", tool_call_id="call_1", name="read_file"),
]


def _client_and_bodies() -> tuple[httpx2.Client, list[bytes]]:
    bodies: list[bytes] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(request.content)
        return httpx2.Response(200, json=openai_stub.text("done").body)

    return httpx2.Client(transport=httpx2.MockTransport(answer)), bodies


def _chat(plain: bool, **extra: Any) -> tuple[Any, list[bytes]]:
    from langchain_openai import ChatOpenAI

    client, bodies = _client_and_bodies()
    model = ChatOpenAI(
        model="stub", base_url="http://stub.test/v1", api_key="not-needed",  # type: ignore[arg-type]
        http_client=client, max_retries=0, **extra,
    )  # fmt: skip
    if plain:
        openai_body.send_plain_bulk(model)
    return model, bodies


@pytest.mark.parametrize("extra_body", [None, {"max_tokens": 7, "top_k": 3}])
def test_the_body_sent_is_the_clients_own_byte_for_byte(extra_body: Any) -> None:
    sent = []
    for plain in (False, True):
        model, bodies = _chat(plain, extra_body=extra_body)
        model.bind_tools([read_file, write_files], tool_choice="required").invoke(CONVERSATION)
        model.invoke(CONVERSATION[:2])  # no tools: only the messages move
        sent.append(bodies)
    assert len(sent[1]) == 2
    assert sent[1] == sent[0]  # key order included
    body = json.loads(sent[1][0])
    assert body["tools"][1]["function"]["name"] == "write_files"
    assert body["messages"][3] == {
        "content": "print('hi')\n", "role": "tool", "tool_call_id": "call_1",
    }  # fmt: skip
    if extra_body:
        assert body["max_tokens"] == 7 and body["top_k"] == 3


def test_the_client_walks_none_of_the_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    import openai.resources.chat.completions.completions as completions

    walked: list[dict[str, Any]] = []
    walk = completions.maybe_transform

    def recording(data: Any, expected: Any) -> Any:
        walked.append(data)
        return walk(data, expected)

    monkeypatch.setattr(completions, "maybe_transform", recording)
    with openai_stub.serve() as stub:
        stub.responder = lambda _request: openai_stub.text("done")
        model = init_model("openai:stub", ModelOptions(base_url=stub.url))
        model.bind_tools([read_file]).invoke(CONVERSATION)
        assert stub.requests[-1]["messages"][0]["content"].startswith("You are a developer")
        assert stub.requests[-1]["tools"][0]["function"]["name"] == "read_file"
    assert [(body["messages"], body["tools"]) for body in walked] == [([], [])]


class _Part(BaseModel):
    type: str = "text"
    text: str = "hi"


def test_what_is_not_plain_json_stays_on_the_typed_path() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    typed = {"messages": [{"role": "user", "content": [_Part()]}], "tools": tools}
    assert openai_body.plain_bulk(typed) == {
        "messages": typed["messages"], "tools": [], "extra_body": {"tools": tools},
    }  # fmt: skip
    generated = {"messages": (m for m in [{"role": "user", "content": "x"}])}
    assert openai_body.plain_bulk(generated) is generated
    assert openai_body.plain_bulk({"messages": [{"role": "user", "content": b"x"}]})[
        "messages"
    ] == [{"role": "user", "content": b"x"}]
    # A key the caller's own extra_body sets is the caller's.
    mine = {"messages": [{"role": "user", "content": "x"}], "extra_body": {"messages": ["m"]}}
    assert openai_body.plain_bulk(mine) is mine


def test_another_provider_or_a_test_double_is_left_as_it_is() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    fake = FakeListChatModel(responses=["x"])
    assert openai_body.send_plain_bulk(fake) is fake
    assert not hasattr(fake, "client")


def test_a_model_that_refuses_the_change_or_an_install_without_openai_is_left_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import openai

    resource = openai.OpenAI(api_key="not-needed", base_url="http://stub.test/v1").chat.completions

    class Frozen:
        client = resource

        def __setattr__(self, name: str, value: Any) -> None:
            raise TypeError("frozen")

    frozen = Frozen()
    assert openai_body.send_plain_bulk(frozen) is frozen
    assert frozen.client is resource

    class Other:  # another provider's client, and no openai package to compare it with
        client = object()

    monkeypatch.setitem(sys.modules, "openai.resources.chat.completions", None)
    other = Other()
    assert openai_body.send_plain_bulk(other) is other
