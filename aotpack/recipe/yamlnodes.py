"""A YAML reader that keeps positions: every value knows its ``file:line:col`` and key path, and its
typed accessors raise ``RecipeError`` located there. It knows nothing of kernels (``recipe.py``
gives the values their meaning).

Only plain YAML is read: no tags beyond plain values and collections (no ``!!python/...``), no merge
keys, no control characters, one document; its size, nesting and values (aliases counted at each use)
within the bounds of ``limits.py``.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import limits
from ..errors import Location, RecipeError

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}


@dataclass(frozen=True)
class Node:
    """A YAML node with its position and key path, and typed accessors that raise RecipeError."""

    node: yaml.Node
    path: str
    file: str
    _loader: yaml.SafeLoader = field(repr=False, compare=False)

    @property
    def where(self) -> Location:
        mark = self.node.start_mark
        return Location(self.file, mark.line + 1, mark.column + 1)

    @property
    def quoted(self) -> bool:
        """A scalar written in quotes (its text starts one column after ``where``)."""
        return isinstance(self.node, yaml.ScalarNode) and self.node.style in ("'", '"')

    def fail(self, message: str) -> RecipeError:
        return RecipeError(f"{self.path}: {message}" if self.path else message, self.where)

    def _child(self, node: yaml.Node, name: str) -> Node:
        if not name:  # a mapping's key: located at the key, named by the mapping
            return Node(node, self.path, self.file, self._loader)
        path = f"{self.path}.{name}" if self.path and not name.startswith("[") else f"{self.path}{name}"
        return Node(node, path, self.file, self._loader)

    def scalar(self) -> Any:
        if not isinstance(self.node, yaml.ScalarNode):
            raise self.fail(f"expected a single value, got a {kind(self.node)}")
        try:
            value = self._loader.construct_object(self.node)
        except (yaml.YAMLError, ValueError) as exc:  # !!int abc, an integer past Python's digit limit
            raise self.fail(f"cannot read the value {self.node.value[:40]!r}: {exc}") from None
        # an escape in quotes ("\0", "\e", "\ud800") makes what the file may not hold; values reach generated
        # code, command lines and messages
        bad = control_character(value, allowed="\n\t") if isinstance(value, str) else None
        if bad is not None:
            raise self.fail(f"control character {value[bad]!r} in {value[:40]!r}: write text without it")
        return value

    def as_written(self) -> str:
        """For a plain scalar YAML reads as something other than its text (``on``: true, ``1e3``: 1000.0,
        ``~``: None, ``0x10``: 16): how to keep the text; else nothing."""
        if not isinstance(self.node, yaml.ScalarNode) or self.node.style is not None or self.node.value == "":
            return ""
        if isinstance(self.scalar(), str):
            return ""
        return f" (YAML reads {self.node.value} as {self.scalar()!r}: write '{self.node.value}' in quotes)"

    def raw(self) -> Any:
        """A scalar as written (YAML would read 0.10 as the float 0.1); a collection fails as in scalar()."""
        return self.node.value if isinstance(self.node, yaml.ScalarNode) else self.scalar()

    def mapping(self, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Node]:
        if not isinstance(self.node, yaml.MappingNode):
            raise self.fail(f"expected a mapping, got a {kind(self.node)}")
        out: dict[str, Node] = {}
        for key_node, value_node in self.node.value:
            key_at = self._child(key_node, "")
            key = key_at.scalar()
            if not isinstance(key, str):
                raise key_at.fail(f"keys must be strings, got {key!r}{key_at.as_written()}")
            if allowed and key not in allowed:
                raise RecipeError(unknown_key(key, self.path, allowed), key_at.where)
            if key in out:
                raise RecipeError(f"duplicate key {key!r} in {self.path or 'the recipe'}", key_at.where)
            out[key] = self._child(value_node, key)
        for key in required:
            if key not in out:
                raise self.fail(f"missing required key {key!r}")
        return out

    def is_mapping(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def is_sequence(self) -> bool:
        return isinstance(self.node, yaml.SequenceNode)

    def is_scalar(self) -> bool:
        return isinstance(self.node, yaml.ScalarNode)

    def keys(self) -> tuple[str, ...]:
        """The keys of a mapping as written, without checking them (empty for anything else)."""
        return tuple(k.value for k, _ in self.node.value) if self.is_mapping() else ()

    def items(self) -> Iterator[tuple[str, Node, Location]]:
        """Entries of a free-form mapping (names chosen by the user), in file order."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.fail(f"expected a mapping, got a {kind(self.node)}")
        seen: set[str] = set()
        for key_node, value_node in self.node.value:
            key_at = self._child(key_node, "")
            key = key_at.scalar()
            if isinstance(key, bool) or key is None:
                raise key_at.fail(f"expected a name, got {key!r}{key_at.as_written()}")
            if not isinstance(key, str):
                key = str(key)
            if key in seen:
                raise RecipeError(f"duplicate key {key!r} in {self.path}", key_at.where)
            seen.add(key)
            yield key, self._child(value_node, key), key_at.where

    def sequence(self, allow_scalar: bool = False) -> list[Node]:
        if isinstance(self.node, yaml.SequenceNode):
            return [self._child(n, f"[{i}]") for i, n in enumerate(self.node.value)]
        if allow_scalar and isinstance(self.node, yaml.ScalarNode):
            return [self]
        raise self.fail(f"expected a list, got a {kind(self.node)}")

    def string(self, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        value = self.scalar()
        if not isinstance(value, str) or value == "":
            raise self.fail(f"expected a non-empty string, got {value!r}{self.as_written()}")
        if pattern is not None and not pattern.match(value):
            raise self.fail(f"{value!r} is not {what}")
        return value

    def integer(self, minimum: int | None = None) -> int:
        value = self.scalar()
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(f"expected an integer >= {minimum}, got {value}")
        return value

    def boolean(self) -> bool:
        value = self.scalar()
        if not isinstance(value, bool):
            raise self.fail(f"expected true or false, got {value!r}")
        return value


def read(path: Path, what: str) -> Node:
    """The document at ``path`` (a ``what``, such as "recipe", in messages), checked as the module says."""
    return parse(read_text(path, what), path, what)


def read_text(path: Path, what: str, bound: str = "MAX_RECIPE_BYTES") -> str:
    """The text of the file at ``path``: a regular file of UTF-8, at most ``limits.<bound>`` bytes."""
    limit = getattr(limits, bound)
    try:
        if not path.is_file():  # a FIFO or a device would block or never end
            raise RecipeError(f"{what} {path} is not a regular file" if path.exists() else f"{what} {path} not found")
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise RecipeError(f"cannot read {what} {path}: {exc.strerror}") from None
    if len(data) > limit:
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        raise RecipeError(f"{what} {path} is larger than {size} (aotpack's limits.{bound}): is it the right file?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RecipeError(f"the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x})", Location(str(path), line,
                          column)) from None  # fmt: skip
    return text


