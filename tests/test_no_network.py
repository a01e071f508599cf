"""The guard in tests/conftest.py: a test that would reach a real provider (any host that
is not this machine) is refused at the socket and fails, whatever the HTTP client, even
where the code under test catches the error; this machine's servers stay reachable; a test
marked `real_provider` is let through."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def guard() -> Iterator[object]:
    """The process's guard; what a test here tried to reach on purpose is forgotten after
    it (so that this test itself passes)."""
    found = socket._orchestrator_test_guard  # type: ignore[attr-defined]
    before = len(found.reached)
    yield found
    del found.reached[before:]


def test_a_chat_model_of_a_hosted_provider_is_refused(guard: object) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o-mini", api_key="sk-not-a-key", max_retries=0, timeout=5)
    with pytest.raises(Exception) as caught:
        model.invoke("hello")
    assert "api.openai.com:443" in guard.reached  # type: ignore[attr-defined]
    seen, chain = [], caught.value
    while chain is not None:
        seen.append(str(chain))
        chain = chain.__cause__ or chain.__context__
    assert any("tests never call a real provider" in text for text in seen), seen


def test_httpx_and_raw_sockets_to_a_public_address_are_refused(guard: object) -> None:
    import httpx

    with pytest.raises(httpx.ConnectError, match="not this machine"):
        httpx.get("https://api.anthropic.com/v1/messages")
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError, match="not this machine"):
        sock.connect(("8.8.8.8", 443))
    assert {"api.anthropic.com:443", "8.8.8.8:443"} <= set(guard.reached)  # type: ignore[attr-defined]


def test_this_machines_servers_stay_reachable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        accepted = threading.Thread(target=lambda: server.accept()[0].close())
        accepted.start()
        with socket.create_connection(("localhost", port), timeout=5):
            pass
        accepted.join(5)


def test_a_test_that_swallows_the_refusal_still_fails(pytester: pytest.Pytester) -> None:
    """The guard keeps what was refused and fails the test at its end: code that turns
    a connection error into a stalled session cannot hide it. `real_provider` lets a
    test out."""
    from tests.conftest import ROOT

    pytester.makeconftest(
        f"import sys\nsys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]\n"
        "from tests.conftest import no_real_provider, pytest_configure  # noqa: F401\n"
    )
    pytester.makepyfile(
        """
        import socket
        import pytest

        def test_swallowed():
            try:
                socket.create_connection(("api.openai.com", 443), timeout=1)
            except OSError:
                pass  # as a backend that records a failed call would

        @pytest.mark.real_provider
        def test_let_out():
            assert socket._orchestrator_test_guard.host_ok("api.openai.com")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    # test_swallowed's own body passed; its teardown is the error that fails the run
    result.assert_outcomes(passed=2, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*this test tried to reach api.openai.com:443*"])
