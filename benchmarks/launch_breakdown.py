"""Where the host time of one aotpack call goes: the torch tensor queries the binding makes, the
dispatch without a launch (select), and the full call, each timed in a tight loop."""

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
steps = {
    "t.data_ptr()": lambda: x.data_ptr(),
    "t.get_device()": lambda: x.get_device(),
    "t.dtype": lambda: x.dtype,
    "t.shape": lambda: x.shape,
    "t.stride()": lambda: x.stride(),
    "t.numel()": lambda: x.numel(),
    "torch current raw stream": lambda: raw(0),
    "select (no launch)": lambda: demo_kernels.select("add", x, y, out),
    "add (tensors)": lambda: demo_kernels.add(x, y, out),
    "add (x tensor, raw y/out, n, stream=0)": lambda: demo_kernels.add(x, y.data_ptr(), out.data_ptr(), N, stream=0),
    "torch.add": lambda: torch.add(x, y, out=out),
}
for name, fn in steps.items():
    print(f"{name:36} {per_call(fn) * 1e6:7.3f} us")