def parse(text: str, path: Path, what: str) -> Node:
    """The root of the YAML document ``text``; ``path`` names it in locations. A command reads its recipe more than
    once (the Triton release it names, then the recipe), and PyYAML's pure-Python scanner walks every character
    (a recipe's long comment): the last documents parsed are kept (``_parsed``; nodes are not changed after)."""
    return _parsed(text, path, what)


@functools.lru_cache(maxsize=4)
def _parsed(text: str, path: Path, what: str) -> Node:
    for number, line in enumerate(text.split("\n"), start=1):  # only \n ends a line, as in YAML
        bad = control_character(line, allowed="\t\r\ufeff")
        if bad is not None:
            raise RecipeError(f"control character {line[bad]!r} in the {what}", Location(str(path), number, bad + 1))
    _depth_first(text, path, what)
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = Location(str(path), mark.line + 1, mark.column + 1) if mark else None
        problem = str(getattr(exc, "problem", None) or exc)
        if "another document" in problem:
            problem = f"a {what} is one YAML document; this '---' starts another: remove it and what follows"
        raise RecipeError(f"invalid YAML: {problem}", where) from None
    except RecursionError:
        raise RecipeError(f"the {what} nests deeper than {limits.MAX_YAML_DEPTH} levels (aotpack's "
                          "limits.MAX_YAML_DEPTH)", Location(str(path), 1, 1)) from None  # fmt: skip
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        raise RecipeError(f"the {what} is empty", Location(str(path), 1, 1))
    _check_nodes(root, str(path), what)
    return Node(root, "", str(path), loader)


