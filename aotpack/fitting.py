"""How the dispatcher's rule (aotpack/selection.py) is chosen from a kernel's tuning measurements.

Its ``k`` and ``scale`` are chosen per kernel from the measurements, not by hand: each candidate rule predicts every
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

The error over the folds is over every class the table times alike, the classes calls rarely select too
(docs/tuning.md). Where the table holds validation rows (``tune: validate:``: keys drawn at random as calls are),
the held-out error printed is at those keys instead: that of the rule chosen without them, each key predicted
from the other measured rows as a call's would be. The dispatcher's rule is then chosen the same way from every
row, the validation rows too, and looks them up (tables.fit): the error printed is of a rule fitted to fewer keys
than the one built, which errs less (the demo's tables, half of their validation keys added, erred 20 to 30% less
at the other half's: docs/tuning.md).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from . import limits
from .model import NEAREST, HeldOut, Kernel, Selection, Tile
from .selection import (
    MIN_ROWS,
    Blocks,
    Group,
    Measured,
    blocks_of,
    bucketed,
    consts_of,
    grouped,
    log2_approx,
    log2_work,
    log_distance,
    logs_of,
    measured_rows,
    nearest_rank,
    tiles,
)

NEIGHBOURS = (1, 2, 3, 4, 6, 8, 12, limits.MAX_NEIGHBOURS)  # the candidates' k
# the candidates' power of the work ratio: below 1 where fixed costs (a launch, a row's reduction) do not scale
SCALES = (0.0, 0.5, 0.75, 1.0)
OCCUPANCIES = (0, 1, 2, 3, 4, 8)  # the candidates' programs per multiprocessor in a wave (0: not in waves)
# the candidates' fixed cost of a program, in elements of its loops' tiles (0: work is the loops' trips): what a
# program costs besides its loops (its launch, loading a row's statistics, a reduction's tail)
FIXED = (0, 512, 2048, 8192)
TOP_SCALED = 3  # the best scaled (k, scale) candidates each fixed cost is tried with
_T = TypeVar("_T")


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
    def of(cls, rows: Sequence[Measured], data: _Data, blocks: tuple[int, ...] = (), ordered_from: int = 0) -> _Class:
        """The class of these rows; ``ordered_from``: only the rows from that index on are ever targets (the
        others' orders are left empty)."""
        logs = tuple(logs_of(r.key) for r in rows)
        approx = [[log2_approx(v) for v in r.key] for r in rows]
        by_distance: list[tuple[int, ...]] = [()] * ordered_from
        by_rank: list[tuple[int, ...]] = [()] * ordered_from
        for i, row in enumerate(rows[ordered_from:], ordered_from):
            others = [j for j in range(len(rows)) if j != i]  # sorted() is stable: ties stay in table order
            distance = [log_distance(other, logs[i]) for other in logs]
            by_distance.append(tuple(sorted(others, key=distance.__getitem__)))
            v, v_logs = bucketed(row.key, data.pow2)
            rank = [nearest_rank(r.key, approx[j], v, v_logs) for j, r in enumerate(rows)]
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
            weights.append([1.0 / ((log_distance(klass.logs[j], klass.logs[i]) + limits.SELECTION_WEIGHT_OFFSET) ** 2)
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
    """The rule with the least held-out error on the kernel's timed rows, validation rows too (NEAREST without
    enough): each way of choosing runs on every fold of the keys, and the one with the least error over the folds
    chooses the rule from all the rows. Its held-out error is over the folds or, with MIN_ROWS or more validation
    rows (Kernel.validation) of measured classes, that of the rule chosen without them at them (the module's
    docstring). ``blocks``: each class's variants' blocks per multiprocessor (Artifact.blocks_per_sm), for the
    way that counts waves of those; None: that way is not tried."""
    measured = grouped(kernel)
    if not measured:
        return NEAREST
    data = _Data.of(kernel, sms)
    everything = grouped(kernel, (*kernel.rules, *kernel.validation))
    rule = _chosen(tuple(map(tuple, everything.values())), data, _own(blocks, everything))
    drawn = measured_rows(kernel, kernel.validation)
    checks = tuple(tuple(drawn.get(g, ())) for g in measured)
    if sum(map(len, checks)) < MIN_ROWS:
        return rule
    held_out, nearest = _validated(tuple(map(tuple, measured.values())), checks, data, _own(blocks, measured))
    return dataclasses.replace(rule, held_out=held_out, nearest=nearest, drawn=True)


def _own(blocks: Blocks | None, groups: Iterable[Group]) -> tuple[tuple[int, ...], ...] | None:
    return tuple(blocks_of(blocks, g) for g in groups) if blocks is not None else None


@functools.lru_cache(maxsize=64)
def _validated(measured: tuple[tuple[Measured, ...], ...], checks: tuple[tuple[Measured, ...], ...], data: _Data,
               blocks: tuple[tuple[int, ...], ...] | None) -> tuple[HeldOut, HeldOut]:  # fmt: skip
    """The held-out error of the rule chosen from the measured rows (_chosen), and the nearest-row rule's, at the
    validation rows: each predicted from the measured rows of its class, as the dispatcher predicts a call's key
    (never from another validation row). They choose nothing here: a rule chosen by them fits their errors (the
    demo's tables with the 240 live keys of half of the H200's benchmark runs per kernel as validation rows: the
    rule they chose erred more at the other half's keys than the folds' rule in two of the six halves, less in
    one; docs/tuning.md)."""
    rule = _chosen(measured, data, blocks)
    # per class with validation rows: the class of its rows and them (only they are targets), its pool, and them
    # prepared for prediction from the pool
    held = []
    for g, (rows, drawn) in enumerate(zip(measured, checks, strict=True)):
        if drawn:
            klass = _Class.of((*rows, *drawn), data, blocks[g] if blocks is not None else (), ordered_from=len(rows))
            pool = [True] * len(rows) + [False] * len(drawn)
            held.append((klass, pool, _Held.of(klass, range(len(rows), len(klass.rows)), pool)))

    def error(chosen: Rule) -> HeldOut:
        picks = [_picks(klass, prepared, pool, chosen, data) for klass, pool, prepared in held]
        return _error([list(drawn) for drawn in checks if drawn], picks)[0]

    way = (rule.neighbours, rule.scale, rule.occupancy, rule.fixed, rule.own_occupancy)
    return error(way), error(NEAREST_RULE)


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
    occupancy chosen the same way, then k and scale again) where that errs less; with a fixed cost (loop tiles:
    each of FIXED with the TOP_SCALED best scaled candidates) where that errs less; and with the waves of each
    class's variants' own blocks per multiprocessor (grid tiles, every class's known: the scaled candidates
    again) where that errs less. The nearest-row rule (k 0) where it errs less than any."""
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
