"""The third-party corpus against Triton's JIT: GPU time of each kernel through the wheel built from
tests/corpus/thirdparty.yaml (recipes with no hints) and, where installed, through the wheel of its recipes
written the other equivalent ways (tests/corpus/variations.py), and through the same @triton.jit function
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

from tests.corpus.cases import CASES, jit_class, pair  # noqa: E402

REPS, WARMUP = 100, 10
_TORCH = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def kernels() -> list[tuple[object, str, str, str, list[str]]]:
    """(package, kernel in it, corpus kernel, variation, dtypes built): the corpus as published, then, where
    the wheel of its recipe variations is installed (``make variations-matched``), every variation."""
    out = [(pkg, kernel, kernel, "as published", list(dtypes)) for kernel, (_, dtypes, _, _, _) in CASES.items()]
    try:
        import variations_kernels as variations
    except ImportError:
        return out
    for name, entry in variations.__aotpack__["kernels"].items():
        corpus, variation = name.split("__")
        built = {_TORCH[next(iter(b.values()))] for b in entry["bindings"]}
        out.append((variations, name, corpus, variation, [d for d in CASES[corpus][1] if d in built]))
    return out


def main() -> None:
    built_by = pkg.__aotpack__["toolchain"]["triton"]
    print(f"# {torch.cuda.get_device_name()}; wheel built by Triton {built_by}, JIT Triton {triton.__version__}")
    print("| kernel | variation | dtype | shape | class | JIT's class | max diff | aot us | JIT us | aot/JIT |")
    print("|---|---|---|---|---|---|---:|---:|---:|---:|")
    ratios: dict[str, list[float]] = {}
    for package, name, kernel, variation, dtypes in kernels():
        case, _, shapes, _, _ = CASES[kernel]
        for dtype in dtypes:
            for shape in shapes:
                torch.manual_seed(0)
                call = case(torch, shape, getattr(torch, dtype), "contiguous")
                both = pair(package, name, call, by_name=package is not pkg)
                both.aot()
                first = [o.clone() for o in both.outputs]
                both.jit()
                pairs = zip(first, both.outputs, strict=True)
                diff = max((a.double() - b.double()).abs().max().item() for a, b in pairs)
                entry = next(v for v in package.__aotpack__["kernels"][name]["variants"] if v["id"] == both.variant)
                exact = entry["assumes"] == jit_class(both.fn, both.jit_args)
                times = interleaved_ms({"aot": both.aot, "jit": both.jit}, REPS, WARMUP, warmup_s=0.3)
                ratio = times["jit"] / times["aot"]
                ratios.setdefault(variation, []).append(ratio)
                print(f"| {kernel} | {variation} | {dtype} | {'x'.join(map(str, shape))} | "
                      f"{both.variant.rsplit('/', 1)[1]} | {'same' if exact else 'other'} | {diff:.3g} | "
                      f"{times['aot'] * 1000:.1f} | {times['jit'] * 1000:.1f} | {ratio:.3f} |", flush=True)  # fmt: skip
    print()
    for variation, got in [*ratios.items(), ("all", [r for rs in ratios.values() for r in rs])]:
        print(
            f"aot/JIT, {variation}, {len(got)} rows: median {statistics.median(got):.3f}, min {min(got):.3f}, "
            f"max {max(got):.3f}"
        )


if __name__ == "__main__":
    main()
