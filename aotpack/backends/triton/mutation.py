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
    flow = _Flow()
    header = next((ln for ln in raw if "tt.func" in ln), "")
    for name in _ARG.findall(header):
        flow.origin[0, name] = {name}
    lines = [ln.rsplit(" loc(", 1)[0].strip() for ln in raw]  # drop each op's trailing source location
    flow.changed = True
    while flow.changed:  # until what flows where stops growing (loops carry values back)
        flow.start()
        for line in lines:
            flow.step(line)
    return flow.written


class _Flow:
    """Which arguments each SSA value may carry, per region instance, as one pass over the TTIR finds."""

    def __init__(self) -> None:
        self.origin: dict[Key, set[str]] = {}
        self.written: set[str] = set()
        self.changed = False
        self.chain: list[int] = []  # the open regions, outermost first
        self.feeds: list[list[Key]] = []  # per open region: what its yields flow into
        self.fresh = 1

    def start(self) -> None:
        self.changed = False
        self.chain, self.feeds, self.fresh = [0], [[]], 1

    def grow(self, key: Key, flows: set[str]) -> None:
        if not flows <= self.origin.get(key, set()):
            self.origin[key] = self.origin.get(key, set()) | flows
            self.changed = True

    def look(self, name: str) -> set[str]:
        for scope in reversed(self.chain):
            if (scope, name) in self.origin:
                return self.origin[scope, name]
        return set()

    def carried(self, text: str) -> set[str]:
        return set().union(*(self.look(u) for u in _USE.findall(text)))

    def step(self, line: str) -> None:
        m = _DEF.match(line)
        op, operands = (m[2], m[3]) if m else (line.split(" ")[0], line)
        if op in _WRITES:  # the address is the first operand (atomics also return a value)
            uses = _USE.findall(operands)
            if uses:
                self.written |= self.look(uses[0])
        if op in ("scf.yield", "scf.condition"):
            for key in self.feeds[-1]:
                self.grow(key, self.carried(line))
        closes, opens = line.startswith("}"), line.endswith("{")
        ended: list[Key] = []
        if closes and len(self.chain) > 1:
            self.chain.pop()
            ended = self.feeds.pop()
        results = [r.strip().lstrip("%").split(":")[0] for r in m[1].split(",")] if m else []
        if not opens:
            for r in results:
                self.grow((self.chain[-1], r), set() if op == "tt.load" else self.carried(operands))
        elif not line.startswith(("tt.func", "module")):
            self.open_region(results, operands, feeds_then=not m and closes, ended=ended)

    def open_region(self, results: list[str], operands: str, feeds_then: bool, ended: list[Key]) -> None:
        """A region op (scf.for, scf.if, scf.while ...): its results come from its initial values and its
        yields; ``} else {`` feeds what ``then`` fed."""
        inner = self.fresh
        self.fresh += 1
        pairs = _CARRIED.findall(operands)
        for r in results:
            flows = set().union(*(self.look(init) for _, init in pairs)) if pairs else self.carried(operands)
            self.grow((self.chain[-1], r), flows)
        for name, init in pairs:
            self.grow((inner, name), self.look(init))
        region_feeds = [(self.chain[-1], r) for r in results] + [(inner, a) for a, _ in pairs]
        self.feeds.append(ended if feeds_then else region_feeds)
        self.chain.append(inner)


def recorded(writes: Iterable[tuple[str, ...] | None]) -> tuple[str, ...]:
    """The union of the writes the Triton backend found in compiled variants (``Artifact.writes``)."""
    return tuple(sorted({w for names in writes for w in names or ()}))
