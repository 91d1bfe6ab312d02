"""The Triton-release tier (`make test` runs it after the suite; CI with it): every release aotpack is tested with
(backends/triton/releases.py), from one environment.

    python -m tests.releases [--wheelhouse DIR] [--cache-dir DIR] [--only X.Y ...]

1. Each release's wheel for this Python is fetched into the wheelhouse (pip download; kept between runs, default
   build/triton-wheels; an air-gapped host fills it beforehand).
2. For each release other than the installed one (the suite ran with that), its toolchain is made by aotpack's
   own `--triton` machinery (backends/triton/toolchain.py, from the wheelhouse) and SUBSET runs with it first on
   the path: the unit tier, the cubins against that release's own JIT (test_jit_identity.py), its hook payloads
   (test_releases.py), record and activate on the fake driver, and wheels built end to end.
3. tests/integration/test_releases.py runs here once more with the other releases named: `aotpack build --triton
   X` from this environment for each, and aotpack installed into fresh venvs beside each release and a torch pin.

It prints one line per release and fails when any step does."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBSET = ["tests/unit", "tests/integration/test_jit_identity.py", "tests/integration/test_releases.py",
          "tests/integration/test_record.py", "tests/integration/test_record_property.py",
          "tests/integration/test_dropin.py", "tests/integration/test_build.py"]  # fmt: skip
# the hostile corpus's sample reads recipes and command lines, as the suite's own run checked: the same with every
# release (minutes each on 2 cores); the layout tests read aotpack's own files and imports, never Triton
NOT_PER_RELEASE = ["--ignore=tests/unit/test_hostile.py", "--ignore=tests/unit/test_layout.py"]


def fetch(version: str, wheelhouse: Path) -> None:
    if list(wheelhouse.glob(f"triton-{version}-*.whl")):
        return
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q",
                    "--disable-pip-version-check", "-d", str(wheelhouse), f"triton=={version}"], check=True)  # fmt: skip


def main() -> int:
    from aotpack.backends.triton import releases, toolchain

    parser = argparse.ArgumentParser(prog="python -m tests.releases")
    parser.add_argument("--wheelhouse", type=Path, default=ROOT / "build" / "triton-wheels")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "build" / "releases-cache")
    parser.add_argument("--only", action="append", default=[], metavar="X.Y")
    args = parser.parse_args()
    installed = releases.installed_version()
    python = sys.version_info[:2]
    chosen = [r for r in releases.RELEASES if python in r.pythons and (not args.only or
              f"{r.minor[0]}.{r.minor[1]}" in args.only)]  # fmt: skip
    args.wheelhouse.mkdir(parents=True, exist_ok=True)
    results, others = [], []
    for release in chosen:
        fetch(release.tested, args.wheelhouse)
        if releases.minor(installed) == release.minor:
            results.append((release.tested, "the suite's own release", 0.0))
            continue
        kept = toolchain.ensure(toolchain.Request.parse(release.tested), args.cache_dir, args.wheelhouse)
        others.append(release.tested)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(kept.path), os.environ.get("PYTHONPATH")])),
        }
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                               "unit or integration", "--durations=15", *SUBSET, *NOT_PER_RELEASE], cwd=ROOT, env=env)  # fmt: skip
        results.append((release.tested, "passed" if done.returncode == 0 else "FAILED", time.monotonic() - started))
    started = time.monotonic()
    env = {**os.environ, "AOTPACK_TEST_RELEASES": ",".join(others),
           "AOTPACK_TEST_RELEASES_CACHE": str(args.cache_dir), "AOTPACK_TEST_WHEELHOUSE": str(args.wheelhouse)}  # fmt: skip
    here = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "integration",
                           "--durations=15", "tests/integration/test_releases.py"], cwd=ROOT, env=env)  # fmt: skip
    results.append((f"{installed} (--triton builds, installs)", "passed" if here.returncode == 0 else "FAILED",
                    time.monotonic() - started))  # fmt: skip
    for version, outcome, seconds in results:
        print(f"Triton {version}: {outcome}" + (f" ({seconds:.0f} s)" if seconds else ""))
    return 0 if all(outcome != "FAILED" for _, outcome, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
