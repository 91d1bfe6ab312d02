"""How the dispatcher picks a config for a key between the keys a tuning table measured.

A table row holds every config's time at one key. For a call's key, the rule takes the ``k`` rows nearest to it
(distance: the sum over key dimensions of |log2(row value / call value)|, among the rows for the call's arch,
types and class) and predicts each config's time as the weighted mean of the log of its times there (weight 1 /
(distance + 1/4)^2). ``scale`` > 0: each time is first multiplied by the call's work over the row's in that
config's tiles, to the power ``scale`` (below 1 where fixed costs do not grow with the work), work being the
programs the grid's tiles make (at least one per multiprocessor) times the trips of the loops' tiles
(``tiles``), the call's on its GPU and a row's on the GPU that timed it (the table's multiprocessors, the blocks
of the variant it timed): what makes a 64-row tile win at M = 96 where a 128-row one won at M = 64, or a
1024-column chunk win at 6000 columns where a 4096-column one won at 8192. The config with the least predicted
time wins (ties: the first). Programs run in waves: with an ``occupancy`` o > 0 for a config, its programs count
in whole waves of o per multiprocessor (ceil(programs / (o * SMs)) waves), so that 135 programs of a 64x128 tile
cost two waves where 243 of a 64x64 tile that fit twice per multiprocessor cost one; 0: not in waves. With
``own_occupancy``, o is the blocks per multiprocessor of the variant the call runs for the config (from its
registers, warps and shared memory: Artifact.blocks_per_sm); a row's, of the variant it timed. A program may
cost more than its loops: with a ``fixed`` cost > 0, a program's work is the elements its loops' tiles cover
plus that many (a layer norm's short rows cost more per element than long ones); 0: its loops' trips.

``k``, ``scale`` and the rest are chosen per kernel from the measurements, not by hand (aotpack/fitting.py).

The C runtime (aot_dispatch.c, choose_config) computes the same numbers in the same order; a test holds
the two to the same picks.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from . import expr, limits
from .model import Kernel, Tile
from .model import Rule as TableRow

MIN_ROWS = 6  # measured keys of one class a rule is fitted to
DEFAULT_SMS = 132  # a table written before tables held the GPU's multiprocessors


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One measured key: its values and each config's median time (configs by index; None: not measured)."""

    key: tuple[int, ...]
    us: tuple[float | None, ...]

    @functools.cached_property
    def best(self) -> float:
        return min(t for t in self.us if t is not None)

    def over_best(self, c: int | None) -> float:
        """Config c's time here over the fastest's (inf: no config, or c not measured here)."""
        t = self.us[c] if c is not None else None
        return (t if t is not None else math.inf) / self.best

    @functools.cached_property
    def fastest(self) -> int:
        """The config measured fastest (ties: the first)."""
        return min((t, c) for c, t in enumerate(self.us) if t is not None)[1]


def tiles(kernel: Kernel) -> tuple[Tile, ...]:
    """The key's tiles: a key dimension that is an argument, cut by an integer constexpr in a ``cdiv`` of the
    grid or stepped over in a loop of the kernel (Triton kernels' source; see introspect.loops)."""
    ints = {n for n in kernel.constexpr_names if all(isinstance(c.value(n), int) for c in kernel.configs)}
    dims = {e.id: d for d, (_, e) in enumerate(kernel.key) if isinstance(e, expr.Name)}
    found: dict[int, Tile] = {}
    for node in (n for g in kernel.grid for n in expr.nodes(g)):
        if isinstance(node, expr.Call) and node.func == "cdiv" and len(node.args) == 2:
            arg, step = node.args
            if isinstance(arg, expr.Name) and isinstance(step, expr.Name) and arg.id in dims and step.id in ints:
                found.setdefault(dims[arg.id], Tile(dim=dims[arg.id], constexpr=step.id, loop=False))
    for arg_name, step_name in kernel.triton.loops if kernel.triton is not None else ():
        if arg_name in dims and step_name in ints:
            found.setdefault(dims[arg_name], Tile(dim=dims[arg_name], constexpr=step_name, loop=True))
    return tuple(found[d] for d in sorted(found))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b) if b > 0 else a


