"""Real builds: Triton, zig and auditwheel. One small recipe is built once per session."""

import subprocess
import sys
from pathlib import Path

import pytest

from aotpack import build

from ..shared import SMALL_ANYWHERE
from . import machines
from .helpers import install_wheel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Builds in tests use a cache of their own, never the user's."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def small_recipe(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("recipe") / "small.yaml"
    path.write_text(SMALL_ANYWHERE)
    return path


@pytest.fixture(scope="session")
def small_wheel(small_recipe, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    return build(small_recipe, out, jobs=2).wheel


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory) -> Path:
    """A folder holding a fake libcuda.so.1 (tests/integration/fake_libcuda.c)."""
    folder = tmp_path_factory.mktemp("fakecuda")
    subprocess.run(
        [sys.executable, "-m", "ziglang", "cc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
         "-o", str(folder / "libcuda.so.1"), str(Path(__file__).with_name("fake_libcuda.c")), "-lpthread"],
        check=True,
    )  # fmt: skip
    return folder


@pytest.fixture(scope="session")
def fake_exchange(tmp_path_factory) -> Path:
    """libfakexchange.so: DLPack's C exchange API over torch's own, CPU tensors reported as CUDA
    tensors (tests/integration/fake_exchange.c)."""
    library = tmp_path_factory.mktemp("fakexchange") / "libfakexchange.so"
    subprocess.run(
        [sys.executable, "-m", "ziglang", "cc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
         "-o", str(library), str(Path(__file__).with_name("fake_exchange.c"))],
        check=True,
    )  # fmt: skip
    return library


@pytest.fixture(scope="session")
def installed(small_wheel, tmp_path_factory) -> Path:
    """The small wheel installed into a plain folder (put it on PYTHONPATH)."""
    return install_wheel(small_wheel, tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="session")
def aarch64_machine(tmp_path_factory) -> machines.Machine:
    """An aarch64 machine emulated in user mode (tests/integration/machines.py)."""
    return machines.aarch64(tmp_path_factory.mktemp("aarch64"))


@pytest.fixture(scope="session", params=["host", "aarch64"])
def machine(request, fake_driver) -> machines.Machine:
    """This host, then the emulated aarch64 machine: a test taking it runs the wheel built for each."""
    if request.param == "host":
        return machines.host(fake_driver)
    return request.getfixturevalue("aarch64_machine")


@pytest.fixture(scope="session")
def installed_on(machine, small_recipe, tmp_path_factory, request) -> Path:
    """The small wheel built for the machine and installed into a plain folder for it."""
    return machine.site(small_recipe, lambda: request.getfixturevalue("installed"), tmp_path_factory)
