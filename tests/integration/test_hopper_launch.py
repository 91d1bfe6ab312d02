"""Hopper launch needs, built with real Triton and driven through the fake driver: host tensor
descriptors (encoded from the tensor and the compiler's layout), global scratch from a pool in stream
order, clusters and PDL through cuLaunchKernelEx, bound constexprs, required hints, and variants
pruned for shared memory the target does not have."""

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from aotpack import build
from aotpack.backends.triton.compiler import ptxas_candidates, ptxas_for

from .helpers import CAI_ARRAY, install_wheel, run_on_fake_driver

ROOT = Path(__file__).resolve().parents[2]

RECIPE = """\
package: hopper_small
version: 0.1.0
targets: [sm_90a]
kernels:
  matmul_tma:
    triton: {root}/examples/hopper/tma_matmul.py:matmul_tma_kernel
    types: {{T: [fp16]}}
    args:
      a_desc: tensordesc<T[BLOCK_M, BLOCK_K]>
      b_desc: tensordesc<T[BLOCK_K, BLOCK_N]>
      c_desc: tensordesc<T[BLOCK_M, BLOCK_N]>
      M: {{type: i32, default: "size(a_desc, 0)"}}
      N: {{type: i32, default: "size(b_desc, 1)"}}
      K: {{type: i32, default: "size(a_desc, 1)"}}
      programs: {{type: i32, default: 132}}
    constexprs: {{BLOCK_M: [128], BLOCK_N: [256], BLOCK_K: [64], GROUP_M: [8]}}
    num_warps: [8]
    num_stages: [3, 4]
    grid: ["min(programs, cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N))"]
  attention:
    triton: {root}/examples/hopper/attention.py:attention_fwd_kernel
    types: {{T: [fp16]}}
    args:
      q_ptr: {{type: "*T:16!", extent: "batch_heads * seq * 64", contiguous: true}}
      k_ptr: {{type: "*T:16!", extent: "batch_heads * seq * 64", contiguous: true}}
      v_ptr: {{type: "*T:16!", extent: "batch_heads * seq * 64", contiguous: true}}
      out_ptr: {{type: "*T:16!", extent: "batch_heads * seq * 64", contiguous: true}}
      scale: fp32
      seq: {{type: i32, default: "size(q_ptr, 2)"}}
      batch_heads: {{type: i32, default: "size(q_ptr, 0) * size(q_ptr, 1)", launch_only: true}}
      causal: {{type: i32, default: 0, launch_only: true}}
    constexprs:
      HEAD_DIM: {{values: [64], equals: "size(q_ptr, 3)"}}
      CAUSAL: {{values: [0, 1], equals: causal}}
      BLOCK_M: [128]
      BLOCK_N: [64]
    num_warps: [4]
    num_stages: [2]
    grid: ["cdiv(seq, BLOCK_M)", batch_heads]
  add_cluster:
    triton: {root}/examples/add.py:add_kernel
    args: {{x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n_elements: {{type: i32, default: numel(out_ptr)}}}}
    constexprs: {{BLOCK: [1024]}}
    grid: ["cdiv(n_elements, BLOCK)"]
    options: {{num_ctas: 2, launch_pdl: true}}
"""

