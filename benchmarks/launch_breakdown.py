"""Where the host time of one aotpack call goes: the torch tensor queries the binding makes where
torch lacks DLPack's C exchange API (torch < 2.10: add reads get_device, data_ptr, dtype,
is_contiguous and numel of each tensor; a kernel that reads sizes or strides reads shape and stride
instead of the last two; with the API, one C call per tensor replaces them), the argument parsing and dispatch
without a launch (the C select), and the full call, each timed in a tight loop, for the demo's add
(a 33-row dispatch table), softmax and matmul (about 1,000 rows), matmul also with a new key on every call
(the rule between measured keys runs: aotpack/selection.py) and with 512 keys cycled (the kept picks serve
about six calls in seven); for the drop-in launch of a recorded kernel (when liger_recorded is installed), the
config pick alone (warmup=True returns before the launch) and the full call."""

import itertools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import demo_kernels

N, LOOPS = 4096, 400


def per_call(fn) -> float:
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(15):
        t0 = time.perf_counter()
        for _ in range(LOOPS):
            fn()
        rounds.append((time.perf_counter() - t0) / LOOPS)
        torch.cuda.synchronize()
    return statistics.median(rounds)


x, y, out = (torch.randn(N, device="cuda") for _ in range(3))
raw = torch._C._cuda_getCurrentRawStream
s_in, s_out = torch.randn(8, 1000, device="cuda"), torch.empty(8, 1000, device="cuda")
a, b, c = (torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(3))
# keys cycled (views of one buffer): 4,096, four times the picks a kernel keeps, so that every call is a new key and
# the table's rule runs; 512, most of which the kept picks hold (a serving loop's shapes)
big = torch.empty(1 << 22, device="cuda", dtype=torch.float16)
views = [(big[: m * 64].view(m, 64), big[: 64 * n].view(64, n), big[: m * n].view(m, n))
         for m, n in ((65 + 7 * (i % 64), 100 + 13 * (i // 64)) for i in range(4096))]  # fmt: skip


def cycled(count: int):
    """A select of the matmul, each call on the next of ``count`` keys, round and round."""
    keys = itertools.cycle(views[:count])
    return lambda: demo_kernels._native._select_matmul(*next(keys))


steps = {
    "t.data_ptr()": lambda: x.data_ptr(),
    "t.get_device()": lambda: x.get_device(),
    "t.dtype": lambda: x.dtype,
    "t.shape": lambda: x.shape,
    "t.stride()": lambda: x.stride(),
    "t.numel()": lambda: x.numel(),
    "t.is_contiguous()": lambda: x.is_contiguous(),
    "torch current raw stream": lambda: raw(0),
    "select through Python (no launch)": lambda: demo_kernels.select("add", x, y, out),
    "C select: parse + dispatch (no launch)": lambda: demo_kernels._native._select_add(x, y, out),
    "add (tensors)": lambda: demo_kernels.add(x, y, out),
    "add (x tensor, raw y/out, n, stream=0)": lambda: demo_kernels.add(x, y.data_ptr(), out.data_ptr(), N, stream=0),
    "torch.add": lambda: torch.add(x, y, out=out),
    "softmax 8x1000 (tensors)": lambda: demo_kernels.softmax(s_out, s_in),
    "torch.softmax(out=)": lambda: torch.softmax(s_in, -1, out=s_out),
    "C select: matmul 64^3 fp16": lambda: demo_kernels._native._select_matmul(a, b, c),
    "C select: matmul, a new key each call": cycled(4096),
    "C select: matmul, 512 keys cycled": cycled(512),
    "matmul 64^3 fp16 (tensors)": lambda: demo_kernels.matmul(a, b, c),
    "torch.matmul(out=)": lambda: torch.matmul(a, b, out=c),
}
try:
    import liger_recorded

    a, b = (torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty_like(a)
    run = liger_recorded.swiglu_forward_kernel.run
    meta = {"n_cols": 4096, "BLOCK_SIZE": 4096, "num_warps": 8}
    steps["drop-in: config pick (warmup=True)"] = lambda: run(a, b, c, 4096, 1.0, grid=(1,), warmup=True, **meta)
    steps["drop-in: full launch (run)"] = lambda: run(a, b, c, 4096, 1.0, grid=(1,), **meta)
except ImportError:
    pass
print("torch.Tensor has DLPack's C exchange API:", hasattr(torch.Tensor, "__dlpack_c_exchange_api__"))
for name, fn in steps.items():
    print(f"{name:40} {per_call(fn) * 1e6:7.3f} us")
