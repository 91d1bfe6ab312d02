"""Dispatch quality: the demo's matmul and softmax over 20 problem shapes each, off the tuned
buckets. For each shape: the dispatched call (the tuned table, ahead of time), the same call with the
package's runtime tuning on per key (`pkg.autotune(True, per="key")`: each new key value is timed
over the configs on first sight, as @triton.autotune does; its tuning excluded), the oracle (the
fastest variant of this wheel for that exact shape, each forced with variant=), and Triton's
@triton.autotune over the same config grid run JIT in this process (its tuning excluded). Times:
CUDA events around each launch, L2 flushed before each, median of 30 after 5 warm-ups, the candidates
of a shape interleaved. Printed as ratios; the targets: a median dispatched/oracle <= 1.05, and
runtime-tuned/@triton.autotune <= 1.00.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import demo_kernels  # noqa: E402
import tuning  # noqa: E402
from matmul import matmul_kernel  # noqa: E402
from softmax import softmax_kernel  # noqa: E402
from timing import interleaved_ms  # noqa: E402

from aotpack import model  # noqa: E402
from aotpack.backends import recipes as recipe  # noqa: E402

REPS, WARMUP = 30, 5
MATMUL_SHAPES = [
    (100, 100, 100), (300, 200, 500), (777, 513, 129), (1000, 1000, 1000), (1500, 900, 2048), (2000, 3000, 700),
    (3000, 3000, 3000), (4000, 4000, 500), (96, 4000, 4000), (4000, 96, 4000), (1234, 4321, 999), (2500, 2500, 64),
    (640, 6000, 1024), (6000, 640, 1024), (3500, 1800, 2600), (128, 128, 8000), (5000, 5000, 256), (257, 1025, 3000),
    (1800, 1800, 1800), (3333, 222, 1111),
]  # fmt: skip
SOFTMAX_COLS = [100, 200, 300, 500, 700, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 5000, 6000, 7000, 8000, 10000,
                12000, 14000, 16000]  # fmt: skip


def triton_configs(kernel: model.Kernel) -> list[triton.Config]:
    return [triton.Config(dict(c.constexprs), num_warps=c.num_warps, num_stages=c.num_stages) for c in kernel.configs]


def candidates(name: str, args) -> list[str]:
    """The variants the dispatcher could have chosen for this call: same arch, types, specialization."""
    chosen = getattr(demo_kernels, name).select(*args).split("/")

    def same(variant: str) -> bool:
        parts = variant.split("/")
        return parts[2] == chosen[2] and parts[1].split(",")[0] == chosen[1].split(",")[0] and parts[3:] == chosen[3:]

    return [v for v in getattr(demo_kernels, name).variants if same(v)]


def check(out, ref, what):
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-2, f"{what}: relative error {err}"


def runtime_tuned(name: str, args) -> str:
    """The variant the package's runtime tuning picks for the call (its first call times the configs)."""
    demo_kernels.autotune(True, per="key")
    try:
        getattr(demo_kernels, name)(*args)
        return str(getattr(demo_kernels, name).select(*args))
    finally:
        demo_kernels.autotune(False)


def timed(name: str, args, jit: Callable[[], None]) -> tuple[float, float, float, float, str, str]:
    """(dispatched, runtime-tuned, oracle, @triton.autotune) medians in us, and the variants chosen by
    the table and by runtime tuning. Runtime tuning happens first (untimed); its pick is then timed
    as a forced variant, interleaved with the rest."""
    kernel = getattr(demo_kernels, name)
    chosen, picked = kernel.select(*args), runtime_tuned(name, args)
    launches = {"dispatched": lambda: kernel(*args), "runtime-tuned": lambda: kernel(*args, variant=picked),
                "autotune": jit}  # fmt: skip
    for v in candidates(name, args):
        launches[v] = lambda v=v: kernel(*args, variant=v)
    t = {name: ms * 1000 for name, ms in interleaved_ms(launches, REPS, WARMUP).items()}
    oracle = min(t[v] for v in launches if "/" in v)
    return t["dispatched"], t["runtime-tuned"], oracle, t["autotune"], chosen, picked


def config_of(variant: str) -> str:
    return ",".join(p for p in variant.split("/")[1].split(",") if not p.startswith("T="))


def triton_config(tuned) -> str:
    c = tuned.best_config
    return ",".join([*(f"{k}={v}" for k, v in c.kwargs.items()), f"w{c.num_warps}", f"s{c.num_stages}"])


