"""``tune: validate:``: keys drawn at random as calls are, timed, kept in the table as validation rows, the held-out
error of the rule chosen without them printed at them, then looked up by the dispatcher (aotpack/fitting.py)."""

import dataclasses
import math
import random
import statistics
from pathlib import Path
from typing import Any, cast

import pytest

from aotpack import fitting, manifest, model, selection
from aotpack.backends import recipes as recipe
from aotpack.commands import tune_keys
from aotpack.errors import RecipeError
from aotpack.plan import classes
from aotpack.recipe import tables

from ..shared import GOOD

TUNE = "    tune:\n      inputs: add.py:add_kernel\n      sample: {count: 40, range: {n_elements: [4096, 4194304]}}\n"


def parsed(kernel_dir: Path, extra: str) -> model.Kernel:
    (kernel,) = recipe.parse(GOOD + TUNE + extra, kernel_dir / "r.yaml").kernels
    return kernel


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("      validate: -1\n", "expected an integer >= 0"),
        ("      validate: some\n", "integer"),
        ("      validate: 473\n", "513 keys to time (0 listed, 40 sampled, 0 refined, 473 to validate); a table holds "
                                  "at most 512 of a kernel"),
    ],
)  # fmt: skip
def test_a_bad_validate_is_a_located_error(kernel_dir, extra, message):
    with pytest.raises(RecipeError) as info:
        parsed(kernel_dir, extra)
    assert message in str(info.value) and str(info.value).startswith(f"{kernel_dir}/r.yaml:")


def test_validate_draws_from_the_sampled_ranges_so_it_needs_them(kernel_dir):
    text = GOOD + "    tune:\n      inputs: add.py:add_kernel\n      keys: [[4096]]\n      validate: 8\n"
    with pytest.raises(RecipeError) as info:
        recipe.parse(text, kernel_dir / "r.yaml")
    assert str(info.value).startswith(f"{kernel_dir}/r.yaml:") and "give 'sample' too" in str(info.value)
    assert cast(model.TuneSpec, parsed(kernel_dir, "      validate: 8\n").tune).validate == 8
    assert cast(model.TuneSpec, parsed(kernel_dir, "").tune).validate == 0


def test_validation_keys_are_drawn_as_calls_are_seeded_and_apart_from_the_tables(kernel_dir):
    """Independent draws (log-uniform over the ranges, as benchmarks/dispatch.py draws its shapes), the same for
    the same recipe, none a listed or sampled key nor twice; a kernel of several classes draws half of them
    16-divisible dimension by dimension; they are timed after the sampled keys."""
    kernel = parsed(kernel_dir, "      keys: [[4096], [65536]]\n      validate: 200\n")
    spec = cast(model.TuneSpec, kernel.tune)
    keys = tune_keys.validation(kernel)
    assert keys == tune_keys.validation(kernel) and len(set(keys)) == 200
    several = len(classes.specs(kernel)) > 1
    assert not set(keys) & {*spec.keys, *tune_keys.sampled(spec, aligned=several)}
    assert all(4096 <= k <= 4194304 for (k,) in keys)
    logs = [math.log2(k) for (k,) in keys]  # log-uniform over [12, 22]: about a tenth per unit of log
    assert all(0.05 < sum(lo <= x < lo + 1 for x in logs) / 200 < 0.17 for lo in range(12, 22))
    divisible = sum(k % 16 == 0 for (k,) in keys) / 200
    # half of them drawn with each dimension 16-divisible half the time: a quarter and a 32nd are
    assert (0.18 < divisible < 0.4) if several else divisible < 0.15
    units = [key for _, key in tune_keys.units(kernel)]
    assert units[-len(keys) * len(kernel.bindings) :: len(kernel.bindings)] == keys
    other = dataclasses.replace(kernel, tune=dataclasses.replace(spec, seed=spec.seed + 1))
    assert tune_keys.validation(other) != keys
    assert tune_keys.validation(dataclasses.replace(kernel, tune=dataclasses.replace(spec, validate=0))) == []


