"""The drop-in path for kernels no module path names, without a GPU: a kernel generated into a temporary module
(as Helion and code generators do), with a dtype, a @triton.jit function and a tuple among its constexprs, is
recorded from the hook stream Triton's JIT gives (its source written out beside the recipe), built, and in a fresh
process launched on the fake driver in place of the same kernel generated anew under another module name;
``activate(fallback="error")`` refuses any compilation, of a kernel it knows or not."""

import importlib.util
import json
import sys
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from aotpack import build, record
from aotpack.backends import recipes as recipe

from .helpers import CAI_ARRAY, install_wheel, recorded_variants, run_on_fake_driver

GENERATED = """
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt as fast_rsqrt

SCALE = tl.constexpr(3)


@triton.jit
def _double(x, factor):
    return x * factor


@triton.jit
def _halve(x):
    return x * 0.5


mul_half = _halve


@triton.jit
def _generated_scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr, DTYPE: tl.constexpr, ACT: tl.constexpr,
                     SHAPE: tl.constexpr, BIAS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(DTYPE)
    y = ACT(x, SCALE) + SHAPE[0] * SHAPE[1] + mul_half(fast_rsqrt(x * x + 1.0))
    if BIAS is not None:
        y = y + BIAS
    tl.store(out_ptr + offs, y, mask=mask)
"""


def generate(folder: Path):
    """The kernel module written into a new folder and imported under a made-up name, as Helion's code cache
    does: a new module, and new function objects, every time."""
    name = f"generated_{uuid.uuid4().hex}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(GENERATED)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def hook(jit, constants, states, num_warps=4):
    """The keyword arguments Triton's JIT passes its jit_cache_hook for _generated_scale(x, out, n, ...)."""
    import triton.language as tl

    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr", "DTYPE": "constexpr",
                 "ACT": "constexpr", "SHAPE": "constexpr", "BIAS": "constexpr"}  # fmt: skip
    attrs = {(i,): [["tt.divisibility", 16]] for i, s in enumerate(states) if s == "D"}
    values = dict(zip(["BLOCK", "DTYPE", "ACT", "SHAPE", "BIAS"], constants, strict=True))
    consts = {(3 + i,): v for i, v in enumerate(values.values())}
    if states[2] == "1":
        signature["n"] = "constexpr"
        consts[(2,)] = 1
    spec = {"options": {"num_warps": num_warps, "num_stages": 3, "num_ctas": 1}, "target": {"arch": 90}}
    compile = {"signature": signature, "constants": consts, "configs": [attrs], "num_warps": num_warps,
               "num_stages": 3, "specialization_data": json.dumps(spec)}  # fmt: skip
    assert tl is not None
    return {"key": str(uuid.uuid4()), "repr": "", "fn": SimpleNamespace(module=jit.fn.__module__,
            name=jit.fn.__qualname__, jit_function=jit), "compile": compile, "is_manual_warmup": False,
            "already_compiled": False}  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    import triton.language as tl

    folder = tmp_path_factory.mktemp("recorded")
    module = generate(folder / "first")
    rec = record.Recording()
    act = module._double
    rec.on_compile(**hook(module._generated_scale, (256, tl.float32, act, (2, 3), None), "DDD"))
    rec.on_compile(**hook(module._generated_scale, (256, tl.float32, act, (2, 3), 0.5), "DD_", num_warps=8))
    path = folder / "recipe" / "r.yaml"
    path.parent.mkdir()
    record.write(path, rec.events, "generated_kernels")
    return path


def test_a_generated_kernel_is_written_out_and_every_constexpr_kind_is_said(recorded):
    data = yaml.safe_load(recorded.read_text())
    (kernel,) = data["kernels"].values()
    source, _, function = kernel["triton"].partition(":")
    assert source.startswith("kernels/") and function == "_generated_scale"
    written = (recorded.parent / source).read_text()
    assert "def _generated_scale(" in written and "SCALE = tl.constexpr(3)" in written and "import uuid" not in written
    assert written.startswith("# generated_") and ":_generated_scale: written out by aotpack" in written.split("\n")[0]
    # Triton's function under another name, and a @triton.jit helper bound to a second name, come along
    assert "\nfast_rsqrt = triton.language.extra.libdevice.rsqrt\n" in written
    assert "mul_half = _halve" in written and "def _halve(" in written
    config = next(r["config"] for r in kernel["variants"] if r["config"]["BIAS"] is None)
    assert config["DTYPE"] == {"dtype": "fp32"} and config["SHAPE"] == {"tuple": [2, 3]} and config["BIAS"] is None
    helper = config["ACT"]["function"]
    assert helper.startswith("kernels/") and helper.endswith(":_double")
    assert {r["config"]["BIAS"] for r in kernel["variants"]} == {None, 0.5}
    loaded = recipe.load(recorded)
    ids = [v.id for v in recorded_variants(loaded)]
    assert len(ids) == 2 and "DTYPE=tl.fp32" in ids[0] and "ACT=_double" in ids[0] and "SHAPE=(2,3)" in ids[0]


@pytest.fixture(scope="module")
def site(recorded, tmp_path_factory):
    wheel = build(recorded, tmp_path_factory.mktemp("dist"), jobs=2).wheel
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


