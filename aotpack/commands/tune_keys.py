"""Which keys ``aotpack tune`` times: the listed ones, those ``sample:`` draws from ranges, and those
``refine:`` puts where the fastest config changes between the keys timed before."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sequence

from .. import limits, model, selection
from ..plan import classes
from ..states import DIVISOR

REFINE_ROUNDS = 4  # rounds `tune: refine:` times its keys in, each round's chosen with the keys before it timed
REFINE_NEAR = 3  # a measured key's nearest keys a refinement key may be put between


def sampled(spec: model.TuneSpec, aligned: bool = False) -> list[tuple[int, ...]]:
    """``sample:``'s keys: the points of a low-discrepancy sequence (``_spread``, from an index the seed picks)
    over the log of each dimension's range (skinny, square and off-power-of-two shapes alike); the same recipe
    draws the same keys. Keys drawn independently leave holes where a call finds no measured key near it: 120 of
    them over the demo layer norm's range left no key of 400 rows or more with 12,000 columns or more, and 10 of
    the 64 cells of an 8 by 8 grid over the range's log empty (the mean over 50 seeds; this sequence: 0.7).
    ``aligned`` (a kernel with several classes): each dimension is rounded to a multiple of 16 in half the keys,
    in every combination of the dimensions alike, so that the classes a 16-divisible size selects get as many
    rows as the one that assumes nothing (a uniform draw makes a multiple of 16 one time in 16, and leaves those
    classes the listed keys alone); which combination a key takes is one more coordinate of the sequence, so
    that each combination's keys are spread over the range too."""
    dims = len(spec.ranges)
    draw = random.Random(spec.seed)
    points = _spread(dims + aligned, draw.randrange(1 << 32))
    keys: list[tuple[int, ...]] = []
    for _ in range(spec.sample * 4):  # values rounded onto one key are drawn again, a bounded number of times
        point = next(points)
        rounded = int(point[dims] * (1 << dims)) if aligned else 0  # bit d: dimension d a multiple of 16
        key = tuple(value_at(lo, hi, point[d], rounded >> d & 1 == 1) for d, (lo, hi) in enumerate(spec.ranges))
        if key not in keys and key not in spec.keys:
            keys.append(key)
        if len(keys) == spec.sample:
            break
    return keys


def _spread(dims: int, start: int) -> Iterator[tuple[float, ...]]:
    """The Halton sequence in [0, 1) ** dims from index ``start``: coordinate j of point n is n's digits in the
    j-th prime base read after the point. Any 2 ** a * 3 ** b * ... consecutive points put one in each box of a
    grid of 2 ** a by 3 ** b by ... boxes, so that no stretch of it leaves a region out as independent draws
    do. Ten lines, where scipy.stats.qmc's Sobol sequence would make scipy a dependency of every tuning host."""
    bases = list(itertools.islice((p for p in itertools.count(2) if all(p % q for q in range(2, p))), dims))
    for n in itertools.count(start):
        point = []
        for base in bases:
            x, scale, rest = 0.0, 1.0 / base, n
            while rest:
                rest, digit = divmod(rest, base)
                x, scale = x + digit * scale, scale / base
            point.append(x)
        yield tuple(point)


def value_at(lo: int, hi: int, u: float, aligned: bool) -> int:
    """The value at u in [0, 1) of the range's log, rounded; ``aligned``: to a multiple of 16 (the nearest
    above, or below where that leaves the range; a range without a multiple keeps the value). benchmarks/dispatch.py
    draws its shapes' values with it too."""
    value = max(lo, min(hi, round(2 ** (math.log2(lo) + u * (math.log2(hi) - math.log2(lo))))))
    if aligned:
        up, down = -(-value // DIVISOR) * DIVISOR, value // DIVISOR * DIVISOR
        value = up if up <= hi else down if down >= lo else value
    return value


def drawn(ranges: Sequence[tuple[int, int]], count: int, draw: random.Random, aligned: bool,
          taken: Iterable[tuple[int, ...]] = ()) -> list[tuple[int, ...]]:  # fmt: skip
    """``count`` keys drawn at random, each dimension log-uniformly from its range (with ``aligned``, a multiple of
    16 half of the time, dimension by dimension), none of ``taken`` and none twice: independent draws, as calls
    come, not ``sampled``'s sequence. benchmarks/dispatch.py draws its shapes with it too."""
    seen = set(taken)
    keys: list[tuple[int, ...]] = []
    for _ in range(count * 4):  # keys drawn twice are drawn again, a bounded number of times
        key = tuple(value_at(lo, hi, draw.random(), aligned and draw.random() < 0.5) for lo, hi in ranges)
        if key not in keys and key not in seen:
            keys.append(key)
        if len(keys) == count:
            break
    return keys


def validation(kernel: model.Kernel) -> list[tuple[int, ...]]:
    """``tune: validate:``'s keys: drawn as calls are (``drawn``, a seed of their own from sample:'s), none a key
    the table looks up; a kernel of several classes draws half of them 16-divisible dimension by dimension, as
    benchmarks/dispatch.py's --aligned does, so that every class has keys to measure its rule at."""
    spec = kernel.tune
    if spec is None or not spec.validate:
        return []
    several = len(classes.specs(kernel)) > 1
    draw = random.Random(f"validate {spec.seed}")
    taken = [*spec.keys, *sampled(spec, aligned=several)]
    first = drawn(spec.ranges, spec.validate - spec.validate // 2 if several else spec.validate, draw, False, taken)
    return first + drawn(spec.ranges, spec.validate - len(first), draw, True, [*taken, *first])


def units(kernel: model.Kernel) -> list[tuple[tuple[tuple[str, str], ...], tuple[int, ...]]]:
    """The kernel's tuning work before any refining, (binding, key): the listed keys, the sampled ones, then those
    to validate the rule on, each binding's keys interleaved so that a budget that ends the work early leaves every
    binding keys."""
    spec = kernel.tune
    assert spec is not None
    keys = list(dict.fromkeys(spec.keys)) + sampled(spec, aligned=len(classes.specs(kernel)) > 1) + validation(kernel)
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
