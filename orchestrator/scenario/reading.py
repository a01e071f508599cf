"""Reading a scenario's text safely: YAML with a key given twice refused (plain YAML keeps
the last silently), JSON likewise, and nesting bounded before the C parser sees it (it
recurses per level: 100,000 levels in 200 KB would crash the process)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from orchestrator.errors import ScenarioError
from orchestrator.limits import MAX_SCENARIO_DEPTH

__all__ = ["parse_text"]


def parse_text(path: Path, text: str) -> Any:
    """The document in `text` (JSON for a .json path, else YAML); a ScenarioError names
    the line of any problem."""
    too_deep = ScenarioError(
        f"{path}: nested more than {MAX_SCENARIO_DEPTH} levels deep; a scenario needs fewer than 10"
    )
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_json_object)
        except _DuplicateKey as exc:
            raise ScenarioError(f"{path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ScenarioError(
                f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
            ) from None
        except RecursionError:
            raise too_deep from None
    import yaml

    if _yaml_depth_over(text, 2 * MAX_SCENARIO_DEPTH):
        raise too_deep  # before the C parser, which recurses per level and can crash
    try:
        return yaml.load(text, Loader=_unique_keys_loader())  # noqa: S506  (a safe loader)
    except RecursionError:
        raise too_deep from None
    except _DuplicateKey as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path}: {where}invalid YAML: {problem}") from None


def _yaml_depth_over(text: str, limit: int) -> bool:
    """Whether YAML `text` may nest deeper than `limit`, read without parsing it: the block
    levels open on each line (by indentation, and each leading `- ` or `? `) plus the flow
    brackets still open. Quotes and comments are not told apart, so it may count too much
    (brackets inside a string), never too little; the exact depth is checked after parsing."""
    flow = 0
    indents: list[int] = []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if flow == 0 and stripped and not stripped.startswith("#"):
            column = len(line) - len(stripped)
            while indents and indents[-1] >= column:
                indents.pop()
            indents.append(column)
            while stripped[:2] in ("- ", "? "):  # each a sequence (or key) one level deeper
                column += 2
                indents.append(column)
                stripped = stripped[2:].lstrip(" ")
        for char in line:
            if char in "[{":
                flow += 1
                if flow + len(indents) > limit:
                    return True
            elif char in "]}":
                flow = max(0, flow - 1)
        if len(indents) + flow > limit:
            return True
    return False


class _DuplicateKey(Exception):
    """A key given twice in one mapping (the message says which, and where)."""


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(
                f"duplicate key {key!r}: each key may appear once in a mapping; remove one"
            )
        seen[key] = value
    return seen


@functools.cache
def _unique_keys_loader() -> Any:
    """A safe YAML loader (the C parser when PyYAML has it: the pure-Python one takes
    minutes on large input) that refuses a key given twice in one mapping, with its line:
    plain YAML lets the last one win silently. Merge keys (`<<`) may still be overridden."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    line = key_node.start_mark.line + 1
                    try:
                        first = seen.get(key)
                    except TypeError:  # an unhashable key: the constructor says so below
                        continue
                    if first is not None:
                        where = "" if first == line else f" (first given on line {first})"
                        raise _DuplicateKey(
                            f"line {line}: duplicate key {key!r}{where}; each key may appear "
                            "once in a mapping (YAML would silently keep the last)"
                        )
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return Loader
