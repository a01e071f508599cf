"""An OpenAI-compatible chat-completions server on 127.0.0.1, for tests: the agents reach it
through the project's `openai` provider, i.e. langchain-openai's and the openai package's
real HTTP client, exactly as they reach a llama.cpp, vLLM or LM Studio server.

Replies are queued (`stub.queue(...)`) and served in order; once the queue is empty a
`responder` (request -> reply) answers, by default one that plays a whole session: the PM
asks one question, plans one task once answered, and completes once it is done; developers
report DONE. Every request body is kept (`stub.requests`) for the test to check.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Stub", "Reply", "Team", "TeamApart", "tool_call", "text", "error", "hang", "serve",
    "serve_apart", "play_session",
]  # fmt: skip

_ids = itertools.count(1)
USAGE = (120, 30)  # prompt, completion tokens of every reply unless told otherwise


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (a reply that never ends: a long one)


def _completion(
    message: dict[str, Any], finish: str, usage: tuple[int, int] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
    return body


def tool_call(
    arguments: dict[str, Any] | str,
    *,
    name: str = "submit_reply",
    more: list[tuple[str, dict[str, Any] | str]] = (),  # type: ignore[assignment]
    usage: tuple[int, int] | None = USAGE,
    finish: str = "tool_calls",
) -> Reply:
    """An answer with tool calls: `name(arguments)` and then any `more` (name, arguments)."""
    calls = []
    for called, args in [(name, arguments), *more]:
        calls.append(
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {
                    "name": called,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return Reply(body=_completion(message, finish, usage))


def text(content: str, *, usage: tuple[int, int] | None = USAGE, finish: str = "stop") -> Reply:
    """An answer in text (the model ignored the tools, or was asked for JSON text)."""
    return Reply(body=_completion({"role": "assistant", "content": content}, finish, usage))


def error(status: int, *, retry_after: str | None = None, message: str = "stub error") -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = {"error": {"message": message, "type": "server_error", "code": status}}
    return Reply(status=status, body=body, headers=headers)


def hang(seconds: float, then: Reply | None = None) -> Reply:
    """A reply that takes `seconds` to come (the model generating forever)."""
    reply = then or text('{"status": "COMPLETE", "summary": "late"}')
    return Reply(reply.status, reply.body, reply.headers, delay=seconds)


class Stub:
    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self.responder = responder or play_session
        self.url = ""  # the OpenAI-compatible base URL (…/v1)
        self.root = ""  # the server itself (Ollama's base URL)
        self.in_flight = 0  # requests being answered now
        self.peak = 0  # the most ever answered at once: the agents' parallelism
        self.spans: list[tuple[float, float]] = []  # (arrived, answered), time.monotonic()
        self.changed = threading.Condition(self._lock)  # notified when in_flight moves

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Count one request in flight for as long as the block runs."""
        arrived = time.monotonic()
        with self.changed:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.changed.notify_all()
        try:
            yield
        finally:
            with self.changed:
                self.in_flight -= 1
                self.spans.append((arrived, time.monotonic()))
                self.changed.notify_all()

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.pop(0)
        return self.responder(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # As a real server's: the standard library's backlog of 5 drops the connections of a
    # hundred agents calling at once, and each dropped one is retried by the client's
    # TCP a second later (a second added to a call, and to a benchmark's wall).
    request_queue_size = 1024


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            with stub.answering():
                self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/api/chat":  # Ollama's own API (langchain-ollama)
                reply = stub.next_reply(request)
                if reply.delay:
                    time.sleep(reply.delay)
                self._send(_as_ollama(reply), ndjson=True)
                return
            if not self.path.endswith("/chat/completions"):
                self._send(Reply(404, {"error": {"message": f"no route {self.path}"}}))
                return
            reply = stub.next_reply(request)
            if reply.delay:
                time.sleep(reply.delay)
            self._send(reply)

        def _send(self, reply: Reply, *, ndjson: bool = False) -> None:
            if ndjson and reply.status == 200:
                data = b"".join(json.dumps(line).encode() + b"\n" for line in reply.body or [])
            else:
                data = json.dumps(reply.body or {}).encode()
            try:
                self.send_response(reply.status)
                self.send_header(
                    "Content-Type", "application/x-ndjson" if ndjson else "application/json"
                )
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout)

    return Handler


def _as_ollama(reply: Reply) -> Reply:
    """An OpenAI-shaped reply as Ollama's /api/chat stream: the message, then `done`."""
    if reply.status != 200 or not reply.body:
        return Reply(reply.status, {"error": str((reply.body or {}).get("error"))}, reply.headers)
    choice = reply.body["choices"][0]
    said = choice["message"]
    message: dict[str, Any] = {"role": "assistant", "content": said.get("content") or ""}
    if said.get("tool_calls"):
        message["tool_calls"] = [
            {
                "function": {
                    "name": call["function"]["name"],
                    "arguments": json.loads(call["function"]["arguments"]),
                }
            }
            for call in said["tool_calls"]
        ]
    usage = reply.body.get("usage") or {}
    stamp = {"model": "stub", "created_at": "2026-11-23T00:00:00Z"}
    lines = [
        {**stamp, "message": message, "done": False},
        {
            **stamp,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "length" if choice["finish_reason"] == "length" else "stop",
            "prompt_eval_count": usage.get("prompt_tokens", 0),
            "eval_count": usage.get("completion_tokens", 0),
        },
    ]
    return Reply(200, lines, {})  # type: ignore[arg-type]


