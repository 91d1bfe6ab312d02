"""Host tensor descriptors recorded and launched, without a GPU: the persistent TMA matmul of examples/hopper,
called as libraries call it (``TensorDescriptor`` arguments), recorded from the hook stream Triton's JIT gives
(``tensordesc<fp16[128, 64]>`` in its signature), built for sm_90a, and in a fresh process launched on the fake
driver from the unchanged call site: each descriptor encoded from its base, shape and strides as Triton's
launcher encodes it, and a descriptor the variants were not built for (another block, NaN padding) a miss."""

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

from .helpers import CAI_ARRAY, install_wheel, run_on_fake_driver

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "hopper" / "tma_matmul.py"
PARAMS = ("a_desc", "b_desc", "c_desc", "M", "N", "K", "programs", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")


def load(name: str):
    """examples/hopper/tma_matmul.py imported under a made-up name (so that the recording writes it out)."""
    spec = importlib.util.spec_from_file_location(name, MATMUL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def hook(jit, dtype="fp16", block_m=128):
    """What Triton's JIT passes its jit_cache_hook for matmul_tma_kernel called with TensorDescriptors (N and K
    multiples of 16, M and programs not)."""
    block = {"BLOCK_M": block_m, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}
    signature = {"a_desc": f"tensordesc<{dtype}[{block_m}, 64]>", "b_desc": f"tensordesc<{dtype}[64, 256]>",
                 "c_desc": f"tensordesc<{dtype}[{block_m}, 256]>", "M": "i32", "N": "i32", "K": "i32",
                 "programs": "i32", **dict.fromkeys(block, "constexpr")}  # fmt: skip
    spec = {"options": {"num_warps": 8, "num_stages": 3, "num_ctas": 1}, "target": {"arch": 90}}
    compile = {"signature": signature, "constants": {(7 + i,): v for i, v in enumerate(block.values())},
               "configs": [{(4,): [["tt.divisibility", 16]], (5,): [["tt.divisibility", 16]]}], "num_warps": 8,
               "num_stages": 3, "specialization_data": json.dumps(spec)}  # fmt: skip
    return {"key": str(uuid.uuid4()), "repr": "", "fn": SimpleNamespace(module=jit.fn.__module__,
            name=jit.fn.__qualname__, jit_function=jit), "compile": compile, "is_manual_warmup": False,
            "already_compiled": False}  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recorded")
    module = load(f"tma_{uuid.uuid4().hex}")
    rec = record.Recording()
    rec.on_compile(**hook(module.matmul_tma_kernel))
    rec.on_compile(**hook(module.matmul_tma_kernel, "bf16", block_m=64))
    path = folder / "r.yaml"
    record.write(path, rec.events, "tma_kernels")
    return path


def test_descriptor_arguments_are_recorded_with_their_dtype_and_block(recorded):
    (kernel,) = yaml.safe_load(recorded.read_text())["kernels"].values()
    assert kernel["launch"] == "triton" and kernel["types"] == {"T": ["bf16", "fp16"]}
    assert kernel["args"] == {"a_desc": "tensordesc<T[BLOCK_M, 64]>", "b_desc": "tensordesc<T[64, 256]>",
                              "c_desc": "tensordesc<T[BLOCK_M, 256]>", "M": "i32", "N": "i32", "K": "i32",
                              "programs": "i32"}  # fmt: skip
    assert sorted((r["types"]["T"], r["config"]["BLOCK_M"], r["class"]) for r in kernel["variants"]) == [
        ("bf16", 64, "____DD_"), ("fp16", 128, "____DD_")]  # fmt: skip


@pytest.fixture(scope="module")
def site(recorded, tmp_path_factory):
    wheel = build(recorded, tmp_path_factory.mktemp("dist"), jobs=2).wheel
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


def test_the_manifest_and_launcher_take_the_descriptors(site):
    manifest = json.loads((site / "tma_kernels" / "manifest.json").read_text())
    (kernel,) = manifest["kernels"].values()
    assert [a["type"] for a in kernel["args"][:3]] == ["tensordesc<T[BLOCK_M, 64]>", "tensordesc<T[64, 256]>",
                                                       "tensordesc<T[BLOCK_M, 256]>"]  # fmt: skip
    # each recorded row and its floors, M and N relaxed one at a time, then both (the descriptors take no class
    # letter: the JIT keys them on their type)
    assert sorted((v["types"]["T"], v["specialization"]) for v in kernel["variants"]) == [
        (t, c) for t in ("bf16", "fp16") for c in ("_DD_", "_D__", "__D_", "____")]  # fmt: skip
    assert {v["compiler"]["writes"] for v in kernel["variants"]} == {"c_desc"}


REPLAY = """
import sys
sys.path.insert(0, {tests!r})
from integration.test_record_descriptors import load
from triton.tools.tensor_descriptor import TensorDescriptor
import tma_kernels as k

class Dtype:
    itemsize, is_floating_point = 2, True

class Base(Array):  # what TensorDescriptor and the launcher read of a torch tensor, at a made-up address
    dtype = Dtype()
    def __init__(self, ptr, shape, strides):
        super().__init__(ptr, shape, "<f2", tuple(2 * s for s in strides))
        self.ptr, self.shape, self.strides = ptr, shape, strides
    def data_ptr(self):
        return self.ptr
    def stride(self):
        return self.strides
    def as_strided(self, shape, strides):
        print("view", shape, strides)
        return Base(self.ptr, shape, strides)

m = load("tma_again")  # the same code under another name: matched by its source
print(k.activate(fallback="error"))
a, b, c = Base(A, (1000, 512), (512, 1)), Base(A + 0x1000000, (512, 1024), (1024, 1)), Base(A + 0x2000000, (1000, 768), (768, 1))
blocks = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8)
da, dc = TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(c, [128, 256])
db = TensorDescriptor(b, [512, 768], [1024, 1], [64, 256])  # a view of b's first 768 columns
m.matmul_tma_kernel[(4,)](da, db, dc, 1000, 768, 512, 4, **blocks, num_warps=8, num_stages=3)
m.matmul_tma_kernel[(4,)](da, db, c_desc=dc, M=1000, N=768, K=512, programs=4, **blocks, num_warps=8)
for bad in (TensorDescriptor.from_tensor(a, [64, 64]), TensorDescriptor.from_tensor(a, [128, 64], padding="nan"), a):
    try:
        m.matmul_tma_kernel[(4,)](bad, db, dc, 1000, 768, 512, 4, **blocks, num_warps=8)
    except k.MissingVariant as exc:
        print("missing:", exc)
wide = [Base(A, (1000, 512), (512, 1)), Base(A, (512, 768), (768, 1)), Base(A, (1000, 768), (768, 1))]
for t in wide:
    t.__cuda_array_interface__.update(typestr="<f4", strides=tuple(4 * s for s in t.strides))
try:  # a dtype no row has: a call no variant was built for, as the JIT sees it (the fallback takes it); no launch
    m.matmul_tma_kernel[(4,)](*(TensorDescriptor.from_tensor(t, b) for t, b in zip(wide, ([128, 64], [64, 256],
                              [128, 256]))), 1000, 768, 512, 4, **blocks, num_warps=8)
except k.MissingVariant as exc:
    print("missing:", exc)
"""


def test_activate_launches_a_tensor_descriptor_call_as_triton_encodes_it(site, fake_driver, tmp_path):
    code = CAI_ARRAY + textwrap.dedent(REPLAY).format(tests=str(Path(__file__).parents[1]))
    out, log = run_on_fake_driver(code, site, fake_driver, tmp_path / "cuda.log")
    assert out[0] == "['matmul_tma_kernel']"
    assert out[1:3] == ["view (512, 768) (1024, 1)"] * 2  # only the descriptor that is not its whole base
    assert out[3].startswith("missing: matmul_tma_kernel[grid](...): argument a_desc is a TensorDescriptor of block "
                             "[64, 64]; the variant for these constexprs was built for [128, 64]")  # fmt: skip
    assert out[4].startswith("missing: matmul_tma_kernel[grid](...): argument a_desc is a TensorDescriptor with "
                             "padding='nan', which aotpack does not encode")  # fmt: skip
    assert out[5].startswith("missing: matmul_tma_kernel[grid](...): argument a_desc is a Base; the variants were "
                             "built for a TensorDescriptor")  # fmt: skip
    assert out[6].startswith("missing: matmul_tma_kernel[grid](...): matmul_tma_kernel(): no variant was built for "
                             "T=fp32")  # fmt: skip
    tma = [line for line in log if line.startswith("tma")]
    # innermost dimension first; byte strides; the box Triton chose; b's view: 768 columns of rows of 1024
    assert tma[:3] == [
        "tma type=6 rank=2 addr=0x100000000 swizzle=3 l2=2 fill=0 interleave=0 dim0=512/1024/64 dim1=1000/0/128",
        "tma type=6 rank=2 addr=0x101000000 swizzle=3 l2=2 fill=0 interleave=0 dim0=768/2048/64 dim1=512/0/64",
        "tma type=6 rank=2 addr=0x102000000 swizzle=3 l2=2 fill=0 interleave=0 dim0=768/1536/64 dim1=1000/0/128",
    ]
    assert tma[3:] == tma[:3]
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 2 and all("grid=4,1,1 block=256,1,1" in line for line in launches)
    # a's descriptor (its first word: the address), then its shape as i32 (1000, 512) and strides as i64
    assert all("p0=100000000 p1=200000003e8 p2=20000000200 p3=512" in line for line in launches)
