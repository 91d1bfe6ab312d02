"""The README's quick start as a newcomer runs it before aotpack is published: aotpack's wheel, built from this
checkout, in a local wheelhouse, everything else from pip's index (Triton and, without a CUDA toolkit, nvcc), and
the scaffold built by the two standard front ends with isolation. Opt-in (AOTPACK_NEWCOMER=1): it downloads
hundreds of MB and builds the scaffold four times (3 to 4 minutes on 2 cores)."""

import ctypes.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotpack._version import __version__
from aotpack.commands import cli

from ..shared import ROOT
from .helpers import install_wheel

pytestmark = pytest.mark.skipif(
    os.environ.get("AOTPACK_NEWCOMER") != "1",
    reason="opt-in, set AOTPACK_NEWCOMER=1: downloads Triton and nvcc from PyPI (hundreds of MB)",
)


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """aotpack's wheel where pip looks, as the README tells a user to make it."""
    folder = tmp_path_factory.mktemp("house")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(ROOT)], check=True)
    return folder


def _without_cuda(env: dict[str, str]) -> dict[str, str]:
    """No CUDA toolkit to be found: PATH without the folders holding an nvcc, and no $CUDA_HOME."""
    folders = [f for f in env["PATH"].split(os.pathsep) if not (Path(f) / "nvcc").is_file()]
    dropped = {"CUDA_HOME", "CUDA_PATH"}
    return {**{k: v for k, v in env.items() if k not in dropped}, "PATH": os.pathsep.join(folders)}


@pytest.mark.parametrize("nvcc", ["on PATH", "from PyPI"])
def test_a_newcomer_builds_the_scaffold_with_pip_wheel_and_build_with_isolation(nvcc, house, tmp_path):
    """`pip wheel .` and `python -m build` (an sdist, then the wheel from it) each build in a fresh environment
    from the scaffold's requires (aotpack[cuda]) and the Triton the backend asks for; a build is reproducible,
    so the two wheels are the same bytes. The wheel imports on a machine without a GPU and says so when
    called (not tried where a driver is installed)."""
    env = {**os.environ, "PIP_FIND_LINKS": " ".join(filter(None, [str(house), os.environ.get("PIP_FIND_LINKS")]))}
    if nvcc == "on PATH" and not shutil.which("nvcc"):
        pytest.skip("no nvcc on PATH")
    if nvcc == "from PyPI":
        env = _without_cuda(env)
        assert shutil.which("nvcc", path=env["PATH"]) is None
    project = tmp_path / "my_kernels"
    assert cli.main(["new", "my_kernels", "--dir", str(project)]) == 0

    by_pip = subprocess.run([sys.executable, "-m", "pip", "wheel", "-w", str(tmp_path / "pip"), str(project)],
                            env=env, capture_output=True, text=True)  # fmt: skip
    assert by_pip.returncode == 0, by_pip.stdout[-3000:] + by_pip.stderr[-3000:]
    by_build = subprocess.run([sys.executable, "-m", "build", "-o", str(tmp_path / "build"), str(project)],
                              env=env, capture_output=True, text=True)  # fmt: skip
    assert by_build.returncode == 0, by_build.stdout[-3000:] + by_build.stderr[-3000:]
    assert f"aotpack=={__version__}" in by_build.stdout + by_build.stderr  # the checkout's, from the wheelhouse

    (wheel,) = (tmp_path / "pip").glob("my_kernels-0.1.0-cp39-abi3-manylinux*.whl")
    from_sdist = tmp_path / "build" / wheel.name
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == sorted(["my_kernels-0.1.0.tar.gz", wheel.name])
    assert from_sdist.read_bytes() == wheel.read_bytes(), "the wheel built from the sdist differs from pip's"

    site = install_wheel(wheel, tmp_path / "site")
    if ctypes.util.find_library("cuda"):  # a driver would launch the made-up pointers below
        return
    called = subprocess.run([sys.executable, "-c", "import my_kernels; my_kernels.relu(4096, 8192, 16)"],
                            cwd=tmp_path, env={**env, "PYTHONPATH": str(site)}, capture_output=True,
                            text=True)  # fmt: skip
    assert called.returncode == 1, called.stdout + called.stderr
    assert "my_kernels.CudaError: no NVIDIA driver" in called.stderr, called.stderr
