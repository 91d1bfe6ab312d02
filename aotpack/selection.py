"""How the dispatcher picks a config for a key between the keys a tuning table measured.

A table row holds every config's time at one key. For a call's key, the rule takes the ``k`` rows
nearest to it (distance: the sum over key dimensions of |log2(row value / call value)|, among the rows
for the call's arch, types and class) and predicts each config's time as the weighted mean of the log
of its times there (weight 1 / (distance + 1/4)^2). ``scale`` > 0: each time is first multiplied by the
call's work over the row's in that config's tiles, to the power ``scale`` (below 1 where fixed costs do
not grow with the work), work being the programs the grid's tiles make (at least one per
multiprocessor) times the trips of the loops' tiles (``tiles``): what makes a 64-row
tile win at M = 96 where a 128-row one won at M = 64, or a 1024-column chunk win at 6000 columns where a
4096-column one won at 8192. The config with the least predicted time wins (ties: the first).
Programs run in waves: with an ``occupancy`` o > 0 for a config, its programs count in whole waves of
o per multiprocessor (ceil(programs / (o * SMs)) waves), so that 135 programs of a 64x128 tile cost two
waves where 243 of a 64x64 tile that fit twice per multiprocessor cost one; 0: not in waves. With
``own_occupancy``, o is the blocks per multiprocessor of the variant the call runs for the config (from its
registers, warps and shared memory: Artifact.blocks_per_sm), rows and call alike. A program may cost more than
its loops: with a ``fixed`` cost > 0, a program's work is the elements its loops' tiles cover plus that many (a
layer norm's short rows cost more per element than long ones); 0: its loops' trips.

``k`` and ``scale`` are chosen per kernel from the measurements, not by hand: each candidate rule predicts every
measured row from the others (leave-one-out), and the one with the least mean log error wins, the nearest-row rule
(``neighbours`` 0, the dispatcher's rule for tables without times) included. With a scaled rule and grid tiles,
each config's occupancy is then chosen the same way (one config at a time, from OCCUPANCIES, the rule's k and scale
held), and k and scale again with those occupancies; with loop tiles, each fixed cost of FIXED with the TOP_SCALED
best scaled (k, scale); with grid tiles and the variants' blocks known, the scaled (k, scale) again with those.
Which of these five ways of choosing is used is decided on keys they were not chosen on: the measured keys fall in
FOLDS folds, each fold's rows are predicted by the rule each way chooses from the other folds' rows, and the way
with the least error over the folds chooses the rule from all rows. That error over the folds is the held-out error
``aotpack tune`` and ``aotpack inspect`` print (docs/tuning.md: a leave-one-out error of a rule chosen on the
same rows reads low, and fitted occupancies or a fixed cost chosen so fit noise). A kernel whose tables measured
fewer than MIN_ROWS keys of one class keeps the nearest-row rule.

The C runtime (aot_dispatch.c, choose_config) computes the same numbers in the same order; a test holds
the two to the same picks.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from . import expr, limits
from .model import NEAREST, HeldOut, Kernel, Selection, Tile

MIN_ROWS = 6  # measured keys of one class a rule is fitted to
NEIGHBOURS = (1, 2, 3, 4, 6, 8, 12, limits.MAX_NEIGHBOURS)  # the candidates' k
# the candidates' power of the work ratio: below 1 where fixed costs (a launch, a row's reduction) do not scale
SCALES = (0.0, 0.5, 0.75, 1.0)
OCCUPANCIES = (0, 1, 2, 3, 4, 8)  # the candidates' programs per multiprocessor in a wave (0: not in waves)
# the candidates' fixed cost of a program, in elements of its loops' tiles (0: work is the loops' trips): what a
# program costs besides its loops (its launch, loading a row's statistics, a reduction's tail)
FIXED = (0, 512, 2048, 8192)
TOP_SCALED = 3  # the best scaled (k, scale) candidates each fixed cost is tried with
DEFAULT_SMS = 132  # a table written before tables held the GPU's multiprocessors
_T = TypeVar("_T")


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
    the elements its loops' tiles cover plus that many."""
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
    return math.log2(float(programs)) + math.log2(per_program)


