"""A chat request's bulk sent as the JSON it already is, past the openai client's
per-call parameter walk.

Before a chat-completions request leaves, the openai package walks every parameter
against its typed-dict definitions (`maybe_transform`), to rename aliased keys and format
dates and files. A chat request's messages and tools, as langchain-openai builds them, are
plain JSON with none of those: the walk returns what it was given, at about 0.7 ms of CPU
a call for a developer's request (two messages, six tools), held under the GIL. A hundred
developers starting at once pay it one after another (docs/parallel.md).

The client's public `extra_body` is merged into the request's JSON after that walk, so
the plain bulk goes there, with an empty list left in its own place: the body sent is the
same, byte for byte, key order included (tests/test_openai_body.py). What is not plain
JSON (a pydantic model, a generator, bytes) stays on the typed path, and so does a key
the caller's own `extra_body` already sets. The same move is made by other agent
runtimes for the same cost (openai/openai-python pull request 3616 asks for it upstream).
"""

from __future__ import annotations

from typing import Any

__all__ = ["send_plain_bulk"]

_BULK = ("messages", "tools")
_SCALARS = (str, int, float, bool, type(None))


def send_plain_bulk(model: Any) -> Any:
    """`model` with its chat-completions client sending plain bulk as it is; a model
    without an openai client (another provider, a test double) is returned unchanged."""
    found = {name: getattr(model, name, None) for name in ("client", "async_client")}
    if not any(found.values()):
        return model
    try:
        from openai.resources.chat.completions import AsyncCompletions, Completions
    except ImportError:  # another provider's `client`, without the openai package installed
        return model
    for name, client in found.items():
        if isinstance(client, Completions | AsyncCompletions):
            try:
                setattr(model, name, _PlainBulk(client))
            except (AttributeError, TypeError, ValueError):  # a model class that refuses it
                return model  # sends as the client does, walk and all
    return model


class _PlainBulk:
    """openai's chat-completions resource (or its raw-response view) whose `create`
    moves the plain bulk into `extra_body`; everything else is the resource's own."""

    def __init__(self, resource: Any) -> None:
        self._resource = resource

    @property
    def with_raw_response(self) -> _PlainBulk:
        return _PlainBulk(self._resource.with_raw_response)

    def create(self, **params: Any) -> Any:
        return self._resource.create(**plain_bulk(params))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)


def plain_bulk(params: dict[str, Any]) -> dict[str, Any]:
    """`params` for `create`, with plain-JSON messages and tools moved into `extra_body`
    and an empty list in their place (which keeps each key where the body has it)."""
    extra = params.get("extra_body") or {}
    moved = {
        key: params[key]
        for key in _BULK
        if key not in extra and isinstance(params.get(key), list) and _plain(params[key])
    }
    if not moved:
        return params
    return {**params, **{key: [] for key in moved}, "extra_body": {**moved, **extra}}


def _plain(value: Any) -> bool:
    """Is `value` JSON as it is: dicts with string keys, lists, strings, numbers, None?
    (Walked with a list, not recursion: about 40 microseconds for a developer's request.)"""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind not in _SCALARS:
            return False
    return True
