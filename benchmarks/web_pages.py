"""Whole requests to `orchestrator serve` on 100,000 sessions: the inbox (`GET /`) and the
JSON list (`GET /api/sessions?status=paused`), each a first page and a late one, against
the same requests on a 1-session database and on 1,000 sessions of the same mix.

Each figure is the median time of a whole response (request sent to the last byte read)
from a server started as a process on that database, over one kept-alive connection. The
three servers run at the same time and their requests are taken in turn, so a ratio never
compares servers measured one after another.
"""

from __future__ import annotations

import http.client
import socket
import sqlite3
import statistics
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from proc import Row

__all__ = ["figure_pages"]

BIG = 100_000
SMALL = 1_000
TARGET_INBOX = 2.0  # issue 22: page 1 and page 1,000 "<= 2x the 1-session page"
TARGET_LIST = 1.5  # "paged like list": as `list --json`, <= 1.5x the small database
REPRODUCE = "benchmarks/web.py --only-pages"


def _whole(conn: http.client.HTTPConnection, path: str, auth: dict[str, str]) -> tuple[float, int]:
    """(seconds for the whole response, its bytes)."""
    started = time.perf_counter()
    conn.request("GET", path, headers=auth)
    response = conn.getresponse()
    body = response.read()
    taken = time.perf_counter() - started
    assert response.status == 200, (path, response.status, body[:200])
    return taken, len(body)


def _json_after(db: Path, page: int, size: int = 100) -> str:
    """The id that opens page `page` of the paused sessions, newest first (the API's order)."""
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT id FROM sessions WHERE status = 'paused' ORDER BY created_at DESC, id DESC"
            " LIMIT 1 OFFSET ?",
            ((page - 1) * size - 1,),
        ).fetchone()
    return str(row[0])


def _measure_together(
    web: Any, env: dict[str, str], paths_of: dict[Path, dict[str, str]], reps: int
) -> dict[Path, dict[str, tuple[float, int]]]:
    """Each database's server started at once, and their requests taken in turn (one
    round: every path of every server), so a change in the machine's load falls on every
    figure alike: (median ms, bytes) per database and path."""
    servers = []
    try:
        for db in paths_of:
            servers.append(web.start_server(str(db), env))
        conns = {}
        for db, (_proc, base) in zip(paths_of, servers, strict=True):
            host, port = base.removeprefix("http://").split(":")
            conn = http.client.HTTPConnection(host, int(port))
            conn.connect()  # without Nagle: a request is one small write, sent at once
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conns[db] = (conn, {**web.AUTH, "Host": f"{host}:{port}"})
        for db, paths in paths_of.items():  # warm: templates compiled, pages cached
            conn, auth = conns[db]
            for path in paths.values():
                for _ in range(3):
                    _whole(conn, path, auth)
        times: dict[Path, dict[str, list[float]]] = {
            db: {name: [] for name in paths} for db, paths in paths_of.items()
        }
        sizes: dict[Path, dict[str, int]] = {db: {} for db in paths_of}
        for _ in range(reps):
            for db, paths in paths_of.items():
                conn, auth = conns[db]
                for name, path in paths.items():
                    taken, sizes[db][name] = _whole(conn, path, auth)
                    times[db][name].append(taken)
        for conn, _auth in conns.values():
            conn.close()
    finally:
        for proc, _base in servers:
            proc.terminate()
            proc.wait()
    return {
        db: {name: (statistics.median(ts) * 1000, sizes[db][name]) for name, ts in named.items()}
        for db, named in times.items()
    }


def figure_pages(web: Any, tmp: Path, env: dict[str, str], reps: int) -> list[Row]:
    print(
        f"\n== the inbox and the JSON list through `serve`, on {BIG:,} sessions (whole responses)"
    )
    one, small, big = tmp / "pages-1.db", tmp / "pages-small.db", tmp / "pages-big.db"
    started = time.perf_counter()
    web.fill(one, 1)
    web.fill(small, SMALL)
    web.fill(big, BIG)
    print(
        f"(databases of 1, {SMALL:,} and {BIG:,} sessions written in "
        f"{time.perf_counter() - started:.1f} s; one in 3 waits for an answer)"
    )
    listing = "/api/sessions?status=paused"
    paths_of = {
        one: {"inbox 1": "/", "list 1": listing},
        small: {
            "inbox 1": "/",
            "inbox late": f"/?after={web.cursor_of_page(small, 10)}",
            "list 1": listing,
            "list late": f"{listing}&after={_json_after(small, 3)}",
        },
        big: {
            "inbox 1": "/",
            "inbox late": f"/?after={web.cursor_of_page(big, 1000)}",
            "list 1": listing,
            "list late": f"{listing}&after={_json_after(big, 300)}",
        },
    }
    got = _measure_together(web, env, paths_of, reps)
    labels = {one: "1 session", small: f"{SMALL:,} sessions", big: f"{BIG:,} sessions"}
    late = {small: ("page 10", "page 3"), big: ("page 1,000", "page 300")}
    for db, figures in got.items():
        shown = []
        for name, (ms, size) in figures.items():
            which = late[db][name.startswith("list")] if name.endswith("late") else "page 1"
            shown.append(f"{name.split()[0]} {which} {ms:.2f} ms ({size / 1024:.0f} KiB)")
        print(f"{labels[db]:>16}: " + "; ".join(shown))
    print(
        f"(medians of {reps} requests each after 3 warm-ups; the three servers run at once "
        "and their requests are interleaved; the inbox shows 50 sessions a page, the JSON "
        "list 100)"
    )

    def ratios(kind: str) -> tuple[float, float, float, float]:
        base, same_first = got[one][f"{kind} 1"][0], got[small][f"{kind} 1"][0]
        first, deep = got[big][f"{kind} 1"][0], got[big][f"{kind} late"][0]
        return first / base, deep / base, first / same_first, deep / got[small][f"{kind} late"][0]

    inbox, listed = ratios("inbox"), ratios("list")
    return [
        Row(
            f"web inbox (`GET /`) with {BIG:,} sessions, page 1 / page 1,000",
            [
                f"{inbox[0]:.1f}x / {inbox[1]:.1f}x the 1-session page (which shows one row, "
                "not 50)",
                f"{inbox[2]:.2f}x / {inbox[3]:.2f}x the same pages on {SMALL:,} sessions",
            ],
            f"<= {TARGET_INBOX:g}x the 1-session page (as the issue words it)",
            max(inbox[:2]) <= TARGET_INBOX,
            REPRODUCE,
        ),
        Row(
            f"`GET /api/sessions?status=paused` with {BIG:,} sessions, page 1 / page 300",
            [
                f"{listed[2]:.2f}x / {listed[3]:.2f}x the same pages on {SMALL:,} sessions",
                f"{listed[0]:.1f}x / {listed[1]:.1f}x the 1-session database (one session "
                "listed, not 100)",
            ],
            f"paged like `list`: <= {TARGET_LIST:g}x the same page on {SMALL:,} sessions",
            max(listed[2:]) <= TARGET_LIST,
            REPRODUCE,
        ),
    ]
