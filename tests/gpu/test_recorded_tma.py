"""A host-TMA matmul (tests/gpu/tma_workload.py: TensorDescriptor arguments, desc.load/.store, tl.dot) recorded,
built with the Triton release this environment's JIT runs, and replayed: in fresh processes with empty Triton
caches, the workload at shapes the recording never saw under the JIT, and after `activate(fallback="error")`:
no JIT compilation at all, and the same bits. Hopper (sm_90) only.

The package is tma_recorded as installed (tests/gpu/tma_recorded.yaml, built by `make recorded-matched` into
dist/triton-X.Y/, which `make gpu-test` installs); where it is not, this GPU records the workload with `aotpack
record` and builds it with `--triton` of the release here (which needs aotpack's build dependencies).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a Hopper GPU (sm_90): host tensor descriptors lower to TMA there", allow_module_level=True)

WORKLOAD = Path(__file__).with_name("tma_workload.py")
ROOT = Path(__file__).resolve().parents[2]


def command(*args: str, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"{' '.join(args)}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def workload(tmp_path: Path, name: str, *extra: str, site: Path | None = None) -> int:
    """Run the workload in a fresh process with an empty Triton cache; the JIT compilations it counted."""
    cache = tmp_path / f"triton-cache-{name}"
    cache.mkdir()
    path = os.pathsep.join(p for p in (str(site) if site else "", os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONPATH": path}
    out = command(sys.executable, str(WORKLOAD), str(tmp_path / f"{name}.pt"), *extra, env=env)
    return int(dict(line.split() for line in out.splitlines() if line.count(" ") == 1)["jit-compilations"])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path | None:
    """Where tma_recorded is installed (None: on the path already)."""
    import importlib.util

    if importlib.util.find_spec("tma_recorded") is not None:
        return None
    for needed in ("yaml", "ruamel.yaml", "lz4", "ziglang"):
        pytest.importorskip(needed, reason=f"install tma_recorded (make recorded-matched), or {needed} to build it")
    import yaml

    folder = tmp_path_factory.mktemp("tma")
    recipe = folder / "tma.yaml"
    command(sys.executable, "-m", "aotpack", "record", "-o", str(recipe), "--package", "tma_recorded", "--",
            sys.executable, str(WORKLOAD), str(folder / "recorded.pt"))  # fmt: skip
    (kernel,) = yaml.safe_load(recipe.read_text())["kernels"].values()
    print(yaml.safe_dump(kernel, sort_keys=False))
    assert kernel["args"]["a_desc"] == "tensordesc<T[BM, 64]>" and kernel["args"]["b_desc"] == "tensordesc<T[64, 128]>"
    assert kernel["args"]["c_desc"] == "tensordesc<T[BM, 128]>" and kernel["types"] == {"T": ["bf16", "fp16"]}
    assert len(kernel["variants"]) == 3
    command(sys.executable, "-m", "aotpack", "build", str(recipe), "-o", str(folder / "dist"), "--triton",
            triton.__version__)  # fmt: skip
    (wheel,) = (folder / "dist").glob("*.whl")
    target = folder / "site"
    command(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
            str(wheel))  # fmt: skip
    return target


def test_a_recorded_host_tma_matmul_replays_unseen_shapes_with_no_jit_bit_for_bit(site, tmp_path):
    assert workload(tmp_path, "jit", "--unseen") > 0, "the JIT compiled the workload's kernel"
    assert workload(tmp_path, "aot", "--unseen", "--activate", "tma_recorded", site=site) == 0
    expected, got = torch.load(tmp_path / "jit.pt"), torch.load(tmp_path / "aot.pt")
    assert len(expected) == len(got) == 3
    for e, g in zip(expected, got, strict=True):
        assert e.dtype == g.dtype and torch.equal(e, g)
