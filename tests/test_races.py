"""Twenty concurrent-resume races per backend, cheaply: one harness process (forked from
the test fork server, tests/forkserver.py) has the orchestrator imported once, then per
round forks four racers that wait on one pipe and all answer the same paused session at
the same moment (each in its own process, with its own connections, as four
`orchestrator resume --answer` commands would). Exactly one wins."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import forkserver
import pytest
from conftest import EXAMPLES, ROOT
from dbcheck import payload, query

pytestmark = pytest.mark.backends()

ROUNDS = 20
RACERS = 4

HARNESS = """
import json, os, sys
from orchestrator import Reply, Sessions
from orchestrator.errors import UserError
import orchestrator.runtime.graph  # the costly imports, once, before forking

url, scenario, rounds, racers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
results = []
for r in range(rounds):
    with Sessions(url) as api:
        session_id = api.start_scenario(scenario)["session_id"]
    go_read, go_write = os.pipe()
    children = []
    for n in range(racers):
        pid = os.fork()
        if pid == 0:
            os.close(go_write)
            os.read(go_read, 1)  # every racer is released by the same close
            try:
                with Sessions(url) as api:
                    doc = api.resume(session_id, Reply(text=f"answer {r}.{n}"))
                code = 0 if doc["status"] == "completed" else 1
            except UserError:
                code = 2
            except BaseException:
                code = 3
            os._exit(code)
        children.append(pid)
    os.close(go_read)
    os.close(go_write)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    results.append({"session_id": session_id, "codes": codes})
print(json.dumps(results))
"""


def test_twenty_rounds_of_four_racing_answers_exactly_one_wins_each(
    db_url: str, tmp_path: Path
) -> None:
    harness = tmp_path / "races.py"  # a script, so the harness is forked from the fork server
    harness.write_text(HARNESS, encoding="utf-8")
    ran = forkserver.run(
        [sys.executable, str(harness), db_url, str(EXAMPLES / "pause-and-resume.yaml"),
         str(ROUNDS), str(RACERS)],
        timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    rounds = json.loads(ran.stdout)
    assert len(rounds) == ROUNDS
    for race in rounds:
        assert sorted(race["codes"]) == [0] + [2] * (RACERS - 1), race
        winner = race["codes"].index(0)
        rows = query(
            db_url,
            "SELECT kind, agent, payload FROM events WHERE session_id = ? ORDER BY id",
            race["session_id"],
        )
        log = [{"kind": k, "agent": a, **payload(p)} for k, a, p in rows]
        answers = [e["response"] for e in log if e["kind"] == "answer"]
        assert answers == [f"answer {rounds.index(race)}.{winner}"]
        replies = Counter(e["agent"] for e in log if e["kind"] == "agent_reply")
        assert replies == {"pm": 3, "developer-1": 1, "developer-2": 1}
        resumed = [e for e in log if e["kind"] == "status" and e.get("previous") == "paused"]
        assert len(resumed) == 1
