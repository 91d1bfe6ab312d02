"""The dispatcher's rule between measured keys (aotpack/selection.py): its features read from a recipe and a
kernel's source, its prediction, and its choice by held-out error. tests/integration/test_selection.py holds
the C runtime to the same picks."""

import math
from typing import cast

import pytest

from aotpack import fitting, manifest, selection
from aotpack.backends.triton import introspect
from aotpack.model import Tile

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("src", "loops"),
    [
        ("def k(K, BLOCK_K):\n    for i in range(0, K, BLOCK_K):\n        pass\n", (("K", "BLOCK_K"),)),
        ("def k(n, B):\n    for i in tl.range(0, n, B, num_stages=2):\n        pass\n", (("n", "B"),)),
        ("def k(n, B):\n    for i in tl.static_range(0, tl.cdiv(n, B)):\n        pass\n", (("n", "B"),)),
        ("def k(n, B):\n    for i in range(tl.cdiv(n, B)):\n        pass\n", (("n", "B"),)),
        ("def k(n, B):\n    for i in range(0, n, 2):\n        pass\n", ()),  # a constant step is no tile
        ("def k(n, B):\n    for i in range(n):\n        pass\n", ()),
        ("    def k(n, B):\n        for i in range(0, n, B):\n            pass\n", (("n", "B"),)),  # indented
        ("def k(:", ()),  # source that does not parse has none
    ],
)  # fmt: skip
def test_loops_that_step_over_a_parameter(src, loops):
    assert introspect.loops(src) == loops


def measured(key, us):
    return selection.Measured(key=key, us=us)


def test_prediction_scales_each_neighbour_by_the_calls_work():
    """Two configs measured at 4096 columns: a 4096-column chunk wins there, but at 6000 columns it takes two
    chunks (8192 columns of work) where a 1024-column chunk takes six: the scaled rule picks the small chunk."""
    tiles = (Tile(dim=0, constexpr="BLOCK", loop=True),)
    consts = [{"BLOCK": 4096}, {"BLOCK": 1024}]
    rows = [measured((4096,), (10.0, 11.0))]
    assert selection.predict(rows, (6000,), 1, 0.0, tiles, consts, 132) == 0
    assert selection.predict(rows, (6000,), 1, 1.0, tiles, consts, 132) == 1
    assert selection.log2_work(tiles, consts[0], (6000,), 132) == math.log2(132 * 2)
    # a config not measured at every neighbour is not a candidate; one that does not fit the call neither
    rows = [measured((4096,), (10.0, None)), measured((8192,), (20.0, 19.0))]
    assert selection.predict(rows, (6000,), 2, 0.0, tiles, consts, 132) == 0
    assert selection.predict(rows, (6000,), 2, 0.0, tiles, consts, 132, fits=[False, True]) is None


def test_grid_tiles_count_programs_at_least_one_per_multiprocessor():
    tiles = (Tile(dim=0, constexpr="BM", loop=False),)
    assert selection.log2_work(tiles, {"BM": 64}, (64,), 132) == math.log2(132)  # one program: the GPU's width
    assert selection.log2_work(tiles, {"BM": 64}, (64 * 264,), 132) == math.log2(264)


def test_with_an_occupancy_programs_count_in_whole_waves():
    """133 programs on 132 multiprocessors: two waves of one per multiprocessor, one of two; 0: not in waves."""
    tiles = (Tile(dim=0, constexpr="BM", loop=False), Tile(dim=1, constexpr="BK", loop=True))
    consts = {"BM": 64, "BK": 32}
    key = (64 * 133, 64)
    # (log2 of the programs times the trips, one log2 as the C runtime takes it: two trips here)
    assert selection.log2_work(tiles, consts, key, 132, 1) == math.log2(264 * 2)
    assert selection.log2_work(tiles, consts, key, 132, 2) == math.log2(264 * 2)
    assert selection.log2_work(tiles, consts, (64 * 265, 64), 132, 2) == math.log2(528 * 2)
    assert selection.log2_work(tiles, consts, key, 132, 0) == math.log2(133 * 2)
    assert selection.log2_work(tiles, consts, (64, 64), 132, 3) == math.log2(396 * 2)  # one program: a wave


