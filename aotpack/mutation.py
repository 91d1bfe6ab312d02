"""Which pointer arguments a Triton kernel writes, read off its TTIR.

Every SSA value carries the set of pointer arguments it may be derived from: a function argument
carries itself, an op's results carry the union of its operands' (loaded values carry none: data is
not an address), a loop's carried values start from their initial values, and ``scf.yield`` feeds
the results and carried values of the region it ends. A store (``tt.store``, ``tt.atomic_rmw``,
``tt.atomic_cas``, ``tt.descriptor_store`` ...) writes every argument its address operand carries.
Names are looked up region by region (MLIR reuses names in sibling regions), and the whole is
iterated to a fixed point. Conservative: it may name an argument no store reaches, never miss one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ARG = re.compile(r"%([\w.$-]+): !tt\.(?:ptr|tensordesc)")
_DEF = re.compile(r'^\s*((?:%[\w.$-]+(?::\d+)?)(?:\s*,\s*%[\w.$-]+(?::\d+)?)*)\s*=\s*"?([\w.]+)"?(.*)$')
_USE = re.compile(r"%([\w.$-]+)")
_CARRIED = re.compile(r"%([\w.$-]+)\s*=\s*%([\w.$-]+)")  # `iter_args(%a = %init)`, `%i = %lower to ...`
_WRITES = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_store", "tt.descriptor_reduce",
           "tt.descriptor_scatter")  # fmt: skip

Key = tuple[int, str]  # (region instance, SSA name)


def written_arguments(ttir: str) -> set[str]:
    """The names of the pointer arguments the kernel may write."""
    raw = ttir.splitlines()
    lines = [ln.rsplit(" loc(", 1)[0].strip() for ln in raw]  # drop each op's trailing source location
    origin: dict[Key, set[str]] = {}
    header = next((ln for ln in raw if "tt.func" in ln), "")
    for name in _ARG.findall(header):
        origin[0, name] = {name}
    written: set[str] = set()
    changed = True

    def grow(key: Key, flows: set[str]) -> None:
        nonlocal changed
        if not flows <= origin.get(key, set()):
            origin[key] = origin.get(key, set()) | flows
            changed = True

    chain: list[int] = []  # the open regions, outermost first
    feeds: list[list[Key]] = []  # per open region: what its yields flow into

    def look(name: str) -> set[str]:
        for scope in reversed(chain):
            if (scope, name) in origin:
                return origin[scope, name]
        return set()

    def carried(text: str) -> set[str]:
        return set().union(*(look(u) for u in _USE.findall(text)))

    while changed:
        changed = False
        chain[:] = [0]
        feeds[:] = [[]]
        fresh = 1
        for line in lines:
            m = _DEF.match(line)
            op, operands = (m[2], m[3]) if m else (line.split(" ")[0], line)
            if op in _WRITES:  # the address is the first operand (atomics also return a value)
                uses = _USE.findall(operands)
                if uses:
                    written |= look(uses[0])
            if op in ("scf.yield", "scf.condition"):
                for key in feeds[-1]:
                    grow(key, carried(line))
            closes, opens = line.startswith("}"), line.endswith("{")
            if closes and len(chain) > 1:
                chain.pop()
                ended = feeds.pop()
            else:
                ended = []
            results = [r.strip().lstrip("%").split(":")[0] for r in m[1].split(",")] if m else []
            if not opens:
                for r in results:
                    grow((chain[-1], r), set() if op == "tt.load" else carried(operands))
                continue
            if line.startswith(("tt.func", "module")):
                continue
            inner = fresh
            fresh += 1
            pairs = _CARRIED.findall(operands)
            for r in results:  # a region op's results come from its initial values and its yields
                grow((chain[-1], r), set().union(*(look(init) for _, init in pairs)) if pairs else carried(operands))
            for name, init in pairs:
                grow((inner, name), look(init))
            region_feeds = [(chain[-1], r) for r in results] + [(inner, a) for a, _ in pairs]
            feeds.append(region_feeds if m or not closes else ended)  # `} else {` feeds what `then` fed
            chain.append(inner)
    return written


def recorded(metadata: Iterable[Iterable[tuple[str, str]]]) -> tuple[str, ...]:
    """The union of the writes the Triton backend recorded in compiled variants' metadata."""
    return tuple(sorted({w for facts in metadata for w in dict(facts).get("writes", "").split(",") if w}))
