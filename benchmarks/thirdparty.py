"""The third-party corpus against Triton's JIT: GPU time of each kernel through the wheel built from
tests/corpus/thirdparty.yaml (recipes with no hints) and through the same @triton.jit function
launched by the JIT with the config aotpack dispatched, on three shapes per kernel.

Times: CUDA events around each launch, a 256 MB L2 flush queued before each, median of 100 after
0.3 s of warm-up launches, the two interleaved rep by rep (taking turns at going first). Printed
per row: the variant's class and whether it is the JIT's own specialization of the call, the max
abs difference of the outputs, the times, and aot/JIT as speed (JIT time / aotpack time; 1.00 =
equal, higher = aotpack faster). Targets: median >= 0.99 and min >= 0.97 with the wheel built by
the JIT's own Triton release.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import thirdparty_kernels as pkg  # noqa: E402
from timing import interleaved_ms  # noqa: E402

from tests.corpus.cases import CASES  # noqa: E402
from tests.gpu.test_thirdparty import jit_class  # noqa: E402

REPS, WARMUP = 100, 10


def main() -> None:
    built_by = pkg.__aotpack__["toolchain"]["triton"]
    print(f"# {torch.cuda.get_device_name()}; wheel built by Triton {built_by}, JIT Triton {triton.__version__}")
    print("| kernel | dtype | shape | class | JIT's class | max diff | aot us | JIT us | aot/JIT |")
    print("|---|---|---|---|---|---:|---:|---:|---:|")
    ratios = []
    for kernel, (case, dtypes, shapes, _, _) in CASES.items():
        for dtype in dtypes:
            for shape in shapes:
                torch.manual_seed(0)
                pair = case(torch, pkg, shape, getattr(torch, dtype), "contiguous")
                pair.aot()
                first = [o.clone() for o in pair.outputs]
                pair.jit()
                pairs = zip(first, pair.outputs, strict=True)
                diff = max((a.double() - b.double()).abs().max().item() for a, b in pairs)
                entry = next(v for v in pkg.__aotpack__["kernels"][kernel]["variants"] if v["id"] == pair.variant)
                exact = entry["assumes"] == jit_class(pair.fn, pair.jit_args)
                times = interleaved_ms({"aot": pair.aot, "jit": pair.jit}, REPS, WARMUP, warmup_s=0.3)
                ratio = times["jit"] / times["aot"]
                ratios.append(ratio)
                print(f"| {kernel} | {dtype} | {'x'.join(map(str, shape))} | {pair.variant.rsplit('/', 1)[1]} | "
                      f"{'same' if exact else 'other'} | {diff:.3g} | {times['aot'] * 1000:.1f} | "
                      f"{times['jit'] * 1000:.1f} | {ratio:.3f} |", flush=True)  # fmt: skip
    print(
        f"\naot/JIT over {len(ratios)} rows: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
        f"max {max(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
