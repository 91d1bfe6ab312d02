"""How much noise a tuning row holds: whether the config `aotpack tune` measures fastest at a key is the fastest.
For KEYS keys per kernel (the demo's softmax, layer norm and matmul, fp16, contiguous inputs, drawn at random from
each kernel's `tune: sample:` ranges), every variant of the call's class is timed as tune times it (one variant
after another: tune_measure.median_us, 5 warm-ups then 30 runs, L2 flushed before each), twice; then interleaved
run by run (benchmarks/timing.py), 30 runs, twice, and 100 runs; and, for reference, interleaved 300 runs. Printed
per kernel and way of timing: the reference's time of the config that way found fastest, over the reference's
fastest (median, worst, how many past 1.02x and 1.05x). Rows of 1.000 throughout say the rule's misses between
measured keys are its own, not the table's noise.

    python benchmarks/tune_noise.py [--keys N] [--seed S] [--json PATH]  (demo wheel)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import demo_kernels  # noqa: E402
import tuning  # noqa: E402
from dispatch import candidates  # noqa: E402
from timing import FLUSH, interleaved_ms  # noqa: E402

from aotpack.backends import recipes as recipe  # noqa: E402
from aotpack.commands import tune_keys, tune_measure  # noqa: E402

KERNELS = ("softmax", "layernorm", "matmul")
WAYS = ("tune", "tune again", "interleaved", "interleaved again", "interleaved 100")


def as_tune_times(launches: dict[str, Callable[[], object]]) -> dict[str, float]:
    opts = tune_measure.Options()
    return {n: tune_measure.median_us(torch, lambda _i, f=f: f(), FLUSH, opts) for n, f in launches.items()}


def timed(launches: dict[str, Callable[[], object]]) -> dict[str, dict[str, float]]:
    """Each way's times (us) of every variant, and the reference's."""

    def interleaved(reps: int) -> dict[str, float]:
        return {n: ms * 1000 for n, ms in interleaved_ms(launches, reps, 5).items()}

    return {"tune": as_tune_times(launches), "interleaved": interleaved(30), "tune again": as_tune_times(launches),
            "interleaved again": interleaved(30), "interleaved 100": interleaved(100),
            "reference": interleaved(300)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/tune_noise.py")
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="write every way's times per key here")
    opts = parser.parse_args()
    kernels = {k.name: k for k in recipe.load(ROOT / "recipes" / "demo.yaml").kernels}
    results = []
    for i, name in enumerate(KERNELS):
        kernel = kernels[name]
        assert kernel.tune is not None
        obj = getattr(demo_kernels, name)
        for key in tune_keys.drawn(kernel.tune.ranges, opts.keys, random.Random(opts.seed + i), False):
            named = dict(zip((n for n, _ in kernel.key), key, strict=True))
            args, _ = getattr(tuning, f"{name}_inputs")(named, {"T": "fp16"})
            _, options = candidates(obj, args)
            times = timed({v: (lambda v=v, obj=obj, args=args: obj(*args, variant=v)) for v in options})
            ref = times["reference"]
            over = {way: ref[min(times[way], key=times[way].__getitem__)] / min(ref.values()) for way in WAYS}
            results.append({"kernel": name, "key": list(key), "times": times, "over": over})
            print(f"{name:9} {'x'.join(map(str, key)):>16} " + " ".join(f"{w} {x:.3f}" for w, x in over.items()),
                  flush=True)  # fmt: skip
            if opts.json:
                opts.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "shapes": results}))
    print(f"\n# tune_noise on {torch.cuda.get_device_name()}, torch {torch.__version__}; {opts.keys} keys per kernel, "
          f"seed {opts.seed}; the reference's time of each way's fastest over the reference's fastest")  # fmt: skip
    for name in KERNELS:
        for way in WAYS:
            got = [r["over"][way] for r in results if r["kernel"] == name]
            print(
                f"{name:9} {way:18} median {statistics.median(got):.3f}x worst {max(got):.3f}x, "
                f"{sum(x > 1.02 for x in got)} past 1.02x, {sum(x > 1.05 for x in got)} past 1.05x of {len(got)}"
            )


if __name__ == "__main__":
    main()
