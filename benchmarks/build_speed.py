"""Build speed on this machine (no GPU needed).

1. aotpack's compile engine (one pool of worker processes, Triton imported once per worker) against
   one compile process per variant (how FastDeploy drives Triton's AOT compiler), on the same
   variants, the same number of parallel processes, and cold Triton caches for both. The process per
   variant runs aotpack's own Triton backend on one variant, so the only difference is the engine.
2. The same variants compiled on a local Dask cluster of as many single-threaded worker processes
   (``aotpack build --executor``; needs ``aotpack[dask]``): the time from a running cluster to the
   last outcome, the toolchain check included, and the engine's cost per variant beside the pool.
3. The no-op rebuild: ``aotpack build`` of the full demo recipe when nothing changed.

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
from aotpack.backends.triton.compiler import TritonCompiler
variant = next(v for v in plan_variants(load(sys.argv[1])) if v.id == sys.argv[2])
outcome = TritonCompiler.find([variant.target]).compile(variant)
assert type(outcome).__name__ == "Artifact", outcome
"""

ENGINE = """
import sys
from aotpack import load, plan_variants
from aotpack.backends import compile_all, compilers_for
ids = set(sys.argv[3].split(";"))
recipe = load(sys.argv[1])
variants = [v for v in plan_variants(recipe) if v.id in ids]
outcomes = compile_all(variants, compilers_for(recipe.kernels), jobs=int(sys.argv[2]))
assert all(type(o).__name__ == "Artifact" for _, o in outcomes)
"""


DASK = """
import sys, time
from distributed import LocalCluster
from aotpack import load, plan_variants
from aotpack.backends import compilers_for, targets_of
from aotpack.pipeline import distributed
ids = set(sys.argv[3].split(";"))
recipe = load(sys.argv[1])
variants = [v for v in plan_variants(recipe) if v.id in ids]
settings = distributed.Settings(targets_of(recipe.kernels), None, False, None)
with LocalCluster(n_workers=int(sys.argv[2]), threads_per_worker=1, dashboard_address=None) as cluster:
    t0 = time.perf_counter()
    outcomes = distributed.compile_on(cluster.scheduler_address, variants, compilers_for(recipe.kernels), settings)
    print(time.perf_counter() - t0)
assert all(type(o).__name__ == "Artifact" for _, o in outcomes)
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

    dask = None
    try:
        import distributed  # noqa: F401

        done = subprocess.run([sys.executable, "-c", DASK, str(RECIPE), str(args.jobs), ";".join(ids)], env=env,
                              check=True, capture_output=True, text=True)  # fmt: skip
        dask = float(done.stdout.split()[-1])
    except ImportError:
        print("(no Dask here: pip install 'aotpack[dask]' for the cluster row)")

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
    if dask is not None:
        per_variant = (dask - engine) / len(ids) * 1e3
        print(f"{f'Dask, {args.jobs} local workers':34} {dask:8.1f} s   {engine / dask:5.2f}x the pool's speed, "
              f"{per_variant:+.0f} ms per variant")  # fmt: skip
    print(f"{'no-op rebuild, demo recipe':34} {noop:8.2f} s   ({total} variants; target <= 2 s)")


if __name__ == "__main__":
    main()
