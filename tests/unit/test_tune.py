"""What aotpack tune does around each run that a kernel's @triton.autotune asks for."""

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest

from aotpack.backends import recipes as recipe
from aotpack.commands import tune, tune_keys, tune_measure

from ..shared import GOOD

torch = pytest.importorskip("torch")


def test_reset_to_zero_and_restore_value_before_each_run(kernel_dir):
    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    assert kernel.triton is not None
    triton = dataclasses.replace(kernel.triton, reset_to_zero=("out_ptr",), restore_value=("x_ptr",))
    kernel = dataclasses.replace(kernel, triton=triton)
    x, y, out = torch.arange(4.0), torch.ones(4), torch.full((4,), 7.0)
    sets = [([x, y, out], [2])]
    prepare = tune_measure._preparer(kernel, sets)
    x.mul_(10)  # a run wrote into what it should only have read ...
    out.fill_(3)  # ... and accumulated into its output
    prepare(sets[0][0])
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and out.tolist() == [0.0] * 4 and y.tolist() == [1.0] * 4


class _Cuda:
    def __init__(self, names):
        self.names = names

    def device_count(self):
        return len(self.names)

    def get_device_name(self, i):
        return self.names[i]


class _Torch:
    def __init__(self, *names):
        self.cuda = _Cuda(list(names))


