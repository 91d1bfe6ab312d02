"""A recorded kernel as a recipe holds it (``launch: triton``): the format's one home, shared by its writer
(record/kernels.py), the merge of a recording into a recipe (record/merge.py), record's check of the recipe it
merges into (record/existing.py) and the recipe reader (backends/triton/recipe.py). A kernel's keys in the order
written; a row of its ``variants:`` (the types, the config, the class in letters: states.py, the launches seen) and
of its ``autotuned:`` picks; and the order rows and picks are written and merged in."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .states import spell

# a recorded kernel's keys, in the order they are written (record writes all but doc and targets)
KERNEL_KEYS = ("triton", "launch", "doc", "types", "args", "targets", "options", "variants", "autotuned")
ROW_KEYS = ("types", "config", "class", "launches")  # a row of variants:, in the order written
ROW_REQUIRED = ("config", "class")
PICK_KEYS = ("key", "config")  # a row of autotuned: one autotuner key and the config it picked


def row(
    *, types: Mapping[str, str] | None, config: Mapping[str, Any], states: Iterable[str], launches: int
) -> dict[str, Any]:
    """A row of ``variants:`` as record writes it: the type variables' dtypes (where the kernel has some), the
    config (constexprs, then num_warps and num_stages), the class one letter per argument, the launches seen."""
    out: dict[str, Any] = {"types": dict(types)} if types else {}
    out.update({"config": dict(config), "class": spell(states), "launches": launches})
    return out


def row_order(row: Mapping[str, Any]) -> str:
    """Where a row goes among a kernel's rows (written sorted by it; a merge inserts it there): what it compiles,
    its launch count aside."""
    return json.dumps([row.get("types"), row.get("config"), row.get("class")], sort_keys=True, default=str)


def pick_order(pick: Any) -> str:
    """Where a pick goes among a kernel's ``autotuned:`` (written sorted by it; a merge inserts it there), and what
    makes two picks one."""
    return json.dumps(pick, sort_keys=True, default=str)