def _depth_first(text: str, path: Path, what: str) -> None:
    """Nesting past limits.MAX_YAML_DEPTH refused at libyaml's speed, where PyYAML has it, before PyYAML's own
    parser (which reads the text at Python's speed: seconds for 100,000 open brackets) composes it. Whatever
    libyaml cannot read is left to PyYAML, whose messages and locations a recipe's errors give."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None:
        return
    depth, mark = 0, None
    try:
        for event in yaml.parse(text, Loader=fast):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > limits.MAX_YAML_DEPTH:  # (a collection this deep: where _check_nodes would say it)
                    mark = event.start_mark
                    break
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:  # libyaml's own bound on nesting (1,000) is past ours; anything else: PyYAML's
        if "maximum nesting depth" not in str(exc):
            return
        mark = getattr(exc, "problem_mark", None)
    if depth > limits.MAX_YAML_DEPTH or mark is not None:
        at = Location(str(path), mark.line + 1, mark.column + 1) if mark is not None else Location(str(path), 1, 1)
        raise RecipeError(f"the {what} nests deeper than {limits.MAX_YAML_DEPTH} levels (aotpack's "
                          "limits.MAX_YAML_DEPTH)", at)  # fmt: skip


def _check_nodes(root: yaml.Node, file: str, what: str) -> None:
    """Walk the tree (without recursion) as the loader will, an alias at each use: no YAML tags beyond plain
    values and collections (no !!python/..., no custom tags), no merge keys, no nesting past
    limits.MAX_YAML_DEPTH, at most limits.MAX_YAML_VALUES values (counted before anything expands them)."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    values = 0
    while stack:
        node, depth = stack.pop()
        values += 1
        mark = node.start_mark
        where = Location(file, mark.line + 1, mark.column + 1)
        if values > limits.MAX_YAML_VALUES:
            raise RecipeError(f"the {what} holds more than {limits.MAX_YAML_VALUES} values, each alias counted "
                              "where it is used (aotpack's limits.MAX_YAML_VALUES): are aliases repeating "
                              "aliases?", where)  # fmt: skip
        if depth > limits.MAX_YAML_DEPTH:
            raise RecipeError(f"the {what} nests deeper than {limits.MAX_YAML_DEPTH} levels (aotpack's "
                              "limits.MAX_YAML_DEPTH)", where)  # fmt: skip
        if node.tag not in _PLAIN_TAGS:
            raise RecipeError(f"YAML tag {node.tag!r} is not allowed in a {what}: write plain values", where)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge" or (isinstance(key, yaml.ScalarNode) and key.value == "<<"):
                    at = Location(file, key.start_mark.line + 1, key.start_mark.column + 1)
                    raise RecipeError("YAML merge keys (<<) are not supported: write the keys out", at)
                stack += [(key, depth + 1), (value, depth + 1)]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, depth + 1) for item in node.value]


def kind(node: yaml.Node) -> str:
    return {yaml.ScalarNode: "value", yaml.SequenceNode: "list", yaml.MappingNode: "mapping"}[type(node)]


def suggest(word: str, choices: Sequence[str], label: str = "expected one of") -> str:
    """' — did you mean X?' for a near miss, else the list of choices."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" — did you mean {close[0]!r}?" if close else f" ({label}: {', '.join(choices)})"


def unknown_key(key: str, path: str, allowed: tuple[str, ...]) -> str:
    where = f" in {path}" if path else ""
    return f"unknown key {key!r}{where}{suggest(key, allowed)}"


def control_character(text: str, allowed: str) -> int | None:
    """The index of the first character of ``text`` that is neither printable nor ``allowed``."""
    if text.isprintable():  # (the common case, at C speed: a long line is not walked character by character)
        return None
    return next((i for i, c in enumerate(text) if not c.isprintable() and c not in allowed), None)
