"""A recorded kernel's tensor-descriptor arguments (host ``TensorDescriptor``s, the Hopper TMA path): one
recipe type per argument, ``tensordesc<T[BM, 64]>``, from the rows' concrete ``tensordesc<bf16[128, 64]>``.
The dtype is a column as a pointer's is (``kernels._kernel`` gives differing columns a type variable); the
block is a literal where every row has the same, else per dimension the constexpr whose value equals it in
every row (the block a library derives from its tile sizes). A block no constexpr says keeps the rows of the
most frequent block and drops the others, each with the reason, as a scalar typed otherwise is dropped."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from .events import Compilation

_CONCRETE = re.compile(r"tensordesc<(?P<dtype>\w+)\[(?P<block>[^\]]*)\]>")
Block = tuple[int | str, ...]  # a dimension's size, or the constexpr that gives it


def parse(kind: str) -> tuple[str, tuple[str, ...]] | None:
    """(dtype, block dimensions as written) of a descriptor type; None for any other type."""
    m = _CONCRETE.fullmatch(kind)
    return None if m is None else (m["dtype"], tuple(d.strip() for d in m["block"].split(",")))


def dtype(kind: str) -> str:
    """The dtype of a descriptor type."""
    return _parsed(kind)[0]


def _parsed(kind: str) -> tuple[str, tuple[str, ...]]:
    parsed = parse(kind)
    assert parsed is not None, kind
    return parsed


def spelled(dtype: str, block: Block) -> str:
    return f"tensordesc<{dtype}[{', '.join(map(str, block))}]>"


def concrete(kind: str, dtype: str, constexprs: dict[str, object]) -> str:
    """A recipe's descriptor type as one row has it: its dtype, and its block's constexprs by their values."""
    return spelled(dtype, tuple(d if d.isdigit() else str(constexprs[d]) for d in _parsed(kind)[1]))


def blocks(runtime: list[str], group: list[Compilation],
           drop: Callable[[Compilation, str], None]) -> tuple[list[Compilation], dict[str, Block]]:  # fmt: skip
    """The rows kept and each descriptor argument's block (literals and constexpr names); ``drop(row, why)``
    is told of each row left out."""
    found: dict[str, Block] = {}
    for index, name in enumerate(runtime):
        if not any(parse(c.types[index][1]) for c in group):
            continue
        for c in [c for c in group if parse(c.types[index][1]) is None]:  # a pointer, or None (folded)
            was = c.types[index][1] or "None"
            drop(c, f"{name} was {was} here and a tensor descriptor in the kernel's other variants: a recipe "
                    "argument is one or the other; record this call into a recipe of its own")  # fmt: skip
            group = [r for r in group if r is not c]
        sizes = [tuple(int(d) for d in _parsed(c.types[index][1])[1]) for c in group]
        block = _named(sizes, group)
        if block is None:  # some dimension no constexpr says: the most frequent block's rows stay
            common = Counter(sizes).most_common(1)[0][0]
            for c, size in zip(group, sizes, strict=True):
                if size != common:
                    drop(c, f"{name} had the block {list(size)} here and {list(common)} in the kernel's other "
                            "variants, and no constexpr equals its sizes in every variant: a recipe argument "
                            "takes one block; record this call into a recipe of its own")  # fmt: skip
            group = [c for c, size in zip(group, sizes, strict=True) if size == common]
            block = common
        found[name] = block
    return group, found


def _named(sizes: list[tuple[int, ...]], group: list[Compilation]) -> Block | None:
    """Each dimension a literal where the rows agree, else the first constexpr equal to it in every row;
    None where neither says some dimension (or the rows' ranks differ)."""
    if len({len(s) for s in sizes}) != 1:
        return None
    out: list[int | str] = []
    for d in range(len(sizes[0])):
        column = [s[d] for s in sizes]
        if len(set(column)) == 1:
            out.append(column[0])
            continue
        names = [n for n, _ in group[0].constexprs]
        same = [
            n for n in names if all(_int(dict(c.constexprs).get(n)) == v for c, v in zip(group, column, strict=True))
        ]
        if not same:
            return None
        out.append(same[0])
    return tuple(out)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
