"""What orchestrator.web.protocol takes from uvicorn's private API, held still.

`DeadlineProtocol` builds uvicorn's private `H11Protocol` as uvicorn's own server does and
forwards asyncio's protocol calls to it (composition, nothing overridden). uvicorn does not
promise that API, so pyproject.toml pins uvicorn below its next minor and these tests fail
when an upgrade moves what we use: the constructor's parameters, the methods forwarded, and
the keywords uvicorn's server builds `Config(http=...)`'s class with.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import tomllib
from typing import Any

from tests.conftest import ROOT

# The asyncio.Protocol calls DeadlineProtocol forwards to H11Protocol.
FORWARDED = (
    "connection_made",
    "data_received",
    "eof_received",
    "connection_lost",
    "pause_writing",
    "resume_writing",
)


async def _app(scope: Any, receive: Any, send: Any) -> None:  # never called
    raise AssertionError


def test_h11_protocol_takes_what_deadline_protocol_gives_it() -> None:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    parameters = list(inspect.signature(H11Protocol.__init__).parameters)
    assert parameters[:5] == ["self", "config", "server_state", "app_state", "_loop"], parameters
    for name in FORWARDED:
        method = getattr(H11Protocol, name)
        assert method is not getattr(asyncio.Protocol, name, None), f"{name}: not its own"
        assert len(inspect.signature(method).parameters) == (
            1 if name in ("eof_received", "pause_writing", "resume_writing") else 2
        ), name


def test_uvicorn_builds_the_configured_class_with_those_keywords() -> None:
    """uvicorn's server creates each connection's protocol as
    `config.http_protocol_class(config=, server_state=, app_state=, _loop=)`; ours, built
    the same way, wraps an H11Protocol."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.server import Server, ServerState

    from orchestrator.web.protocol import DeadlineProtocol, server_config

    source = inspect.getsource(Server.startup)
    call = re.search(r"config\.http_protocol_class\((.*?)\)", source, re.S)
    assert call is not None, "uvicorn no longer builds config.http_protocol_class"
    keywords = re.findall(r"(\w+)=", call.group(1))
    assert keywords == ["config", "server_state", "app_state", "_loop"], keywords

    config = server_config(_app, connections=4)
    config.load()
    assert issubclass(config.http_protocol_class, DeadlineProtocol)
    loop = asyncio.new_event_loop()
    try:
        made = config.http_protocol_class(
            config=config, server_state=ServerState(), app_state={}, _loop=loop
        )
    finally:
        loop.close()
    assert isinstance(made._http, H11Protocol)


def test_uvicorn_is_pinned_below_its_next_minor() -> None:
    """A new minor may move the private API: it is taken on purpose, with these tests."""
    import uvicorn

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [
        spec
        for group in (
            project["optional-dependencies"]["web"],
            project["optional-dependencies"]["dev"],
        )
        for spec in group
        if spec.startswith("uvicorn")
    ]
    assert len(specs) == 2
    for spec in specs:
        ceiling = re.search(r"<\s*(\d+)\.(\d+)", spec)
        assert ceiling is not None, f"{spec}: no upper pin"
        major, minor = (int(n) for n in uvicorn.__version__.split(".")[:2])
        assert (major, minor) < (int(ceiling.group(1)), int(ceiling.group(2))), spec
