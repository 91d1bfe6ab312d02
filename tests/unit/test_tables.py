"""Tuning tables: the file format, its errors, and how build bakes rows into dispatch rules."""

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from aotpack import model
from aotpack.backends import recipes as recipe
from aotpack.errors import RecipeError
from aotpack.plan import variants as plan
from aotpack.recipe import tables

from ..shared import GOOD


def table(**changes) -> tables.Table:
    rows = (
        tables.Row(key=(65536,), types=(("T", "fp16"),), config="BLOCK=1024,w8,s3", specialization="hinted",
                   median_us=(("BLOCK=1024,w8,s3", 4.25), ("BLOCK=256,w4,s3", 5.5)), rejected=(("BLOCK=256,w8,s3", "nan"),)),
        tables.Row(key=(4096,), types=(("T", "fp32"),), config="BLOCK=256,w4,s3"),
    )  # fmt: skip
    fields: dict[str, Any] = dict(package="kit", arch="sm_90a", device="H100", driver_cuda="13.0", date="2026-11-22",
                  kernels=(("add", rows),))  # fmt: skip
    fields.update(changes)
    return tables.Table(**fields)


def test_round_trip_is_sorted_and_stable(tmp_path):
    path = tables.write(table(), tmp_path / "t.json")
    text = path.read_text()
    assert tables.to_json(tables.read(path)) == text
    rows = json.loads(text)["kernels"]["add"]
    assert [r["types"] for r in rows] == [{"T": "fp16"}, {"T": "fp32"}]  # sorted by types, then key
    assert rows[0]["specialization"] == "hinted" and "specialization" not in rows[1]
    assert rows[0]["median_us"] == {"BLOCK=1024,w8,s3": 4.25, "BLOCK=256,w4,s3": 5.5}
    assert not list(tmp_path.glob(".tmp-*"))


HEAD = (
    '{"format": "aotpack-tuning-table/1", "package": "kit", "arch": "sm_90a", "device": "d", "driver_cuda": "1", '
    '"date": "d", '
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "t.json:1:2: not valid JSON"),
        ('{"format": "x"}', 't.json: not a tuning table (expected "format": "aotpack-tuning-table/1")'),
        ('{"format": "aotpack-tuning-table/1", "package": "kit"}', "t.json: missing 'arch'"),
        ('{"format": "aotpack-tuning-table/1", "package": "kit", "arch": "sm_90a", "device": "d", "driver_cuda": "1",'
         ' "date": "d", "kernels": {"add": [{"key": [1.5], "config": "c"}]}}',
         "t.json: kernels.add[0].key: expected a list of integers >= 0 (key values), got [1.5]"),
        ('{"format": "aotpack-tuning-table/1", "package": "kit", "arch": "sm_90a", "device": "d", "driver_cuda": "1",'
         ' "date": "d", "kernels": {"add": [{"key": [1], "config": "c", "specialization": 5}]}}',
         "t.json: kernels.add[0].specialization: expected a class name such as 'hinted' or 'DD_1', got 5"),
        *[(HEAD + f'"kernels": {{"add": [{{"key": [1], "config": "c", "{field}": {value}}}]}}}}',
           f"t.json: kernels.add[0].{field}: expected a mapping of config labels to {what}")
          for field, what in (("median_us", "microseconds"), ("rejected", "reasons"))
          for value in ('"fast"', "[1, 2]", '{"c": "fast"}', '{"c": true}', "7") if (field, value) != ("rejected",
                                                                                                       '{"c": "fast"}')],
        (HEAD + '"kernels": {"add": [{"key": [1], "config": "c", "median_us": {"c": -1}}]}}',
         "t.json: kernels.add[0].median_us: expected a mapping of config labels to microseconds"),
        (HEAD + '"kernels": {"add": 7}}', "t.json: 'kernels' must map kernel names to lists of rows"),
        (HEAD + '"kernels": {"add": {"key": [1]}}}', "t.json: 'kernels' must map kernel names to lists of rows"),
        (HEAD + '"kernels": {"add": [{"key": [-4], "config": "c"}]}}',
         "t.json: kernels.add[0].key: expected a list of integers >= 0 (key values), got [-4]"),
        ("[" * 100_000 + "]" * 100_000, "t.json: not a tuning table (nested too deeply)"),
        (HEAD + '"kernels": {"add": [{"key": [1' + "0" * 5000 + '], "config": "c"}]}}',
         "t.json: not a tuning table (Exceeds the limit (4300 digits) for integer string conversion"),
    ],
)  # fmt: skip
def test_malformed_tables(tmp_path, text, message):
    (tmp_path / "t.json").write_text(text)
    with pytest.raises(tables.TableError) as info:
        tables.read(tmp_path / "t.json")
    assert str(info.value).startswith(f"{tmp_path}/{message}")


