"""The Hopper recipe against torch and against the same Triton kernels run JIT in this process.

TMA matmul (host tensor descriptors) and attention forward (device descriptors in global scratch):
for each shape the dispatched aotpack call, the same kernel source launched by Triton JIT with the
config aotpack chose (so the comparison is of the launch and of the compiled code, not of tuning),
and torch (cuBLAS matmul; scaled_dot_product_attention). Times: CUDA events around each launch, a
256 MB L2 flush queued before each (it also hides host-side launch cost, which launch.py measures),
median of 40 after 5 warm-ups, the three interleaved. Printed as TFLOP/s and ratios; the target is
aotpack/JIT >= 0.98. Where it is missed, the two cubins are compared (registers, SASS instructions):
the wheel is built with the Triton on the build host, the JIT uses the one installed here, so the
code itself may differ.
"""

from __future__ import annotations

import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "examples" / "hopper")]

import hopper_kernels  # noqa: E402
from attention import attention_fwd_kernel  # noqa: E402
from timing import interleaved_ms  # noqa: E402
from tma_matmul import matmul_tma_kernel  # noqa: E402

REPS, WARMUP = 40, 5
MATMUL_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (3000, 5000, 2000)]
ATTENTION_SHAPES = [(4, 16, 4096, 64), (4, 16, 4096, 128), (16, 16, 1024, 64), (2, 8, 8192, 128)]


def per_call_us(launch: Callable[[], object], calls: int = 2000) -> float:
    """Wall time per call of back-to-back launches of a tiny problem: the host-side launch cost."""
    for _ in range(50):
        launch()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            launch()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def rel_diff(x, y) -> float:
    return ((x.double() - y.double()).norm() / y.double().norm()).item()


def config_of(variant_id: str) -> tuple[dict[str, int], int, int]:
    """The constexprs, num_warps and num_stages in a variant id."""
    fields = variant_id.split("/")[1].split(",")
    consts = {k: int(v) for k, v in (f.split("=") for f in fields if "=" in f and not f.startswith("T="))}
    warps = next(int(f[1:]) for f in fields if f.startswith("w"))
    stages = next(int(f[1:]) for f in fields if f.startswith("s") and f[1:].isdigit())
    return consts, warps, stages


def bench_matmul(dtype) -> list[tuple]:
    return [matmul_row(m, n, k, dtype) for m, n, k in MATMUL_SHAPES]


def matmul_row(m: int, n: int, k: int, dtype) -> tuple:
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    chosen = hopper_kernels.matmul_tma.select(a, b, c)
    consts, warps, stages = config_of(chosen)
    bm, bn, bk = consts["BLOCK_M"], consts["BLOCK_N"], consts["BLOCK_K"]
    programs = 132
    grid = (min(programs, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)

    def jit():
        a_d = TensorDescriptor.from_tensor(a, [bm, bk])
        b_d = TensorDescriptor.from_tensor(b, [bk, bn])
        c_d = TensorDescriptor.from_tensor(c, [bm, bn])
        return matmul_tma_kernel[grid](a_d, b_d, c_d, m, n, k, programs, **consts, num_warps=warps, num_stages=stages)

    c.zero_()
    compiled = jit()
    jit_out = c.clone()
    c.zero_()
    hopper_kernels.matmul_tma(a, b, c)
    torch.cuda.synchronize()
    assert rel_diff(c, jit_out) < 1e-3, "aotpack and Triton JIT disagree"
    times = interleaved_ms({
        "aotpack": lambda: hopper_kernels.matmul_tma(a, b, c),
        "triton_jit": jit,
        "torch": lambda: torch.matmul(a, b, out=c),
    }, REPS, WARMUP)  # fmt: skip
    tflops = {name: 2 * m * n * k / (t * 1e-3) / 1e12 for name, t in times.items()}
    return (f"matmul {m}x{n}x{k}", chosen, tflops, compiled.asm["cubin"])


def bench_attention(dtype) -> list[tuple]:
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    return [attention_row(shape, causal, dtype) for shape in ATTENTION_SHAPES for causal in (0, 1)]


def attention_row(shape: tuple[int, int, int, int], causal: int, dtype) -> tuple:
    z, h, seq, d = shape
    q, k, v = (torch.randn(*shape, device="cuda").to(dtype) for _ in range(3))
    out = torch.empty_like(q)
    scale = 1 / math.sqrt(d)
    chosen = hopper_kernels.attention.select(q, k, v, out, scale, causal=causal)
    consts, warps, stages = config_of(chosen)
    grid = (triton.cdiv(seq, consts["BLOCK_M"]), z * h)

    def jit():
        return attention_fwd_kernel[grid](q, k, v, out, scale, seq, **consts, num_warps=warps, num_stages=stages)

    def aot():
        hopper_kernels.attention(q, k, v, out, scale, causal=causal)

    def sdpa():
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))

    compiled = jit()
    jit_out = out.clone()
    aot()
    torch.cuda.synchronize()
    assert rel_diff(out, jit_out) < 1e-3, "aotpack and Triton JIT disagree"
    times = interleaved_ms({"aotpack": aot, "triton_jit": jit, "torch": sdpa}, REPS, WARMUP)
    flops = 4 * z * h * seq * seq * d * (0.5 if causal else 1.0)
    tflops = {name: flops / (t * 1e-3) / 1e12 for name, t in times.items()}
    return (f"attention {z}x{h}x{seq}x{d}{' causal' if causal else ''}", chosen, tflops, compiled.asm["cubin"])


