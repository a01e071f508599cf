"""The hidden check of the eval cases with a repository, run in a task's worktree:

    python -B digest.py MODULE EXPRESSION SHA256

imports MODULE from the current folder, evaluates EXPRESSION (MODULE is in scope) and
passes when the SHA-256 of the result's text is SHA256. Comparing digests keeps the
user's answer out of the check's text and its output: a developer who reads either learns
only that the code does not yet do what the user wants, not what that is.
"""

from __future__ import annotations

import hashlib
import importlib
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: digest.py MODULE EXPRESSION SHA256", file=sys.stderr)
        return 2
    module, expression, digest = argv[1:]
    sys.path.insert(0, ".")
    try:
        value = eval(expression, {module: importlib.import_module(module)})  # noqa: S307
    except Exception as exc:  # the developer's code failed: the check fails, saying how
        print(f"{expression}: {type(exc).__name__}: {exc}")
        return 1
    if hashlib.sha256(str(value).encode()).hexdigest() != digest:
        print(f"{expression} is not what the user wants")
        return 1
    print(f"{expression}: as the user wants")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
