"""YAML as sws reads it: plain data only (PyYAML's safe loader), within limits a settings file never needs.

A file may use anchors and aliases, but one whose aliases expand past `MAX_VALUES` values (an "alias bomb",
which would hang whatever walks the result), an alias inside the very node it names, nesting deeper than
`MAX_DEPTH`, or a key given twice in one mapping (the last would silently win) is refused with one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sws.errors import UserError

MAX_VALUES = 100_000  # values in the document with every alias expanded
MAX_DEPTH = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(yaml.YAMLError):
    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(f"{message} (line {mark.line + 1})" if mark is not None else message)


class _Loader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> values under it, aliases expanded
        self._open_anchors: list[str | None] = []

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and event.anchor in self._open_anchors:
            raise _Refused(f"alias *{event.anchor} is used inside the node it names", event.start_mark)
        if len(self._open_anchors) >= MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self._open_anchors.append(getattr(event, "anchor", None))
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open_anchors.pop()
        if id(node) not in self._sizes:
            children = (node.value if isinstance(node, yaml.SequenceNode)
                        else [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode)
                        else [])
            self._sizes[id(node)] = 1 + sum(self._sizes[id(child)] for child in children)
        if self._sizes[id(node)] > MAX_VALUES:
            raise _Refused(f"aliases that expand to more than {MAX_VALUES} values", event.start_mark)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: the base constructor says so
                break
            if repeated:
                raise _Refused(f"key {key!r} is given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load(text: str, source: Path | str) -> Any:
    """The data in YAML `text`; anything malformed or beyond the limits is a UserError naming `source`."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: not valid YAML ({str(exc).splitlines()[0] if str(exc) else 'malformed'})") \
            from None
    except RecursionError:
        raise UserError(f"{source}: not valid YAML (nested too deeply)") from None
