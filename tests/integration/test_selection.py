"""The dispatcher's rule between measured keys (aotpack/selection.py), built: a matmul whose tuning table
holds every config's time at 40 keys (drawn from a wave model of the GPU, so that the best tile changes with
the shape and some configs' programs are best counted in waves), the rule chosen at build time, and the C
runtime's pick for 300 keys nobody measured, read back through select() on the fake driver, the same as the
Python rule's: the runtime computes what the build's held-out error describes."""

import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotpack import build, manifest, model, selection
from aotpack.backends import recipes as recipe
from aotpack.recipe import tables

from .helpers import CAI_ARRAY, install_wheel, run_on_fake_driver

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SMS = 132

RECIPE = f"""
package: picked_kernels
version: 0.1.0
targets: [sm_90a]
tables: [table.json]
kernels:
  matmul:
    triton: {ROOT}/examples/matmul.py:matmul_kernel
    types: {{T: [fp16]}}
    args:
      a_ptr: {{type: "*T", extent: "(M - 1) * stride_am + (K - 1) * stride_ak + 1"}}
      b_ptr: {{type: "*T", extent: "(K - 1) * stride_bk + (N - 1) * stride_bn + 1"}}
      c_ptr: {{type: "*T", extent: "(M - 1) * stride_cm + (N - 1) * stride_cn + 1"}}
      M: {{type: i32, default: "size(a_ptr, 0)"}}
      N: {{type: i32, default: "size(b_ptr, 1)"}}
      K: {{type: i32, default: "size(a_ptr, 1)"}}
      stride_am: {{type: i32, default: "stride(a_ptr, 0)"}}
      stride_ak: {{type: i32, default: "stride(a_ptr, 1)"}}
      stride_bk: {{type: i32, default: "stride(b_ptr, 0)"}}
      stride_bn: {{type: i32, default: "stride(b_ptr, 1)"}}
      stride_cm: {{type: i32, default: "stride(c_ptr, 0)"}}
      stride_cn: {{type: i32, default: "stride(c_ptr, 1)"}}
    constexprs: {{BLOCK_M: [64, 128], BLOCK_N: [64, 128], BLOCK_K: [32, 64], GROUP_M: [8]}}
    num_warps: [4]
    num_stages: [3]
    specialize: none
    grid: ["cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)"]
    key: [M, N, K]
    bucket: pow2
    default: {{BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 32}}
"""


def modelled_us(m: int, n: int, k: int, bm: int, bn: int, bk: int) -> float:
    """A GPU's time as waves of tiles: a 64x64 tile fits four times per multiprocessor, a 128x128 one once, so
    that a full wave costs the same per element whatever the tile, and the fuller last wave wins."""
    per_sm = 128 * 128 // (bm * bn)
    waves = math.ceil(math.ceil(m / bm) * math.ceil(n / bn) / (SMS * per_sm))
    return 3.0 + waves * math.ceil(k / bk) * bk * (1.0 if bk == 64 else 1.1) / 50.0


def fixed_cost_us(m: int, n: int, k: int, bm: int, bn: int, bk: int) -> float:
    """A GPU's time where a program costs 2048 elements of its K loop besides the loop (storing its tile, say):
    small K pays it most, and a rule that counts only the loop's trips mispredicts between keys."""
    programs = max(math.ceil(m / bm) * math.ceil(n / bn), SMS)
    return 3.0 + programs / SMS * (bm * bn / 4096) * (math.ceil(k / bk) * bk * (1.0 if bk == 64 else 1.1) + 2048) / 50.0


def label(bm: int, bn: int, bk: int) -> str:
    return f"BLOCK_M={bm},BLOCK_N={bn},BLOCK_K={bk},GROUP_M=8,w4,s3"


CONFIGS = [(bm, bn, bk) for bm in (64, 128) for bn in (64, 128) for bk in (32, 64)]


def draw(rng: random.Random) -> tuple[int, int, int]:
    return tuple(round(2 ** rng.uniform(5, 13)) for _ in range(3))  # type: ignore[return-value]