def test_with_a_fixed_cost_a_programs_work_is_its_loops_elements_and_that_cost():
    """300 columns in 256-column chunks: two trips, 512 elements; a fixed cost of 2048 makes a program's work 2560,
    with 264 programs (two rows each in a grid tile of 2) of 2560."""
    tiles = (Tile(dim=0, constexpr="ROWS", loop=False), Tile(dim=1, constexpr="BLOCK", loop=True))
    consts = {"ROWS": 2, "BLOCK": 256}
    assert selection.log2_work(tiles, consts, (528, 300), 132) == math.log2(264 * 2)
    assert selection.log2_work(tiles, consts, (528, 300), 132, fixed=2048) == math.log2(264 * 2560)
    assert selection.log2_work(tiles, consts, (528, 300), 132, 2, 2048) == math.log2(264 * 2560)


@pytest.mark.parametrize("cost", [2048, 8192])
def test_a_fixed_cost_is_chosen_where_short_rows_cost_more_than_their_elements(cost, monkeypatch):
    """Times of a row-wise kernel whose programs cost ``cost`` elements besides their loop over a row: counting
    only the loop's trips mispredicts short rows from long ones; a fixed cost predicts the held-out keys better,
    and is chosen (the same times with no fixed cost to try err more), and inspect names it."""
    import random

    from aotpack import manifest
    from aotpack.commands.inspect import selection_lines

    tiles = (Tile(dim=0, constexpr="ROWS", loop=False), Tile(dim=1, constexpr="BLOCK", loop=True))
    configs = [(b, w) for b in (256, 1024, 4096) for w in (4, 8)]
    consts = [{"ROWS": 1, "BLOCK": b} for b, _ in configs]

    def us(m: int, n: int, block: int, warps: int) -> float:
        rate = (1 + 0.3 * math.log2(block / 256)) * (1.0 if warps == 4 else 1.05 - 0.03 * math.log2(block / 256))
        return 2 + max(m, 132) * (-(-n // block) * block / rate + cost) / 2e4

    rng = random.Random(5)
    keys = [(round(2 ** rng.uniform(7, 15)), round(2 ** rng.uniform(6, 14))) for _ in range(120)]
    rows = tuple(measured(key, tuple(round(us(*key, b, w), 4) for b, w in configs)) for key in keys)
    data = fitting._Data(work=tiles, constexprs=tuple(tuple(sorted(c.items())) for c in consts), sms=132, pow2=False)
    chosen = fitting._chosen((rows,), data, None)
    assert chosen.fixed > 0 and chosen.scale > 0, chosen
    held = {"points": 1, "median": 1.0, "worst": 1.0, "worst_key": [1, 1], "over": 0}
    sel = {"neighbours": chosen.neighbours, "scale": chosen.scale, "tiles": ["M/ROWS grid", "N/BLOCK loop"],
           "held_out": held, "nearest": held, "fixed": chosen.fixed}  # fmt: skip
    (line, _) = selection_lines("norm", cast(manifest.Selection, sel))
    assert f"each program's work the elements of its loops plus {chosen.fixed}" in line
    monkeypatch.setattr(fitting, "FIXED", (0,))
    fitting._chosen.cache_clear()  # the rule is kept per rows: these rows again, with no fixed cost to try
    without = fitting._chosen((rows,), data, None)
    assert without.fixed == 0
    assert chosen.held_out is not None and without.held_out is not None
    assert chosen.held_out.over <= without.held_out.over and chosen.held_out.worst < without.held_out.worst


def _waved_kernel(kernel_dir, us, keys=None):
    """The kit's kernel (a grid tile n_elements/BLOCK) with rows timed by ``us(n, block, warps)`` at ``keys`` (60
    spread over 2^17 to 2^22 by default)."""
    import dataclasses

    from aotpack.backends import recipes as recipe
    from aotpack.model import Rule

    from ..shared import GOOD

    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    rules = []
    for n in keys or [round(2 ** (17 + 5 * ((i * 0.618034) % 1))) for i in range(60)]:
        times = tuple((c.label, round(us(n, cast(int, c.value("BLOCK")), c.num_warps or 4), 4))
                      for c in kernel.configs)  # fmt: skip
        best = min(times, key=lambda p: p[1])[0]
        rules.append(Rule(key=(n,), config=next(c for c in kernel.configs if c.label == best), arch="sm_90a",
                          types=(("T", "fp16"),), specialization=None, median_us=times, where=kernel.where))  # fmt: skip
    return dataclasses.replace(kernel, rules=tuple(rules))


def test_occupancies_are_chosen_where_the_times_run_in_waves(kernel_dir, monkeypatch):
    """Times of a GPU that runs programs in waves (a 256-element block fits three times per multiprocessor, a
    1024 one once; a wave costs the same per element): which block wins turns on whose last wave is fuller.
    Counting each config's programs in waves predicts the held-out keys better than counting them one by
    one, and is chosen; the manifest and inspect name it."""
    import dataclasses

    from aotpack.commands.inspect import selection_lines

    per_sm = {256: 3, 1024: 1}

    def us(n: int, block: int, warps: int) -> float:
        waves = math.ceil(math.ceil(n / block) / (132 * per_sm[block]))
        return 2.0 + waves * block * per_sm[block] / (1000.0 if warps == 8 else 990.0)

    kernel = _waved_kernel(kernel_dir, us)
    chosen = fitting.choose(kernel, 132)
    assert chosen.scale > 0 and any(chosen.occupancy), chosen
    assert len(chosen.occupancy) == len(kernel.configs)
    monkeypatch.setattr(fitting, "OCCUPANCIES", (0,))
    fitting._chosen.cache_clear()  # the rule is kept per rows: these rows again, with no occupancy to try
    unwaved = fitting.choose(kernel, 132)
    assert unwaved.occupancy == ()
    assert chosen.held_out is not None and unwaved.held_out is not None
    assert (chosen.held_out.over, chosen.held_out.worst) < (unwaved.held_out.over, unwaved.held_out.worst)
    entry = manifest.selection_of(dataclasses.replace(kernel, selection=chosen))
    assert entry is not None
    waved = {c.label: o for c, o in zip(kernel.configs, chosen.occupancy, strict=True) if o}
    assert entry["occupancy"] == waved
    (line, _) = selection_lines("add", entry)
    assert all(f"{o} per SM ({label})" in line for label, o in waved.items())


@pytest.mark.parametrize(
    ("arch", "registers", "warps", "shared", "blocks"),
    [
        ("sm_90a", 255, 4, 16384, 2),  # registers: a warp's 8,160 rounded to 8,192; 4 warps take a quarter
        ("sm_90a", 128, 4, 8192, 4),
        ("sm_90a", 167, 4, 8192, 3),  # 5,344 per warp rounded to 5,376
        ("sm_90a", 32, 4, 0, 16),  # warps: 64 per multiprocessor
        ("sm_90a", 104, 2, 0, 8),  # 3,328 per warp: 4 warps in each quarter's 16,384 (not 9 blocks of 65,536)
        ("sm_90a", 16, 1, 7000, 28),  # 8,024 bytes with the reserved 1,024, allocated as 8,064 (not 29)
        ("sm_90a", 16, 1, 0, 32),  # blocks: 32
        ("sm_90a", 32, 4, 100_000, 2),  # shared memory: 233,472 bytes, 1,024 more per block
        ("sm_86", 32, 4, 0, 12),  # 48 warps
        ("sm_86", 16, 1, 0, 16),  # 16 blocks
        ("sm_89", 16, 1, 0, 24),
        ("sm_80", 32, 4, 80_000, 2),  # 167,936 bytes
        ("sm_90a", 32, 4, 240_000, 0),  # more than one multiprocessor holds
        ("sm_90a", 0, 4, 0, 16),  # no registers: warps and blocks alone
        ("sm_90a", 32, 0, 0, 0),  # no warps (a CUDA kernel's block is the call's): not known
    ],
)
def test_blocks_per_multiprocessor_as_the_occupancy_calculator_counts(arch, registers, warps, shared, blocks):
    from aotpack import facts

    assert facts.archs()[arch].blocks_per_sm(registers, warps, shared) == blocks


def test_the_variants_own_blocks_per_multiprocessor_are_chosen_where_programs_run_in_their_waves(kernel_dir):
    """Times of a GPU whose programs run in waves of as many blocks as fit on a multiprocessor (5, 6 or 7 per
    config: counts no fitted occupancy of OCCUPANCIES takes): given the variants' blocks, the rule counting
    programs in waves of them predicts the held-out keys best and is chosen, its picks those predict() makes
    with them; given none (a wheel built before they were known), that way is not tried; the manifest and
    inspect name it."""
    import dataclasses

    from aotpack.commands.inspect import selection_lines

    def per_sm(block: int, warps: int) -> int:
        return {(256, 4): 7, (256, 8): 6, (1024, 4): 6, (1024, 8): 5}[(block, warps)]

    def us(n: int, block: int, warps: int) -> float:
        fit = per_sm(block, warps)
        return 2.0 + math.ceil(math.ceil(n / block) / (132 * fit)) * block * fit / (1000.0 if warps == 8 else 990.0)

    kernel = _waved_kernel(kernel_dir, us)
    own = tuple(per_sm(cast(int, c.value("BLOCK")), c.num_warps or 4) for c in kernel.configs)
    blocks: selection.Blocks = {("sm_90a", (("T", "fp16"),), "DDDD"): own}  # the one class built (rows name none)
    chosen = fitting.choose(kernel, 132, blocks)
    assert chosen.own_occupancy and chosen.scale > 0 and chosen.occupancy == (), chosen
    fitted = fitting.choose(kernel, 132)
    assert not fitted.own_occupancy
    assert chosen.held_out is not None and fitted.held_out is not None
    assert (chosen.held_out.over, chosen.held_out.worst) < (fitted.held_out.over, fitted.held_out.worst)
    assert fitting.choose(kernel, 132, {}) == fitted  # no class's blocks known: not tried
    rows = selection.groups(kernel)[0]
    work = selection.tiles(kernel)
    consts = selection.consts_of(kernel, work)
    shapes = [(cast(int, c.value("BLOCK")), c.num_warps or 4) for c in kernel.configs]
    for n in (150_000, 600_001, 2_000_000, 3_333_333):  # keys nobody measured: within 5% of the fastest config
        picked = selection.predict(rows, (n,), chosen.neighbours, chosen.scale, work, consts, 132, occupancy=own)
        assert picked is not None
        assert us(n, *shapes[picked]) <= 1.05 * min(us(n, *shape) for shape in shapes), (n, picked)
    entry = manifest.selection_of(dataclasses.replace(kernel, selection=chosen))
    assert entry is not None and entry["own_occupancy"] is True and "occupancy" not in entry
    assert "each variant's blocks" in selection_lines("add", entry)[0]


def test_the_blocks_of_a_wheels_variants_are_read_per_arch_types_and_class(kernel_dir):
    """What aotpack tune fits the rule with (the installed wheel's manifest), as a build does: each config's
    variant's blocks per multiprocessor, per (arch, types, class); 0 for a config with no variant there, and
    none from a wheel without blocks_per_sm (built before they were recorded) or without the kernel."""
    from aotpack.backends import recipes as recipe

    from ..shared import GOOD

    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    labels = [c.label for c in kernel.configs]

    def variant(config: int, klass: str, blocks: int | None) -> dict[str, object]:
        v: dict[str, object] = {"target": "sm_90a", "types": {"T": "fp16"}, "specialization": klass,
                                "config": labels[config]}  # fmt: skip
        return v if blocks is None else {**v, "blocks_per_sm": blocks}

    built = {"kernels": {"add": {"variants": [variant(0, "DDDD", 7), variant(2, "DDDD", 5), variant(1, "DDD_", 3)]}}}
    assert manifest.blocks_of(cast(manifest.Manifest, built), kernel) == {
        ("sm_90a", (("T", "fp16"),), "DDDD"): (7, 0, 5, 0), ("sm_90a", (("T", "fp16"),), "DDD_"): (0, 3, 0, 0)}  # fmt: skip
    older = {"kernels": {"add": {"variants": [variant(0, "DDDD", None)]}}}
    assert manifest.blocks_of(cast(manifest.Manifest, older), kernel) == {
        ("sm_90a", (("T", "fp16"),), "DDDD"): (0,) * 4
    }
    assert manifest.blocks_of(cast(manifest.Manifest, {"kernels": {}}), kernel) == {}


def test_occupancies_fitted_to_noise_are_not_kept(kernel_dir):
    """Times with no waves in them, only noise of a few percent per key and config: choosing each config's
    occupancy by leave-one-out error on all the keys finds some that fit the noise, but they predict the keys
    of other folds worse than none, and are not kept."""
    import random

    noise = random.Random(1)

    def us(n: int, block: int, warps: int) -> float:
        return (2.0 + n / 1000.0) * (1.0 + (block == 256) * 0.01) * noise.uniform(0.96, 1.04)

    kernel = _waved_kernel(kernel_dir, us)
    data = fitting._Data.of(kernel, 132)
    classes = [fitting._Class.of(rows, data) for rows in selection.groups(kernel)]
    flat, waved, _, _ = fitting._rules(classes, [[True] * len(c.rows) for c in classes], data)
    assert any(waved[2]) and waved != flat  # leave-one-out on all the keys takes occupancies
    chosen = fitting.choose(kernel, 132)
    assert chosen.occupancy == () and (chosen.neighbours, chosen.scale) == flat[:2]


def test_a_class_of_just_enough_keys_is_still_fitted_on_each_folds_fewer(kernel_dir):
    """Six keys of one class (MIN_ROWS): each fold leaves four or five, and the rule is still chosen on them there
    (not the nearest row for want of six), so the neighbours' rule, which sees the best config change between
    2048 and 4096 where the nearest row above does not, is chosen over the folds too."""
    assert selection.MIN_ROWS == 6

    def us(n: int, block: int, warps: int) -> float:
        return (1.0 + n / 1000.0 if block == 256 else 3.0 + n / 2000.0) + warps / 1000.0

    kernel = _waved_kernel(kernel_dir, us, keys=[512, 1024, 2048, 4096, 8192, 16384])
    chosen = fitting.choose(kernel, 132)
    assert chosen.neighbours > 0, chosen
    assert chosen.held_out is not None and chosen.nearest is not None
    assert chosen.held_out.over < chosen.nearest.over


def test_the_held_out_error_is_each_folds_keys_predicted_by_the_rule_the_others_chose(kernel_dir):
    """The held-out error, recomputed through the public steps: for each fold of the keys, the rule choose()
    makes from the other keys' rows, predicting the fold's keys from those rows."""
    import dataclasses
    import statistics

    def us(n: int, block: int, warps: int) -> float:
        per_sm = {256: 3, 1024: 1}[block]
        return 2.0 + math.ceil(math.ceil(n / block) / (132 * per_sm)) * block * per_sm / (1000.0 + warps)

    kernel = _waved_kernel(kernel_dir, us)
    chosen = fitting.choose(kernel, 132)
    labels = [c.label for c in kernel.configs]
    work = selection.tiles(kernel)
    consts = selection.consts_of(kernel, work)
    keys = sorted(r.key for r in kernel.rules)
    ratios = []
    for f in range(fitting.FOLDS):
        fold = set(keys[f :: fitting.FOLDS])
        others = dataclasses.replace(kernel, rules=tuple(r for r in kernel.rules if r.key not in fold))
        rule = fitting.choose(others, 132)
        (rows,) = selection.groups(others)
        for r in kernel.rules:
            if r.key in fold:
                times = dict(r.median_us or ())
                c = selection.predict(rows, r.key, rule.neighbours, rule.scale, work, consts, 132,
                                      occupancy=rule.occupancy)  # fmt: skip
                assert rule.neighbours > 0 and c is not None
                ratios.append(times[labels[c]] / min(times.values()))
    assert chosen.held_out is not None
    assert chosen.held_out.points == len(ratios) == len(kernel.rules)
    assert chosen.held_out.over == sum(r > 1.05 for r in ratios)
    assert chosen.held_out.worst == pytest.approx(max(ratios))
    assert chosen.held_out.median == pytest.approx(statistics.median(ratios))


def test_neighbours_are_the_nearest_in_log_space_ties_in_table_order():
    rows = [measured((1024,), (1.0,)), measured((256,), (1.0,)), measured((4096,), (1.0,))]
    assert [r.key for _, r in selection.neighbours(rows, (2048,), 2)] == [(1024,), (4096,)]


def test_the_nearest_row_rule_rounds_the_key_up():
    rows = [measured((1024,), (1.0, 2.0)), measured((4096,), (2.0, 1.0))]
    assert selection.nearest_row(rows, (1500,), pow2=True) == 1  # 2048 is past 1024: the row above serves
    assert selection.nearest_row(rows, (1024,), pow2=True) == 0
    assert selection.nearest_row(rows, (9000,), pow2=True) == 1  # past the table: the nearest


def test_the_rule_is_the_one_with_the_least_held_out_error(kernel_dir):
    """Times that follow a loop's chunk count (the padding of the last chunk, a cost per chunk): the scaled rule
    predicts the keys of each fold better than the nearest row, which misses where the best chunk changes
    between measured keys, and is chosen."""
    import dataclasses

    from aotpack import expr
    from aotpack.backends import recipes as recipe
    from aotpack.model import Rule

    from ..shared import GOOD

    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    assert kernel.triton is not None
    kernel = dataclasses.replace(kernel, grid=(expr.parse("n_elements"), expr.parse(1), expr.parse(1)),
                                 triton=dataclasses.replace(kernel.triton, loops=(("n_elements", "BLOCK"),)))  # fmt: skip
    rules = []
    for n in (round(300 * (31000 / 300) ** (i / 16)) for i in range(16)):  # 300 to 23199, log-spaced
        blocks = [cast(int, c.value("BLOCK")) for c in kernel.configs]
        us = tuple((c.label, 0.5 + math.ceil(n / b) * (b + 400) / 1000 + (c.num_warps or 4) / 100)
                   for c, b in zip(kernel.configs, blocks, strict=True))  # fmt: skip
        best = min(us, key=lambda p: p[1])[0]
        rules.append(Rule(key=(n,), config=next(c for c in kernel.configs if c.label == best), arch="sm_90a",
                          types=(("T", "fp16"),), specialization=None, median_us=us, where=kernel.where))  # fmt: skip
    chosen = fitting.choose(dataclasses.replace(kernel, rules=tuple(rules)), 132)
    assert chosen.tiles == (Tile(dim=0, constexpr="BLOCK", loop=True),)
    assert chosen.held_out is not None and chosen.nearest is not None and chosen.held_out.points == len(rules)
    assert chosen.neighbours > 0 and chosen.scale > 0
    assert chosen.held_out.worst < chosen.nearest.worst
    assert chosen.held_out.over < chosen.nearest.over


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        ("{count: 0}", "expected an integer >= 1"),
        ("{count: 5000}", "at most 4096 sampled keys, got 5000"),
        ("{count: 4, range: {M: [1, 8]}}", "'M' is not in the kernel's key (n_elements)"),
        ("{count: 4, range: {n_elements: [8, 1]}}", "expected low <= high, got [8, 1]"),
        ("{count: 4, range: {n_elements: [8]}}", "expected [low, high]"),
        ("{count: 4, seed: -1}", "expected an integer >= 0"),
        ("{count: 4, every: 2}", "every"),
    ],
)  # fmt: skip
def test_a_bad_sample_is_a_located_error(kernel_dir, sample, message):
    from aotpack.backends import recipes as recipe
    from aotpack.errors import RecipeError

    from ..shared import GOOD

    text = GOOD + f"    tune:\n      inputs: add.py:add_kernel\n      sample: {sample}\n"
    with pytest.raises(RecipeError) as info:
        recipe.parse(text, kernel_dir / "r.yaml")
    assert message in str(info.value) and str(info.value).startswith(f"{kernel_dir}/r.yaml:")


