"""A host-TMA matmul as matmul libraries write it for Hopper: the caller wraps its tensors in
``triton.tools.tensor_descriptor.TensorDescriptor`` (``from_tensor``, and one explicit view of a wider tensor),
the kernel reads and writes tiles through ``desc.load``/``desc.store`` and multiplies them with ``tl.dot``; the
block follows the problem (BM 64 for short M), the dtype the inputs. Run as a program:

    python tma_workload.py OUT.pt [--unseen] [--activate PACKAGE]

OUT.pt gets every result (CPU tensors). --unseen: shapes the recording never saw (other M, an input with a
storage offset). --activate: PACKAGE.activate(fallback="error") first, so that any JIT compilation raises.
Prints ``jit-compilations <n>``, counted through Triton's own hook.

    python tests/gpu/tma_workload.py --record-without-gpu RECIPE

records the workload's calls into RECIPE on a machine without a GPU: Triton's own JIT, with the stub driver of
tests/jit_stub.py reporting an H100 (sm_90), compiles each call (``warmup``) and aotpack's record agent takes
its hook, as ``aotpack record`` does on the GPU (tests/gpu/tma_recorded.yaml was made so, under Triton 3.6.0).
"""

import functools
import sys

import torch
import triton
import triton.language as tl
from triton import knobs
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([k * BK, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


def matmul(a: torch.Tensor, b_wide: torch.Tensor, n: int, warmup: bool = False) -> torch.Tensor:
    """a @ b_wide[:, :n], as a library calls the kernel: descriptors built on the host, the grid from the blocks."""
    m, k = a.shape
    c = torch.empty(m, n, device=a.device, dtype=a.dtype)
    bm, bn, bk = (64 if m <= 64 else 128), 128, 64
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor(b_wide, [k, n], list(b_wide.stride()), [bk, bn])  # the first n columns
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    launch = functools.partial(matmul_tma.run, grid=grid, warmup=True) if warmup else matmul_tma[grid]
    launch(a_desc, b_desc, c_desc, m, n, k, BM=bm, BN=bn, BK=bk, num_warps=8, num_stages=3)
    return c


RECORDED = [(512, 256, 384, torch.float16), (1024, 512, 256, torch.bfloat16), (64, 256, 128, torch.float16)]
UNSEEN = [(1040, 512, 384, torch.bfloat16), (48, 256, 256, torch.float16), (2000, 384, 512, torch.float16)]


def main(argv: list[str]) -> None:
    out = next(a for a in argv if a.endswith(".pt"))
    compiled = []
    previous = knobs.runtime.jit_cache_hook

    def count(**kwargs):
        compiled.append(kwargs["repr"])
        return previous(**kwargs) if previous else None

    knobs.runtime.jit_cache_hook = count
    if "--activate" in argv:
        import importlib

        importlib.import_module(argv[argv.index("--activate") + 1]).activate(fallback="error")
    gen = torch.Generator(device="cuda").manual_seed(0)
    unseen = "--unseen" in argv
    results = []
    for m, n, k, dtype in UNSEEN if unseen else RECORDED:
        offset = 16 if unseen else 0  # a slice of a larger tensor: a storage offset the descriptor keeps
        a = torch.randn(m + offset, k, device="cuda", dtype=dtype, generator=gen)[offset:]
        b_wide = torch.randn(k, n + 64, device="cuda", dtype=dtype, generator=gen)
        results.append(matmul(a, b_wide, n).cpu())
        torch.cuda.synchronize()
    torch.save(results, out)
    print("jit-compilations", len(compiled))


def record_without_gpu(recipe: str) -> None:
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from aotpack.record import program
    from tests.jit_stub import jit_on

    with tempfile.TemporaryDirectory() as cache, program.recording(recipe, "tma_recorded") as rec, jit_on(90, cache):
        rec.events.tritons.add(triton.__version__)  # what the agent says of the process it runs in
        for m, n, k, dtype in RECORDED:
            matmul(torch.zeros(m, k, dtype=dtype), torch.zeros(k, n + 64, dtype=dtype), n, warmup=True)


if __name__ == "__main__":
    if sys.argv[1] == "--record-without-gpu":
        record_without_gpu(sys.argv[2])
    else:
        main(sys.argv[1:])
