"""Hermetic, reproducible builds: one recipe (a Triton and, where nvcc is found, a CUDA kernel) copied
into two checkouts at different paths, each built by the CLI with its own empty aotpack cache and its
own HOME, both pointed at one TRITON_CACHE_DIR and the second with TRITON_DEBUG=1 set, gives
byte-identical wheels and leaves that Triton cache untouched; and no byte of the wheel, nor of any
kernel image unpacked from it, names a folder of the build host."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from aotpack.backends.cuda.compiler import NvccCompiler
from aotpack.errors import ToolNotFound

from ..shared import ROOT, SMALL
from .helpers import install_wheel

CUDA_KERNEL = """\
  rmsnorm:
    cuda: kernels/rmsnorm.cu
    entry: "rmsnorm<{T}, {BLOCK}>"
    types: {T: [fp16]}
    mutates: [out]
    args:
      out: {type: "*T:16", extent: "n_rows * n_cols", contiguous: true}
      x: {type: "*T:16", extent: "n_rows * n_cols", contiguous: true}
      weight: {type: "*T:16", extent: n_cols}
      eps: fp32
      n_cols: {type: "i32:16", default: "size(x, 1)"}
      n_rows: {type: i32, default: "size(x, 0)", launch_only: true}
    defines: {BLOCK: [256]}
    grid: [n_rows]
    block: [BLOCK]
    gencode: [sm_80]
"""


def have_nvcc() -> bool:
    try:
        NvccCompiler.find(None)
    except ToolNotFound:
        return False
    return True


def checkout(root: Path) -> Path:
    """The recipe and its kernel sources, as a project of its own at `root`."""
    (root / "kernels").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "add.py", root / "kernels" / "add.py")
    shutil.copy(ROOT / "examples" / "rmsnorm.cu", root / "kernels" / "rmsnorm.cu")
    recipe = root / "recipe.yaml"
    text = SMALL  # the small recipe, its kernel in kernels/; the CUDA one before license:
    recipe.write_text(text.replace("license: MIT\n", CUDA_KERNEL + "license: MIT\n") if have_nvcc() else text)
    return recipe


def build_in(recipe: Path, home: Path, triton_cache: Path, **triton_settings: str) -> Path:
    """`aotpack build` as a user runs it: its own HOME (so its own default aotpack cache), the
    recipe's folder as the working directory, and the host's Triton settings."""
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "TRITON_HOME")}
    env.update(HOME=str(home), TRITON_CACHE_DIR=str(triton_cache), **triton_settings)
    aotpack = [sys.executable, "-m", "aotpack"]
    done = subprocess.run([*aotpack, "build", "recipe.yaml", "-o", "dist", "-q", "-j", "2"], cwd=recipe.parent,
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (home / ".cache" / "aotpack").is_dir(), "the build used the cache under its own HOME"
    (wheel,) = (recipe.parent / "dist").glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("repro")
    triton_cache = tmp / "triton-cache"  # the host's: neither build may read or write it
    triton_cache.mkdir()
    first = build_in(checkout(tmp / "a" / "checkout"), tmp / "home-a", triton_cache)
    second = build_in(checkout(tmp / "b" / "elsewhere" / "project"), tmp / "home-b", triton_cache, TRITON_DEBUG="1")
    assert list(triton_cache.iterdir()) == []
    return tmp, first, second


def test_two_checkouts_two_homes_and_empty_caches_build_the_same_bytes(two_builds):
    _, first, second = two_builds
    assert first.name == second.name
    assert hashlib.sha256(first.read_bytes()).hexdigest() == hashlib.sha256(second.read_bytes()).hexdigest()


def test_no_byte_of_the_wheel_names_a_folder_of_the_build_host(two_builds):
    tmp, wheel, _ = two_builds
    forbidden = sorted({str(tmp), str(ROOT), str(Path.home()), sys.prefix, os.path.dirname(os.__file__),
                        "site-packages", "/usr/local/cuda"})  # fmt: skip
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            data = zf.read(name)
            for path in forbidden:
                assert path.encode() not in data, f"{name} holds {path}"
    # the kernel images ship compressed: unpack every one as the runtime does and look inside too
    site = install_wheel(wheel, tmp / "site")
    code = textwrap.dedent("""
        import json, sys
        import small_kernels as k
        forbidden = json.loads(sys.argv[1])
        count = 0
        for name, info in k.__aotpack__["kernels"].items():
            for v in info["variants"]:
                image = k._native._image(name, v["id"])
                count += 1
                for path in forbidden:
                    assert path.encode() not in image, (v["id"], path)
        print(count)
        """)
    done = subprocess.run([sys.executable, "-c", code, json.dumps(forbidden)],
                          env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 8  # every Triton variant (and the CUDA ones where nvcc is found) was looked at


def test_another_checkout_finds_the_triton_variants_in_the_cache(two_builds):
    """A third checkout at yet another path, building with the first one's aotpack cache: its Triton
    variants (code that holds no path) are cache hits, CUDA ones (whose code may hold one) are built
    again, and the wheel is the same bytes. Before, every path change missed the whole cache."""
    tmp, first, _ = two_builds
    with zipfile.ZipFile(first) as zf:
        manifest = json.loads(zf.read("small_kernels/manifest.json"))
    triton = sum(len(k["variants"]) for k in manifest["kernels"].values() if k["backend"] == "triton")
    recipe = checkout(tmp / "c" / "third")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_HOME"}
    env.update(HOME=str(tmp / "home-a"), XDG_CACHE_HOME=str(tmp / "home-a" / ".cache"))
    done = subprocess.run([sys.executable, "-m", "aotpack", "build", "recipe.yaml", "-o", "dist", "-j", "2"],
                          cwd=recipe.parent, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr  # without nvcc every variant is Triton's: the whole wheel is a hit
    assert f"({triton} cached)" in said or ("the wheel comes from the cache" in said and not have_nvcc())
    (wheel,) = (recipe.parent / "dist").glob("*.whl")
    assert wheel.read_bytes() == first.read_bytes()