def _logs(key: Sequence[int]) -> tuple[float, ...]:
    return tuple(math.log2(max(v, 1)) for v in key)


def _log_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """The rule's distance between two keys from their logs: the sum over dimensions of |log2 a - log2 b|."""
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def _distance(a: Sequence[int], b: Sequence[int]) -> float:
    return _log_distance(_logs(a), _logs(b))


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
) -> int | None:
    """The config (index) the rule picks for the key from these rows: the least predicted time among configs
    measured at every neighbour (and fitting the call); None: none is."""
    near = neighbours(rows, key, k)
    best, best_t = None, 0.0
    for c in range(len(consts)):
        if (fits is not None and not fits[c]) or any(r.us[c] is None for _, r in near) or not near:
            continue
        occ = occupancy[c] if occupancy else 0
        here = log2_work(work, consts[c], key, sms, occ, fixed) if scale > 0 else 0.0
        total = weights = 0.0
        for d, r in near:
            w = 1.0 / ((d + limits.SELECTION_WEIGHT_OFFSET) * (d + limits.SELECTION_WEIGHT_OFFSET))
            t = math.log2(max(r.us[c] or 0.0, 1e-3))
            if scale > 0:
                t += scale * (here - log2_work(work, consts[c], r.key, sms, occ, fixed))
            total += w * t
            weights += w
        if best is None or total / weights < best_t:
            best, best_t = c, total / weights
    return best


def _log2_approx(x: int) -> float:
    """aot_dispatch.c's log2_approx: exact at powers of two, linear between."""
    x = max(x, 1)
    e = x.bit_length() - 1
    return e + (x - (1 << e)) / (1 << e)


def nearest_row(rows: Sequence[Measured], key: Sequence[int], pow2: bool) -> int:
    """The config the nearest-row rule picks (the dispatcher's rule for rows without times): the measured
    best of the nearest row at or above the bucketed key in every dimension, else of the nearest row."""
    v, v_logs = _bucketed(key, pow2)
    ranks = [(_nearest_rank(r.key, [_log2_approx(x) for x in r.key], v, v_logs), j) for j, r in enumerate(rows)]
    return rows[min(ranks)[1]].fastest


def _bucketed(key: Sequence[int], pow2: bool) -> tuple[list[int], list[float]]:
    """The key the nearest-row rule looks up (rounded up to powers of two where keys are bucketed so) and its
    approximate logs."""
    v = [expr.next_pow2(x) if pow2 and x > 1 else x for x in key]
    return v, [_log2_approx(x) for x in v]


