"""A real nvcc build of a CUDA recipe: the shipped images hold the expected archs and entry symbols,
and the runtime launches them with the recipe's block shape and shared memory (fake driver)."""

import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from aotpack import build
from aotpack.backends.cuda.compiler import find_nvcc
from aotpack.errors import CompileError, RecipeError, ToolNotFound

from .helpers import install_wheel, run_on_fake_driver

NVCC: Path | None
try:
    NVCC = find_nvcc()
except ToolNotFound:
    NVCC = None
pytestmark = [pytest.mark.skipif(NVCC is None, reason="needs nvcc")]

SOURCE = """\
#include <cuda_fp16.h>
template <typename T, int kThreads>
__global__ void scale(T *x, float s, int n) {
  extern __shared__ float scratch[];
  int i = blockIdx.x * kThreads + threadIdx.x;
  scratch[threadIdx.x] = s;
  if (i < n) x[i] = (T)((float)x[i] * scratch[threadIdx.x] * (AOTPACK_HINTED ? 1.f : 1.f));
}
extern "C" __global__ void unrelated(int *p) { *p = 1; }
"""

RECIPE = """\
package: cuda_kit
version: '1.0'
kernels:
  scale:
    cuda: scale.cu
    entry: "scale<{T}, {THREADS}>"
    types: {T: [fp16, fp32]}
    args:
      x: {type: "*T:16", extent: n}
      s: fp32
      n: {type: "i32:16", default: numel(x)}
    defines: {THREADS: [128, 256]}
    grid: ["cdiv(n, THREADS)"]
    block: [THREADS]
    shared: "THREADS * 4 + 60000"
    gencode: [sm_80, sm_90a, compute_90]
    default: {THREADS: 256}
"""


@pytest.fixture(scope="module")
def cuda_wheel(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cuda")
    (folder / "scale.cu").write_text(SOURCE)
    (folder / "r.yaml").write_text(RECIPE)
    return build(folder / "r.yaml", folder / "dist", jobs=2).wheel


def shipped_images(wheel: Path, tmp_path: Path) -> dict[str, bytes]:
    """Every variant's image as the runtime unpacks it from the installed extension module."""
    site = install_wheel(wheel, tmp_path / "images-site")
    code = (
        "import json, sys, cuda_kit as k\n"
        "ids = k.scale.variants\n"
        "sys.stdout.write(json.dumps({i: k._native._image('scale', i).hex() for i in ids}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(site)},
                         capture_output=True, text=True, check=True)  # fmt: skip
    return {i: bytes.fromhex(h) for i, h in json.loads(out.stdout).items()}


def test_shipped_images_have_the_archs_and_entries(cuda_wheel, tmp_path):
    images = shipped_images(cuda_wheel, tmp_path)
    with zipfile.ZipFile(cuda_wheel) as zf:
        manifest = json.loads(zf.read("cuda_kit/manifest.json"))
    for variant in manifest["kernels"]["scale"]["variants"]:
        assert hashlib.sha256(images[variant["id"]]).hexdigest() == variant["image_sha256"]
    cubins = {i: ELFFile(io.BytesIO(b)) for i, b in images.items() if b.startswith(b"\x7fELF")}
    ptx = {i: b.decode() for i, b in images.items() if not b.startswith(b"\x7fELF")}
    assert len(cubins) == 2 * 2 * 2 * 2 and len(ptx) == 2 * 2 * 2  # types x defines x specs x targets
    for vid, cubin in cubins.items():
        assert cubin["e_machine"] == "EM_CUDA"
        assert (cubin["e_flags"] >> 8) & 0xFF == {"sm_80": 80, "sm_90a": 90}[vid.split("/")[2]]
        symtab = cubin.get_section_by_name(".symtab")
        assert isinstance(symtab, SymbolTableSection)
        names = {s.name for s in symtab.iter_symbols()}
        assert any(n.startswith("_Z5scaleI") for n in names)
    assert all(vid.split("/")[2] == "compute_90" and ".target sm_90" in p and ".entry _Z5scaleI" in p
               for vid, p in ptx.items())  # fmt: skip


def test_manifest_records_nvcc_resources_and_entries(cuda_wheel):
    with zipfile.ZipFile(cuda_wheel) as zf:
        manifest = json.loads(zf.read("cuda_kit/manifest.json"))
    assert manifest["toolchain"]["nvcc"].startswith("13.")
    variant = manifest["kernels"]["scale"]["variants"][0]
    assert variant["id"] == "scale/T=fp16,THREADS=128/sm_80/hinted"
    assert variant["entry"] == "_Z5scaleI6__halfLi128EEvPT_fi"
    assert variant["compiler"]["entry_demangled"] == "scale<__half, 128>"
    assert int(variant["compiler"]["registers"]) > 0 and variant["compiler"]["spill_stores"] == "0"


def test_launch_block_shared_and_ptx_fallback(cuda_wheel, fake_driver, tmp_path):
    site = install_wheel(cuda_wheel, tmp_path / "site")
    code = textwrap.dedent("""
        import cuda_kit as k
        class Array:
            def __init__(self, ptr, n, typestr="<f2"):
                self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": typestr,
                                                 "strides": None, "version": 3}
        x = Array(0x100000000, 10000)
        print(k.select("scale", x, 2.0))
        k.scale(x, 2.0)
        """)  # fmt: skip
    results = {}
    for cc in ("86", "90", "100"):
        out, log = run_on_fake_driver(code, site, fake_driver, tmp_path / f"{cc}.log", FAKE_CUDA_CC=cc)
        results[cc] = ("\n".join(out).strip(), [ln for ln in log if ln.startswith(("launch", "attr"))])
    assert results["86"][0] == "scale/T=fp16,THREADS=256/sm_80/hinted"
    assert results["90"][0] == "scale/T=fp16,THREADS=256/sm_90a/hinted"
    assert results["100"][0] == "scale/T=fp16,THREADS=256/compute_90/hinted"  # PTX, compiled by the driver
    for _, log in results.values():
        attr, launch = log
        assert attr.startswith("attr 8="), "opted in to more than 48 KB of dynamic shared memory"
        assert "grid=40,1,1 block=256,1,1 shared=61024" in launch


def test_arch_nvcc_cannot_build_is_an_error(tmp_path):
    (tmp_path / "scale.cu").write_text(SOURCE)
    (tmp_path / "r.yaml").write_text(RECIPE.replace("gencode: [sm_80, sm_90a, compute_90]", "gencode: [sm_80, sm_100]"))
    fake = tmp_path / "bin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\ncase \"$1\" in --version) echo 'Cuda compilation tools, release 11.8, V11.8.89';;\n"
        "--list-gpu-code) echo 'sm_50 sm_80 sm_90';; --list-gpu-arch) echo 'compute_80 compute_90';; esac\n"
    )
    fake.chmod(0o755)
    with pytest.raises(RecipeError, match=r"kernels.scale: nvcc 11.8 \(.*\) cannot build sm_100; it builds compute_80"):
        build(tmp_path / "r.yaml", tmp_path / "dist", nvcc=str(fake))
    assert shutil.which("nvcc") != str(fake)