Row = tuple[str, str, float, float, float, float, str, str, str]


def bench_matmul(tuned, m: int, n: int, k: int) -> Row:
    args, _ = tuning.matmul_inputs({"M": m, "N": n, "K": k}, {"T": "fp16"})
    a, b, c = args
    ref = tuning.matmul_reference(args)[0]

    def jit() -> None:
        grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
        tuned[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

    for launch, what in ((lambda: demo_kernels.matmul(a, b, c), "matmul"), (jit, "triton matmul")):
        c.fill_(float("nan"))
        launch()  # the JIT's first call tunes (excluded from the timing, like the package's)
        check(c, ref, f"{what} {m}x{n}x{k}")
    d, rt, oracle, auto, chosen, picked = timed("matmul", args, jit)
    c.fill_(float("nan"))
    demo_kernels.matmul(a, b, c, variant=picked)
    check(c, ref, f"runtime-tuned matmul {m}x{n}x{k}")
    return ("matmul", f"{m}x{n}x{k}", d, rt, oracle, auto, config_of(chosen), config_of(picked), triton_config(tuned))


def bench_softmax(tuned, cols: int) -> Row:
    args, _ = tuning.softmax_inputs({"n_cols": cols}, {"T": "fp16"})
    out, x = args
    ref = tuning.softmax_reference(args)[0]

    def jit() -> None:
        tuned[(x.shape[0],)](out, x, x.stride(0), out.stride(0), cols)

    for launch, what in ((lambda: demo_kernels.softmax(out, x), "softmax"), (jit, "triton softmax")):
        out.fill_(float("nan"))
        launch()
        check(out, ref, f"{what} {cols}")
    d, rt, oracle, auto, chosen, picked = timed("softmax", args, jit)
    out.fill_(float("nan"))
    demo_kernels.softmax(out, x, variant=picked)
    check(out, ref, f"runtime-tuned softmax {cols}")
    return ("softmax", f"4096x{cols}", d, rt, oracle, auto, config_of(chosen), config_of(picked), triton_config(tuned))


def main() -> None:
    demo = recipe.load(ROOT / "recipes" / "demo.yaml")
    kernels = {k.name: k for k in demo.kernels}
    tuned_matmul = triton.autotune(triton_configs(kernels["matmul"]), key=["M", "N", "K"])(matmul_kernel)
    tuned_softmax = triton.autotune(triton_configs(kernels["softmax"]), key=["n_cols"])(softmax_kernel)
    rows = [bench_matmul(tuned_matmul, *shape) for shape in MATMUL_SHAPES]
    rows += [bench_softmax(tuned_softmax, cols) for cols in SOFTMAX_COLS]

    print(
        f"\n# dispatch on {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__} (JIT)"
    )
    print(f"{'kernel':8} {'shape':>16} {'dispatched':>10} {'rt-tuned':>9} {'oracle':>8} {'autotune':>9} "
          f"{'disp/orcl':>9} {'disp/auto':>9} {'rt/auto':>8}  configs: dispatched | rt-tuned | autotune")  # fmt: skip
    for kernel, shape, d, r, o, t, dc, rc, tc in rows:
        print(f"{kernel:8} {shape:>16} {d:10.2f} {r:9.2f} {o:8.2f} {t:9.2f} {d / o:8.3f}x {d / t:8.3f}x "
              f"{r / t:7.3f}x  {dc} | {rc} | {tc}")  # fmt: skip
    for kernel in ("matmul", "softmax"):
        mine = [r for r in rows if r[0] == kernel]
        vs_oracle = statistics.median(r[2] / r[4] for r in mine)
        vs_autotune = statistics.median(r[2] / r[5] for r in mine)
        rt_autotune = statistics.median(r[3] / r[5] for r in mine)
        oracle_autotune = statistics.median(r[4] / r[5] for r in mine)
        print(
            f"{kernel}: median dispatched/oracle {vs_oracle:.3f}x (target <= 1.05: "
            f"{'met' if vs_oracle <= 1.05 else 'MISSED'}); runtime-tuned/@triton.autotune {rt_autotune:.3f}x "
            f"(target <= 1.00: {'met' if rt_autotune <= 1.0 else 'MISSED'}); dispatched/@triton.autotune "
            f"{vs_autotune:.3f}x; oracle/@triton.autotune {oracle_autotune:.3f}x over {len(mine)} shapes"
        )


if __name__ == "__main__":
    main()
