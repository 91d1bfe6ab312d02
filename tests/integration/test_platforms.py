"""Wheels for other machines from this x86-64 host (zig cross-compiles, auditwheel repairs for the wheel's machine):
an aarch64 wheel of the same cubins, tagged manylinux 2.17 aarch64, abi3 by abi3audit's strict check, built again
byte for byte, beside the x86-64 one in the same cache; a recording's Triton modules of another machine refused.
The aarch64 wheel runs on an emulated aarch64 machine in the tests that take ``machine`` (test_runtime.py,
test_calls.py, test_selection.py; tests/integration/machines.py)."""

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aotpack import build, manifest
from aotpack.errors import WheelError
from aotpack.pipeline import native

from .helpers import add_recipe

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

RECIPE = add_recipe("cross_kernels", ("sm_80", "sm_90a"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cross")
    (folder / "r.yaml").write_text(RECIPE)
    cache_dir = folder / "cache"
    return {p: build(folder / "r.yaml", folder / p, jobs=2, cache_dir=cache_dir, platform=p).wheel
            for p in ("linux_x86_64", "linux_aarch64")}  # fmt: skip


def machines(wheel: Path) -> dict[str, str | None]:
    with zipfile.ZipFile(wheel) as zf:
        return {n.rpartition("/")[2]: native.elf_machine(zf.read(n)[:64]) for n in zf.namelist() if n.endswith(".so")}


def test_one_wheel_per_machine_with_the_same_cubins(wheels):
    x86, arm = wheels["linux_x86_64"], wheels["linux_aarch64"]
    assert x86.name == "cross_kernels-0.1.0-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    assert arm.name == "cross_kernels-0.1.0-cp39-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl"
    assert machines(x86) == {"_native.abi3.so": "x86_64", "libcross_kernels.so": "x86_64"}
    assert machines(arm) == {"_native.abi3.so": "aarch64", "libcross_kernels.so": "aarch64"}
    images = [{v["id"]: v["image_sha256"] for v in manifest.read_wheel(w)["kernels"]["add"]["variants"]}
              for w in (x86, arm)]  # fmt: skip
    assert images[0] == images[1] and len(images[0]) > 0
    out = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(arm)], capture_output=True, text=True)
    assert 'consistent with the following platform tag: "manylinux_2_17_aarch64"' in " ".join(out.stdout.split())


def test_the_aarch64_wheel_is_abi3(wheels):
    out = subprocess.run([sys.executable, "-m", "abi3audit", "--strict", "--summary", str(wheels["linux_aarch64"])],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 extensions scanned; 0 ABI version mismatches and 0 ABI violations found" in " ".join(out.stderr.split())


def test_the_aarch64_wheel_builds_again_byte_for_byte(wheels, tmp_path):
    (tmp_path / "r.yaml").write_text(RECIPE)
    again = build(tmp_path / "r.yaml", tmp_path / "dist", jobs=2, use_cache=False, platform="linux_aarch64").wheel
    digest = [hashlib.sha256(w.read_bytes()).hexdigest() for w in (wheels["linux_aarch64"], again)]
    assert digest[0] == digest[1]


def test_a_recordings_modules_of_another_machine_are_refused(tmp_path):
    """A recording's Triton cache module (a launcher Triton built with the recording host's C compiler) runs on
    that host's machine alone: an aarch64 wheel of an x86-64 recording is refused, naming the module."""
    folder = tmp_path / "rec"
    shutil.copytree(ROOT / "examples" / "serve" / "recording", folder)
    key = folder / "triton-cache" / ("A" * 52)
    key.mkdir(parents=True)
    launcher = key / "__triton_launcher.cpython-311-x86_64-linux-gnu.so"
    launcher.write_bytes(_an_x86_object())
    text = (folder / "recipe.yaml").read_text().replace("widen:", "triton_cache: triton-cache\nwiden:", 1)
    (folder / "recipe.yaml").write_text(text)
    with pytest.raises(WheelError, match=r"a module Triton built for x86_64, which a wheel for aarch64 cannot ship"):
        build(folder / "recipe.yaml", tmp_path / "dist", jobs=2, platform="linux_aarch64",
              select=("softmax_kernel/BLOCK=8,*",))  # fmt: skip


def _an_x86_object() -> bytes:
    """The bytes of an x86-64 shared object of this machine's Python (its own extension modules are)."""
    import _ctypes

    return Path(_ctypes.__file__).read_bytes()


def test_one_invocation_builds_a_wheel_per_platform(wheels, tmp_path):
    """--platform repeated: a wheel each, in order, one path per line with -q; the variants come from the
    cache the first platform's build filled (here: the fixture's)."""
    folder = wheels["linux_x86_64"].parent.parent
    out = subprocess.run([sys.executable, "-m", "aotpack", "build", str(folder / "r.yaml"), "-q", "-o", str(tmp_path),
                          "--cache-dir", str(folder / "cache"), "--platform", "linux_aarch64", "--platform",
                          "linux_x86_64", "--platform", "linux_aarch64"], capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    paths = [Path(line) for line in out.stdout.splitlines()]
    assert [p.name for p in paths] == [wheels["linux_aarch64"].name, wheels["linux_x86_64"].name]
    assert [hashlib.sha256(p.read_bytes()).digest() for p in paths] == [
        hashlib.sha256(wheels[m].read_bytes()).digest() for m in ("linux_aarch64", "linux_x86_64")]  # fmt: skip
