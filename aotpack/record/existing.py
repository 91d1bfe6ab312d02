"""The recipe a recording merges into, read and checked before anything runs or is written: the loader's checks
(a malformed recipe is a located RecipeError, as ``aotpack plan`` says it), those of what merging reads of a
recorded kernel, and ruamel.yaml's round-trip document of it, which the merge edits (``merge.merged_text``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import recorded
from ..backends import recipes as recipe
from ..recipe import yamlnodes
from ..states import letters
from . import yamlio


@dataclass(frozen=True, kw_only=True)
class Existing:
    """The recipe a recording merges into: its text, its data (None: it holds only comments), how it indents
    (mapping, sequence, the dash's offset), which the lines a merge adds take, and its round-trip document
    (ruamel.yaml's; ``merged_text`` edits it)."""

    text: str
    data: dict[str, Any] | None
    indents: tuple[int, int, int]
    doc: Any = None


def existing_recipe(path: Path, document: bool = True) -> Existing | None:
    """The recipe a recording merges into (None where there is none yet), checked by the loader and where merging
    reads it: a malformed one is a located RecipeError before anything runs or is written, and before ruamel.yaml
    reads it. ``document``: with ruamel.yaml's document (a merge's; seconds for a long recipe), else without."""
    if not path.exists():
        return None
    text = yamlnodes.read_text(path, "recipe")
    if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        return Existing(text=text, data=None, indents=yamlio.INDENTS)  # nothing to merge into
    root = yamlnodes.parse(text, path, "recipe")
    top = {key: node for key, node, _ in root.items()}
    for target in top["targets"].sequence(allow_scalar=True) if "targets" in top else ():
        target.string()
    for kernel in top["kernels"].mapping(()).values() if "kernels" in top else ():
        fields = kernel.mapping(()) if kernel.is_mapping() else {}
        if "launch" in fields:  # a recorded kernel (one written by hand is kept as it is)
            _check_recorded(fields)
    # anything else the loader refuses is refused here, located, as `plan` says it
    recipe.from_nodes(root, path)
    indents = yamlio.indents(root.node)
    doc = yamlio.load(yamlio.round_trip(indents), text, path) if document else None  # what the merge reads it with
    return Existing(text=text, data=yamlio.data(text), indents=indents, doc=doc)


def _check_recorded(fields: dict[str, yamlnodes.Node]) -> None:
    """What merging reads of a recorded kernel, with located errors where it cannot."""
    args = fields["args"].mapping(()) if "args" in fields else {}
    for kind in args.values():
        kind.string()
    for option in (fields["options"].mapping(()) if "options" in fields else {}).values():
        option.scalar()
    for row in fields["variants"].sequence() if "variants" in fields else ():
        parts = row.mapping((), required=recorded.ROW_REQUIRED)
        for name, value in parts["config"].mapping(()).items():
            if name in ("num_warps", "num_stages"):
                value.integer(minimum=0)
            else:
                _check_value(value)
        for dtype in (parts["types"].mapping(()) if "types" in parts else {}).values():
            dtype.string()
        if "launches" in parts:
            parts["launches"].integer(minimum=0)
        states = letters(parts["class"].string(), list(args))
        if isinstance(states, str):
            raise parts["class"].fail(states)
    for pick in fields["autotuned"].sequence() if "autotuned" in fields else ():
        _check_value(pick)


def _check_value(node: yamlnodes.Node) -> None:
    """A value as recipes write constexprs and picks: values, lists, and mappings keyed by names."""
    if node.is_mapping():
        for value in node.mapping(()).values():
            _check_value(value)
    elif node.is_sequence():
        for item in node.sequence():
            _check_value(item)
    else:
        node.scalar()
