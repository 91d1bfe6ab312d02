"""Per-call overhead and time to first result: aotpack vs Triton JIT vs torch eager.

Run on a GPU host with torch, triton and the demo wheel installed (``make gpu-test`` does). The
kernel is the demo's vector add on a tiny input (4096 fp32), so the host-side cost of a call is
what is measured. Results are printed as ratios against Triton JIT measured in the same run.

  per call:      host time of a call: median over 25 interleaved rounds of (time for 400 back-to-back calls) / 400,
                 synchronizing between rounds (400 launches stay below the launch queue's depth, so the
                 GPU never pushes back); and calls per second end to end, synchronize included
  floor:         the same cubin launched by a bare cuLaunchKernel loop in C, and the package's C API
                 call (benchmarks/launch_floor.c, built here against the installed package as a library
                 loaded into this process): timed in the same interleaved rounds as the Python calls, so
                 that the host's drift (large on the device's machines) hits the floor and the calls alike
  first result:  a fresh process, from after `import torch` and input allocation to the first
                 synchronized result (import of the kernel package + first launch); Triton's cache
                 is warm (the same process ran once before), aotpack has no cache at all; and aotpack
                 in a process that never imports torch (inputs allocated through the driver)
"""

from __future__ import annotations

import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLS, ROUNDS, N = 400, 25, 4096

FIRST_RESULT = r"""
import sys, time, torch
sys.path.insert(0, {examples!r})
x = torch.randn({n}, device="cuda"); y = torch.randn({n}, device="cuda"); out = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
if {which!r} == "aotpack":
    import demo_kernels
    demo_kernels.add(x, y, out)
else:
    import triton
    from add import add_kernel
    add_kernel[(triton.cdiv({n}, 1024),)](x, y, out, {n}, BLOCK=1024)
torch.cuda.synchronize()
t1 = time.perf_counter()
assert torch.equal(out, x + y)
print(t1 - t0)
"""


FIRST_RESULT_NO_TORCH = r"""
import ctypes, struct, time
from ctypes import POINTER, c_int, c_size_t, c_uint64, c_void_p
cu = ctypes.CDLL("libcuda.so.1")
cu.cuDevicePrimaryCtxRetain.argtypes = [POINTER(c_void_p), c_int]
cu.cuCtxSetCurrent.argtypes = [c_void_p]
cu.cuMemAlloc_v2.argtypes = [POINTER(c_uint64), c_size_t]
cu.cuMemcpyHtoD_v2.argtypes = [c_uint64, c_void_p, c_size_t]
cu.cuMemcpyDtoH_v2.argtypes = [c_void_p, c_uint64, c_size_t]
ctx, ptrs = c_void_p(), [c_uint64() for _ in range(3)]
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
host = struct.pack("{n}f", *([1.5] * {n}))
for p in ptrs:
    assert cu.cuMemAlloc_v2(ctypes.byref(p), 4 * {n}) == 0 and cu.cuMemcpyHtoD_v2(p.value, host, 4 * {n}) == 0
class Array:  # typed device memory without torch: the CUDA array interface
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {{"data": (ptr, False), "shape": ({n},), "typestr": "<f4", "version": 3}}
x, y, out = (Array(p.value) for p in ptrs)
t0 = time.perf_counter()
import demo_kernels
demo_kernels.add(x, y, out)
assert cu.cuCtxSynchronize() == 0
t1 = time.perf_counter()
back = ctypes.create_string_buffer(4 * {n})
assert cu.cuMemcpyDtoH_v2(back, ptrs[2].value, 4 * {n}) == 0 and set(struct.unpack("{n}f", back.raw)) == {{3.0}}
import sys
assert "torch" not in sys.modules
print(t1 - t0)
"""


def repeat(fn: Callable[[], object]) -> Callable[[int], object]:
    def calls(n: int) -> None:
        for _ in range(n):
            fn()

    return calls