def fitted(recipe_path: Path) -> model.Kernel:
    """The recipe's one kernel with its rule chosen, as its build chose it (tables.fit, with the blocks per
    multiprocessor of the variants the wheel in dist/ holds, where there is one)."""
    (kernel,) = recipe.load(recipe_path).kernels
    wheels = list((recipe_path.parent / "dist").glob("*.whl"))
    blocks = {kernel.name: manifest.blocks_of(manifest.read_wheel(wheels[0]), kernel)} if wheels else None
    (kernel,) = tables.fit([kernel], blocks)
    return kernel


def own_blocks(recipe_path: Path) -> tuple[int, ...]:
    """Each config's variant's blocks per multiprocessor in the recipe's wheel (its one arch, types and class)."""
    (kernel,) = recipe.load(recipe_path).kernels
    wheel = next((recipe_path.parent / "dist").glob("*.whl"))
    (blocks,) = manifest.blocks_of(manifest.read_wheel(wheel), kernel).values()
    return blocks


def _site(folder: Path, timed: Callable[..., float], seed: int, tmp_path_factory) -> tuple[Path, Path]:
    """40 keys drawn with this seed, timed by the model: the recipe, and its wheel installed."""
    _table(folder, timed, seed)
    wheel = build(folder / "r.yaml", folder / "dist", jobs=2).wheel
    return folder / "r.yaml", install_wheel(wheel, tmp_path_factory.mktemp("site"))


def _table(folder: Path, timed: Callable[..., float], seed: int) -> None:
    """The recipe in the folder, with a table of 40 keys drawn with this seed, timed by the model."""
    rng = random.Random(seed)
    rows = []
    for key in [draw(rng) for _ in range(40)]:
        times = {label(*c): round(timed(*key, *c), 3) for c in CONFIGS}
        rows.append({"key": list(key), "types": {"T": "fp16"}, "config": min(times.items(), key=lambda item: item[1])[0],
                     "median_us": times, "rejected": {}})  # fmt: skip
    table = {"format": "aotpack-tuning-table/1", "package": "picked_kernels", "arch": "sm_90a", "device": "model",
             "driver_cuda": "13.0", "date": "2026-11-29", "sms": SMS, "kernels": {"matmul": rows}}  # fmt: skip
    (folder / "table.json").write_text(json.dumps(table))
    (folder / "r.yaml").write_text(RECIPE)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path]:
    # keys where counting programs in waves predicts the other folds' keys best, so the rule keeps occupancies
    # and the runtime's waves are tested (on most draws of this model k and scale alone predict as well: no waves)
    return _site(tmp_path_factory.mktemp("picked"), modelled_us, 3, tmp_path_factory)


@pytest.fixture(scope="module")
def fixed_site(tmp_path_factory) -> tuple[Path, Path]:
    # keys where a program's fixed cost predicts the other folds' keys best (on some draws k and scale alone do)
    return _site(tmp_path_factory.mktemp("fixed"), fixed_cost_us, 5, tmp_path_factory)


@pytest.fixture(scope="module")
def site_on(site, machine, tmp_path_factory) -> Path:
    """The same recipe's wheel for the machine, installed for it."""
    recipe_path, installed = site
    return machine.site(recipe_path, lambda: installed, tmp_path_factory)


def test_the_runtime_picks_what_the_rule_predicts(site, site_on, machine, tmp_path):
    """On each machine (aarch64's compilers may fuse a multiply and an add where x86-64's cannot: the estimates
    must still order the configs as Python's do)."""
    recipe_path, _ = site
    kernel = fitted(recipe_path)
    chosen = kernel.selection
    assert chosen.neighbours > 0 and chosen.scale > 0, chosen  # the wave model's data favours the scaled rule
    assert chosen.held_out is not None and chosen.nearest is not None
    assert chosen.held_out.worst < chosen.nearest.worst  # and it generalizes better than the nearest row
    assert any(chosen.occupancy)  # the model runs programs in waves: some configs' are counted so
    wheel_manifest = manifest.read_wheel(next((recipe_path.parent / "dist").glob("*.whl")))
    assert wheel_manifest["kernels"]["matmul"]["selection"]["neighbours"] == chosen.neighbours
    assert wheel_manifest["kernels"]["matmul"]["selection"]["occupancy"] == {
        c.label: o for c, o in zip(kernel.configs, chosen.occupancy, strict=True) if o}  # fmt: skip
    _runtime_picks_as_predicted(kernel, site_on, machine, tmp_path)


