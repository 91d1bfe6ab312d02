"""Blackwell targets built on this host, no GPU: sm_100a (B200), sm_103a (B300) and sm_120a (RTX 50) beside sm_90a.
Every Blackwell variant's cubin is disassembled with the cuobjdump Triton ships (CUDA 13's, which reads no cubin
of CUDA 12.2's ptxas, the one sm_90a's are assembled by when installed): machine code for its target, holding
its kernel's entry; the manifest gives each target the driver its ptxas needs; and on the fake driver the runtime runs
each chip's own code (capabilities 10.0, 10.3 and 12.0), refusing a chip the package has none for by name."""

import re
import subprocess
from pathlib import Path

import pytest

from aotpack import build, manifest
from aotpack.backends.base import Artifact
from aotpack.pipeline import cache

from .helpers import CAI_ARRAY, add_recipe, install_wheel, run_on_fake_driver

pytestmark = pytest.mark.integration
TARGETS = ("sm_90a", "sm_100a", "sm_103a", "sm_120a")

RECIPE = add_recipe("blackwell_kernels", TARGETS)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("blackwell")
    (folder / "r.yaml").write_text(RECIPE)
    return build(folder / "r.yaml", folder / "dist", jobs=2, cache_dir=folder / "cache").wheel, folder / "cache"


def cuobjdump() -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def test_every_cubin_is_its_targets_machine_code_with_its_kernel(built):
    wheel, cache_dir = built
    listed = {v["id"]: v for v in manifest.read_wheel(wheel)["kernels"]["add"]["variants"]}
    images = {}
    for path in cache_dir.glob("variants/*/*.variant"):
        outcome = cache.decode(path.read_bytes())
        if isinstance(outcome, Artifact):
            images[outcome.variant_id] = (outcome.image, outcome.entry)
    assert set(images) == set(listed) and {v["target"] for v in listed.values()} == set(TARGETS)
    blackwell = sorted((i, e) for i, e in images.items() if listed[i]["target"] != "sm_90a")
    assert len(blackwell) == 3 * len(images) // 4
    for variant_id, (image, entry) in blackwell:
        cubin = cache_dir / "x.cubin"
        cubin.write_bytes(image)
        sass = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
        target = listed[variant_id]["target"]
        assert f"code for {target}\n" in sass and f"Function : {entry}\n" in sass, (variant_id, sass[:400])
        assert sass.count("/*0000*/") == 1, variant_id  # one function, disassembled from its first instruction
        header = subprocess.run([cuobjdump(), "-elf", str(cubin)], capture_output=True, text=True, check=True)
        assert f"sm={target.removeprefix('sm_')}," in header.stdout.splitlines()[1], (variant_id, header.stdout[:200])


def test_each_variant_records_the_registers_cuobjdump_reads_in_its_cubin(built):
    """The manifest's registers per thread of a Triton variant (read from its cubin, as ptxas -v gives a CUDA
    kernel's) are those cuobjdump --dump-resource-usage reports."""
    wheel, cache_dir = built
    listed = {v["id"]: v for v in manifest.read_wheel(wheel)["kernels"]["add"]["variants"]}
    checked = 0
    for path in sorted(cache_dir.glob("variants/*/*.variant")):
        outcome = cache.decode(path.read_bytes())
        if not isinstance(outcome, Artifact) or listed[outcome.variant_id]["target"] == "sm_90a":
            continue  # (CUDA 13's cuobjdump reads no cubin of CUDA 12.2's ptxas)
        cubin = cache_dir / "r.cubin"
        cubin.write_bytes(outcome.image)
        usage = subprocess.run([cuobjdump(), "--dump-resource-usage", str(cubin)], capture_output=True, text=True,
                               check=True).stdout  # fmt: skip
        (reported,) = re.findall(rf"Function {re.escape(outcome.entry)}:\s*REG:(\d+)", usage)
        assert listed[outcome.variant_id]["compiler"]["registers"] == reported, (outcome.variant_id, usage)
        checked += 1
    assert checked == 3 * len(listed) // 4


def test_each_target_needs_the_driver_of_the_ptxas_that_built_it(built):
    wheel, _ = built
    floors = {t: tuple(map(int, v.split("."))) for t, v in manifest.read_wheel(wheel)["min_driver_cuda"].items()}
    assert floors["sm_103a"] >= (12, 9) and floors["sm_100a"] >= (12, 8) and floors["sm_120a"] >= (12, 8), floors


@pytest.mark.parametrize(("capability", "target"), [("100", "sm_100a"), ("103", "sm_103a"), ("120", "sm_120a")])
def test_the_runtime_runs_each_chips_own_code(built, fake_driver, tmp_path, capability, target):
    wheel, _ = built
    site = install_wheel(wheel, tmp_path / "site")
    code = CAI_ARRAY + "import blackwell_kernels as p\n"
    code += "x = Array(A, (5000,), '<f2')\n"
    code += "print(p.add.select(x, x, x))\n"
    code += "p.add(x, x, x)\n"
    out, log = run_on_fake_driver(code, site, fake_driver, tmp_path / "cuda.log", FAKE_CUDA_CC=capability)
    assert out[0].split("/")[2] == target, out
    assert any(line.startswith("launch") for line in log), log


def test_a_chip_without_code_is_refused_by_name(built, fake_driver, tmp_path):
    wheel, _ = built
    site = install_wheel(wheel, tmp_path / "site")
    code = CAI_ARRAY + "import blackwell_kernels as p\n"
    code += "try:\n    p.add.select(Array(A, (64,), '<f2'), Array(A, (64,), '<f2'), Array(A, (64,), '<f2'))\n"
    code += "except Exception as e:\n    print(type(e).__name__, e)\n"
    out, _ = run_on_fake_driver(code, site, fake_driver, tmp_path / "cuda.log", FAKE_CUDA_CC="110")
    assert out == [
        "CudaError add(): the GPU (Fake GPU 0) has compute capability 11.0, but blackwell_kernels was built for "
        f"{', '.join(TARGETS)}; rebuild with a target for this GPU"
    ], out