@contextmanager
def serve(stub: Stub | None = None) -> Iterator[Stub]:
    """Run `stub` on a free port of 127.0.0.1 for the duration of the block."""
    chosen = stub or Stub()
    server = _Server(("127.0.0.1", 0), _handler(chosen))
    chosen.root = f"http://127.0.0.1:{server.server_address[1]}"
    chosen.url = chosen.root + "/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield chosen
    finally:
        server.shutdown()
        server.server_close()
        from orchestrator.agents.llm import forget_servers

        forget_servers()  # the next stub may get this port: it is another server


@contextmanager
def serve_apart() -> Iterator[TeamApart]:
    """A stub playing `Team`, served by a process of its own (for benchmarks): its
    threads, a hundred of them when a hundred agents call, then never share an interpreter
    lock with the process that times the run, so they never delay its clock. Monotonic
    times are the machine's, the same in both processes."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # no copy of the caller's threads
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve_team, args=(theirs,), daemon=True)
    process.start()
    try:
        yield TeamApart(ours, *ours.recv())
    finally:
        with contextlib.suppress(OSError):  # gone already: what went wrong is raised
            ours.send(("stop",))
        process.join(10)
        if process.is_alive():
            process.kill()


class TeamApart:
    """The stub of `serve_apart`, seen from the process that started it: `team` sets its
    Team (and starts its count afresh), `peak` and `spans` read what it counted since."""

    def __init__(self, conn: Any, url: str, root: str) -> None:
        self._conn, self.url, self.root = conn, url, root

    def _ask(self, *message: Any) -> Any:
        self._conn.send(message)
        return self._conn.recv()

    def team(self, tasks: int, **options: Any) -> None:
        self._ask("team", tasks, options)

    @property
    def peak(self) -> int:
        return int(self._ask("peak"))

    @property
    def spans(self) -> list[tuple[float, float]]:
        return list(self._ask("spans"))


def _serve_team(conn: Any) -> None:
    with serve() as stub:
        conn.send((stub.url, stub.root))
        while (message := conn.recv())[0] != "stop":
            if message[0] == "team":
                Team(stub, message[1], **message[2])
                with stub.changed:
                    stub.peak, stub.spans = 0, []
                conn.send(None)
            else:
                with stub.changed:
                    conn.send(getattr(stub, message[0]))


# -- a whole session ----------------------------------------------------------------------

QUESTION = {
    "status": "NEEDS_CLARIFICATION",
    "question": "Which storage should the export use?",
    "kind": "single_select",
    "options": [{"label": "CSV file"}, {"label": "S3 bucket"}],
    "reason": "Both are viable and the choice changes the code",
    "default": "CSV file",
    "uncertainty": 90,
}


def _said(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.get("messages", []))


def play_session(request: dict[str, Any]) -> Reply:
    """The PM asks, plans once answered, completes once the task is done; developers
    finish their task. Every reply through the submit_reply tool."""
    messages = request.get("messages", [])
    system = str(messages[0].get("content") or "") if messages else ""
    last = str(messages[-1].get("content") or "") if messages else ""
    if "project manager" not in system:
        return tool_call({"status": "DONE", "summary": "exported the report"})
    if "[done]" in last:
        return tool_call({"status": "COMPLETE", "summary": "the export ships"})
    if "The user answered" in _said(request) or "The user declined" in _said(request):
        return tool_call({"status": "PLANNED", "tasks": [{"title": "Write the export"}]})
    return tool_call(QUESTION)


class Team:
    """A responder for a team of `tasks` developers: the PM plans `tasks` tasks (after
    asking QUESTION first, with `ask`), developers report DONE, the PM completes once
    they are done. Every reply comes `latency` seconds after its request (a model's
    time), and with `together` a developer's reply waits until that many requests were
    in flight at once (or `patience` seconds passed: a guard, never a measure), so a test
    sees the parallelism without timing anything. `stub.peak` counts it."""

    def __init__(
        self,
        stub: Stub,
        tasks: int,
        *,
        latency: float = 0.0,
        together: int = 0,
        ask: bool = False,
        patience: float = 60.0,
    ) -> None:
        self.stub, self.tasks, self.latency = stub, tasks, latency
        self.together, self.ask, self.patience = together, ask, patience
        stub.responder = self

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        system = str(messages[0].get("content") or "") if messages else ""
        last = str(messages[-1].get("content") or "") if messages else ""
        if "project manager" not in system:
            if self.together:
                with self.stub.changed:
                    self.stub.changed.wait_for(
                        lambda: self.stub.peak >= self.together, timeout=self.patience
                    )
            reply = tool_call({"status": "DONE", "summary": "done"})
        elif "[done]" in last:
            reply = tool_call({"status": "COMPLETE", "summary": "all done"})
        elif self.ask and "The user answered" not in _said(request):
            reply = tool_call(QUESTION)
        else:
            tasks = [{"title": f"Task {n}"} for n in range(1, self.tasks + 1)]
            reply = tool_call({"status": "PLANNED", "tasks": tasks})
        reply.delay = self.latency
        return reply
