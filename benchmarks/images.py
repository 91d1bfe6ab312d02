"""Kernel images in the demo wheel: size against the raw cubins, and what a variant's first load costs.

Prints: the wheel's bytes over the raw cubin bytes (the manifest's image sizes); per variant, the time
to unpack its image (its LZ4 block up to the image's end, then the CRC-32 check: ``_image``, no GPU
needed), median and maximum; with a GPU, the first call of each fp32 ``add`` variant for the device's
target (unpack, cuModuleLoadData, launch, synchronize) against a second call of the same variant, medians.
Usage: python benchmarks/images.py [path/to/demo_kernels-*.whl]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import demo_kernels


def main() -> None:
    manifest = demo_kernels.__aotpack__
    variants = [(name, v) for name, k in manifest["kernels"].items() for v in k["variants"]]
    raw = sum(v["image_bytes"] for _, v in variants)
    if len(sys.argv) > 1:
        wheel = Path(sys.argv[1]).stat().st_size
        print(f"wheel {wheel} bytes, raw cubins {raw} bytes ({len(variants)} images): {wheel / raw:.3f}x")
    unpack = []
    for name, v in variants:
        start = time.perf_counter()
        demo_kernels._native._image(name, v["id"])
        unpack.append(time.perf_counter() - start)
    print(f"unpack one image: median {statistics.median(unpack) * 1e6:.0f} us, max {max(unpack) * 1e6:.0f} us")
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    major, minor = torch.cuda.get_device_capability()
    target = f"sm_{major}{minor}" + ("a" if major >= 9 else "")
    x, y, out = (torch.rand(1 << 20, device="cuda") for _ in range(3))
    first, again = [], []
    for name, v in variants:
        if name != "add" or v["target"] != target or v["types"] != {"T": "fp32"}:
            continue
        for times in (first, again):
            torch.cuda.synchronize()
            start = time.perf_counter()
            demo_kernels.add(x, y, out, variant=v["id"])
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    print(f"first call of a variant on {torch.cuda.get_device_name()} ({len(first)} add variants): median "
          f"{statistics.median(first) * 1e6:.0f} us, max {max(first) * 1e6:.0f} us; a second call: median "
          f"{statistics.median(again) * 1e6:.0f} us")  # fmt: skip


if __name__ == "__main__":
    main()