def test_sample_alone_is_enough_and_keys_or_sample_are_needed(kernel_dir):
    from aotpack.backends import recipes as recipe
    from aotpack.errors import RecipeError

    from ..shared import GOOD

    text = (
        GOOD + "    tune:\n      inputs: add.py:add_kernel\n      sample: {count: 3, range: {n_elements: [16, 4096]}}\n"
    )
    (kernel,) = recipe.parse(text, kernel_dir / "r.yaml").kernels
    assert kernel.tune is not None and kernel.tune.sample == 3 and kernel.tune.ranges == ((16, 4096),)
    with pytest.raises(RecipeError, match="give the keys to time: 'keys'"):
        recipe.parse(GOOD + "    tune:\n      inputs: add.py:add_kernel\n", kernel_dir / "r.yaml")


@pytest.mark.parametrize("pooled", [False, True])
def test_the_shared_sums_pick_what_predict_picks(pooled):
    """choose() evaluates every candidate rule on every held-out row with shared prefix sums and each class's
    rows ordered once for every fold: the same picks as predict() and nearest_row() compute one at a time from
    the pool's other rows (and the C runtime, tests/integration/test_selection.py); every row from the others,
    or a fold's rows from the rest."""
    import random

    rng = random.Random(3)
    tiles = (Tile(dim=0, constexpr="B", loop=False), Tile(dim=1, constexpr="K", loop=True))
    consts = [{"B": b, "K": k} for b in (32, 64, 128) for k in (16, 64)]
    rows = []
    for _ in range(30):
        key = (rng.randint(1, 20000), rng.randint(1, 5000))
        us = tuple(None if rng.random() < 0.05 else rng.uniform(3, 300) for _ in consts)
        rows.append(measured(key, us))
    data = fitting._Data(work=tiles, constexprs=tuple(tuple(sorted(c.items())) for c in consts), sms=132, pow2=True)
    pool = [not pooled or j % 3 != 1 for j in range(len(rows))]
    targets = [j for j in range(len(rows)) if not pooled or not pool[j]]
    klass = fitting._Class.of(rows, data)
    held = fitting._Held.of(klass, targets, pool)
    nearest = klass.nearest_picks(targets, pool)
    for t, i in enumerate(targets):
        others = [r for j, r in enumerate(rows) if j != i and pool[j]]
        assert nearest[t] == selection.nearest_row(others, rows[i].key, pow2=True), i
    candidates = [(k, s, f) for k, s, _ in fitting._candidates(data) for f in (fitting.FIXED if s else (0,))]
    for occupancy in ((), (0, 1, 2, 3, 4, 8)):
        picks = fitting._candidate_picks(held, occupancy, candidates)
        for (k, scale, fixed), chosen in picks.items():
            for t, i in enumerate(targets):
                others = [r for j, r in enumerate(rows) if j != i and pool[j]]
                expected = selection.predict(others, rows[i].key, k, scale, tiles, consts, 132, occupancy=occupancy,
                                             fixed=fixed)  # fmt: skip
                assert chosen[t] == expected, (k, scale, i, occupancy)


