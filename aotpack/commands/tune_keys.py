"""Which keys ``aotpack tune`` times: the listed ones, those ``sample:`` draws from ranges, and those
``refine:`` puts where the fastest config changes between the keys timed before."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence

from .. import limits, model, selection
from ..plan import classes
from ..states import DIVISOR

REFINE_ROUNDS = 4  # rounds `tune: refine:` times its keys in, each round's chosen with the keys before it timed
REFINE_NEAR = 3  # a measured key's nearest keys a refinement key may be put between


def sampled(spec: model.TuneSpec, aligned: bool = False) -> list[tuple[int, ...]]:
    """``sample:``'s keys: each dimension drawn log-uniformly from its range (skinny, square and
    off-power-of-two shapes alike), seeded; the same recipe draws the same keys. ``aligned`` (a kernel with
    several classes): each value is rounded to a multiple of 16 with probability 1/2, dimension by dimension,
    so that the classes a 16-divisible size selects get as many rows as the one that assumes nothing (a
    uniform draw makes a multiple of 16 one time in 16, and leaves those classes the listed keys alone)."""
    draw = random.Random(spec.seed)
    keys: list[tuple[int, ...]] = []
    for _ in range(spec.sample * 4):  # duplicates are drawn again, a bounded number of times
        key = tuple(_value(draw, lo, hi, aligned) for lo, hi in spec.ranges)
        if key not in keys and key not in spec.keys:
            keys.append(key)
        if len(keys) == spec.sample:
            break
    return keys


def _value(draw: random.Random, lo: int, hi: int, aligned: bool) -> int:
    value = max(lo, min(hi, round(2 ** draw.uniform(math.log2(lo), math.log2(hi)))))
    if aligned and draw.random() < 0.5:
        up, down = -(-value // DIVISOR) * DIVISOR, value // DIVISOR * DIVISOR
        value = up if up <= hi else down if down >= lo else value  # a range without a multiple keeps the draw
    return value


def units(kernel: model.Kernel) -> list[tuple[tuple[tuple[str, str], ...], tuple[int, ...]]]:
    """The kernel's tuning work before any refining, (binding, key): the listed keys, then the sampled ones,
    each binding's keys interleaved so that a budget that ends the work early leaves every binding keys."""
    spec = kernel.tune
    assert spec is not None
    keys = list(dict.fromkeys(spec.keys)) + sampled(spec, aligned=len(classes.specs(kernel)) > 1)
    return [(binding, key) for key in keys for binding in kernel.bindings]


def share(count: int, rounds: int) -> int:
    """How many of ``count`` refining keys the first ``rounds`` rounds time."""
    return -(-count * rounds // REFINE_ROUNDS)


def refinements(kernel: model.Kernel, count: int, taken: Iterable[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Up to ``count`` keys to time next (``tune: refine:``), where the fastest config changes between the
    kernel's measured keys: for each measured key and each of its REFINE_NEAR nearest (of its arch, types and
    class) with another fastest config, where either's fastest loses more than SELECTION_SLACK at the other, the
    key halfway between the two in log space (``_between``). A call there may want either config, and only a key
    timed there tells which: the dispatcher's rule predicts from the measured keys around it. The gaps of most
    loss times width first (log2 of the loss times the distance: a wide gap with a small loss, a narrow one with
    a large; ties: the smaller key); no key of the kernel's rules or of ``taken``, none twice."""
    gaps: dict[tuple[int, ...], float] = {}
    for rows in selection.groups(kernel):
        for i, row in enumerate(rows):
            for distance, near in selection.neighbours([*rows[:i], *rows[i + 1 :]], row.key, REFINE_NEAR):
                if near.fastest == row.fastest:
                    continue
                loss = min(max(row.over_best(near.fastest), near.over_best(row.fastest)), 2.0**10)
                key = _between(row.key, near.key)
                if loss > limits.SELECTION_SLACK and key is not None:
                    gaps[key] = max(gaps.get(key, 0.0), math.log2(loss) * distance)
    seen = {*taken, *(r.key for r in kernel.rules)}
    return sorted((k for k in gaps if k not in seen), key=lambda k: (-gaps[k], k))[:count]


def _between(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The key halfway between two in log space, each value a multiple of 16 where both ends' are and none
    where neither end's is (the class of the two, where they share one); None: no new key lies between."""
    out = []
    for x, y in zip(a, b, strict=True):
        lo, hi = min(x, y), max(x, y)
        mid = round(math.sqrt(max(lo, 1) * max(hi, 1)))
        if x % DIVISOR == 0 and y % DIVISOR == 0:
            mid = max(lo, min(hi, round(mid / DIVISOR) * DIVISOR))
        elif x % DIVISOR and y % DIVISOR and mid % DIVISOR == 0:
            mid = mid + 1 if mid + 1 < hi else mid - 1 if mid - 1 > lo else mid
        out.append(mid)
    key = tuple(out)
    return None if key in (tuple(a), tuple(b)) else key