def test_the_runtime_counts_a_programs_fixed_cost_as_the_rule_does(fixed_site, fake_driver, tmp_path):
    recipe_path, installed = fixed_site
    kernel = fitted(recipe_path)
    chosen = kernel.selection
    assert chosen.neighbours > 0 and chosen.scale > 0 and chosen.fixed > 0 and not chosen.occupancy, chosen
    assert chosen.held_out is not None and chosen.nearest is not None
    wheel_manifest = manifest.read_wheel(next((recipe_path.parent / "dist").glob("*.whl")))
    assert wheel_manifest["kernels"]["matmul"]["selection"]["fixed"] == chosen.fixed
    _runtime_picks_as_predicted(kernel, installed, fake_driver, tmp_path)


@pytest.fixture(scope="module")
def own_site(site, tmp_path_factory) -> tuple[Path, Path]:
    """A GPU whose programs run in waves of as many of each variant's blocks as fit on a multiprocessor (those
    the build computed from the cubins' registers: read off the first site's wheel, the same variants)."""
    blocks = dict(zip(CONFIGS, own_blocks(site[0]), strict=True))
    per_element = {(64, 64): 1.0, (64, 128): 0.8, (128, 64): 0.8, (128, 128): 0.65}  # bigger tiles reuse more

    def own_us(m: int, n: int, k: int, bm: int, bn: int, bk: int) -> float:
        fit = blocks[(bm, bn, bk)]
        waves = math.ceil(math.ceil(m / bm) * math.ceil(n / bn) / (SMS * fit))
        wave = fit * bm * bn / 16384 * per_element[(bm, bn)]
        return 3.0 + waves * wave * math.ceil(k / bk) * bk * (1.0 if bk == 64 else 1.1) / 50.0

    return _site(tmp_path_factory.mktemp("own"), own_us, 5, tmp_path_factory)


def test_the_runtime_counts_waves_of_each_variants_blocks_as_the_rule_does(own_site, fake_driver, tmp_path):
    recipe_path, installed = own_site
    blocks = own_blocks(recipe_path)
    assert all(blocks) and len(set(blocks)) > 1, blocks  # the tiles' variants fit differently many per SM
    kernel = fitted(recipe_path)
    chosen = kernel.selection
    assert chosen.own_occupancy and chosen.scale > 0 and not chosen.occupancy, chosen
    unknown = tables.fit(list(recipe.load(recipe_path).kernels))[0].selection  # without the blocks
    assert chosen.held_out is not None and unknown.held_out is not None
    assert (chosen.held_out.over, chosen.held_out.worst) < (unknown.held_out.over, unknown.held_out.worst)
    wheel_manifest = manifest.read_wheel(next((recipe_path.parent / "dist").glob("*.whl")))
    assert wheel_manifest["kernels"]["matmul"]["selection"].get("own_occupancy") is True
    _runtime_picks_as_predicted(kernel, installed, fake_driver, tmp_path, blocks)


