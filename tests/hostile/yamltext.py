"""A tiny YAML writer for the hostile corpus: it writes a recipe tree as text, keeps the line of every
key path (so a case knows where its one change sits), and lets a case put in what a normal emitter
never writes: duplicate keys, raw text (aliases, tags, YAML 1.1 booleans, control characters), keys
that are not strings and bytes that are not UTF-8 (``BAD_BYTE``, written as the lone byte 0xff).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

BAD_BYTE = "\udcff"  # surrogateescape of 0xff: encodes to a byte that is not UTF-8
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_YAML11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}

Path = tuple[Any, ...]  # keys (str) and list indexes (int) from the root


@dataclass(frozen=True)
class Raw:
    """Text written as is in place of a value or a key (one line: it may sit inside a flow collection)."""

    text: str


@dataclass
class M:
    """A mapping as written: its entries in order, keys may repeat or be Raw."""

    pairs: list[tuple[Any, Any]] = field(default_factory=list)

    @staticmethod
    def of(value: Any) -> Any:
        """Plain dicts and lists, recursively, as ``M`` and lists."""
        if isinstance(value, dict):
            return M([(k, M.of(v)) for k, v in value.items()])
        if isinstance(value, list):
            return [M.of(v) for v in value]
        return value

    def get(self, key: Any) -> Any:
        return next(v for k, v in self.pairs if k == key)


def copy(tree: Any) -> Any:
    if isinstance(tree, M):
        return M([(k, copy(v)) for k, v in tree.pairs])
    if isinstance(tree, list):
        return [copy(v) for v in tree]
    return tree


def at(tree: Any, path: Path) -> Any:
    for part in path:
        tree = tree.get(part) if isinstance(tree, M) else tree[part]
    return tree


def replace(tree: Any, path: Path, value: Any) -> Any:
    """A copy of ``tree`` with the value at ``path`` replaced."""
    out = copy(tree)
    parent = at(out, path[:-1])
    if isinstance(parent, M):
        parent.pairs = [(k, value if k == path[-1] else v) for k, v in parent.pairs]
    else:
        parent[path[-1]] = value
    return out


def edit_entries(tree: Any, path: Path, change: Any) -> Any:
    """A copy of ``tree`` whose mapping at ``path[:-1]`` has its entry ``path[-1]`` passed through
    ``change(key, value) -> [(key, value), ...]`` (none: deleted; two: duplicated; another key: renamed)."""
    out = copy(tree)
    parent = at(out, path[:-1])
    pairs: list[tuple[Any, Any]] = []
    for k, v in parent.pairs:
        pairs += change(k, v) if k == path[-1] else [(k, v)]
    parent.pairs = pairs
    return out


def scalar(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value) if not isinstance(value, float) or value == value else ".nan"
    return json.dumps(value, ensure_ascii=False)


def key_text(key: Any) -> str:
    if isinstance(key, str) and _PLAIN_KEY.match(key) and key.lower() not in _YAML11_WORDS:
        return key
    return scalar(key)


def flow(value: Any) -> str:
    if isinstance(value, M):
        return "{" + ", ".join(f"{key_text(k)}: {flow(v)}" for k, v in value.pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return scalar(value)


def emit(tree: M, flow_depth: int = 3) -> tuple[str, dict[Path, int]]:
    """The text of ``tree`` (block mappings down to ``flow_depth`` levels, flow style below and in lists)
    and the 1-based line of every key path."""
    lines: list[str] = []
    where: dict[Path, int] = {}

    def walk(node: M, indent: int, path: Path) -> None:
        for k, v in node.pairs:
            here = (*path, k)
            where.setdefault(here, len(lines) + 1)
            if isinstance(v, M) and v.pairs and len(path) + 1 < flow_depth:
                lines.append(f"{' ' * indent}{key_text(k)}:")
                walk(v, indent + 2, here)
            else:
                lines.append(f"{' ' * indent}{key_text(k)}: {flow(v)}")
                _mark(v, here, where, len(lines))

    walk(tree, 0, ())
    return "\n".join(lines) + "\n", where


def _mark(value: Any, path: Path, where: dict[Path, int], line: int) -> None:
    """Paths inside a flow collection sit on its line."""
    if isinstance(value, M):
        for k, v in value.pairs:
            where.setdefault((*path, k), line)
            _mark(v, (*path, k), where, line)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            where.setdefault((*path, i), line)
            _mark(v, (*path, i), where, line)


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def dotted(path: Path) -> str:
    """A path as the loader names it: ``kernels.add.args.x_ptr``, ``targets[1]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