def log2_work(tiles: Sequence[Tile], consts: Mapping[str, int], key: Sequence[int], sms: int,
              occupancy: int = 0, fixed: int = 0) -> float:  # fmt: skip
    """log2 of a config's work at a key: programs of the grid's tiles (at least ``sms``; with an occupancy,
    whole waves of ``occupancy * sms``) times loop trips; with a ``fixed`` cost > 0, each program's work is
    the elements its loops' tiles cover plus that many. One log2 of the product (exact below 2^53), as the C
    runtime takes it for every neighbour and config of a new key."""
    programs, trips, elements = 1, 1, 1
    for t in tiles:
        step = consts[t.constexpr]
        n = max(1, _cdiv(key[t.dim], step))
        if t.loop:
            trips *= n
            elements *= n * max(step, 1)
        else:
            programs *= n
    slots = max(1, sms) * max(1, occupancy)
    programs = _cdiv(programs, slots) * slots if occupancy > 0 else max(programs, slots)
    per_program = float(elements) + fixed if fixed > 0 else float(trips)
    return math.log2(float(programs) * per_program)


def logs_of(key: Sequence[int]) -> tuple[float, ...]:
    return tuple(math.log2(max(v, 1)) for v in key)


def log_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """The rule's distance between two keys from their logs: the sum over dimensions of |log2 a - log2 b|."""
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def _distance(a: Sequence[int], b: Sequence[int]) -> float:
    return log_distance(logs_of(a), logs_of(b))


def neighbours(rows: Sequence[Measured], key: Sequence[int], k: int) -> list[tuple[float, Measured]]:
    """The k rows nearest the key, nearest first (ties: table order), with their distances."""
    near = heapq.nsmallest(k, ((_distance(r.key, key), i) for i, r in enumerate(rows)))
    return [(d, rows[i]) for d, i in near]


def predict(
    rows: Sequence[Measured],
    key: Sequence[int],
    k: int,
    scale: float,
    work: Sequence[Tile],
    consts: Sequence[Mapping[str, int]],
    sms: int,
    fits: Sequence[bool] | None = None,
    occupancy: Sequence[int] = (),
    fixed: int = 0,
    row_sms: int | None = None,
    row_occupancy: Sequence[int] | None = None,
) -> int | None:
    """The config (index) the rule picks for the key from these rows: the least predicted time among configs
    measured at every neighbour (and fitting the call); None: none is. The call's work is counted with ``sms``
    and ``occupancy``, the rows' with ``row_sms`` and ``row_occupancy`` (the GPU that timed them; None: the
    call's)."""
    near = neighbours(rows, key, k)
    best, best_t = None, 0.0
    for c in range(len(consts)):
        if (fits is not None and not fits[c]) or any(r.us[c] is None for _, r in near) or not near:
            continue
        occ = occupancy[c] if occupancy else 0
        row_occ = occ if row_occupancy is None else (row_occupancy[c] if row_occupancy else 0)
        here = log2_work(work, consts[c], key, sms, occ, fixed) if scale > 0 else 0.0
        total = weights = 0.0
        for d, r in near:
            w = 1.0 / ((d + limits.SELECTION_WEIGHT_OFFSET) * (d + limits.SELECTION_WEIGHT_OFFSET))
            t = math.log2(max(r.us[c] or 0.0, 1e-3))
            if scale > 0:
                t += scale * (here - log2_work(work, consts[c], r.key, row_sms or sms, row_occ, fixed))
            total += w * t
            weights += w
        if best is None or total / weights < best_t:
            best, best_t = c, total / weights
    return best


def log2_approx(x: int) -> float:
    """aot_dispatch.c's log2_approx: exact at powers of two, linear between."""
    x = max(x, 1)
    e = x.bit_length() - 1
    return e + (x - (1 << e)) / (1 << e)