def _runtime_picks_as_predicted(kernel: model.Kernel, installed: Path, machine, tmp_path: Path,
                                blocks: tuple[int, ...] = ()) -> None:  # fmt: skip
    """The package's select() at 304 keys, twice each, on the machine: the config predict() picks with the rule;
    and the same after 3,000 other keys (the kept picks, 1,024 in sets of 4, evicted), twice: kept again, then
    read back."""
    chosen = kernel.selection
    rng = random.Random(11)
    keys = [draw(rng) for _ in range(300)] + [(96, 4000, 4000), (4000, 96, 4000), (1, 1, 1), (8192, 8192, 8192)]
    code = CAI_ARRAY + "import picked_kernels as p\n"
    code += "def select(m, n, k):\n"
    code += "    return p.matmul.select(Array(A, (m, k)), Array(A, (k, n)), Array(A, (m, n)))\n"
    code += f"keys = {keys!r}\n"
    code += "picks = [(select(*key), select(*key)) for key in keys]\n"
    code += "for m in range(100, 160):\n    for n in range(200, 250):\n        select(m, n, 77)\n"  # 3,000 others
    code += "for key, (first, again) in zip(keys, picks):\n"
    code += "    later, kept = select(*key), select(*key)\n"  # kept again after the eviction, and read back
    code += (
        "    print(first if first == again == later == kept else f'the pick changed: {first} {again} {later} {kept}')\n"
    )
    out, _ = run_on_fake_driver(code, installed, machine, tmp_path / "cuda.log", FAKE_CUDA_SMS=str(SMS))
    rows = selection.groups(kernel)[0]
    work = selection.tiles(kernel)
    consts = selection.consts_of(kernel, work)
    labels = [c.label for c in kernel.configs]
    for key, line in zip(keys, out, strict=True):
        expected = selection.predict(rows, key, chosen.neighbours, chosen.scale, work, consts, SMS,
                                     occupancy=blocks if chosen.own_occupancy else chosen.occupancy,
                                     fixed=chosen.fixed)  # fmt: skip
        assert expected is not None
        assert line.split("/")[1].startswith("T=fp16," + labels[expected]), (key, line, labels[expected])


def test_without_enough_measured_keys_the_nearest_row_rule_stays(tmp_path):
    rows = [{"key": [2**i, 2**i, 2**i], "types": {"T": "fp16"}, "config": label(64, 64, 32),
             "median_us": {label(*c): 1.0 + sum(c) / 1000 for c in CONFIGS}} for i in range(6, 6 + selection.MIN_ROWS - 1)]  # fmt: skip
    table = {"format": "aotpack-tuning-table/1", "package": "picked_kernels", "arch": "sm_90a", "device": "model",
             "driver_cuda": "13.0", "date": "2026-11-29", "kernels": {"matmul": rows}}  # fmt: skip
    (tmp_path / "table.json").write_text(json.dumps(table))
    (tmp_path / "r.yaml").write_text(RECIPE)
    kernel = fitted(tmp_path / "r.yaml")
    assert kernel.selection.neighbours == 0 and kernel.selection.held_out is None