PRELUDE = (
    """
import hopper_small as h
"""
    + CAI_ARRAY
    + """
def attempt(fn):
    try:
        fn()
        print("no error")
    except Exception as e:
        print(type(e).__name__ + ":", e)
"""
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hopper")
    recipe = folder / "hopper.yaml"
    recipe.write_text(RECIPE.format(root=ROOT))
    return install_wheel(build(recipe, folder / "dist", jobs=2).wheel, folder / "site")


def run(code, site, fake_driver, tmp_path, **env):
    """stdout lines, and the driver's log without module loads and function attributes."""
    out, log = run_on_fake_driver(PRELUDE + textwrap.dedent(code), site, fake_driver, tmp_path / "cuda.log", **env)
    return out, [ln for ln in log if not ln.startswith(("load", "attr"))]


def test_manifest_records_launch_needs_and_prunes_what_the_target_cannot_hold(site):
    manifest = json.loads((site / "hopper_small" / "manifest.json").read_text())["kernels"]
    pruned = manifest["matmul_tma"]["pruned"]  # the s4 config, in each of its specialization classes
    assert len(pruned) == len(manifest["matmul_tma"]["specializations"]) > 1
    for p in pruned:
        assert ",w8,s4/sm_90a/" in p["id"]
        assert p["reason"].startswith("needs ") and p["reason"].endswith("sm_90a allows 232448 per block")
    assert all(int(v["compiler"]["global_scratch"]) == 4 * 128 for v in manifest["attention"]["variants"])
    assert all(v["compiler"]["num_ctas"] == "2" for v in manifest["add_cluster"]["variants"])
    assert manifest["matmul_tma"]["args"][0]["type"] == "tensordesc<T[BLOCK_M, BLOCK_K]>"


def test_host_descriptors_are_encoded_from_the_tensor(site, fake_driver, tmp_path):
    out, log = run(
        """
        a = Array(A, (1000, 512))
        b = Array(A + 0x1000000, (512, 768), strides=(2048, 2))  # rows padded to 1024 elements
        c = Array(A + 0x2000000, (1000, 768))
        h.matmul_tma(a, b, c)
        attempt(lambda: h.matmul_tma(Array(A + 2, (1000, 512)), b, c))
        attempt(lambda: h.matmul_tma(a, Array(A, (512, 768), strides=(2, 1024)), c))
        attempt(lambda: h.matmul_tma(a, b, Array(A, (1000, 100))))
        attempt(lambda: h.matmul_tma(A, b, c, M=1000, K=512))
        attempt(lambda: h.matmul_tma(Array(A, (1, 1000, 512)), b, c, M=1000, K=512))
        """,
        site, fake_driver, tmp_path,
    )  # fmt: skip
    assert out == [
        "ValueError: argument a_desc: a tensor descriptor needs a 16-byte aligned address, got 0x100000002",
        "ValueError: argument b_desc: a tensor descriptor needs its last dimension contiguous (stride 1), got stride "
        "512; call .contiguous() on it",
        "ValueError: argument c_desc: a tensor descriptor needs strides of a multiple of 16 bytes; stride 100 of "
        "dimension 0 is 200 bytes",
        "ValueError: argument a_desc: a tensor descriptor is built from the tensor's shape and strides; pass a tensor "
        "of 2 dimensions, not a raw pointer",
        "ValueError: argument a_desc: expected a tensor of 2 dimensions, got 3",
    ]
    tma = [line for line in log if line.startswith("tma")]
    # innermost dimension first; byte strides; the box Triton chose (128-byte swizzle: 64 fp16 wide)
    assert tma[:3] == [
        "tma type=6 rank=2 addr=0x100000000 swizzle=3 l2=2 fill=0 interleave=0 dim0=512/1024/64 dim1=1000/0/128",
        "tma type=6 rank=2 addr=0x101000000 swizzle=3 l2=2 fill=0 interleave=0 dim0=768/2048/64 dim1=512/0/64",
        "tma type=6 rank=2 addr=0x102000000 swizzle=3 l2=2 fill=0 interleave=0 dim0=768/1536/64 dim1=1000/0/128",
    ]
    (launch,) = [line for line in log if line.startswith("launch")]
    assert "grid=24,1,1 block=256,1,1" in launch  # min(132, 8 * 3 tiles)
    # a's descriptor (its first word: the address), then its shape as i32 (1000, 512) and strides as i64
    assert "p0=100000000 p1=200000003e8 p2=20000000200 p3=512" in launch  # p1, p2: 8-byte reads of packed i32s


def test_scratch_comes_from_a_pool_in_stream_order(site, fake_driver, tmp_path):
    out, log = run(
        """
        q = [Array(A + i * 0x1000000, (2, 4, 1000, 64)) for i in range(4)]
        big = [Array(A + i * 0x10000000, (8, 16, 8192, 64)) for i in range(4)]
        h.attention(*q, 0.1)
        h.attention(*q, 0.1, causal=1, stream=5)
        h.attention(*big, 0.1)
        attempt(lambda: h.attention(*q, 0.1, causal=2))
        attempt(lambda: h.attention(*[Array(A, (1, 1, 16, 96))] * 4, 0.1))
        attempt(lambda: h.attention(Array(A + 8, (2, 4, 1000, 64)), *q[1:], 0.1))
        """,
        site, fake_driver, tmp_path,
    )  # fmt: skip
    assert out == [
        "ValueError: attention(): this call needs HEAD_DIM = 64, CAUSAL = 2, for which no variant was built; see "
        "hopper_small.attention.__doc__",
        "ValueError: attention(): this call needs HEAD_DIM = 96, CAUSAL = 0, for which no variant was built; see "
        "hopper_small.attention.__doc__",
        "ValueError: argument q_ptr must be 16-byte aligned (the kernel was built for that), got address 0x100000008",
    ]
    events = [line.split(" -> ")[0] for line in log if line.startswith(("pool", "alloc", "free", "launch"))]
    events = [line.split(" image=")[0] for line in events]
    assert events == [
        # one pool per device, on that device, that keeps its memory (release threshold: all)
        "pool 0x5010 type=1 location=1,0", "pool 0x5010 attr 4=ffffffffffffffff",
        # each launch: 8 x 8 programs x 4 descriptors of 128 bytes (+128 to align), freed after it in stream order
        "alloc 32896 pool=0x5010 stream=(nil)", "launch attention_fwd_kernel", "free 7000000000 stream=(nil)",
        "alloc 32896 pool=0x5010 stream=0x5", "launch attention_fwd_kernel", "free 7000010000 stream=0x5",
        "alloc 4194432 pool=0x5010 stream=(nil)", "launch attention_fwd_kernel", "free 7000020000 stream=(nil)",
    ]  # fmt: skip
    launches = [line for line in log if line.startswith("launch")]
    assert "grid=8,8,1" in launches[0] and "p3=" in launches[0] and "grid=64,128,1" in launches[2]


def test_clusters_and_pdl_launch_through_launch_kernel_ex(site, fake_driver, tmp_path):
    _, log = run(
        """
        x = Array(A, (5000,), "<f4")
        h.add_cluster(x, x, x)
        """,
        site, fake_driver, tmp_path,
    )  # fmt: skip
    (launch,) = [line for line in log if line.startswith("launch")]
    # 5 programs of 2-block clusters: grid x doubled; attributes cluster (4) = 2, spread scheduling (5),
    # programmatic stream serialization (6)
    assert launch == "launchex add_kernel grid=10,1,1 block=128 shared=0 stream=(nil) attr4=2 attr5=1 attr6=1"


def test_a_build_leaves_nothing_in_the_temporary_folder_and_prints_no_ptx(tmp_path):
    """Triton's TMA PTX is newer than CUDA 12.2's ptxas reads, so each variant here fails with the oldest
    ptxas and is built by the next: Triton keeps every failed try's PTX in the temporary folder and
    prints it whole. The build's temporary folder ends empty, and its output holds no PTX."""
    recipe, temp, out = tmp_path / "r.yaml", tmp_path / "tmp", tmp_path / "dist"
    recipe.write_text(RECIPE.format(root=ROOT))
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-m", "aotpack", "build", str(recipe), "--only", "matmul_tma/*",
                           "--no-cache", "-o", str(out)], capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "NVPTX" not in done.stdout + done.stderr and "reproducer" not in done.stdout + done.stderr
    assert list(temp.iterdir()) == []
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        variants = json.loads(z.read("hopper_small/manifest.json"))["kernels"]["matmul_tma"]["variants"]
    first = ptxas_for("sm_90a", ptxas_candidates(), None)[0]
    assert variants and all(v["compiler"]["ptxas"] != first.release for v in variants), "no failed try to clean"
