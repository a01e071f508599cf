"""Many command lines in one interpreter, each with stdout and stderr of its own.

`python tests/cli_batch.py MODE CASES_JSON RESULTS_JSON`: for each argument list in
CASES_JSON, run the command line the way the `orchestrator` process would (MODE `entry`:
the real entry point, fast read path first; `full`: the Typer app alone), with file
descriptors 1 and 2 pointed at files of its own, and write [stdout, stderr, exit code,
heavy packages imported so far] per case to RESULTS_JSON. Starting one interpreter per
mode instead of one per command line is what keeps the fast-path comparison quick; the
output compared is still what the process writes to its descriptors, byte for byte.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

HEAVY = ("sqlalchemy", "typer", "pydantic")


def _one(mode: str, args: list[str]) -> list[Any]:
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = ["orchestrator", *args]
        code: Any = 0
        try:
            if mode == "entry":
                from orchestrator.cli import main
            else:
                from orchestrator.cli import app  # noqa: F401 (every command registered)
                from orchestrator.cli.entry import main
            main()
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        err.seek(0)
        written = out.read().decode(), err.read().decode()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        code = 1
    heavy = " ".join(m for m in HEAVY if m in sys.modules)
    return [*written, code, heavy]


def main() -> None:
    mode, cases, results = sys.argv[1:4]
    with open(cases) as given:
        todo = json.load(given)
    done = [_one(mode, args) for args in todo]
    with open(results, "w") as written:
        json.dump(done, written)


if __name__ == "__main__":
    main()