def test_select_plans_for_a_gpu_that_is_not_here(site, fake_driver, tmp_path):
    """select(..., target=, sms=) with no driver at all (none is loaded): NumPy arrays, CPU and meta tensors, or key
    values, picked as the runtime picks on that GPU (the fake driver's, same capability and multiprocessors); a
    GPU the package has no code for, a bad target or count, sms= alone and a launch with target= are errors that
    say so."""
    _, installed = site
    rng = random.Random(5)
    keys = [draw(rng) for _ in range(40)]
    on_gpu = CAI_ARRAY + "import picked_kernels as p\n"
    on_gpu += f"for m, n, k in {keys!r}:\n"
    on_gpu += "    print(p.matmul.select(Array(A, (m, k)), Array(A, (k, n)), Array(A, (m, n))))\n"
    on_gpu += f"for m, n, k in {keys[:8]!r}:\n"
    on_gpu += "    print(p.matmul.select(M=m, N=n, K=k, T='fp16'))\n"
    expected, _ = run_on_fake_driver(on_gpu, installed, fake_driver, tmp_path / "cuda.log", FAKE_CUDA_SMS=str(SMS),
                                     FAKE_CUDA_CC="90")  # fmt: skip
    planned = f"""
import numpy as np, torch, picked_kernels as p
def aligned(shape):  # 256-byte aligned, as CUDA allocations are
    raw = np.empty(int(np.prod(shape)) + 128, np.float16)
    skip = (-raw.ctypes.data % 256) // 2
    return raw[skip:skip + int(np.prod(shape))].reshape(shape)
for m, n, k in {keys!r}:
    print(p.matmul.select(aligned((m, k)), aligned((k, n)), aligned((m, n)), target="sm_90a", sms={SMS}))
for m, n, k in {keys[:8]!r}:
    print(p.matmul.select(M=m, N=n, K=k, T="fp16", target="sm_90a", sms={SMS}))
m, n, k = {keys[0]!r}
for device in ("cpu", "meta"):
    a, b, c = (torch.empty(s, dtype=torch.float16, device=device) for s in ((m, k), (k, n), (m, n)))
    print(device, p.matmul.select(a, b, c, target="sm_90a").split("/")[2])
a, b, c = aligned((m, k)), aligned((k, n)), aligned((m, n))
for kwargs in ({{"target": "sm_80"}}, {{"target": "h100"}}, {{"target": "sm_90a", "sms": 0}}, {{"sms": 132}}):
    try:
        p.matmul.select(a, b, c, **kwargs)
    except (ValueError, TypeError, RuntimeError) as e:
        print(type(e).__name__, e)
try:
    p.matmul(a, b, c, target="sm_90a")
except TypeError as e:
    print("launch:", e)
print("libcuda loaded:", any("libcuda" in line for line in open("/proc/self/maps")))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    done = subprocess.run([sys.executable, "-c", planned], capture_output=True, text=True, timeout=300,
                          env={**env, "PYTHONPATH": str(installed)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    n = len(keys) + 8
    assert out[:n] == expected, [(a, b) for a, b in zip(out, expected, strict=False) if a != b][:5]
    assert out[n : n + 2] == ["cpu sm_90a", "meta sm_90a"]
    errors = out[n + 2 : n + 6]
    assert "compute capability 8.0" in errors[0] and "built for sm_90a" in errors[0], errors
    assert "argument target: expected a GPU architecture as aotpack names targets" in errors[1], errors
    assert "got h100" in errors[1] and "argument sms: expected the GPU's multiprocessor count" in errors[2], errors
    assert "argument sms: only with target=" in errors[3], errors
    assert out[n + 6].startswith("launch: matmul(): target= and sms= plan a select()"), out[n + 6]
    assert out[n + 7] == "libcuda loaded: False"


def test_two_gpus_of_one_arch_and_other_multiprocessor_counts_keep_their_own_picks(site, fake_driver, tmp_path):
    """The runtime keeps each call's pick; the rule counts waves of the GPU's multiprocessors, so a key repeated on
    a second GPU of the same arch with fewer of them gets that GPU's pick, not the first one's: the call's work
    counted on that GPU, the rows' on the one that timed them (the table's multiprocessors)."""
    recipe_path, installed = site
    kernel = fitted(recipe_path)
    chosen, rows = kernel.selection, selection.groups(kernel)[0]
    work = selection.tiles(kernel)
    consts = selection.consts_of(kernel, work)
    labels = [c.label for c in kernel.configs]

    def predicted(key, sms):
        c = selection.predict(rows, key, chosen.neighbours, chosen.scale, work, consts, sms, occupancy=chosen.occupancy,
                              row_sms=SMS)  # fmt: skip
        assert c is not None
        return labels[c]

    rng = random.Random(13)
    keys = [k for k in (draw(rng) for _ in range(400)) if predicted(k, SMS) != predicted(k, 40)][:12]
    assert len(keys) >= 4  # the multiprocessor count decides these keys' picks
    code = CAI_ARRAY + "import picked_kernels as p\n"
    code += f"for m, n, k in {keys!r}:\n"
    code += "    for base in (A, A + (1 << 40), A, A + (1 << 40)):  # device 0, device 1 (bits 40..), again\n"
    code += "        print(p.matmul.select(Array(base, (m, k)), Array(base, (k, n)), Array(base, (m, n))))\n"
    out, _ = run_on_fake_driver(code, installed, fake_driver, tmp_path / "cuda.log", FAKE_CUDA_DEVICES="2",
                                FAKE_CUDA_SMS=f"{SMS},40")  # fmt: skip
    got = [line.split("/")[1].removeprefix("T=fp16,") for line in out]
    assert got == [predicted(k, sms) for k in keys for sms in (SMS, 40, SMS, 40)]