@pytest.mark.parametrize(("data", "message"), [
    (b'{"format": "aotpack-tuning-table/1", "device": "H\xa5"}', "t.json:1:50: the tuning table is not UTF-8 text"),
    (None, "tuning table {tmp}/t.json is not a regular file"),  # a folder
])  # fmt: skip
def test_a_table_file_that_is_not_text_is_a_located_error(tmp_path, data, message):
    if data is None:
        (tmp_path / "t.json").mkdir()
    else:
        (tmp_path / "t.json").write_bytes(data)
    with pytest.raises(RecipeError) as info:
        tables.read(tmp_path / "t.json")
    assert message.format(tmp=tmp_path) in str(info.value)


def with_table(folder: Path, t: tables.Table) -> model.Recipe:
    tables.write(t, folder / "tables" / "kit.sm_90a.json")
    text = GOOD.replace("targets: [sm_80, sm_90a]\n", "targets: [sm_80, sm_90a]\ntables: [tables/kit.sm_90a.json]\n")
    return recipe.parse(text, folder / "r.yaml")


def test_build_bakes_table_rows(kernel_dir):
    (k,) = with_table(kernel_dir, table()).kernels
    inline, *baked = k.rules
    assert inline.arch is None and inline.key == (4096,)
    assert [(r.key, r.arch, r.types, r.specialization, r.config.label) for r in baked] == [
        ((65536,), "sm_90a", (("T", "fp16"),), "hinted", "BLOCK=1024,w8,s3"),
        ((4096,), "sm_90a", (("T", "fp32"),), None, "BLOCK=256,w4,s3"),
    ]


def test_winners_only_keeps_the_picked_configs_and_the_default(kernel_dir):
    rows = (tables.Row(key=(65536,), types=(("T", "fp16"),), config="BLOCK=256,w8,s3"),)
    rec = with_table(kernel_dir, table(kernels=(("add", rows),)))
    winners = plan.plan_variants(rec, winners_only=True)
    # the inline row and the table row both pick BLOCK=256,w8; the default is BLOCK=1024,w4
    assert sorted({v.config.label for v in winners}) == ["BLOCK=1024,w4,s3", "BLOCK=256,w8,s3"]
    picked = {"BLOCK=1024,w4,s3", "BLOCK=256,w8,s3"}
    assert winners == tuple(v for v in plan.plan_variants(rec) if v.config.label in picked)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"package": "other"}, "the table is for package 'other', not 'kit'"),
        ({"arch": "sm_100a"}, "arch sm_100a is not a target of kernel 'add'"),
        ({"kernels": (("mul", ()),)}, "the table has rows for 'mul', which the recipe does not define"),
        ({"kernels": (("add", (tables.Row(key=(1,), types=(("T", "fp16"),), config="BLOCK=64,w4,s3"),)),)},
         "kernels.add[0]: config 'BLOCK=64,w4,s3' is not in the recipe's grid; re-run aotpack tune"),
        ({"kernels": (("add", (tables.Row(key=(1, 2), types=(("T", "fp16"),), config="BLOCK=256,w4,s3"),)),)},
         "kernels.add[0]: the key has 2 values, the recipe's 1"),
    ],
)  # fmt: skip
def test_tables_that_do_not_fit_the_recipe(kernel_dir, changes, message):
    with pytest.raises(RecipeError) as info:
        with_table(kernel_dir, table(**changes))
    assert str(info.value) == f"{kernel_dir}/r.yaml:4:10: tables[0]: {message}"


def test_sampled_keys_are_seeded_distinct_and_within_their_ranges(kernel_dir: Path) -> None:
    """tune.sample's keys: the same recipe draws the same keys, none twice nor a listed one, each in range."""
    import dataclasses

    from aotpack.commands import tune_keys

    spec = model.TuneSpec(inputs=model.Source(path=kernel_dir / "h.py", module=None, function="f"), reference=None,
                          keys=((16,),), rtol=0.0, sample=50, ranges=((3, 300),), seed=5)  # fmt: skip
    keys = tune_keys.sampled(spec)
    assert keys == tune_keys.sampled(spec) and len(keys) == len(set(keys)) == 50
    assert all(3 <= k <= 300 for (k,) in keys) and (16,) not in keys
    assert any(k & (k - 1) for (k,) in keys)  # off powers of two too
    assert keys != tune_keys.sampled(dataclasses.replace(spec, seed=6))
    narrow = tune_keys.sampled(
        dataclasses.replace(spec, ranges=((1, 4),))
    )  # fewer distinct keys than asked: all of them
    assert sorted(narrow) == [(1,), (2,), (3,), (4,)]


