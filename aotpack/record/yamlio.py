"""The YAML of a recorded recipe: how a new one is written (``dump``: one line per variant and per autotuner pick,
diff-friendly), what a text says as aotpack reads it (``said``, PyYAML), and ruamel.yaml's round trip, which a
merge edits an existing recipe with (``round_trip``, ``load``, ``render``): numbers kept as the file writes them,
no line wrapping, and the file's own indentation (``indents``)."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.representer import RoundTripRepresenter

from ..errors import Location, RecipeError
from ..states import legend

# what a recipe record writes says of itself (its class letters' legend from states.py)
HEADER = textwrap.fill(
    "Written by aotpack record: the kernels a workload ran under Triton's JIT, each variant as the JIT compiled it "
    f"(types, constexprs and options, and its class: per argument {legend()}). Build it with: aotpack build <this "
    "file>",
    width=98,
    initial_indent="# ",
    subsequent_indent="# ",
    break_on_hyphens=False,
)


def dump(recipe: dict[str, Any]) -> str:
    """YAML with one line per variant and per autotuner pick (diff-friendly)."""
    lines = HEADER.splitlines()
    for key, value in recipe.items():  # widen: a line, as a row's lists are
        if key == "widen":
            lines.append(f"widen: {flow(value)}")
        elif key != "kernels":
            lines.append(yaml.safe_dump({key: value}, sort_keys=False, width=1 << 16).rstrip())
    lines.append("kernels:" if recipe["kernels"] else "kernels: {}")  # (only Triton cache entries recorded)
    for name, kernel in recipe["kernels"].items():
        lines += _kernel_lines(name, kernel)
    return "\n".join(lines) + "\n"


def _kernel_lines(name: str, kernel: dict[str, Any]) -> list[str]:
    lines = [f"  {flow(name)}:"]
    for key, value in kernel.items():
        if key in ("variants", "autotuned") and isinstance(value, list):
            lines.append(f"    {key}:")
            lines += [f"      - {flow(row)}" for row in value]
        else:
            lines.append(f"    {key}: {flow(value)}")
    return lines


def flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()


def said(text: str) -> str:
    """What a YAML text says, as aotpack reads it (PyYAML), comparable (NaN equal to NaN)."""
    return json.dumps(data(text), default=str)


def data(text: str) -> Any:
    """What a YAML text aotpack has read (yamlnodes: within its bounds) holds, as PyYAML's safe loader constructs
    it; through libyaml's parser where PyYAML has it (the same values: only scanning and parsing are libyaml's, a
    recording's rows are long lists and the pure-Python scanner takes seconds over them). Where libyaml reads the
    text otherwise than PyYAML, which read it already, PyYAML's own parser decides."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


class _Number(str):
    """A number as the file writes it: ruamel.yaml writes numbers it reads anew (a float can lose its last
    digit, ``010`` is 10 to it and 8 to PyYAML), this as written."""

    tag: str | None = None


class _Constructor(RoundTripConstructor):
    def number(self, node: ScalarNode) -> _Number:
        out = _Number(node.value)
        out.tag = node.tag
        return out


class _Representer(RoundTripRepresenter):
    def number(self, data: _Number) -> ScalarNode:
        return self.represent_scalar(data.tag, str(data))


for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    _Constructor.add_constructor(_tag, _Constructor.number)
_Representer.add_representer(_Number, _Representer.number)


def round_trip(indents: tuple[int, int, int]) -> YAML:
    rt = YAML(typ="rt")
    rt.Constructor, rt.Representer = _Constructor, _Representer
    rt.preserve_quotes = True
    rt.width = 1 << 16  # no line wrapping: a row is a line
    mapping, sequence, offset = indents
    rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    return rt


def load(rt: YAML, text: str, path: Path) -> Any:
    """The round-trip document of a recipe yamlnodes has read (so within its bounds, aliases counted)."""
    try:
        return rt.load(text)
    except RuamelError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = Location(str(path), mark.line + 1, mark.column + 1) if mark else None
        problem = getattr(exc, "problem", None) or exc
        raise RecipeError(f"ruamel.yaml, which aotpack record merges with, cannot read this: {problem}; correct "
                          "it here", where) from None  # fmt: skip


def render(rt: YAML, doc: Any) -> str:
    out = io.StringIO()
    rt.dump(doc, out)
    return out.getvalue()


INDENTS = (2, 4, 2)  # how dump indents: mappings by 2, a list's items by 4 with the dash at 2


def indents(root: yaml.Node) -> tuple[int, int, int]:
    """How a file indents (mapping, sequence, dash offset, as ruamel.yaml counts them), from its first nested
    block mapping and its first block list below the top level (rows; dump writes the top level's lists
    otherwise), else the top level's; as dump does where it has none."""
    mapping = -1
    found: dict[bool, tuple[int, int]] = {}  # (sequence, offset) of the top level's list, and one below it (True)
    stack, seen = [root], set()
    while stack and (mapping < 0 or True not in found):
        node = stack.pop()
        if id(node) in seen or isinstance(node, yaml.ScalarNode):
            continue
        seen.add(id(node))
        pairs = node.value if isinstance(node, yaml.MappingNode) else [(None, item) for item in node.value]
        for key, value in pairs:
            if key is not None and not isinstance(value, yaml.ScalarNode) and not value.flow_style and value.value:
                column = key.start_mark.column
                if isinstance(value, yaml.MappingNode) and mapping < 0:
                    mapping = value.value[0][0].start_mark.column - column
                elif isinstance(value, yaml.SequenceNode):
                    offset = value.start_mark.column - column
                    sequence = max(value.value[0].start_mark.column - column, offset + 2)
                    found.setdefault(node is not root, (sequence, offset))
            stack.append(value)
    sequence, offset = found.get(True) or found.get(False) or INDENTS[1:]
    return mapping if mapping > 0 else INDENTS[0], sequence, offset