def _nearest_rank(row_key: Sequence[int], row_logs: Sequence[float], v: Sequence[int], v_logs: Sequence[float],
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


def _blocks_of(blocks: Blocks, group: Group) -> tuple[int, ...]:
    """A group's variants' blocks: of its class; where its rows name none, of the one class built (else ())."""
    arch, types, klass = group[0], tuple(sorted(group[1] or ())), group[2]
    found = [b for (a, t, c), b in blocks.items() if (a, t) == (arch, types) and klass in (c, None)]
    return found[0] if len(found) == 1 else ()


def grouped(kernel: Kernel) -> dict[Group, list[Measured]]:
    """groups(), each list under its (arch, types, class)."""
    labels = [c.label for c in kernel.configs]
    out: dict[Group, list[Measured]] = {}
    for r in kernel.rules:
        if r.median_us:
            times = dict(r.median_us)
            out.setdefault((r.arch, r.types, r.specialization), []).append(
                Measured(key=r.key, us=tuple(times.get(label) for label in labels)))  # fmt: skip
    return {g: rows for g, rows in out.items() if len(rows) >= MIN_ROWS and any(t is not None for t in rows[0].us)}


def consts_of(kernel: Kernel, work: Sequence[Tile]) -> list[dict[str, int]]:
    names = {t.constexpr for t in work}
    return [{n: cast(int, c.value(n)) for n in names} for c in kernel.configs]


@dataclass(frozen=True)
class _Data:
    """What choosing a rule reads besides the rows: the key's tiles, each config's constexprs, the GPU's
    multiprocessors, and whether keys are bucketed to powers of two."""

    work: tuple[Tile, ...]
    constexprs: tuple[tuple[tuple[str, int], ...], ...]  # per config, (name, value) of the tiles' constexprs
    sms: int
    pow2: bool

    @classmethod
    def of(cls, kernel: Kernel, sms: int) -> _Data:
        work = tiles(kernel)
        constexprs = tuple(tuple(sorted(c.items())) for c in consts_of(kernel, work))
        return cls(work=work, constexprs=constexprs, sms=sms, pow2=kernel.bucket == "pow2")

    @functools.cached_property
    def consts(self) -> list[dict[str, int]]:
        return [dict(c) for c in self.constexprs]


@dataclass(frozen=True)
class _Class:
    """One class's measured rows and, for each row, every other row in the order each rule reaches for them:
    by distance (the neighbours' rule; ties: table order) and by the nearest-row rule's rank. Computed once
    (quadratic in the rows, as MAX_MEASURED_KEYS bounds) and read for every fold: a fold's rules take each
    row's first ones of the fold's pool."""

    rows: tuple[Measured, ...]
    data: _Data
    blocks: tuple[int, ...]  # each config's variant's blocks per multiprocessor, of the rows' class (): not known
    logs: tuple[tuple[float, ...], ...]
    by_distance: tuple[tuple[int, ...], ...]
    by_rank: tuple[tuple[int, ...], ...]
    _work: dict[tuple[int, int, int], list[float]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rows: Sequence[Measured], data: _Data, blocks: tuple[int, ...] = ()) -> _Class:
        logs = tuple(_logs(r.key) for r in rows)
        approx = [[_log2_approx(v) for v in r.key] for r in rows]
        by_distance, by_rank = [], []
        for i, row in enumerate(rows):
            others = [j for j in range(len(rows)) if j != i]  # sorted() is stable: ties stay in table order
            distance = [_log_distance(other, logs[i]) for other in logs]
            by_distance.append(tuple(sorted(others, key=distance.__getitem__)))
            v, v_logs = _bucketed(row.key, data.pow2)
            rank = [_nearest_rank(r.key, approx[j], v, v_logs) for j, r in enumerate(rows)]
            by_rank.append(tuple(sorted(others, key=rank.__getitem__)))
        return cls(rows=tuple(rows), data=data, blocks=blocks, logs=logs, by_distance=tuple(by_distance),
                   by_rank=tuple(by_rank))  # fmt: skip

    def work(self, c: int, occupancy: int, fixed: int) -> list[float]:
        """log2 of config c's work at each row with this occupancy and fixed cost (kept: every fold reads it)."""
        got = self._work.get((c, occupancy, fixed))
        if got is None:
            d = self.data
            got = [log2_work(d.work, d.consts[c], r.key, d.sms, occupancy, fixed) for r in self.rows]
            self._work[(c, occupancy, fixed)] = got
        return got

    def nearest_picks(self, targets: Sequence[int], pool: Sequence[bool]) -> list[int | None]:
        """Each target row's pick by the nearest-row rule from the pool's other rows (None: the pool has none)."""
        out: list[int | None] = []
        for i in targets:
            j = next((j for j in self.by_rank[i] if pool[j]), None)
            out.append(None if j is None else self.rows[j].fastest)
        return out


@dataclass(frozen=True)
class _Held:
    """A class's target rows (indices) prepared for predicting each from its nearest rows of a pool (never
    itself) by every candidate rule at once: each target's nearest (nearest first) with their weights, and per
    config and k the sums over the k nearest of w * log2 time and w, and whether any is unmeasured (the part of
    a prediction that does not depend on the work; a target with fewer neighbours sums them all)."""

    klass: _Class
    targets: tuple[int, ...]
    near: list[list[int]]
    weights: list[list[float]]
    sums: list[dict[int, tuple[list[float], list[float], list[bool]]]]  # [config][k of NEIGHBOURS]: per target
    _work: dict[tuple[int, int, int], tuple[list[float], dict[int, list[float]]]] = field(
        default_factory=dict, compare=False, repr=False)  # fmt: skip

    @classmethod
    def of(cls, klass: _Class, targets: Sequence[int], pool: Sequence[bool]) -> _Held:
        most = max(NEIGHBOURS)
        near, weights = [], []
        for i in targets:
            nearest = [j for j in klass.by_distance[i] if pool[j]][:most]
            near.append(nearest)
            weights.append([1.0 / ((_log_distance(klass.logs[j], klass.logs[i]) + limits.SELECTION_WEIGHT_OFFSET) ** 2)
                            for j in nearest])  # fmt: skip
        lt = [[math.log2(max(t, 1e-3)) if t is not None else None for t in r.us] for r in klass.rows]
        sums = []
        for c in range(len(klass.data.consts)):
            prefixes = []
            for nearest, ws in zip(near, weights, strict=True):
                a = w_sum = 0.0
                missing = False
                prefix = [(0.0, 0.0, True)]
                for w, j in zip(ws, nearest, strict=True):
                    t = lt[j][c]
                    if t is None:
                        missing = True
                    else:
                        a, w_sum = a + w * t, w_sum + w
                    prefix.append((a, w_sum, missing or w_sum == 0.0))
                prefixes.append(prefix)
            sums.append({k: ([p[0] for p in at], [p[1] for p in at], [p[2] for p in at])
                         for k, at in _at_each_k(prefixes).items()})  # fmt: skip
        return cls(klass=klass, targets=tuple(targets), near=near, weights=weights, sums=sums)

    def _work_sums(self, c: int, occupancy: int, fixed: int, k: int) -> tuple[list[float], list[float]]:
        """Config c's log2 work at each target, and the sum over each target's k nearest of w * log2 work (with
        this occupancy and fixed cost; kept, for every k of NEIGHBOURS)."""
        got = self._work.get((c, occupancy, fixed))
        if got is None:
            lw = self.klass.work(c, occupancy, fixed)
            prefixes = [[0.0, *itertools.accumulate(w * lw[j] for w, j in zip(weights, near, strict=True))]
                        for near, weights in zip(self.near, self.weights, strict=True)]  # fmt: skip
            got = self._work[(c, occupancy, fixed)] = ([lw[i] for i in self.targets], _at_each_k(prefixes))
        return got[0], got[1][k]

    def estimates(self, c: int, k: int, scale: float, occupancy: int, fixed: int) -> list[float | None]:
        """Config c's predicted log2 time at each target by the rule (k, scale) with this occupancy and fixed
        cost; None: not measured at every neighbour."""
        a, w, bad = self.sums[c][k]
        if scale <= 0:
            return [None if x else t / ws for t, ws, x in zip(a, w, bad, strict=True)]
        here, b = self._work_sums(c, occupancy, fixed, k)
        return [None if x else (t + scale * (ws * h - bw)) / ws
                for t, ws, x, h, bw in zip(a, w, bad, here, b, strict=True)]  # fmt: skip

    def picks(self, k: int, scale: float, occupancy: Sequence[int], fixed: int) -> list[int | None]:
        """Each target's pick by the rule (k, scale, each config's occupancy, () none; the fixed cost)."""
        configs = range(len(self.sums))
        return _least([self.estimates(c, k, scale, occupancy[c] if occupancy else 0, fixed) for c in configs])


def _at_each_k(prefixes: Sequence[Sequence[_T]]) -> dict[int, list[_T]]:
    """Per k of NEIGHBOURS, each target's prefix sums (over its 0, 1, 2, ... nearest) at k: over all its nearest
    where it has fewer than k."""
    return {k: [p[min(k, len(p) - 1)] for p in prefixes] for k in NEIGHBOURS}


def _least(estimates: Sequence[Sequence[float | None]]) -> list[int | None]:
    """Per row, the config (index into ``estimates``) with the least estimate (ties: the first; None: none has
    one)."""
    out: list[int | None] = []
    for row in zip(*estimates, strict=True):
        best, best_t = None, 0.0
        for c, est in enumerate(row):
            if est is not None and (best is None or est < best_t):
                best, best_t = c, est
        out.append(best)
    return out


def _candidates(data: _Data, scales: Sequence[float] = SCALES) -> list[tuple[int, float, int]]:
    """The candidate (k, scale) rules, in the order ties go, with no fixed cost."""
    return [(k, s, 0) for k in NEIGHBOURS for s in (scales if data.work else (0.0,))]


def _candidate_picks(held: _Held, occupancy: Sequence[int], candidates: Sequence[tuple[int, float, int]],
                     ) -> dict[tuple[int, float, int], list[int | None]]:  # fmt: skip
    """Each candidate rule's (k, scale, fixed cost) pick for each of the held targets: what ``predict``
    computes, with the neighbours' sums shared between the candidates (prefix sums over the nearest first; a
    scale enters as A + scale * (W * here - B)), so that choosing among them costs a second, not a minute."""
    return {(k, s, f): held.picks(k, s, occupancy, f) for k, s, f in candidates}


def _mean_log(ratios: Iterable[float]) -> float:
    """The score rules are chosen by: the mean log2 of their picks' ratios."""
    return statistics.fmean(math.log2(min(r, 1e9)) for r in ratios)


def _error(groups: Sequence[Sequence[Measured]], picks: Sequence[Sequence[int | None]]) -> tuple[HeldOut, float]:
    """A rule's held-out error from its pick for each row (groups' rows in order); and its mean log2."""
    ratios: list[tuple[float, tuple[int, ...]]] = []
    for rows, chosen in zip(groups, picks, strict=True):
        ratios += [(row.over_best(c), row.key) for row, c in zip(rows, chosen, strict=True)]
    worst = max(ratios)
    held = HeldOut(points=len(ratios), median=statistics.median(r for r, _ in ratios), worst=worst[0],
                   worst_key=worst[1], over=sum(r > limits.SELECTION_SLACK for r, _ in ratios))  # fmt: skip
    return held, _mean_log(r for r, _ in ratios)


# neighbours (0: nearest row), scale, occupancy per config, fixed cost, waves of each variant's own blocks per SM
Rule = tuple[int, float, tuple[int, ...], int, bool]
NEAREST_RULE: Rule = (0, 0.0, (), 0, False)


def choose(kernel: Kernel, sms: int, blocks: Blocks | None = None) -> Selection:
    """The rule with the least held-out error on the kernel's measured rows (NEAREST without enough): each way
    of choosing runs on every fold of the keys, and the one with the least error over the folds chooses the rule
    from all the rows (the module's docstring). ``blocks``: each class's variants' blocks per multiprocessor
    (Artifact.blocks_per_sm), for the way that counts waves of those; None: that way is not tried."""
    measured = grouped(kernel)
    if not measured:
        return NEAREST
    own = tuple(_blocks_of(blocks, g) for g in measured) if blocks is not None else None
    return _chosen(tuple(tuple(rows) for rows in measured.values()), _Data.of(kernel, sms), own)


@functools.lru_cache(maxsize=64)
def _chosen(measured: tuple[tuple[Measured, ...], ...], data: _Data,
            blocks: tuple[tuple[int, ...], ...] | None) -> Selection:  # fmt: skip
    """choose() for these rows (kept: loading a recipe again fits the same rows again)."""
    classes = [_Class.of(rows, data, blocks[g] if blocks is not None else ()) for g, rows in enumerate(measured)]
    errors = _cross_errors(classes, _folds(measured), data)
    flat, waved, fixed, own = _rules(classes, [[True] * len(c.rows) for c in classes], data)
    # the way of choosing that predicts the other folds best (ties: the simpler, then the earlier)
    ways = [(NEAREST_RULE, errors[0]), (flat, errors[1])] + [
        (r, e) for r, e in ((waved, errors[2]), (fixed, errors[3]), (own, errors[4])) if r != flat
    ]
    (k, scale, occupancy, cost, by_blocks), (held_out, _) = min(ways, key=lambda way: way[1][1])
    # (the nearest-row rule is k 0; _rules gives no occupancies where the rule is unscaled or counts no waves)
    return Selection(neighbours=k, scale=scale, tiles=data.work, sms=data.sms, held_out=held_out,
                     nearest=errors[0][0], occupancy=occupancy, fixed=cost, own_occupancy=by_blocks)  # fmt: skip


FOLDS = 4  # the held-out error's folds of the measured keys


def _folds(measured: Sequence[Sequence[Measured]]) -> list[frozenset[tuple[int, ...]]]:
    """The measured keys in FOLDS folds: sorted, every FOLDS-th in one (the same rows, the same folds)."""
    keys = sorted({r.key for rows in measured for r in rows})
    return [frozenset(keys[f::FOLDS]) for f in range(FOLDS)]


def _cross_errors(classes: Sequence[_Class], folds: Sequence[frozenset[tuple[int, ...]]], data: _Data,
                  ) -> list[tuple[HeldOut, float]]:  # fmt: skip
    """The error over the folds of each way of choosing: the nearest-row rule, then _rules' four (k and scale;
    fitted occupancies; a fixed cost; the variants' own blocks): each row picked for by the rule the rows of the
    other folds chose, from those rows (a row whose class has none there is left out)."""
    ways = 5
    rows_out: list[list[list[Measured]]] = [[[] for _ in classes] for _ in range(ways)]
    picks: list[list[list[int | None]]] = [[[] for _ in classes] for _ in range(ways)]
    for fold in folds:
        pools = [[r.key not in fold for r in c.rows] for c in classes]
        # the classes the rule is chosen on are those of all the rows (MIN_ROWS or more there), with fewer here
        fitted = [g for g, pool in enumerate(pools) if sum(pool) > 1]
        rules = (NEAREST_RULE, *_rules([classes[g] for g in fitted], [pools[g] for g in fitted], data))
        for g, (klass, pool) in enumerate(zip(classes, pools, strict=True)):
            targets = [i for i, inside in enumerate(pool) if not inside]
            if not targets or not any(pool):
                continue
            held = _Held.of(klass, targets, pool)
            for w, rule in enumerate(rules):
                rows_out[w][g] += [klass.rows[i] for i in targets]
                picks[w][g] += _picks(klass, held, pool, rule, data)
    return [_error(rows_out[w], picks[w]) for w in range(ways)]


def _picks(klass: _Class, held: _Held, pool: Sequence[bool], rule: Rule, data: _Data) -> list[int | None]:
    """The config a rule picks for each held target from the pool's rows (the dispatcher's choice: predict and
    nearest_row compute the same, one key at a time)."""
    k, scale, occupancy, fixed, own = rule
    if k == 0:
        return klass.nearest_picks(held.targets, pool)
    return held.picks(k, scale, klass.blocks if own else occupancy, fixed)


def _rules(classes: Sequence[_Class], pools: Sequence[Sequence[bool]], data: _Data,
           ) -> tuple[Rule, Rule, Rule, Rule]:  # fmt: skip
    """The rules chosen on the pools' rows (each predicted from the pool's others): the candidate (k, scale)
    with the least leave-one-out error; with occupancies (grid tiles, a scaled candidate: each config's
    occupancy chosen the same way, then k and scale again) where that errs less; with a fixed cost
    (loop tiles: each of FIXED with the TOP_SCALED best scaled candidates) where that errs less; and with the
    waves of each class's variants' own blocks per multiprocessor (grid tiles, every class's known: the scaled
    candidates again) where that errs less. The nearest-row rule (k 0) where it errs less than any."""
    if not classes:
        return NEAREST_RULE, NEAREST_RULE, NEAREST_RULE, NEAREST_RULE
    targets = [[i for i, inside in enumerate(pool) if inside] for pool in pools]
    measured = [[c.rows[i] for i in t] for c, t in zip(classes, targets, strict=True)]
    nearest_picks = [c.nearest_picks(t, pool) for c, t, pool in zip(classes, targets, pools, strict=True)]
    nearest_score = _error(measured, nearest_picks)[1]
    held = [_Held.of(c, t, pool) for c, t, pool in zip(classes, targets, pools, strict=True)]

    def rules(occupancy: Sequence[int] | None, candidates: Sequence[tuple[int, float, int]],
              ) -> list[tuple[float, int, float, int]]:  # fmt: skip
        """The candidates (k, scale, fixed) with their mean log2 error, best first (ties: the first); occupancy
        None: each class's own blocks."""
        per_group = [_candidate_picks(h, h.klass.blocks if occupancy is None else occupancy, candidates)
                     for h in held]  # fmt: skip
        scored = [(_error(measured, [group[c] for group in per_group])[1], *c) for c in per_group[0]]
        return sorted(scored, key=lambda x: x[0])

    def rule(best: tuple[float, int, float, int], occupancy: Sequence[int], own: bool = False) -> Rule:
        if best[0] >= nearest_score:
            return NEAREST_RULE
        return best[1], best[2], tuple(occupancy) if best[2] > 0 and any(occupancy) else (), best[3], own

    none = (0,) * len(data.consts)
    flat = rules(none, _candidates(data))
    waved: tuple[tuple[float, int, float, int], Sequence[int]] = (flat[0], none)
    scaled = [r for r in flat if r[2] > 0]
    if scaled and any(not t.loop for t in data.work):
        # each config's programs per wave, for the best scaled rule; then k and scale again (the unscaled
        # candidates read no work: their errors stand)
        occupancy = _occupancy(held, *scaled[0][1:])
        if any(occupancy):
            again = rules(occupancy, _candidates(data, [x for x in SCALES if x > 0]))[0]
            if again[0] < flat[0][0] - 1e-12:
                waved = (again, occupancy)
    fixed = flat[0]
    costs = [(k, s, f) for _, k, s, _ in scaled[:TOP_SCALED] for f in FIXED if f > 0]
    if costs and any(t.loop for t in data.work):
        tried = rules(none, costs)[0]
        if tried[0] < flat[0][0] - 1e-12:
            fixed = tried
    own = flat[0], False
    if scaled and any(not t.loop for t in data.work) and all(any(c.blocks) for c in classes):
        tried = rules(None, _candidates(data, [x for x in SCALES if x > 0]))[0]
        if tried[0] < flat[0][0] - 1e-12:
            own = tried, True
    return rule(flat[0], none), rule(*waved), rule(fixed, none), rule(own[0], none, own[1])


def _occupancy(held: Sequence[_Held], k: int, scale: float, fixed: int) -> tuple[int, ...]:
    """Each config's programs per multiprocessor in a wave: one config at a time, the candidate with the least
    held-out error (mean log2 over the held targets, as _error's) of the rule (k, scale) (ties: the first; 0
    first)."""
    rows = [h.klass.rows[i] for h in held for i in h.targets]
    configs = range(len(held[0].sums))

    def estimates(c: int, o: int) -> list[float | None]:
        """Config c's predicted log2 time at every target (all classes in order) with occupancy o; None:
        unmeasured."""
        return [e for h in held for e in h.estimates(c, k, scale, o, fixed)]

    def score(ests: Sequence[Sequence[float | None]]) -> float:
        return _mean_log(row.over_best(c) for row, c in zip(rows, _least(ests), strict=True))

    chosen = [0] * len(configs)
    ests = [estimates(c, 0) for c in configs]
    current = score(ests)
    for c in configs:
        for o in OCCUPANCIES[1:]:
            before = ests[c]
            ests[c] = estimates(c, o)
            tried = score(ests)
            if tried < current - 1e-12:
                current, chosen[c] = tried, o
            else:
                ests[c] = before
    return tuple(chosen)