def test_a_kernel_of_several_classes_samples_16_divisible_sizes_as_often_as_others(kernel_dir: Path) -> None:
    """aligned: each dimension a multiple of 16 about half the time (a uniform draw: one in 16), so the
    classes a divisible size selects get rows; still seeded, distinct and within range, and a range with no
    multiple of 16 keeps its draws."""
    import dataclasses

    from aotpack.commands import tune_keys

    spec = model.TuneSpec(inputs=model.Source(path=kernel_dir / "h.py", module=None, function="f"), reference=None,
                          keys=(), rtol=0.0, sample=400, ranges=((16, 8192), (3, 5000)), seed=1)  # fmt: skip
    plain, aligned = tune_keys.sampled(spec), tune_keys.sampled(spec, aligned=True)
    assert aligned == tune_keys.sampled(spec, aligned=True) and len(set(aligned)) == 400
    assert all(16 <= m <= 8192 and 3 <= n <= 5000 for m, n in aligned)
    for d in (0, 1):
        share = sum(k[d] % 16 == 0 for k in aligned) / len(aligned)
        assert 0.4 < share < 0.65, share
        assert sum(k[d] % 16 == 0 for k in plain) / len(plain) < 0.15
    both = sum(m % 16 == 0 and n % 16 == 0 for m, n in aligned)
    neither = sum(m % 16 and n % 16 for m, n in aligned)
    assert both > 60 and neither > 60  # every combination of the dimensions' classes, not all-or-nothing
    odd = tune_keys.sampled(dataclasses.replace(spec, sample=5, ranges=((17, 31), (1, 15))), aligned=True)
    assert odd and all(17 <= m <= 31 and 1 <= n <= 15 for m, n in odd)
    assert all(m % 16 and n % 16 for m, n in odd)


def test_sampled_keys_leave_no_region_of_the_range_unmeasured(kernel_dir: Path) -> None:
    """The sampled keys spread over the log of the ranges: any 72 consecutive points of the sequence put one
    in each box of an 8 by 9 grid, from any start; 120 keys of a 2-d range put a key in every cell of a 6 by 6
    grid over its log (independent draws left 1.4 of 36 empty, 4 at worst, over these 20 seeds), and the keys
    of each combination of 16-divisible dimensions fill a 3 by 3 grid (independent draws: 2 of 9 empty at
    worst)."""
    import math

    from aotpack.commands import tune_keys

    for start in (0, 1, 977, (1 << 32) - 5):
        points = list(itertools.islice(tune_keys._spread(2, start), 72))
        boxes = sorted((int(x * 8 + 1e-9), int(y * 9 + 1e-9)) for x, y in points)  # (7/9 sums to just under)
        assert boxes == list(itertools.product(range(8), range(9)))
    spec = model.TuneSpec(inputs=model.Source(path=kernel_dir / "h.py", module=None, function="f"), reference=None,
                          keys=(), rtol=0.0, sample=120, ranges=((64, 32768), (64, 16384)), seed=0)  # fmt: skip

    def cells(keys: list[tuple[int, ...]], n: int) -> set[tuple[int, ...]]:
        return {tuple(min(n - 1, int(n * math.log2(v / lo) / math.log2(hi / lo))) for v, (lo, hi)
                      in zip(key, spec.ranges, strict=True)) for key in keys}  # fmt: skip

    for seed in range(20):
        keys = tune_keys.sampled(dataclasses.replace(spec, seed=seed), aligned=True)
        assert len(cells(keys, 6)) == 36, seed
        for rows, cols in itertools.product((False, True), repeat=2):
            mine = [k for k in keys if (k[0] % 16 == 0) == rows and (k[1] % 16 == 0) == cols]
            assert len(cells(mine, 3)) == 9, (seed, rows, cols)


def test_more_timed_keys_of_one_class_than_the_rule_reads_are_refused(kernel_dir, monkeypatch):
    """Choosing the rule is quadratic in a class's timed keys: a table past limits.MAX_MEASURED_KEYS is refused
    (a hostile or runaway table costs a bounded time), one at the bound is read."""
    from aotpack import limits

    def rows(n):
        return tuple(tables.Row(key=(k + 1,), types=(("T", "fp16"),), config="BLOCK=256,w4,s3",
                                median_us=(("BLOCK=256,w4,s3", 1.0 + k % 7),)) for k in range(n))  # fmt: skip

    with pytest.raises(RecipeError, match=r"tables\[0\]: kernels.add: 513 timed keys of one types and class"):
        with_table(kernel_dir, table(kernels=(("add", rows(limits.MAX_MEASURED_KEYS + 1)),)))
    with_table(kernel_dir, table(kernels=(("add", rows(limits.MAX_MEASURED_KEYS)),)))
    # and a kernel's rows in all (both dtypes at the bound of one class; the total bound lowered to keep it quick)
    monkeypatch.setattr(limits, "MAX_MEASURED_ROWS", 1000)
    one = rows(limits.MAX_MEASURED_KEYS)
    both = one + tuple(dataclasses.replace(r, types=(("T", "fp32"),)) for r in one)
    with pytest.raises(
        RecipeError, match=r"kernels.add: 1024 timed rows; .* at most 1000 \(limits.MAX_MEASURED_ROWS\)"
    ):
        with_table(kernel_dir, table(kernels=(("add", both),)))
