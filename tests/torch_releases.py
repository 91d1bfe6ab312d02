"""The torch tier (opt-in: `make test-torch`; CI runs the suite with one torch): torch.compile's recorded caches
(tests/integration/test_inductor_cache.py: record, build, serve with no C++ compiler and `fallback="error"`, the
recording's runs) with every torch release that pins a tested Triton (backends/triton/releases.py), each with the
Triton it pins. The parts of torch aotpack uses there (the cache artifacts' API, Dynamo's profile, Inductor's C++
kernel loader) change between torch releases; the rest of the suite does not depend on which torch it has.

    python -m tests.torch_releases [--only X.Y ...] [--venvs DIR]

For each torch other than this environment's: a venv of its own (kept under build/torch-venvs/X.Y), `torch==X.Y.*`
from pip with the Triton it pins, aotpack editable with its test extra, which must leave that Triton as it is;
then the tests with that venv's Python. It prints one line per torch and fails when any step does. A torch of
PyPI is its CUDA build (about 3 GB with its NVIDIA libraries): it runs here on the CPU as a user's would."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/integration/test_inductor_cache.py"]


def torch_releases() -> list[str]:
    """The torch releases (X.Y) that pin a tested Triton, as releases.py names them."""
    from aotpack.backends.triton import releases

    named = (t.strip() for r in releases.RELEASES for t in r.torch.split(","))
    return sorted({t for t in named if t[:1].isdigit()}, key=lambda t: tuple(map(int, t.split("."))))


def venv(minor: str, folder: Path) -> tuple[Path, str]:
    """The venv of torch ``minor`` (made once) and the Triton its torch pinned there."""
    python = folder / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if not (folder / ".installed").is_file():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
        subprocess.run([*pip, f"torch=={minor}.*"], check=True)
        pinned = _triton(python)
        subprocess.run([*pip, "-e", f"{ROOT}[test]"], check=True)
        if _triton(python) != pinned:
            raise SystemExit(f"installing aotpack moved torch {minor}'s Triton {pinned} to {_triton(python)}")
        (folder / ".installed").write_text(pinned)
    return python, (folder / ".installed").read_text()


def _triton(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('triton'))"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.torch_releases")
    parser.add_argument("--only", action="append", default=[], metavar="X.Y")
    parser.add_argument("--venvs", type=Path, default=ROOT / "build" / "torch-venvs")
    args = parser.parse_args()
    own = ".".join(importlib.metadata.version("torch").split(".")[:2])
    results = []
    for minor in torch_releases():
        if args.only and minor not in args.only:
            continue
        if minor == own:
            results.append(f"torch {minor}: the suite's own")
            continue
        started = time.monotonic()
        python, triton = venv(minor, args.venvs / minor)
        done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "integration",
                               *TESTS], cwd=ROOT)  # fmt: skip
        outcome = "passed" if done.returncode == 0 else "FAILED"
        results.append(f"torch {minor} with Triton {triton}: {outcome} ({time.monotonic() - started:.0f} s)")
    print("\n".join(results))
    return 1 if any("FAILED" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
