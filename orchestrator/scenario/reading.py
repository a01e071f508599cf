"""Reading a scenario's text safely: YAML with a key given twice refused (plain YAML keeps
the last silently), JSON likewise, and nesting bounded by construction.

libyaml's own composer (the C half of `CSafeLoader`) recurses in C once per level of
nesting, where no recursion limit applies: `[` 100,000 times, or `["]",` repeated so that
a text pre-scan miscounts, overflowed the stack and killed the process (exit 139). Here
libyaml only tokenizes and parses (a state machine, no recursion); the nodes are built by
PyYAML's Python composer, which counts the collections open as it descends (aliases count
with the depth of what they name) and stops past the limit, long before Python's own
recursion limit."""

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

    try:
        return yaml.load(text, Loader=_bounded_loader())  # noqa: S506  (a safe loader)
    except (_TooDeep, RecursionError):
        raise too_deep from None
    except _DuplicateKey as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path}: {where}invalid YAML: {problem}") from None


class _TooDeep(Exception):
    """Collections nested deeper than MAX_SCENARIO_DEPTH (aliases included)."""


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
def _bounded_loader() -> Any:
    """A safe YAML loader whose nesting is bounded as it builds (see the module's note):
    libyaml's parser when PyYAML has it (the pure-Python one takes minutes on large
    input), PyYAML's Python composer counting depth, and a key given twice in one mapping
    refused with its line (plain YAML lets the last one win silently; merge keys `<<` may
    still be overridden)."""
    import yaml
    from yaml.composer import Composer, ComposerError
    from yaml.events import AliasEvent

    events: Any = getattr(yaml.cyaml, "CParser", None) if yaml.__with_libyaml__ else None

    composer: Any = Composer  # mixed into a loader: its events come from the parser

    class BoundedComposer(composer):  # type: ignore[misc]
        """Composer that refuses more than MAX_SCENARIO_DEPTH collections nested, an alias
        counting with the height of the node it names (so a chain of aliases cannot nest
        deeper than the text does), and an alias inside the node it names."""

        # CParser (after this class in the MRO) has C versions of these that compose the
        # whole document recursively in C: the Python ones are the point.
        check_node = Composer.check_node
        get_node = Composer.get_node
        get_single_node = Composer.get_single_node

        def compose_document(self) -> Any:
            self._open = 0
            self._heights: dict[int, int] = {}  # id(collection node) -> its height, once built
            return super().compose_document()

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(AliasEvent):
                event = self.peek_event()
                node = super().compose_node(parent, index)
                if isinstance(node, yaml.CollectionNode):
                    height = self._heights.get(id(node))
                    if height is None:
                        raise ComposerError(
                            None,
                            None,
                            f"the alias *{event.anchor} is inside the node it names "
                            "(a recursive structure)",
                            event.start_mark,
                        )
                    if self._open + height > MAX_SCENARIO_DEPTH:
                        raise _TooDeep
                return node
            opens = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
            if opens:
                self._open += 1
                if self._open > MAX_SCENARIO_DEPTH:
                    raise _TooDeep
            try:
                node = super().compose_node(parent, index)
            finally:
                if opens:
                    self._open -= 1
            if opens:
                if isinstance(node, yaml.MappingNode):
                    children = [part for pair in node.value for part in pair]
                else:
                    children = node.value
                self._heights[id(node)] = 1 + max(
                    (self._heights.get(id(child), 0) for child in children), default=0
                )
            return node

    class UniqueKeys(yaml.SafeLoader):
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

    if events is None:  # pure Python: SafeLoader's reader, scanner and parser

        class PyLoader(BoundedComposer, UniqueKeys):
            pass

        return PyLoader

    # The MRO puts BoundedComposer's node building before CParser's (C, recursive); CParser
    # still supplies the events (check_event, peek_event, get_event).
    class CLoader(BoundedComposer, events, UniqueKeys):  # type: ignore[misc]
        def __init__(self, stream: Any) -> None:
            events.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self.anchors = {}

    return CLoader