def test_devices_name_gpus_as_this_process_sees_them(monkeypatch):
    from aotpack.commands.tune import visible_devices
    from aotpack.errors import UsageError

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_devices(_Torch("H200", "H200"), "all") == [(0, "0"), (1, "1")]
    assert visible_devices(_Torch("H200", "H200", "H200"), "2,0") == [(2, "2"), (0, "0")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")  # this process sees physical GPUs 5 and 7 as 0 and 1
    assert visible_devices(_Torch("H200", "H200"), "all") == [(0, "5"), (1, "7")]
    for asked, says in [("2", "GPUs 0 to 1"), ("0,0", "name each once"), ("x", "give 'all'")]:
        with pytest.raises(UsageError, match=says):
            visible_devices(_Torch("H200", "H200"), asked)
    with pytest.raises(UsageError, match="the GPUs differ"):
        visible_devices(_Torch("H100", "H200"), "all")


def test_units_from_any_number_of_gpus_go_back_in_table_order():
    from types import SimpleNamespace

    from aotpack.commands.tune import _per_kernel
    from aotpack.errors import TuneError

    add: Any = SimpleNamespace(name="add", tune=None)  # stand-ins for model.Kernel
    soft: Any = SimpleNamespace(name="softmax", tune=None)
    work: list[Any] = [(add, (), (1,)), (soft, (), (1,)), (add, (), (2,))]
    merged = _per_kernel(work, [("sm_90a", ["a1"]), ("sm_90a", ["s1", "s1'"]), ("sm_90a", ["a2"])])
    assert merged == {"add": ("sm_90a", ["a1", "a2"]), "softmax": ("sm_90a", ["s1", "s1'"])}
    with pytest.raises(TuneError, match="add: the GPUs ran code for sm_90a and sm_80"):
        _per_kernel(work, [("sm_90a", []), ("sm_90a", []), ("sm_80", [])])


def test_units_are_taken_once_each_and_a_failure_stops_the_others():
    import multiprocessing
    import threading
    import time

    from aotpack.commands.tune import _take

    counter = multiprocessing.get_context("spawn").Value("q", 0)
    work: list[Any] = list(range(50))
    taken: list[list[tuple[int, Any]]] = [[], [], []]

    def worker(slot):
        taken[slot] = _take(counter, work, lambda unit: unit * 10, None)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged = sorted(pair for part in taken for pair in part)
    assert merged == [(i, i * 10) for i in range(50)], "every unit once, with its result"

    counter.value = 0

    def fail_at_3(unit):
        if unit == 3:
            raise RuntimeError("unit 3 failed")
        return unit

    with pytest.raises(RuntimeError, match="unit 3 failed"):
        _take(counter, work, fail_at_3, None)
    assert counter.value >= len(work), "the others stop at their next unit"
    assert _take(counter, work, lambda unit: unit, None) == []

    counter.value = 0  # past the deadline: no unit starts, and none is handed to another process either
    assert _take(counter, work, lambda unit: unit, time.time() - 1) == [] and counter.value >= len(work)


def test_a_kernel_of_several_classes_tunes_16_divisible_sampled_keys(kernel_dir):
    """units: the listed keys, then sample's, drawn aligned where the kernel has more than one class."""
    from aotpack import model
    from aotpack.plan import classes

    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    assert len(classes.specs(kernel)) > 1
    spec = model.TuneSpec(inputs=model.Source(path=kernel_dir / "h.py", module=None, function="f"), reference=None,
                          keys=((4096,),), rtol=0.0, sample=40, ranges=((16, 1 << 20),), seed=2)  # fmt: skip
    keys = [key for _, key in tune_keys.units(dataclasses.replace(kernel, tune=spec))]
    assert keys[: len(kernel.bindings)] == [(4096,)] * len(kernel.bindings)
    sampled = list(dict.fromkeys(keys[len(kernel.bindings) :]))
    assert sampled == tune_keys.sampled(spec, aligned=True) != tune_keys.sampled(spec)
    assert sum(k % 16 == 0 for (k,) in sampled) >= 10


def test_the_rule_tune_reports_is_fitted_to_the_table_it_wrote(kernel_dir, caplog):
    """The held-out error printed after tuning is the new table's: its rows replace the recipe's timed rows of
    that arch (it was the recipe's old rule, its tables not refitted)."""
    import math

    from aotpack.model import Rule
    from aotpack.recipe import tables

    rec = recipe.parse(GOOD, kernel_dir / "r.yaml")
    (kernel,) = rec.kernels

    def rows(keys, cost):
        out = []
        for n in keys:
            us = tuple((c.label, cost(n, c)) for c in kernel.configs)
            out.append(tables.Row(key=(n,), types=(("T", "fp16"),), config=min(us, key=lambda p: p[1])[0],
                                  median_us=tuple(sorted(us))))  # fmt: skip
        return out

    old = rows(range(100, 1000, 100), lambda n, c: 1.0 + c.num_stages)  # 9 keys, the recipe's table
    old_rules = tuple(Rule(key=r.key, config=next(c for c in kernel.configs if c.label == r.config), arch="sm_90a",
                           types=r.types, specialization=None, median_us=r.median_us, where=kernel.where)
                      for r in old)  # fmt: skip
    rec = dataclasses.replace(rec, kernels=(dataclasses.replace(kernel, rules=old_rules),))
    new = rows((3 * 2**i + 1 for i in range(7)), lambda n, c: 1.0 + math.log2(n) * (c.num_warps or 4))
    table = tables.Table(package=rec.package, arch="sm_90a", device="d", driver_cuda="13.0", date="d",
                         kernels=((kernel.name, tuple(new)),), sms=132)  # fmt: skip
    with caplog.at_level("WARNING"):
        tune._say_rules(tune._tuned(table, rec), rec.package)
    said = caplog.text
    assert f"of {len(new)} over 1.05x" in said and f"of {len(new) + len(old)} over" not in said, said


def _step_us(n: int, block: int, warps: int) -> float:
    """A GPU on which the 256-element block is the fastest below 50,000 elements and the 1024 one above, by 30%."""
    return (1.0 if (n < 50_000) == (block == 256) else 1.3) * (1 + n / 1e6) + warps / 1000


def _refining_recipe(kernel_dir, count: int = 24, validate: int = 0) -> Path:
    path = kernel_dir / "r.yaml"
    path.write_text(GOOD + ("    tune:\n      inputs: add.py:add_kernel\n"
                            f"      sample: {{count: {count}, range: {{n_elements: [1024, 1048576]}}, seed: 4}}\n"
                            "      refine: 16\n" + (f"      validate: {validate}\n" if validate else "")))  # fmt: skip
    return path


def _gpu(calls: list, device: str = "GPU", arch: str = "sm_90a", timed: int | None = None):
    """A stand-in for tune._tune_here: each unit's row as _step_us's GPU times it (a unit past the first ``timed``
    of a call: past the budget), the keys of each call kept in ``calls``."""
    from aotpack.recipe import tables

    def on_gpu(package, path, work, opts, devices, kept=None):
        calls.append([key for _, _, key in work])
        results: list = []
        for kernel, binding, key in work:
            us = tuple(sorted((c.label, _step_us(key[0], cast(int, c.value("BLOCK")), c.num_warps or 4))
                              for c in kernel.configs))  # fmt: skip
            row = tables.Row(key=key, types=binding, config=min(us, key=lambda p: p[1])[0], median_us=us)
            results.append(None if timed is not None and len(results) >= timed else (arch, [row]))
        return {"device": device, "driver_cuda": "13.0", "sms": "132"}, results

    return on_gpu


def test_refine_times_keys_where_the_fastest_config_changes(kernel_dir, monkeypatch, caplog):
    """tune: refine: N keys after the sampled ones, in rounds, each round's where the fastest config changes between
    the keys timed before: they close in on the size where it does, which the sampled keys bracket loosely; the
    table holds them all, and none is timed twice."""
    import math

    from aotpack.recipe import tables

    (kernel,) = recipe.load(_refining_recipe(kernel_dir)).kernels
    calls: list[list[tuple[int, ...]]] = []
    monkeypatch.setattr(tune, "_tune_here", _gpu(calls))
    with caplog.at_level("WARNING"):
        written = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    bindings = len(kernel.bindings)
    sampled = {k for k in calls[0]}
    refined = [k for call in calls[1:] for k in dict.fromkeys(call)]
    assert 2 <= len(calls) <= 1 + tune_keys.REFINE_ROUNDS and 0 < len(refined) <= 16
    assert all(len(call) % bindings == 0 for call in calls)  # every key with every type binding
    assert len(set(refined)) == len(refined) and not set(refined) & sampled
    timed = {r.key for _, rows in tables.read(written).kernels for r in rows}
    assert timed == sampled | set(refined)

    def bracket(keys):
        """log2 of the ratio of the timed sizes either side of the change"""
        return math.log2(min(n for (n,) in keys if n >= 50_000) / max(n for (n,) in keys if n < 50_000))

    assert bracket(timed) < bracket(sampled) / 16, (sorted(sampled), refined)
    assert "more keys where the fastest config changes between the" in caplog.text


def test_keep_times_only_the_keys_the_table_lacks(kernel_dir, monkeypatch):
    """A tune the budget ended, run again with --keep: the kept rows stay as they were, only the sampled keys the
    table lacks are timed, the refining reads them all, and the table written holds every row."""
    from aotpack.recipe import tables

    _refining_recipe(kernel_dir)
    first: list[list[tuple[int, ...]]] = []
    monkeypatch.setattr(tune, "_tune_here", _gpu(first, timed=20))  # 10 of the 24 keys, both bindings
    partial = tables.read(tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", tune_measure.Options(budget=60.0)))
    kept = {(r.key, r.types): r for _, rows in partial.kernels for r in rows}
    assert len(first) == 1 and len(kept) == 20
    again: list[list[tuple[int, ...]]] = []
    monkeypatch.setattr(tune, "_tune_here", _gpu(again))
    whole = tables.read(
        tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", keep=kernel_dir / "out" / "kit.sm_90a.json")
    )
    assert set(again[0]) == set(first[0]) - {key for key, _ in kept} and len(again) > 1  # the rest, then refining
    rows = {(r.key, r.types): r for _, got in whole.kernels for r in got}
    assert all(rows[k] == r for k, r in kept.items())
    assert {key for key, _ in rows} == set(first[0]) | {k for call in again for k in call}


@pytest.mark.parametrize(
    ("gpu", "error", "message"),
    [
        ({"device": "Other GPU"}, "TuneError", "the table was measured on GPU, this GPU is Other GPU"),
        ({"arch": "sm_80"}, "TuneError", "the table is for sm_90a, and this GPU runs kit's code for sm_80"),
    ],
)
def test_keep_refuses_a_table_of_another_kind_of_gpu(kernel_dir, monkeypatch, gpu, error, message):
    from aotpack import errors

    _refining_recipe(kernel_dir, count=8)
    monkeypatch.setattr(tune, "_tune_here", _gpu([]))
    table = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    before = table.read_bytes()
    monkeypatch.setattr(tune, "_tune_here", _gpu([], **gpu))
    with pytest.raises(getattr(errors, error), match=message):
        tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", keep=table)
    assert table.read_bytes() == before


def test_keep_refuses_another_packages_table(kernel_dir, monkeypatch):
    from aotpack.errors import UsageError

    _refining_recipe(kernel_dir, count=8)
    monkeypatch.setattr(tune, "_tune_here", _gpu([]))
    table = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    other = kernel_dir / "other.json"
    other.write_text(table.read_text().replace('"package": "kit"', '"package": "other"'))
    with pytest.raises(UsageError, match=f"--keep {other}: the table is for package other, the recipe builds kit"):
        tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", keep=other)


@pytest.mark.parametrize(
    ("spoil", "error", "message"),
    [
        (lambda text: "{not json", "UsageError", "--keep: .*other.json"),
        (lambda text: text.replace('"format": "aotpack-tuning-table/1"', '"format": "x"'), "UsageError",
         "--keep: .*not a tuning table"),
        (lambda text: text.replace('"BLOCK=256,w4,s3"', '"BLOCK=3,w4,s3"'), "TuneError",
         "the table's rows do not go with .*is not in the recipe's grid"),
        (lambda text: text.replace('"key": [', '"key": [7, ', 1), "TuneError",
         "the table's rows do not go with .*the key has 2 values"),
    ],
)  # fmt: skip
def test_keep_says_what_is_wrong_with_a_spoilt_table(kernel_dir, monkeypatch, spoil, error, message):
    """A kept table aotpack cannot take is one of aotpack's errors, naming the table, not a traceback: --keep's file
    unreadable as a table, or rows the recipe no longer takes (a config left its grid)."""
    from aotpack import errors

    _refining_recipe(kernel_dir, count=8)
    monkeypatch.setattr(tune, "_tune_here", _gpu([]))
    table = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    other = kernel_dir / "other.json"
    other.write_text(spoil(table.read_text()))
    assert other.read_text() != table.read_text()
    with pytest.raises(getattr(errors, error), match=message):
        tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", keep=other)


def test_refine_stops_when_the_budget_runs_out(kernel_dir, monkeypatch):
    """A unit past --budget (None) ends the refining: no round starts after it."""
    from aotpack.errors import TuneError

    _refining_recipe(kernel_dir, count=12)
    calls: list[list[tuple[int, ...]]] = []
    monkeypatch.setattr(tune, "_tune_here", _gpu(calls, timed=0))

    with pytest.raises(TuneError, match="no key was timed before the budget ran out"):
        tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", tune_measure.Options(budget=0.0))
    assert len(calls) == 1


def test_keep_refuses_to_grow_a_table_past_what_it_holds(kernel_dir, monkeypatch):
    """The kept keys, the recipe's and the refined ones together past limits.MAX_MEASURED_KEYS: refused before any
    key is timed (the build would refuse the table)."""
    from aotpack import limits
    from aotpack.errors import UsageError
    from aotpack.recipe import tables

    _refining_recipe(kernel_dir, count=8)  # 8 sampled + 16 refined
    monkeypatch.setattr(tune, "_tune_here", _gpu([]))
    table = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    timed = len({r.key for _, rows in tables.read(table).kernels for r in rows})
    monkeypatch.setattr(limits, "MAX_MEASURED_KEYS", timed + 15)
    calls: list = []
    monkeypatch.setattr(tune, "_tune_here", _gpu(calls))
    with pytest.raises(UsageError, match=f"add would have {timed + 16} keys \\(16 of them refined\\)"):
        tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", keep=table)
    assert calls == []
    monkeypatch.setattr(limits, "MAX_MEASURED_KEYS", timed + 16)
    tune.tune(kernel_dir / "r.yaml", kernel_dir / "out", keep=table)
    assert calls


def test_refining_stops_before_the_table_passes_the_rows_it_may_hold(kernel_dir, monkeypatch, caplog):
    """Each key makes a row per type binding and class: refining times no more keys than limits.MAX_MEASURED_ROWS
    leaves room for, says so, and the table it writes is one the build takes."""
    from aotpack import limits
    from aotpack.recipe import tables

    _refining_recipe(kernel_dir)  # 24 sampled keys, 2 type bindings: 48 rows; refine: 16
    monkeypatch.setattr(limits, "MAX_MEASURED_ROWS", 48 + 10)
    monkeypatch.setattr(tune, "_tune_here", _gpu([]))
    with caplog.at_level("WARNING"):
        written = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    rows = [r for _, got in tables.read(written).kernels for r in got]
    assert len(rows) == 58 and len({r.key for r in rows}) == 29
    assert "refining stops" in caplog.text and "(limits.MAX_MEASURED_ROWS)" in caplog.text


def test_refining_counts_the_validation_rows_toward_the_rows_a_table_may_hold(kernel_dir, monkeypatch, caplog):
    """The validation rows are rows of the table the build counts too (tables.apply): refining leaves room for
    them, and the table it writes loads (an H200's refine of the demo matmul wrote 8,406 rows, its 1,344 validation
    rows not counted, and the build refused the table)."""
    from aotpack import limits
    from aotpack.backends import recipes
    from aotpack.recipe import tables

    _refining_recipe(kernel_dir, validate=8)  # 24 sampled keys and 8 to validate, 2 type bindings: 64 rows
    monkeypatch.setattr(limits, "MAX_MEASURED_ROWS", 64 + 10)
    monkeypatch.setattr(tune, "_tune_here", _gpu([]))
    with caplog.at_level("WARNING"):
        written = tune.tune(kernel_dir / "r.yaml", kernel_dir / "out")
    rows = [r for _, got in tables.read(written).kernels for r in got]
    assert len(rows) == 74 and sum(r.validation for r in rows) == 16 and len({r.key for r in rows}) == 37
    assert "refining stops" in caplog.text and "(limits.MAX_MEASURED_ROWS)" in caplog.text
    rec = recipes.load(kernel_dir / "r.yaml")
    (applied,) = tables.apply(tables.read(written), list(rec.kernels), rec.package)
    assert len(tables.timed_rows(applied)) == 74
