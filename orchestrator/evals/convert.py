"""Eval cases from a local copy of a public set: LHAW (CC BY 4.0) and Ambig-SWE (MIT).

    python -m orchestrator.evals.convert --from lhaw lhaw.json > lhaw-cases.yaml
    python -m orchestrator.evals.convert --from ambig-swe rows.jsonl -o ambig-cases.yaml

Nothing is downloaded: the input is a file the user fetched (JSON: a list of rows, or an
object holding one; or JSON Lines, one row a line). Every case carries its `source` (set,
row id, licence), the attribution the licences ask for. What each set's rows hold, and
what does not carry over, is in docs/eval.md ("Public sets"). Rows that cannot become a
case (a task over the length a session takes, more than one outcome-critical removal) are
left out and counted on stderr, with the reason.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.evals.cases import GENERIC_WORDS, EvalCase
from orchestrator.limits import MAX_ANSWER_CHARS, MAX_TASK_CHARS

__all__ = ["CONVERTERS", "Converted", "from_lhaw", "from_ambig_swe", "read_rows", "main"]

LHAW = {
    "dataset": "LHAW (ScaleAI/lhaw)",
    "license": "CC BY 4.0",
    "url": "https://huggingface.co/datasets/ScaleAI/lhaw",
}
AMBIG_SWE = {
    "dataset": "Ambig-SWE (cmu-lti/interactive-swe)",
    "license": "MIT",
    "url": "https://huggingface.co/datasets/cmu-lti/interactive-swe",
}
# LHAW's dimensions are ours; the question a removal leaves open, per dimension (the fact
# a judge is shown and the oracle asks).
_FACTS = {
    "goal": "What exactly should the result be? The task leaves part of its goal out.",
    "constraint": "What limit must the work respect? The task leaves one out.",
    "input": "Which input should the work use? The task does not name it.",
    "context": "What about the setting does the work need to know? The task leaves it out.",
}
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_IDENTIFIER = re.compile(r"`([^`\n]{2,60})`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)+|\w+_\w+)")


class Converted:
    """The cases made from one file, and the rows left out by reason."""

    def __init__(self) -> None:
        self.cases: list[dict[str, Any]] = []
        self.skipped: Counter[str] = Counter()

    def add(self, case: dict[str, Any]) -> None:
        names = {c["name"] for c in self.cases}
        name, n = case["name"], 2
        while case["name"] in names:
            case["name"] = f"{name}-{n}"
            n += 1
        EvalCase.model_validate(case)  # a converter's bug, not the user's: it raises
        self.cases.append(case)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON file (a list, or an object with one list of objects) or a JSON
    Lines file; ConfigError saying what was expected otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{path}:{number}: not JSON ({exc.msg}); expected a JSON file or JSON Lines "
                    "(one object a line). Parquet: export it first, e.g. with the `datasets` "
                    "package: load_dataset(...).to_json('rows.jsonl')"
                ) from None
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else [data]
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise ConfigError(f"{path}: expected a list of JSON objects (rows)")
    if not data:
        raise ConfigError(f"{path}: holds no rows")
    return data


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "case"


def _keywords(text: str, *, unlike: str = "", limit: int = 8) -> list[str]:
    """Words that name `text`'s topic, as the keyword matcher reads them (lower case, no
    generic word), most frequent first; none that `unlike` (the task) already says."""
    said = unlike.lower()
    counts = Counter(
        w.lower()
        for w in _WORD.findall(text)
        if len(w) >= 3 and w.lower() not in GENERIC_WORDS and w.lower() not in said
    )
    return [w for w, _ in counts.most_common(limit)]


def _first(row: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _criticality(segment: Mapping[str, Any]) -> float:
    try:
        return float(segment.get("criticality") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def from_lhaw(rows: Iterable[Mapping[str, Any]]) -> Converted:
    """LHAW variants: `task_id`, the prompt the agent gets (`agent_prompt`, or the
    pipeline's `underspecified_prompt`), and `removed_segments`, each with its
    `dimension`, the removed `value` and its `criticality` (1.0: the task fails without
    it). A segment becomes a blocker whose answer is its value; the outcome-critical one
    (criticality 1.0) is the case's critical blocker and its value an outcome fact."""
    out = Converted()
    for index, row in enumerate(rows, 1):
        task = _first(row, "agent_prompt", "underspecified_prompt", "prompt")
        segments = [s for s in row.get("removed_segments") or [] if isinstance(s, dict)]
        ident = str(row.get("task_id") or row.get("variant_id") or index)
        if not task or not segments:
            out.skipped["no prompt or no removed_segments"] += 1
            continue
        if len(task) > MAX_TASK_CHARS:
            out.skipped[f"prompt over {MAX_TASK_CHARS} characters (a session's task)"] += 1
            continue
        critical = [s for s in segments if _criticality(s) >= 1.0]
        if len(critical) > 1:
            out.skipped["more than one outcome-critical removal (one question a session)"] += 1
            continue
        if any(str(s.get("dimension", "")).lower() not in _FACTS for s in segments):
            out.skipped["a dimension other than goal, constraint, input, context"] += 1
            continue
        blockers = []
        for number, segment in enumerate(segments, 1):
            value = str(segment.get("value") or "").strip()
            dimension = str(segment["dimension"]).lower()
            blockers.append(
                {
                    "id": f"{dimension}-{number}",
                    # The set gives the removed text, not a question: the question
                    # names it, so that the oracle's question (this fact) is about it.
                    "fact": f"{_FACTS[dimension]} (removed: {value})",
                    "dimension": dimension,
                    "critical": _criticality(segment) >= 1.0,
                    "answer": value[:MAX_ANSWER_CHARS] or "(not given)",
                    "keywords": _keywords(value, unlike=task)
                    or _keywords(value)
                    or [value.lower()[:60] or dimension],
                }
            )
        original = _first(row, "original_prompt", "original_task", "full_prompt")
        removed = "; ".join(f"{b['dimension']}: {b['answer']}" for b in blockers)
        out.add(
            {
                "name": f"lhaw-{_slug(ident)}",
                "task": task,
                "spec": original or f"What the task left out: {removed}",
                "blockers": blockers,
                "outcome": [b["answer"] for b in blockers if b["critical"]],
                "source": {**LHAW, "id": ident},
            }
        )
    return out


def from_ambig_swe(rows: Iterable[Mapping[str, Any]]) -> Converted:
    """Ambig-SWE rows (SWE-bench Verified's fields): `instance_id`, the underspecified
    summary the agent gets (`problem_statement`) and the full issue the user knows
    (`original_issue`, with `hints_text`). One critical blocker per row, `input`, whose
    answer is the full issue; its keywords are the identifiers and words the issue names
    and the summary does not (the set labels no dimension or question: a judge model reads
    them better, --judge-model)."""
    out = Converted()
    for index, row in enumerate(rows, 1):
        task = _first(row, "problem_statement")
        issue = _first(row, "original_issue")
        ident = str(row.get("instance_id") or index)
        if not task or not issue:
            out.skipped["no problem_statement or no original_issue"] += 1
            continue
        if len(task) > MAX_TASK_CHARS:
            out.skipped[f"problem_statement over {MAX_TASK_CHARS} characters"] += 1
            continue
        found = [(a or b).strip().lower() for a, b in _IDENTIFIER.findall(issue)]
        named = Counter(k for k in found if k and k not in task.lower() and k not in GENERIC_WORDS)
        keywords = [k for k, _ in named.most_common(6)]
        if len(keywords) < 3:  # few identifiers: the issue's own words as well
            keywords += _keywords(issue, unlike=task, limit=3)
        hints = _first(row, "hints_text")
        spec = issue + (f"\n\nHints: {hints}" if hints else "")
        out.add(
            {
                "name": f"ambig-swe-{_slug(ident)}",
                "task": task,
                "spec": spec,
                "blockers": [
                    {
                        "id": "issue",
                        "fact": "What does the full issue say that this summary leaves out "
                        "(the error, how to reproduce it, what is expected)?",
                        "dimension": "input",
                        "critical": True,
                        "answer": issue[:MAX_ANSWER_CHARS],
                        "keywords": list(dict.fromkeys(keywords)) or ["issue"],
                    }
                ],
                "source": {**AMBIG_SWE, "id": ident},
            }
        )
    return out


CONVERTERS: dict[str, Callable[[Iterable[Mapping[str, Any]]], Converted]] = {
    "lhaw": from_lhaw,
    "ambig-swe": from_ambig_swe,
}


def _yaml(converted: Converted, name: str, source: Path) -> str:
    import yaml

    attribution = LHAW if name == "lhaw" else AMBIG_SWE
    header = (
        f"# Converted from {source.name} by `python -m orchestrator.evals.convert --from "
        f"{name}`.\n# Source: {attribution['dataset']}, {attribution['url']}\n"
        f"# Licence: {attribution['license']}; each case names its row in `source`.\n"
    )
    body = yaml.safe_dump(
        {"cases": converted.cases}, sort_keys=False, allow_unicode=True, width=100
    )
    return header + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.evals.convert",
        description="Convert a local copy of a public set into eval cases (docs/eval.md).",
    )
    parser.add_argument("--from", dest="kind", required=True, choices=sorted(CONVERTERS))
    parser.add_argument("path", type=Path, help="the set's rows: JSON or JSON Lines")
    parser.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        converted = CONVERTERS[args.kind](read_rows(args.path))
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    for reason, count in sorted(converted.skipped.items()):
        print(f"left out {count} row(s): {reason}", file=sys.stderr)
    if not converted.cases:
        print(f"error: no row of {args.path} became a case", file=sys.stderr)
        return 2
    text = _yaml(converted, args.kind, args.path)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    print(f"{len(converted.cases)} case(s) from {args.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