def per_call(batches: dict[str, Callable[[int], object]]) -> dict[str, tuple[float, float]]:
    """Per candidate (a function making n calls): (host seconds per call, end-to-end seconds per call
    including the synchronize). Rounds of the candidates are interleaved so that drift in the
    machine's state hits all alike."""
    import torch

    for batch in batches.values():
        batch(200)
    torch.cuda.synchronize()
    host: dict[str, list[float]] = {name: [] for name in batches}
    total: dict[str, list[float]] = {name: [] for name in batches}
    for _ in range(ROUNDS):
        for name, batch in batches.items():
            t0 = time.perf_counter()
            batch(CALLS)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            host[name].append((t1 - t0) / CALLS)
            total[name].append((t2 - t0) / CALLS)
    return {name: (statistics.median(host[name]), statistics.median(total[name])) for name in batches}


def first_result(which: str) -> float:
    if which == "aotpack, no torch":
        code = FIRST_RESULT_NO_TORCH.format(n=N)
    else:
        code = FIRST_RESULT.format(examples=str(ROOT / "examples"), n=N, which=which)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"first result ({which}) failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def floor(x, y, out) -> dict[str, Callable[[int], object]]:
    """n calls of a bare cuLaunchKernel of the cubin the package launches for this call, and of the
    package's C API call (benchmarks/launch_floor.c, loaded into this process). Empty without a C
    compiler."""
    import demo_kernels

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("\n(launch floor: no C compiler here to build benchmarks/launch_floor.c)")
        return {}
    variant = demo_kernels.add.select(x, y, out)
    info = next(v for v in demo_kernels.__aotpack__["kernels"]["add"]["variants"] if v["id"] == variant)
    package = Path(demo_kernels.__file__).parent
    with tempfile.TemporaryDirectory() as tmp:  # the library stays mapped once loaded
        cubin, library = Path(tmp) / "add.cubin", Path(tmp) / "launch_floor.so"
        cubin.write_bytes(demo_kernels._native._image("add", variant))
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(library), str(ROOT / "benchmarks" / "launch_floor.c"),
                        f"-I{demo_kernels.get_include()}", f"-L{package}", "-l:libdemo_kernels.so",
                        f"-Wl,-rpath,{package}", "-ldl"], check=True)  # fmt: skip
        lib = ctypes.CDLL(str(library))
        block = info["constexprs"]["BLOCK"]
        threads, grid = 32 * info["num_warps"], -(-N // block)
        if lib.floor_setup(str(cubin).encode(), info["entry"].encode(), threads, grid, N) != 0:
            raise RuntimeError("launch floor: set-up failed (see stderr)")

    def calls(which: int) -> Callable[[int], object]:
        def run(n: int) -> None:
            if lib.floor_calls(which, n) != 0:
                raise RuntimeError("launch floor: a launch failed (see stderr)")

        return run

    return {"C: raw": calls(0), "C: c_api": calls(1)}


def dropin(raw: float | None) -> None:
    """Drop-in launch (aotpack record): the same call site of a published kernel, liger-kernel's SwiGLU
    forward with liger's own launch arguments (1 x 4096 bf16, a shape the recording saw), under
    Triton's JIT, after liger_recorded.activate(), and through the package's launcher directly."""
    try:
        import liger_recorded
        from liger_kernel.ops.swiglu import _swiglu_forward_kernel
    except ImportError:
        print("\n(drop-in launch: liger_recorded is not installed; see docs/dropin.md)")
        return
    import torch

    a, b = (torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty_like(a)

    def site(kernel):  # liger's own call: grid, arguments and meta-parameters as in ops/swiglu.py
        return lambda: kernel[(1,)](a, b, c, c.stride(-2), 1.0, n_cols=4096, BLOCK_SIZE=4096, num_warps=8)

    jit = site(_swiglu_forward_kernel)
    direct = site(liger_recorded.swiglu_forward_kernel)
    jit()
    expected = c.clone()
    calls = {"triton JIT": jit, "aotpack launcher (pkg.k[grid])": direct}
    liger_recorded.activate(fallback="error")
    calls["aotpack drop-in (activate())"] = site(_swiglu_forward_kernel)
    for fn in calls.values():
        c.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        assert torch.equal(c, expected)
    times = per_call({name: repeat(fn) for name, fn in calls.items()})
    liger_recorded.deactivate()
    anchor = times["triton JIT"][0]
    print(f"\n{'drop-in launch (liger SwiGLU fwd)':32} {'host us':>8} {'vs triton':>10} {'e2e us':>8}")
    for name, (host, e2e) in times.items():
        print(f"{name:32} {host * 1e6:8.2f} {host / anchor:9.2f}x {e2e * 1e6:8.2f}")
    if raw is not None:
        print(f"{'raw cuLaunchKernel (C)':32} {raw * 1e6:8.2f} {raw / anchor:9.2f}x")
    ratio = times["aotpack drop-in (activate())"][0] / anchor
    print(
        f"target: drop-in per call <= 0.3x triton JIT: {ratio:.2f}x ({'met' if ratio <= 0.3 else 'MISSED'})"
        + ("" if raw is None else f"; the floor, a bare cuLaunchKernel, is {raw / anchor:.2f}x")
    )


def main() -> None:
    import torch
    import triton

    sys.path.insert(0, str(ROOT / "examples"))
    import demo_kernels
    from add import add_kernel

    x, y = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(N, 1024),)
    calls = {
        "aotpack": lambda: demo_kernels.add(x, y, out),
        "aotpack (all args, stream=)": lambda: demo_kernels.add(x, y, out, N, stream=0),
        "triton JIT": lambda: add_kernel[grid](x, y, out, N, BLOCK=1024),
        "torch eager": lambda: torch.add(x, y, out=out),
    }
    for fn in calls.values():  # correctness first, on fresh random data
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)
    times = per_call({**{name: repeat(fn) for name, fn in calls.items()}, **floor(x, y, out)})

    first_result("triton")  # warm Triton's cache
    first = {
        "aotpack": statistics.median(first_result("aotpack") for _ in range(3)),
        "aotpack, no torch": statistics.median(first_result("aotpack, no torch") for _ in range(3)),
        "triton JIT (warm cache)": statistics.median(first_result("triton") for _ in range(3)),
    }
    device = torch.cuda.get_device_name()
    exchange = "with" if hasattr(torch.Tensor, "__dlpack_c_exchange_api__") else "without"
    print(f"\n# launch overhead on {device}; torch {torch.__version__} ({exchange} DLPack's C exchange API), "
          f"triton {triton.__version__}")  # fmt: skip
    print(f"{'per call':32} {'host us':>8} {'vs triton':>10} {'vs raw':>8} {'e2e us':>8}")
    anchor = times["triton JIT"][0]
    raw = times["C: raw"][0] if "C: raw" in times else None
    for name, (host, e2e) in times.items():
        versus_raw = f"{host / raw:7.2f}x" if raw else "       -"
        print(f"{name:32} {host * 1e6:8.2f} {host / anchor:9.2f}x {versus_raw} {e2e * 1e6:8.2f}")
    print(f"\n{'first result, fresh process':32} {'ms':>8} {'speed-up':>14}")
    anchor = first["triton JIT (warm cache)"]
    for name, t in first.items():
        print(f"{name:32} {t * 1e3:8.2f} {anchor / t:13.1f}x")
    call = times["aotpack"][0]
    checks = [("per call <= 0.35x triton JIT", call / times["triton JIT"][0], 0.35),
              ("per call <= 0.7x torch eager", call / times["torch eager"][0], 0.7)]  # fmt: skip
    if raw:
        checks += [("per call <= 1.5x raw cuLaunchKernel", call / raw, 1.5),
                   ("C API per call <= 1.2x raw cuLaunchKernel", times["C: c_api"][0] / raw, 1.2)]  # fmt: skip
    print()
    for what, ratio, bound in checks:
        print(f"target: {what}: {ratio:.2f}x ({'met' if ratio <= bound else 'MISSED'})")
    speedup = anchor / first["aotpack"]
    print(f"target: first result >= 100x faster than the warm JIT: {speedup:.0f}x "
          f"({'met' if speedup >= 100 else 'MISSED'})")  # fmt: skip
    dropin(raw)


if __name__ == "__main__":
    main()