def code_facts(cubin: bytes) -> str:
    """Registers and SASS instruction count of a cubin (cuobjdump, when the CUDA toolkit is here)."""
    if shutil.which("cuobjdump") is None:
        return "(no cuobjdump)"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run(["cuobjdump", "-res-usage", f.name], capture_output=True, text=True).stdout
        sass = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True).stdout
    regs = re.search(r"REG:(\d+)", usage)
    count = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M))
    return f"{regs[1] if regs else '?'} registers, {count} SASS instructions"


def tiny_problems() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """A 128^3 matmul (three host descriptors per call) and a one-tile attention (scratch)."""
    a, b, c, _ = (torch.randn(128, 128, device="cuda", dtype=torch.float16) for _ in range(4))
    consts, warps, stages = config_of(hopper_kernels.matmul_tma.select(a, b, c))
    bm, bn, bk = consts["BLOCK_M"], consts["BLOCK_N"], consts["BLOCK_K"]

    def matmul_jit():
        descs = [TensorDescriptor.from_tensor(x, block) for x, block in ((a, [bm, bk]), (b, [bk, bn]), (c, [bm, bn]))]
        matmul_tma_kernel[(1,)](*descs, 128, 128, 128, 132, **consts, num_warps=warps, num_stages=stages)

    q, k, v, out = (torch.randn(1, 1, 128, 64, device="cuda", dtype=torch.float16) for _ in range(4))
    aconsts, awarps, astages = config_of(hopper_kernels.attention.select(q, k, v, out, 0.125))

    def attention_jit():
        attention_fwd_kernel[(1, 1)](q, k, v, out, 0.125, 128, **aconsts, num_warps=awarps, num_stages=astages)

    return [
        ("matmul 128x128x128", lambda: hopper_kernels.matmul_tma(a, b, c), matmul_jit),
        ("attention 1x1x128x64", lambda: hopper_kernels.attention(q, k, v, out, 0.125), attention_jit),
    ]


def main() -> None:
    dev = torch.cuda.get_device_name()
    print(f"# {dev}; torch {torch.__version__}; Triton {triton.__version__} (JIT); wheel built with "
          f"{hopper_kernels.__aotpack__['toolchain'].get('triton', '?')}; TFLOP/s, median of {REPS}")  # fmt: skip
    ratios = []
    for dtype in (torch.float16, torch.bfloat16):
        print(f"\n{'problem':34} {'aotpack':>8} {'jit':>8} {'torch':>8} {'aot/jit':>8} {'aot/torch':>9}  config "
              f"({str(dtype).split('.')[1]})")  # fmt: skip
        for name, chosen, t, jit_cubin in bench_matmul(dtype) + bench_attention(dtype):
            ratio = t["aotpack"] / t["triton_jit"]
            ratios.append(ratio)
            print(f"{name:34} {t['aotpack']:8.1f} {t['triton_jit']:8.1f} {t['torch']:8.1f} {ratio:8.3f} "
                  f"{t['aotpack'] / t['torch']:9.3f}  {chosen.split('/')[1]}")  # fmt: skip
            if ratio < 0.98:  # is it the launch or the code? compare the two cubins
                aot_cubin = hopper_kernels._native._image(chosen.split("/")[0], chosen)
                print(f"{'':34} code: aotpack {code_facts(aot_cubin)}; JIT {code_facts(jit_cubin)}")
    print("\nper call, tiny problems (host-bound: descriptor encoding and launch), microseconds")
    print(f"{'problem':34} {'aotpack':>8} {'jit':>8} {'aot/jit':>8}")
    for name, aot, jit in tiny_problems():
        t_aot, t_jit = per_call_us(aot), per_call_us(jit)
        print(f"{name:34} {t_aot:8.2f} {t_jit:8.2f} {t_aot / t_jit:8.3f}")
    print(f"\naotpack/JIT: median {statistics.median(ratios):.3f}, min {min(ratios):.3f} over {len(ratios)} problems "
          "(target >= 0.98)")  # fmt: skip


if __name__ == "__main__":
    main()
