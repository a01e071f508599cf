"""The slow-body attack of issue 45 against `orchestrator serve` (a process of its own, on
loopback): ATTACKERS connections each declare a 200,000-byte body and send it one byte at
a time, and as many again send half a request's headers and then nothing, while a client
times normal requests (`GET /api/sessions` with the token). Prints the normal requests'
latency (median and worst) with and without the attack, and how many attack connections
the server still held after the request deadline. Checks nothing; exits 0.

  .venv/bin/python benchmarks/slow_bodies.py [--attackers N]   # default 200

Target (issue 45): a normal request is answered in under a second during the attack.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789"
TARGET_SECONDS = 1.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(db: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ORCHESTRATOR_WEB_TOKEN": TOKEN}
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "serve", "--port", str(port), "--db", db],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    for _ in range(300):
        try:
            normal_request(port)
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the server did not start")


def normal_request(port: int) -> float:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
        json.loads(response.read())
    return time.perf_counter() - started


def latencies(port: int, count: int) -> list[float]:
    return [normal_request(port) for _ in range(count)]


def attack(port: int, count: int, stop: threading.Event) -> list[socket.socket]:
    """`count` slow bodies and `count` slow headers, kept trickling until `stop`."""
    socks: list[socket.socket] = []
    for n in range(count):
        body = socket.create_connection(("127.0.0.1", port), timeout=30)
        path = "/q/abc" if n % 2 else "/sessions/s1/answer"
        body.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + b"Content-Type: application/x-www-form-urlencoded\r\n"
            + b"Content-Length: 200000\r\n\r\nc"
        )
        head = socket.create_connection(("127.0.0.1", port), timeout=30)
        head.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        socks += [body, head]

    def trickle() -> None:
        while not stop.wait(1.0):
            for sock in socks:
                with contextlib.suppress(OSError):  # closed by the server: what we want
                    sock.send(b"a")

    threading.Thread(target=trickle, daemon=True).start()
    return socks


def still_open(socks: list[socket.socket]) -> int:
    """How many of `socks` the server has not closed (a read that would block)."""
    count = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            while sock.recv(65536):
                pass
        except BlockingIOError:
            count += 1
        except OSError:
            pass
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start_server(str(Path(tmp) / "bench.db"), port)
        try:
            quiet = latencies(port, 20)
            stop = threading.Event()
            socks = attack(port, args.attackers, stop)
            during = latencies(port, 20)
            time.sleep(12)  # past the 10 s request deadline
            after = latencies(port, 20)
            held = still_open(socks)
            stop.set()
            for sock in socks:
                sock.close()
        finally:
            server.terminate()
            _out, err = server.communicate(timeout=30)
    tracebacks = err.decode(errors="replace").count("Traceback")

    def ms(values: list[float]) -> str:
        return (
            f"median {statistics.median(values) * 1000:.1f} ms, worst {max(values) * 1000:.1f} ms"
        )

    print(f"normal requests, no attack:            {ms(quiet)}")
    print(
        f"during the attack ({args.attackers} slow bodies + {args.attackers} slow headers): "
        f"{ms(during)}"
    )
    print(f"12 s into the attack:                  {ms(after)}")
    print(f"attack connections still open after 12 s: {held} of {len(socks)}")
    print(f"tracebacks in the server's log: {tracebacks}")
    worst = max(during + after)
    met = "met" if worst < TARGET_SECONDS else "NOT met"
    print(f"target: every normal request under {TARGET_SECONDS:.0f} s during the attack: {met}")


if __name__ == "__main__":
    main()