def nearest_row(rows: Sequence[Measured], key: Sequence[int], pow2: bool) -> int:
    """The config the nearest-row rule picks (the dispatcher's rule for rows without times): the measured
    best of the nearest row at or above the bucketed key in every dimension, else of the nearest row."""
    v, v_logs = bucketed(key, pow2)
    ranks = [(nearest_rank(r.key, [log2_approx(x) for x in r.key], v, v_logs), j) for j, r in enumerate(rows)]
    return rows[min(ranks)[1]].fastest


def bucketed(key: Sequence[int], pow2: bool) -> tuple[list[int], list[float]]:
    """The key the nearest-row rule looks up (rounded up to powers of two where keys are bucketed so) and its
    approximate logs."""
    v = [expr.next_pow2(x) if pow2 and x > 1 else x for x in key]
    return v, [log2_approx(x) for x in v]


def nearest_rank(row_key: Sequence[int], row_logs: Sequence[float], v: Sequence[int], v_logs: Sequence[float],
                  ) -> tuple[int, float]:  # fmt: skip
    """How the nearest-row rule ranks a row for the looked-up key v (least first, ties: table order): rows at
    or above v in every dimension first, then by distance."""
    up = all(a >= b for a, b in zip(row_key, v, strict=True))
    return (0 if up else 1), sum(abs(a - b) for a, b in zip(row_logs, v_logs, strict=True))


def groups(kernel: Kernel) -> list[list[Measured]]:
    """The measured rows, one list per (arch, types, class), in table order; each list of MIN_ROWS or more."""
    return list(grouped(kernel).values())


Group = tuple[str | None, tuple[tuple[str, str], ...] | None, str | None]  # a table row's arch, types and class
Blocks = Mapping[Group, tuple[int, ...]]  # per group, each config's variant's blocks per multiprocessor (0: unknown)


def blocks(variants: Iterable[tuple[Group, int, int]], configs: int) -> dict[Group, tuple[int, ...]]:
    """Per (arch, types, class), each config's variant's blocks per multiprocessor (0: none compiled), from
    (group, config index, blocks) of each compiled variant (the build's artifacts, an installed wheel's manifest)."""
    out: dict[Group, list[int]] = {}
    for group, config, count in variants:
        out.setdefault(group, [0] * configs)[config] = count
    return {group: tuple(counts) for group, counts in out.items()}


def blocks_of(blocks: Blocks, group: Group) -> tuple[int, ...]:
    """A group's variants' blocks: of its class; where its rows name none, of the one class built (else ())."""
    arch, types, klass = group[0], tuple(sorted(group[1] or ())), group[2]
    found = [b for (a, t, c), b in blocks.items() if (a, t) == (arch, types) and klass in (c, None)]
    return found[0] if len(found) == 1 else ()


def grouped(kernel: Kernel, rules: Iterable[TableRow] | None = None) -> dict[Group, list[Measured]]:
    """groups(), each list under its (arch, types, class); of ``rules`` (None: the kernel's)."""
    out = measured_rows(kernel, kernel.rules if rules is None else rules)
    return {g: rows for g, rows in out.items() if len(rows) >= MIN_ROWS and any(t is not None for t in rows[0].us)}


def measured_rows(kernel: Kernel, rules: Iterable[TableRow]) -> dict[Group, list[Measured]]:
    """The timed rows of ``rules`` under their (arch, types, class), in table order."""
    labels = [c.label for c in kernel.configs]
    out: dict[Group, list[Measured]] = {}
    for r in rules:
        if r.median_us:
            times = dict(r.median_us)
            out.setdefault((r.arch, r.types, r.specialization), []).append(
                Measured(key=r.key, us=tuple(times.get(label) for label in labels)))  # fmt: skip
    return out


def consts_of(kernel: Kernel, work: Sequence[Tile]) -> list[dict[str, int]]:
    names = {t.constexpr for t in work}
    return [{n: cast(int, c.value(n)) for n in names} for c in kernel.configs]
