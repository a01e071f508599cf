"""Benchmarks of the web inbox (`orchestrator serve`). Prints figures, then a summary of
issue 22's rows (ratio, target, met or not, the command again); always exits 0.

  .venv/bin/python benchmarks/web.py [--quick] [--only-answer | --only-pages | --only-inbox]
                                     [--answers N]

1. answer → first agent call: from the start of `POST /api/sessions/{id}/answer` to the
   moment the background run-on makes its first agent call (server in this process,
   uvicorn on loopback, a real SQLite file); and answer → session completed, as a ratio
   against the same answer given in-process (`Sessions.resume`, returning completed),
   one of each in turn;
2. whole requests to `orchestrator serve` (a process) on 100,000 sessions, a third of them
   waiting: the inbox `GET /` (page 1 and page 1,000 by cursor) and the JSON list
   `GET /api/sessions?status=paused` (page 1 and page 300), against the same on 1 session
   and on 1,000 (benchmarks/web_pages.py);
3. memory (RSS) of an idle `orchestrator serve` process;
4. the inbox's page in this process on 100,000 sessions (one in 3 waiting, one in 100,
   and one in 3 waiting all with one deadline: the ties its order breaks): the store's
   reads of `GET /` (a page of 50 after its cursor, the waiting count capped at 101),
   page 1 and page 1,000 (its cursor reached by walking the pages), as
   ratios against the same reads on a 1-session database, a 50-session one (one full
   page), and 1,000 sessions of the same mix (page 1 and page 10);
5. `orchestrator serve`'s memory while it answers and runs on 1,000 paused sessions (300
   with --quick, N with --answers N, e.g. 10000): RSS after each tenth, and the growth per
   session from the first tenth to the end (flat after warm-up is the target).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc import Row, summary  # noqa: E402
from web_pages import figure_pages  # noqa: E402

TARGET_GROWTH_KIB = 1.0  # serve's RSS growth per answered session after warm-up, at most
TOKEN = "bench-token-0123456789"  # serve asks for at least 16 characters
AUTH = {"Authorization": f"Bearer {TOKEN}"}

SCENARIO = {
    "task": "Add a CSV export",
    "agents": {
        "pm": [
            {
                "status": "NEEDS_CLARIFICATION",
                "question": "Which columns?",
                "kind": "single_select",
                "options": [{"label": "All"}, {"label": "Summary"}],
            },
            {"status": "PLANNED", "tasks": [{"title": "Export endpoint"}]},
            {"status": "COMPLETE", "summary": "done"},
        ],
        "developer": [{"status": "DONE", "summary": "done"}],
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answer_latency(runs: int) -> tuple[list[float], list[float], list[float]]:
    """(answer POST -> the run-on's first agent call, answer POST -> the session completed,
    the same answer given in this process: `Sessions.resume` from the call to its return
    with the session completed) per answer, in seconds, the two ways taken in turn (drift
    hits both alike). Completion through the server is seen on a separate SQLite
    connection polled every half millisecond (the server is not asked, so the polling
    does not load it)."""
    import httpx
    import uvicorn
    from orchestrator.agents.scripted import ScriptedBackend

    from orchestrator.api import Reply, Sessions
    from orchestrator.web import WebConfig, create_app

    tmp = Path(tempfile.mkdtemp())
    db = f"sqlite:///{tmp / 'bench.db'}"
    first_call: dict[str, float] = {}
    respond = ScriptedBackend.respond

    def timed(self: Any, request: Any) -> Any:
        first_call.setdefault(request.session_id, time.perf_counter())
        return respond(self, request)

    def paused(sessions: Any) -> list[str]:
        text = json.dumps(SCENARIO, indent=2)
        return [sessions.start_scenario(text)["session_id"] for _ in range(runs + 1)]

    with Sessions(db) as sessions:
        ids = paused(sessions)
    here = Sessions(f"sqlite:///{tmp / 'inprocess.db'}")
    local = paused(here)
    ScriptedBackend.respond = timed
    port = free_port()
    app = create_app(WebConfig(db=db, token=TOKEN, port=port))
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    times, done, baseline = [], [], []
    watch = sqlite3.connect(tmp / "bench.db")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH) as client:
        for n, (sid, mine) in enumerate(zip(ids, local, strict=True)):
            started = time.perf_counter()
            doc = here.resume(mine, Reply(choices=("All",)))
            resumed = time.perf_counter() - started
            assert doc["status"] == "completed", doc
            started = time.perf_counter()
            client.post(f"/api/sessions/{sid}/answer", json={"answer": "All"}).raise_for_status()
            while sid not in first_call:
                time.sleep(0.0005)
            while _status(watch, sid) != "completed":
                time.sleep(0.0005)
            if n:  # the first of each pays imports and warm-up
                baseline.append(resumed)
                times.append(first_call[sid] - started)
                done.append(time.perf_counter() - started)
    watch.close()
    here.close()
    server.should_exit = True
    thread.join()
    ScriptedBackend.respond = respond
    return times, done, baseline


def _running(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM sessions WHERE status = 'running'").fetchone()[0])


def _status(conn: sqlite3.Connection, session_id: str) -> str:
    (status,) = conn.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return str(status)


def fill(db_path: Path, count: int, waiting_every: int = 3, deadline: float | None = None) -> None:
    """`count` sessions in one transaction: one in `waiting_every` waits for an answer,
    each by its own deadline, or all by `deadline` (the ties the inbox's order breaks)."""
    from sqlalchemy import insert

    from orchestrator.store import open_engine
    from orchestrator.store.schema import sessions, state

    engine = open_engine(f"sqlite:///{db_path}")
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    for n in range(count):
        sid = uuid.uuid4().hex[:12]
        waiting = n % waiting_every == 0
        created = now - timedelta(seconds=count - n)
        rows.append(
            {
                "id": sid,
                "task": f"Task number {n}: add a CSV export to report {n}",
                "status": "paused" if waiting else "completed",
                "created_at": created,
                "updated_at": created,
                "agents": {"kind": "script", "agents": {}},
                "settings": {},
                "tasks": [],
                "round": 1,
                "answers_used": 0,
                "summary": None if waiting else "done",
            }
        )
        states.append(
            {
                "session_id": sid,
                "clarification_used": waiting,
                "clarification_resolved": False,
                "clarification_question": "Which columns?" if waiting else None,
                "question_object": {
                    "question": f"Which columns for report {n}?",
                    "kind": "single_select",
                    "options": [{"label": "All"}, {"label": "Summary"}],
                    "urgency": "medium",
                }
                if waiting
                else None,
                "asked_by": "pm" if waiting else None,
                "asked_at": created if waiting else None,
                "deadline": (deadline or time.time() + 3600 + n) if waiting else None,
                "questions_surfaced": int(waiting),
                "fallbacks_injected": 0,
                "fallback_counts": {},
            }
        )
    with engine.begin() as conn:
        conn.execute(insert(sessions), rows)
        conn.execute(insert(state), states)
    engine.dispose()


def start_server(db: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = free_port()
    # What the server says, read if it does not start; it lives as long as the server.
    log = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "serve", "--port", str(port), "--token", TOKEN]
        + ["--db", db],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/api/sessions?status=running", headers=AUTH).status_code == 200:
                return proc, base
        except httpx.TransportError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    log.seek(0)
    said = log.read().decode(errors="replace")[-2000:]
    raise RuntimeError(f"the server did not start (exit {proc.returncode}):\n{said}")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    quick = "--quick" in sys.argv
    answers = 0
    if "--answers" in sys.argv:
        given = sys.argv[sys.argv.index("--answers") + 1 :][:1]
        answers = int(given[0]) if given and given[0].isdigit() else 0
        if answers < 10:
            print("--answers takes a whole number, at least 10 (e.g. 10000)", file=sys.stderr)
            sys.exit(2)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp())
    home = tmp / "home"
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "share")}
    rows: list[Row] = []
    if "--only-inbox" in sys.argv:
        inbox_pages(tmp, 3 if quick else 7)
        return
    if "--only-pages" in sys.argv:
        summary(figure_pages(sys.modules[__name__], tmp, env, 5 if quick else 15))
        return
    runs = 5 if quick else 20
    times, done, baseline = answer_latency(runs)
    print(
        f"1. answer POST -> first agent call: median {statistics.median(times) * 1000:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms ({len(times)} answers)"
    )
    ratio = statistics.median(done) / statistics.median(baseline)
    print(
        f"   answer POST -> session completed: median {statistics.median(done) * 1000:.1f} ms; "
        f"in-process Sessions.resume: median {statistics.median(baseline) * 1000:.1f} ms; "
        f"ratio {ratio:.2f}x (target <= 2x)"
    )
    rows.append(
        Row(
            "answer POST -> session completed, through `serve`",
            [
                f"{ratio:.2f}x the same answer in-process ({statistics.median(done) * 1000:.1f}"
                f" ms against {statistics.median(baseline) * 1000:.1f} ms)"
            ],
            "<= 2x in-process",
            ratio <= 2,
            "benchmarks/web.py --only-answer",
        )
    )
    if "--only-answer" in sys.argv:
        summary(rows)
        return
    rows += figure_pages(sys.modules[__name__], tmp, env, 5 if quick else 15)
    proc, base = start_server(str(tmp / "idle.db"), env)
    try:
        time.sleep(2)
        print(f"3. idle `orchestrator serve`: RSS {rss_mib(proc.pid):.1f} MiB")
    finally:
        proc.terminate()
        proc.wait()
    inbox_pages(tmp, 3 if quick else 7)
    rows.append(serve_memory(tmp, env, answers or (300 if quick else 1000)))
    summary(rows)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def serve_memory(tmp: Path, env: dict[str, str], count: int) -> Row:
    import httpx

    from orchestrator.api import Sessions

    db = tmp / "answers.db"
    with Sessions(f"sqlite:///{db}") as sessions:
        ids = [
            sessions.start_scenario(ROOT / "examples" / "pause-and-resume.yaml")["session_id"]
            for _ in range(count)
        ]
    proc, base = start_server(str(db), env)
    marks, queued = [], []
    watch = sqlite3.connect(db)
    try:
        with httpx.Client(headers=AUTH, timeout=60) as client:
            for n, session_id in enumerate(ids):
                answered = client.post(
                    f"{base}/api/sessions/{session_id}/answer", json={"answer": "Weekly"}
                )
                assert answered.status_code == 200, answered.text
                if (n + 1) % (count // 10) == 0:
                    time.sleep(1)  # the runs on go on meanwhile
                    marks.append(rss_mib(proc.pid))
                    queued.append(_running(watch))
        for _ in range(600):  # the queue drains
            if not _running(watch):
                break
            time.sleep(0.5)
        drained = rss_mib(proc.pid)
    finally:
        watch.close()
        proc.terminate()
        proc.wait()
    per = (marks[-1] - marks[0]) * 1024 / (count - count // 10)
    print(
        f"5. serve answering {count:,} sessions: RSS {marks[0]:.1f} MiB after {count // 10}, "
        f"{marks[-1]:.1f} MiB after all ({per:.2f} KiB per session after the first tenth), "
        f"{drained:.1f} MiB once every run on ended; each tenth: "
        f"{' '.join(f'{mark:.1f}' for mark in marks)} MiB; answered sessions not yet run on "
        f"at each: {' '.join(map(str, queued))}"
        + (" (the answers came faster than two workers ran them)" if any(queued) else "")
    )
    # Warm-up is not over after the first tenth on 1,000 answers (the second tenth still
    # grows): the target is read on the second half.
    late = (marks[-1] - marks[len(marks) // 2 - 1]) * 1024 / (count - count // 2)
    return Row(
        f"`serve` memory while answering {count:,} sessions",
        [
            f"{late:.2f} KiB per answered session over the second half "
            f"({marks[len(marks) // 2 - 1]:.1f} -> {marks[-1]:.1f} MiB); {per:.2f} KiB after "
            f"the first tenth ({marks[0]:.1f} -> {marks[-1]:.1f} MiB)"
        ],
        f"flat after warm-up: <= {TARGET_GROWTH_KIB:g} KiB per session over the second half "
        "(it was 41)",
        late <= TARGET_GROWTH_KIB,
        f"benchmarks/web.py --answers {count}",
    )


def cursor_of_page(db: Path, number: int, size: int = 50) -> str | None:
    """The cursor that opens page `number` of the inbox, reached by walking its pages."""
    from orchestrator.api import Sessions

    cursor = None
    with Sessions(f"sqlite:///{db}") as sessions:
        for _ in range(number - 1):
            cursor = sessions.inbox.page(limit=size, after=cursor)[1]
            assert cursor is not None, "the inbox has fewer pages"
    return cursor


def inbox_pages(tmp: Path, reps: int) -> None:
    """Row 4: what `GET /` asks of the store (a page of 50, the waiting count capped)."""
    from orchestrator.api import Sessions

    def median_ms(db: Path, cursor: str | None) -> float:
        with Sessions(f"sqlite:///{db}") as sessions:

            def once() -> float:
                started = time.perf_counter()
                sessions.inbox.page(limit=50, after=cursor)
                sessions.inbox.waiting_count(cap=101)
                return time.perf_counter() - started

            once()  # warm
            times = [once() for _ in range(reps)]
        return statistics.median(times) * 1000

    fill(tmp / "one.db", 1)
    fill(tmp / "fifty.db", 50)
    base, full = median_ms(tmp / "one.db", None), median_ms(tmp / "fifty.db", None)
    print(
        f"4. inbox page (50 rows + capped waiting count): 1-session database {base:.2f} ms; "
        f"50-session database (one full page) {full:.2f} ms"
    )
    one_deadline = time.time() + 3600
    for every, deadline in ((3, None), (100, None), (3, one_deadline)):
        mix = f"1 in {every} waiting" + (", one deadline for all" if deadline else "")
        name = f"{every}{'-tied' if deadline else ''}"
        small = tmp / f"inbox-{name}-1000.db"
        fill(small, 1_000, waiting_every=every, deadline=deadline)
        small_first = median_ms(small, None)
        small_late = median_ms(small, cursor_of_page(small, 10))
        db = tmp / f"inbox-{name}.db"
        fill(db, 100_000, waiting_every=every, deadline=deadline)
        first, deep = median_ms(db, None), median_ms(db, cursor_of_page(db, 1000))
        print(
            f"   100,000 sessions, {mix}: page 1 {first:.2f} ms "
            f"({first / base:.1f}x the 1-session page, {first / full:.2f}x the 50-session "
            f"page, {first / small_first:.2f}x page 1 of 1,000 such sessions); page 1,000 by "
            f"cursor {deep:.2f} ms ({deep / base:.1f}x, {deep / full:.2f}x, "
            f"{deep / small_late:.2f}x page 10 of 1,000) (target <= 2x)"
        )


if __name__ == "__main__":
    main()
