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

``k`` and ``scale`` are chosen per kernel from the measurements, not by hand: each candidate rule
predicts every measured row from the others (leave-one-out), and the one with the least mean log error
wins, the nearest-row rule (``neighbours`` 0, the dispatcher's rule for tables without times) included.
That error is the held-out error ``aotpack tune`` and ``aotpack inspect`` print. A kernel whose tables
measured fewer than MIN_ROWS keys of one class keeps the nearest-row rule.

The C runtime (aot_dispatch.c, choose_config) computes the same numbers in the same order; a test holds
the two to the same picks.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from . import expr, limits, manifest
from .model import NEAREST, HeldOut, Kernel, Selection, Tile

MIN_ROWS = 6  # measured keys of one class a rule is fitted to
NEIGHBOURS = (1, 2, 3, 4, 6, 8, 12, limits.MAX_NEIGHBOURS)  # the candidates' k
# the candidates' power of the work ratio: below 1 where fixed costs (a launch, a row's reduction) do not scale
SCALES = (0.0, 0.5, 0.75, 1.0)
DEFAULT_SMS = 132  # a table written before tables held the GPU's multiprocessors


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One measured key: its values and each config's median time (configs by index; None: not measured)."""

    key: tuple[int, ...]
    us: tuple[float | None, ...]

    @property
    def best(self) -> float:
        return min(t for t in self.us if t is not None)

    @property
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


def log2_work(tiles: Sequence[Tile], consts: Mapping[str, int], key: Sequence[int], sms: int) -> float:
    """log2 of a config's work at a key: programs of the grid's tiles (at least ``sms``) times loop trips."""
    programs, trips = 1, 1
    for t in tiles:
        n = max(1, _cdiv(key[t.dim], consts[t.constexpr]))
        if t.loop:
            trips *= n
        else:
            programs *= n
    return math.log2(float(max(programs, max(1, sms)))) + math.log2(float(trips))


def _distance(a: Sequence[int], b: Sequence[int]) -> float:
    return sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for x, y in zip(a, b, strict=True))


def neighbours(rows: Sequence[Measured], key: Sequence[int], k: int) -> list[tuple[float, Measured]]:
    """The k rows nearest the key, nearest first (ties: table order), with their distances."""
    near = sorted((_distance(r.key, key), i) for i, r in enumerate(rows))[:k]
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
) -> int | None:
    """The config (index) the rule picks for the key from these rows: the least predicted time among configs
    measured at every neighbour (and fitting the call); None: none is."""
    near = neighbours(rows, key, k)
    best, best_t = None, 0.0
    for c in range(len(consts)):
        if (fits is not None and not fits[c]) or any(r.us[c] is None for _, r in near) or not near:
            continue
        here = log2_work(work, consts[c], key, sms) if scale > 0 else 0.0
        total = weights = 0.0
        for d, r in near:
            w = 1.0 / ((d + limits.SELECTION_WEIGHT_OFFSET) * (d + limits.SELECTION_WEIGHT_OFFSET))
            t = math.log2(max(r.us[c] or 0.0, 1e-3))
            if scale > 0:
                t += scale * (here - log2_work(work, consts[c], r.key, sms))
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
    logs = [[_log2_approx(v) for v in r.key] for r in rows]
    return rows[_nearest_index([r.key for r in rows], logs, key, pow2, skip=-1)].fastest


def _nearest_index(keys: Sequence[Sequence[int]], logs: Sequence[Sequence[float]], key: Sequence[int], pow2: bool,
                   skip: int) -> int:  # fmt: skip
    """The index of the row the nearest-row rule takes for the key (``skip``: a row left out)."""
    v = [expr.next_pow2(x) if pow2 and x > 1 else x for x in key]
    v_logs = [_log2_approx(x) for x in v]
    best: tuple[int, float] | None = None
    pick = 0
    for j, (row_key, row_logs) in enumerate(zip(keys, logs, strict=True)):
        if j == skip:
            continue
        up = int(all(a >= b for a, b in zip(row_key, v, strict=True)))
        dist = sum(abs(a - b) for a, b in zip(row_logs, v_logs, strict=True))
        if best is None or up > best[0] or (up == best[0] and dist < best[1]):
            best, pick = (up, dist), j
    return pick


def groups(kernel: Kernel) -> list[list[Measured]]:
    """The measured rows, one list per (arch, types, class), in table order; each list of MIN_ROWS or more."""
    labels = [c.label for c in kernel.configs]
    out: dict[tuple[object, ...], list[Measured]] = {}
    for r in kernel.rules:
        if r.median_us:
            times = dict(r.median_us)
            out.setdefault((r.arch, r.types, r.specialization), []).append(
                Measured(key=r.key, us=tuple(times.get(label) for label in labels)))  # fmt: skip
    return [rows for rows in out.values() if len(rows) >= MIN_ROWS and any(t is not None for t in rows[0].us)]


def consts_of(kernel: Kernel, work: Sequence[Tile]) -> list[dict[str, int]]:
    names = {t.constexpr for t in work}
    return [{n: cast(int, c.value(n)) for n in names} for c in kernel.configs]