REPLAY = """
import importlib.util, json, sys, uuid
from pathlib import Path
from types import SimpleNamespace
import triton.language as tl
from triton import knobs
sys.path.insert(0, {tests!r})
from integration.test_dropin import generate, hook
import generated_kernels as k
module = generate(Path({folder!r}))  # the same code, generated anew under another name
x, o = (Array(A + i * 0x1000000, (4096,), "<f4") for i in range(2))
print(k.activate(fallback="error"))
kept = module._generated_scale[(16,)](x, o, 4096, BLOCK=256, DTYPE=tl.float32, ACT=module._double, SHAPE=(2, 3),
                                     BIAS=None)
module._generated_scale[(16,)](x, o, 4001, BLOCK=256, DTYPE=tl.float32, ACT=module._double, SHAPE=(2, 3), BIAS=0.5,
                               num_warps=8)
# what the run returned launches its config again, as a CompiledKernel does: every parameter by position
# (Triton 3.6), or the runtime arguments alone (3.7 on)
kept[(4, 1, 1)](x, o, 4096, 256, tl.float32, module._double, (2, 3), None)
kept[(2, 1, 1)](x, o, 4096)
import torch


class Buffer:  # a library's tensor wrapper (FlagGems' StridedBuffer), as Triton's JIT takes it: data_ptr() and dtype
    def __init__(self, ptr, dtype=torch.float32):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self):
        return self.ptr


kept[(3, 1, 1)](Buffer(A), Buffer(A + 0x1000000), 4096)
try:  # a dtype no row has: a call no variant was built for, as the JIT sees it
    kept[(3, 1, 1)](Buffer(A, torch.complex128), o, 4096)
except k.MissingVariant as exc:
    print("wrapper:", exc)
for bad in (dict(BLOCK=512, DTYPE=tl.float32, SHAPE=(2, 3), BIAS=None), dict(BLOCK=256, DTYPE=tl.float16,
            SHAPE=(2, 3), BIAS=None), dict(BLOCK=256, DTYPE=tl.float32, SHAPE=(3, 2), BIAS=None)):
    try:
        module._generated_scale[(16,)](x, o, 4096, ACT=module._double, **bad)
    except k.MissingVariant as exc:
        print("missing:", str(exc)[:60])
# what Triton's JIT calls before any compilation, for a kernel the package never saw: refused before it compiles
other = generate(Path({folder!r}))
try:
    knobs.runtime.jit_cache_hook(**hook(other._double, (256, tl.float16, other._double, (1,), None), "DD_"))
except k.MissingVariant as exc:
    print("refused:", str(exc))
k.deactivate()
print("run" in module._generated_scale.__dict__, knobs.runtime.jit_cache_hook)
"""


def test_activate_finds_a_kernel_generated_anew_by_its_source(site, fake_driver, tmp_path):
    code = CAI_ARRAY + textwrap.dedent(REPLAY).format(tests=str(Path(__file__).parents[1]),
                                                      folder=str(tmp_path / "again"))  # fmt: skip
    out, log = run_on_fake_driver(code, site, fake_driver, tmp_path / "cuda.log")
    assert out[0] == "['generated_scale']"
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 5 and "grid=16,1,1 block=128,1,1" in launches[0] and "block=256,1,1" in launches[1]
    assert "grid=4,1,1 block=128,1,1" in launches[2] and "grid=2,1,1 block=128,1,1" in launches[3]
    assert "grid=3,1,1 block=128,1,1" in launches[4]  # through data_ptr() and dtype, as Triton's JIT takes it
    assert launches[2].split("grid=")[0] == launches[3].split("grid=")[0] == launches[0].split("grid=")[0]
    assert out[1] == (
        "wrapper: generated_scale[grid](...): argument x_ptr has dtype torch.complex128, which no "
        "kernel here takes; record a run that makes this call"
    )
    out = out[:1] + out[2:]
    assert [line.split(":")[0] for line in out[1:4]] == ["missing"] * 3
    assert out[4].startswith("refused: Triton's JIT would compile generated_") and "_double (" in out[4]
    assert "activate(fallback='error') allows no compilation" in out[4] and "aotpack record -o RECIPE" in out[4]
    assert out[5] == "False None"


NESTED = """
import triton
import triton.language as tl


def make(step):
    @triton.jit
    def nested_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    return nested_kernel


class Kernels:
    @staticmethod
    @triton.jit
    def in_class(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
"""


def test_a_kernel_inside_a_function_or_class_of_an_installed_package_is_written_out(tmp_path, monkeypatch):
    """Importable modules hold kernels a module path cannot name (a factory's, a class's): their sources go
    beside the recipe as generated kernels do, and the recipe builds."""
    from aotpack.runtime import _aotpack_source

    site = tmp_path / "site"
    (site / "nested_pkg").mkdir(parents=True)
    (site / "nested_pkg" / "__init__.py").write_text(NESTED)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(_aotpack_source, "_installed_roots", lambda: (str(site.resolve()),))
    module = importlib.import_module("nested_pkg")
    try:
        rec = record.Recording()
        for jit in (module.make(2), module.Kernels.in_class):
            compile = {
                "signature": {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                "constants": {(2,): 128},
                "configs": [{(0,): [["tt.divisibility", 16]]}],
                "num_warps": 4,
                "num_stages": 3,
                "specialization_data": json.dumps({"options": {"num_warps": 4}, "target": {"arch": 90}}),
            }
            rec.on_compile(key=str(uuid.uuid4()), repr="", compile=compile, is_manual_warmup=False,
                           already_compiled=False, fn=SimpleNamespace(module=jit.fn.__module__,
                           name=jit.fn.__qualname__, jit_function=jit))  # fmt: skip
        path = tmp_path / "out" / "r.yaml"
        path.parent.mkdir()
        record.write(path, rec.events, "nested_kernels")
        kernels = yaml.safe_load(path.read_text())["kernels"]
        assert sorted(k["triton"].partition(":")[2] for k in kernels.values()) == ["in_class", "nested_kernel"]
        assert all(k["triton"].startswith("kernels/") for k in kernels.values())
        assert len(recorded_variants(recipe.load(path))) == 2
    finally:
        sys.modules.pop("nested_pkg", None)