def test_the_benchmarks_draw_is_the_one_validation_keys_are_drawn_by():
    """tune_keys.drawn: a value per dimension from one stream (a second number only where aligned), none of
    ``taken``; benchmarks/dispatch.py's shapes at a seed are its keys at that seed."""
    draw = random.Random(7)
    expected = []
    for _ in range(5):
        u = draw.random()
        expected.append((tune_keys.value_at(16, 8192, u, draw.random() < 0.5),))
    got = tune_keys.drawn(((16, 8192),), 5, random.Random(7), True)
    assert got == expected
    assert tune_keys.drawn(((16, 8192),), 5, random.Random(7), True, taken=[expected[0]])[0] != expected[0]


def _kernel(kernel_dir: Path, us, validated: int = 0) -> model.Kernel:
    """The kit's kernel, with rows timed by ``us(n, block, warps)`` at 60 keys over 2^17 to 2^22 and ``validated``
    validation rows at keys drawn between them."""
    kernel = parsed(kernel_dir, "")

    def row(n: int) -> model.Rule:
        times = tuple((c.label, round(us(n, cast(int, c.value("BLOCK")), c.num_warps or 4), 4))
                      for c in kernel.configs)  # fmt: skip
        best = min(times, key=lambda p: p[1])[0]
        return model.Rule(key=(n,), config=next(c for c in kernel.configs if c.label == best), arch="sm_90a",
                          types=(("T", "fp16"),), specialization=None, median_us=times, where=kernel.where)  # fmt: skip

    keys = [round(2 ** (17 + 5 * ((i * 0.618034) % 1))) for i in range(60)]
    checks = tune_keys.drawn(((1 << 17, 1 << 22),), validated, random.Random(3), False, [(n,) for n in keys])
    return dataclasses.replace(kernel, rules=tuple(map(row, keys)), validation=tuple(row(n) for (n,) in checks))


def us_of(n: int, block: int, warps: int) -> float:
    per_sm = {256: 3, 1024: 1}[block]
    return 2.0 + math.ceil(math.ceil(n / block) / (132 * per_sm)) * block * per_sm / (1000.0 + warps)


def test_validation_rows_give_the_held_out_error_then_join_the_rule(kernel_dir):
    """With validation rows the held-out error (and the nearest-row rule's) is at the validation keys, each
    predicted from the measured rows by the rule the folds choose from those alone: recomputed here through
    predict() and nearest_row(). The rule built is the one the folds choose from every row, the validation rows
    too. Fewer than MIN_ROWS of them: that rule, with the folds' error."""
    plain = fitting.choose(_kernel(kernel_dir, us_of), 132)  # the measured rows alone
    kernel = _kernel(kernel_dir, us_of, 40)
    chosen = fitting.choose(kernel, 132)
    merged = fitting.choose(dataclasses.replace(kernel, rules=(*kernel.rules, *kernel.validation), validation=()),
                            132)  # fmt: skip
    assert chosen.drawn and not plain.drawn and not merged.drawn
    assert dataclasses.replace(chosen, held_out=merged.held_out, nearest=merged.nearest, drawn=False) == merged
    assert (merged.neighbours, merged.scale) != (plain.neighbours, plain.scale)  # the 40 rows changed the rule
    labels = [c.label for c in kernel.configs]
    (rows,) = selection.groups(kernel)
    consts = selection.consts_of(kernel, chosen.tiles)
    ratios, nearest = [], []
    for r in kernel.validation:
        times = dict(r.median_us)
        c = selection.predict(rows, r.key, plain.neighbours, plain.scale, plain.tiles, consts, 132,
                              occupancy=plain.occupancy, fixed=plain.fixed)  # fmt: skip
        assert c is not None
        ratios.append(times[labels[c]] / min(times.values()))
        near = rows[selection.nearest_row(rows, r.key, pow2=kernel.bucket == "pow2")]
        nearest.append(times[labels[near.fastest]] / min(times.values()))
    for held, want in ((chosen.held_out, ratios), (chosen.nearest, nearest)):
        assert held is not None and held.points == len(want) == 40
        assert held.median == pytest.approx(statistics.median(want)) and held.worst == pytest.approx(max(want))
        assert held.over == sum(x > 1.05 for x in want)
    few = _kernel(kernel_dir, us_of, selection.MIN_ROWS - 1)
    together = dataclasses.replace(few, rules=(*few.rules, *few.validation), validation=())
    assert fitting.choose(few, 132) == fitting.choose(together, 132) != plain