def test_a_refinement_key_lies_halfway_in_log_space_in_the_class_of_both_ends():
    from aotpack.commands import tune_keys

    assert tune_keys._between((1024,), (4096,)) == (2048,)
    assert tune_keys._between((1000, 64), (4000, 64)) == (2000, 64)
    assert tune_keys._between((32, 48), (160, 48)) == (64, 48)  # multiples of 16 at both ends: one between
    assert tune_keys._between((20, 33), (205, 33)) == (65, 33)  # 64 is a multiple of 16 and neither end is
    assert tune_keys._between((100,), (101,)) is None  # no key between
    assert tune_keys._between((16,), (32,)) is None  # no multiple of 16 between


def test_refinements_are_put_where_the_fastest_config_changes_widest_gaps_first(kernel_dir):
    """Keys timed every octave, the 256-element block fastest below 50,000 elements and the 1024 one above: the
    keys to time next lie between the two keys either side of the change, the gap that loses most first; a
    timed key is not proposed again, nor any where one config is the fastest everywhere."""
    import dataclasses

    from aotpack.commands import tune_keys

    keys = [2**i for i in range(10, 21)]
    step = _waved_kernel(kernel_dir, lambda n, b, w: (1.0 if (n < 50_000) == (b == 256) else 1.3) + w / 1000, keys)
    got = tune_keys.refinements(step, 10, [r.key for r in step.rules])
    assert got and len(got) <= 10 and len(set(got)) == len(got)
    assert all(32768 < n < 65536 for (n,) in got[:1]) and all(16384 < n < 131072 for (n,) in got)
    assert got[0] == tune_keys._between((32768,), (65536,))
    assert tune_keys.refinements(step, 10, [*((n,) for n in keys), *got[:1]]) == got[1:]
    assert tune_keys.refinements(step, 1, ()) == got[:1]
    # the nearest keys' fastest configs differ only by a warp count that costs 0.1%: nothing to refine
    flat = _waved_kernel(kernel_dir, lambda n, b, w: 1.0 + w / 1000 + (0.0 if b == 256 else 0.5), keys)
    assert tune_keys.refinements(flat, 10, ()) == []
    assert tune_keys.refinements(dataclasses.replace(step, rules=step.rules[:3]), 10, ()) == []  # under MIN_ROWS


@pytest.mark.parametrize(
    ("refine", "message"),
    [
        ("-1", "expected an integer >= 0"),
        (
            "512",
            "513 keys to time (1 listed, 0 sampled, 512 refined, 0 to validate); a table holds at most 512 of a kernel",
        ),
        ("many", "integer"),
    ],
)
def test_a_bad_refine_is_a_located_error(kernel_dir, refine, message):
    """refine: a count; with the listed and sampled keys, no more than a table holds of a kernel (a tune that
    timed more would have its table refused by the build)."""
    from aotpack.backends import recipes as recipe
    from aotpack.errors import RecipeError

    from ..shared import GOOD

    text = GOOD + f"    tune:\n      inputs: add.py:add_kernel\n      keys: [[4096]]\n      refine: {refine}\n"
    with pytest.raises(RecipeError) as info:
        recipe.parse(text, kernel_dir / "r.yaml")
    assert message in str(info.value) and str(info.value).startswith(f"{kernel_dir}/r.yaml:")
    (kernel,) = recipe.parse(text.replace(f"refine: {refine}", "refine: 8"), kernel_dir / "r.yaml").kernels
    assert kernel.tune is not None and kernel.tune.refine == 8