def _candidate_picks(
    rows: Sequence[Measured], work: Sequence[Tile], consts: Sequence[Mapping[str, int]], sms: int
) -> dict[tuple[int, float], list[int | None]]:
    """Every candidate rule's pick for each row predicted from the others: what ``predict`` computes, with the
    neighbours' sums shared between the candidates (prefix sums over the nearest first; a scale enters as
    A + scale * (W * here - B)), so that choosing among them costs a second, not a minute."""
    n, nconfigs = len(rows), len(consts)
    logs = [[math.log2(max(v, 1)) for v in r.key] for r in rows]
    lt = [[math.log2(max(t, 1e-3)) if t is not None else None for t in r.us] for r in rows]
    lw = [[log2_work(work, consts[c], r.key, sms) for c in range(nconfigs)] for r in rows]
    scales = SCALES if work else (0.0,)
    picks: dict[tuple[int, float], list[int | None]] = {(k, s): [] for k in NEIGHBOURS for s in scales}
    for i in range(n):
        mine = logs[i]
        near = heapq.nsmallest(max(NEIGHBOURS), ((sum(abs(a - b) for a, b in zip(other, mine, strict=True)), j)
                                                 for j, other in enumerate(logs) if j != i))  # fmt: skip
        weights = [1.0 / ((d + limits.SELECTION_WEIGHT_OFFSET) * (d + limits.SELECTION_WEIGHT_OFFSET)) for d, _ in near]
        # per config, prefix sums over the nearest: of w * log2 time, w * log2 work, w, and the unmeasured
        sums = []
        for c in range(nconfigs):
            a = b = w_sum = 0.0
            missing = 0
            prefix = [(0.0, 0.0, 0.0, 0)]
            for w, (_, j) in zip(weights, near, strict=True):
                t = lt[j][c]
                if t is None:
                    missing += 1
                else:
                    a, b, w_sum = a + w * t, b + w * lw[j][c], w_sum + w
                prefix.append((a, b, w_sum, missing))
            sums.append(prefix)
        for k in NEIGHBOURS:
            kk = min(k, len(near))
            for scale in scales:
                best, best_t = None, 0.0
                for c in range(nconfigs):
                    a, b, w_sum, missing = sums[c][kk]
                    if missing or kk == 0:
                        continue
                    est = (a + scale * (w_sum * lw[i][c] - b)) / w_sum
                    if best is None or est < best_t:
                        best, best_t = c, est
                picks[(k, scale)].append(best)
    return picks


def _error(groups: Sequence[Sequence[Measured]], picks: Sequence[Sequence[int | None]]) -> tuple[HeldOut, float]:
    """A rule's held-out error from its pick for each row (groups' rows in order); and its mean log2."""
    ratios: list[tuple[float, tuple[int, ...]]] = []
    for rows, chosen in zip(groups, picks, strict=True):
        for row, c in zip(rows, chosen, strict=True):
            t = row.us[c] if c is not None else None
            ratios.append(((t if t is not None else math.inf) / row.best, row.key))
    worst = max(ratios)
    held = HeldOut(points=len(ratios), median=statistics.median(r for r, _ in ratios), worst=worst[0],
                   worst_key=worst[1], over=sum(r > limits.SELECTION_SLACK for r, _ in ratios))  # fmt: skip
    return held, statistics.fmean(math.log2(min(r, 1e9)) for r, _ in ratios)


def choose(kernel: Kernel, sms: int) -> Selection:
    """The rule with the least held-out error on the kernel's measured rows (NEAREST without enough)."""
    measured = groups(kernel)
    if not measured:
        return NEAREST
    work = tiles(kernel)
    consts = consts_of(kernel, work)
    pow2 = kernel.bucket == "pow2"
    nearest_picks = []
    for rows in measured:
        keys, logs = [r.key for r in rows], [[_log2_approx(v) for v in r.key] for r in rows]
        nearest_picks.append([rows[_nearest_index(keys, logs, row.key, pow2, skip=i)].fastest
                              for i, row in enumerate(rows)])  # fmt: skip
    nearest, nearest_score = _error(measured, nearest_picks)
    per_group = [_candidate_picks(rows, work, consts, sms) for rows in measured]
    best: tuple[float, int, float, HeldOut] | None = None
    for k, scale in per_group[0]:
        held, score = _error(measured, [group[(k, scale)] for group in per_group])
        if best is None or score < best[0] - 1e-12:
            best = (score, k, scale, held)
    assert best is not None
    if best[0] >= nearest_score:
        return Selection(tiles=work, sms=sms, held_out=nearest, nearest=nearest)
    return Selection(neighbours=best[1], scale=best[2], tiles=work, sms=sms, held_out=best[3], nearest=nearest)


def entry(kernel: Kernel) -> manifest.Selection | None:
    """The rule and its held-out error as the manifest holds them (None: no table measured enough keys)."""
    sel, names = kernel.selection, [n for n, _ in kernel.key]
    if sel.held_out is None or sel.nearest is None:
        return None

    def held(h: HeldOut) -> manifest.HeldOut:
        return {"points": h.points, "median": round(h.median, 4), "worst": round(h.worst, 4),
                "worst_key": list(h.worst_key), "over": h.over}  # fmt: skip

    tiles = [f"{names[t.dim]}/{t.constexpr} {'loop' if t.loop else 'grid'}" for t in sel.tiles]
    return {"neighbours": sel.neighbours, "scale": sel.scale, "tiles": tiles, "held_out": held(sel.held_out),
            "nearest": held(sel.nearest)}  # fmt: skip