def test_a_validation_row_goes_through_the_table_to_the_fit_then_to_the_dispatch_table(kernel_dir, tmp_path):
    """A table row with "validation": true round-trips, is refused when it is not a boolean or has no times, and
    is applied as a validation row; once the rule is fitted it is one of the kernel's dispatch rows (what the
    runtime looks up); the manifest and inspect say where the held-out error was measured."""
    from aotpack.commands.inspect import selection_lines

    kernel = _kernel(kernel_dir, us_of, 12)

    def row(r: model.Rule, validation: bool) -> tables.Row:
        return tables.Row(key=r.key, types=cast(Any, r.types), config=r.config.label, median_us=r.median_us,
                          validation=validation)  # fmt: skip

    rows = tuple(row(r, False) for r in kernel.rules) + tuple(row(r, True) for r in kernel.validation)
    table = tables.Table(package="kit", arch="sm_90a", device="H100", driver_cuda="13.0", date="2026-12-01",
                         sms=132, kernels=(("add", rows),))  # fmt: skip
    path = tables.write(table, tmp_path / "t.json")
    (read,) = tables.read(path).kernels
    assert sorted((r.key, r.validation) for r in read[1]) == sorted((r.key, r.validation) for r in rows)
    assert path.read_text().count('"validation": true') == 12
    base = dataclasses.replace(kernel, rules=(), validation=())
    (read_in,) = tables.apply(tables.read(path), [base], "kit")
    assert {r.key for r in read_in.rules} == {r.key for r in kernel.rules}
    assert {r.key for r in read_in.validation} == {r.key for r in kernel.validation}
    (applied,) = tables.fit([read_in])
    assert [r.key for r in applied.rules] == [r.key for r in (*read_in.rules, *read_in.validation)]
    assert applied.validation == ()
    assert applied.selection.drawn and applied.selection.held_out is not None
    assert applied.selection.held_out.points == 12
    entry = manifest.selection_of(applied)
    assert entry is not None and entry["drawn"] is True
    assert "held-out at keys drawn as calls are (tune.validate)" in selection_lines("add", entry)[0]
    head = (
        '{"format": "aotpack-tuning-table/1", "package": "kit", "arch": "sm_90a", "device": "d", "driver_cuda": "1", '
    )
    for bad, message in (('"validation": 1, "median_us": {"c": 1}', "kernels.add[0].validation: expected true or false"),
                         ('"validation": true', "kernels.add[0]: a validation row needs 'median_us'")):  # fmt: skip
        (tmp_path / "bad.json").write_text(
            head + f'"date": "d", "kernels": {{"add": [{{"key": [1], "config": "c", {bad}}}]}}}}'
        )
        with pytest.raises(tables.TableError) as info:
            tables.read(tmp_path / "bad.json")
        assert str(info.value).startswith(f"{tmp_path}/bad.json: {message}")


def test_tune_marks_the_rows_of_validation_keys(kernel_dir):
    """The rows tune times at tune_keys.validation's keys are written as validation rows, the others not."""
    from aotpack.commands.tune import _per_kernel

    kernel = parsed(kernel_dir, "      validate: 6\n")
    checks = tune_keys.validation(kernel)
    work: list[Any] = [(kernel, (), key) for key in [(4096,), checks[0], (8192,), checks[1]]]
    results = [("sm_90a", [tables.Row(key=key, types=(), config="c")]) for _, _, key in work]
    (arch, rows) = _per_kernel(work, results)["add"]
    assert arch == "sm_90a" and [r.validation for r in rows] == [False, True, False, True]
