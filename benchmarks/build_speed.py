"""Build speed on this machine (no GPU needed).

1. aotpack's compile engine (one pool of worker processes, Triton imported once per worker) against
   one compile process per variant (how FastDeploy drives Triton's AOT compiler), on the same
   variants, the same number of parallel processes, and cold Triton caches for both. The process per
   variant runs aotpack's own Triton backend on one variant, so the only difference is the engine.
2. The no-op rebuild: ``aotpack build`` of the full demo recipe (256 variants) when nothing changed.

Usage: python benchmarks/build_speed.py [--kernels add,softmax] [-j N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "demo.yaml"

ONE_VARIANT = """
import sys
from aotpack import load, plan_variants
from aotpack.compilers.triton import TritonCompiler
variant = next(v for v in plan_variants(load(sys.argv[1])) if v.id == sys.argv[2])
outcome = TritonCompiler.find([variant.target]).compile(variant)
assert type(outcome).__name__ == "Artifact", outcome
"""

ENGINE = """
import sys
from aotpack import load, plan_variants
from aotpack.compilers import compile_all, compilers_for
ids = set(sys.argv[3].split(";"))
recipe = load(sys.argv[1])
variants = [v for v in plan_variants(recipe) if v.id in ids]
outcomes = compile_all(variants, compilers_for(recipe.kernels), jobs=int(sys.argv[2]))
assert all(type(o).__name__ == "Artifact" for o in outcomes.values())
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", default="add", help="demo kernels to compile (comma-separated)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from aotpack import load, plan_variants

    names = set(args.kernels.split(","))
    ids = [v.id for v in plan_variants(load(RECIPE)) if v.kernel.name in names and v.kernel.backend == "triton"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    with tempfile.TemporaryDirectory() as cold:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", ENGINE, str(RECIPE), str(args.jobs), ";".join(ids)],
                       env={**env, "TRITON_CACHE_DIR": cold}, check=True)  # fmt: skip
        engine = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as cold:

        def one(vid: str) -> None:
            subprocess.run([sys.executable, "-c", ONE_VARIANT, str(RECIPE), vid],
                           env={**env, "TRITON_CACHE_DIR": cold}, check=True)  # fmt: skip

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(one, ids))
        per_process = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as scratch:
        build = [sys.executable, "-m", "aotpack", "build", str(RECIPE), "-o", f"{scratch}/dist", "--cache-dir",
                 f"{scratch}/cache", "-q"]  # fmt: skip
        subprocess.run(build, env=env, check=True, capture_output=True)
        t0 = time.perf_counter()
        subprocess.run(build, env=env, check=True, capture_output=True)
        noop = time.perf_counter() - t0
    total = len(plan_variants(load(RECIPE)))

    head = f"{os.cpu_count()} cores, -j {args.jobs}, {len(ids)} Triton variants ({args.kernels}), cold caches"
    print(f"\n# build speed, {head}")
    print(f"{'one process per variant':34} {per_process:8.1f} s")
    print(f"{'aotpack compile engine':34} {engine:8.1f} s   {per_process / engine:5.1f}x faster (target >= 5x)")
    print(f"{'no-op rebuild, demo recipe':34} {noop:8.2f} s   ({total} variants; target <= 2 s)")


if __name__ == "__main__":
    main()
