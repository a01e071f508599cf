"""The client libraries' own floor for a hundred developers starting at once (issue 48).

    .venv/bin/python benchmarks/client_floor.py              # 3 runs of each
    .venv/bin/python benchmarks/client_floor.py --repeat 5

The 100-developer row of `latency.py` is judged on how long the developers' requests take
to leave. This prints what the chat client alone needs for the same hundred calls, with
no orchestrator, LangGraph or store in the process: a developer's real request (its
messages and tools, captured from an `orchestrator run`) sent 100 times at once through
langchain-openai to the same OpenAI-compatible stub, from 100 threads (as the developers'
calls are made) and from one asyncio event loop (`ainvoke`). A whole `run` of 100
developers at `--max-parallel 100` is measured in turn beside them, so all three share
the machine's state. Information, not a target.

Two figures each: `window`, from the moment the calls may start (the child's start of the
hundred; in a run, the PM's plan answered) to the last request's arrival, and `spread`,
from the first arrival to the last. Only the window compares threads with an event loop:
on a loop each call does its part up to its first wait before the first request leaves
(each task runs until it first waits), which its spread leaves out (here the loop's spread
read about a fifth under the threads', its window about a tenth).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import latency  # noqa: E402
import openai_stub  # noqa: E402

CALLS = 100
LATENCY = 1.0


def _calls(mode: str, url: str, body_file: str, calls: int) -> None:
    """The child process: `calls` chat calls at once, from threads or one event loop."""
    import asyncio

    from langchain_core.messages import HumanMessage, SystemMessage
    from orchestrator.agents.models import init_model

    from orchestrator.model_options import ModelOptions

    body = json.loads(Path(body_file).read_text())
    chat = init_model("openai:stub", options=ModelOptions(base_url=url))
    bound = chat.bind(tools=body["tools"])
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    messages = [SystemMessage(system), HumanMessage(user)]
    if mode == "threads":
        bound.invoke(messages)  # imports and the connection pool, not counted
        workers = [threading.Thread(target=bound.invoke, args=(messages,)) for _ in range(calls)]
        print(f"start {time.monotonic()!r}", flush=True)
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return

    async def at_once() -> None:
        await bound.ainvoke(messages)  # on this loop: its client is bound to it
        print(f"start {time.monotonic()!r}", flush=True)
        await asyncio.gather(*(bound.ainvoke(messages) for _ in range(calls)))

    asyncio.run(at_once())


def _developer_body(stub: openai_stub.Stub, tmp: Path, env: dict[str, str]) -> Path:
    latency.one_session(stub, tmp, env, 3, 0.0, None)
    for request in stub.requests:
        messages = request.get("messages") or []
        if len(messages) > 1 and "Your task (#" in str(messages[1].get("content")):
            path = tmp / "developer-request.json"
            path.write_text(json.dumps(request))
            return path
    raise RuntimeError("no developer request was captured")


def _timing(stub: openai_stub.Stub, calls: int, start: float) -> tuple[float, float]:
    """(window, spread) of the last `calls` requests: from `start` to the last arrival,
    and from the first arrival to the last (time.monotonic is one clock for every
    process of the machine)."""
    arrived = sorted(a for a, _ in stub.spans)[-calls:]
    return float(arrived[-1] - start), float(arrived[-1] - arrived[0])


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "URL", "BODY", "CALLS"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args(argv)
    if args.child:
        mode, url, body, calls = args.child
        _calls(mode, url, body, int(calls))
        return 0
    with tempfile.TemporaryDirectory(prefix="orch-bench-floor-") as tmp_name:
        tmp = Path(tmp_name)
        env = latency._env(tmp)
        os.environ["HOME"] = env["HOME"]
        os.environ.pop("OPENAI_API_KEY", None)
        print(f"load average at start: {os.getloadavg()}")
        timings: dict[str, list[tuple[float, float]]] = {
            "threads": [],
            "event loop": [],
            "orchestrator run": [],
        }
        with openai_stub.serve() as stub:
            body = _developer_body(stub, tmp, env)
            done = openai_stub.text('{"status": "DONE", "summary": "done"}')
            for _ in range(max(1, args.repeat)):
                for mode in ("threads", "loop"):
                    stub.responder = lambda _request: openai_stub.hang(LATENCY, done)
                    stub.spans = []
                    command = [sys.executable, __file__, "--child", mode, stub.url, str(body),
                               str(CALLS)]  # fmt: skip
                    child = subprocess.run(
                        command, env=env, cwd=ROOT, check=True, capture_output=True, text=True
                    )
                    start = float(child.stdout.split("start ", 1)[1].split()[0])
                    label = "threads" if mode == "threads" else "event loop"
                    timings[label].append(_timing(stub, CALLS, start))
                latency.one_session(stub, tmp, env, CALLS, LATENCY, CALLS)
                plan, *developers, _review = sorted(stub.spans)
                stub.spans = developers
                timings["orchestrator run"].append(_timing(stub, CALLS, plan[1]))
        print(f"\n== {CALLS} chat calls at once: when the requests reached the stub")
        print(f"{'made from':>18} {'window, each run':>30} {'median':>8} {'spread':>8}")
        for label, values in timings.items():
            each = ", ".join(f"{w:.2f}" for w, _ in values)
            window = statistics.median(w for w, _ in values)
            spread = statistics.median(s for _, s in values)
            print(f"{label:>18} {each:>30} {window:>7.2f}s {spread:>7.2f}s")
        print("(window: from the calls' start, in a run the PM's plan answered, to the last "
              "request's arrival; spread: first arrival to last. threads and event loop: "
              "langchain-openai alone, a developer's real request; orchestrator run: a whole "
              "session of 100 developers at --max-parallel 100)")  # fmt: skip
        print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