def test_nvcc_failure_is_pruned_with_its_output_and_a_define_hint(tmp_path):
    (tmp_path / "scale.cu").write_text(SOURCE.replace("kThreads", "THREADS"))
    (tmp_path / "r.yaml").write_text(RECIPE.replace("gencode: [sm_80, sm_90a, compute_90]", "gencode: [sm_90a]"))
    with pytest.raises(CompileError, match="no variant compiled") as info:
        build(tmp_path / "r.yaml", tmp_path / "dist", jobs=2)
    message = str(info.value)
    assert f"{tmp_path}/r.yaml:4:3: kernel 'scale': no variant compiled:" in message
    assert "scale/T=fp16,THREADS=128/sm_90a/hinted: " in message and "nvcc failed: " in message
    assert 'scale.cu(2): error: expected a "," or ">"' in message
    assert "note: defines reach nvcc as -D macros, and scale.cu declares THREADS; rename it" in message
    assert not (tmp_path / "dist").exists()


def test_a_recipe_that_gives_a_kernel_another_number_of_arguments_does_not_build(tmp_path):
    """The launch passes the recipe's arguments and nothing else: an entry taking another number would read
    past them. Where the .cu file declares it plainly, the recipe's loader says so (unit tests); where it does not
    (a macro, an include), nvcc checks the count (a static_assert in the wrapper) and the variant is pruned,
    saying so."""
    (tmp_path / "scale.cu").write_text(SOURCE.replace("__global__ void scale(", "#define ENTRY scale\n"
                                                      "__global__ void ENTRY("))  # fmt: skip
    recipe_text = RECIPE.replace("gencode: [sm_80, sm_90a, compute_90]", "gencode: [sm_90a]")
    lines = recipe_text.splitlines(keepends=True)
    dropped = next(i for i, line in enumerate(lines) if line.strip().startswith("s:"))  # the scale factor
    (tmp_path / "r.yaml").write_text("".join(lines[:dropped] + lines[dropped + 1 :]))
    with pytest.raises(CompileError, match="no variant compiled") as info:
        build(tmp_path / "r.yaml", tmp_path / "dist", jobs=2)
    assert "aotpack: the recipe gives kernel scale 2 arguments (those not launch_only); its entry takes another " \
           "number" in str(info.value)  # fmt: skip
    assert not (tmp_path / "dist").exists()


def test_the_demo_cuda_kernel_builds_with_no_cuda_toolkit_on_the_machine(tmp_path):
    """A fresh machine: no CUDA_HOME, no toolkit on PATH; nvcc and its headers come from PyPI (the cuda
    extra), and `--only` builds just the demo's CUDA kernel."""
    path = "/usr/bin:/bin"
    if shutil.which("nvcc", path=path):
        pytest.skip(f"an nvcc is installed in {path}: this machine cannot show a build without one")
    try:
        pypi_nvcc = importlib.metadata.version("nvidia-cuda-nvcc")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("aotpack's cuda extra is not installed (make test installs it)")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update(PATH=path, HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    demo = Path(__file__).parents[2] / "recipes" / "demo.yaml"
    run = subprocess.run([sys.executable, "-m", "aotpack", "build", str(demo), "--only", "rmsnorm/*", "-o",
                          str(tmp_path / "dist"), "-q"], capture_output=True, text=True, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr
    (wheel,) = (tmp_path / "dist").glob("demo_kernels-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        manifest = json.loads(zf.read("demo_kernels/manifest.json"))
    assert list(manifest["kernels"]) == ["rmsnorm"] and manifest["targets"] == ["sm_80", "sm_90a"]
    assert manifest["toolchain"]["nvcc"] == ".".join(pypi_nvcc.split(".")[:2])
