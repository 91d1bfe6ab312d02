"""Build real wheels and use them where no GPU is: tags, contents, install, import, errors."""

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aotpack import build
from aotpack.commands import cli
from aotpack.errors import CompileError, RecipeError

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, site: Path, python: str = sys.executable, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run([python, "-c", code], capture_output=True, text=True, env=environment, timeout=120)


def test_wheel_is_manylinux2014_abi3_with_no_dependencies(small_wheel):
    assert small_wheel.name == "small_kernels-0.2.0-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    out = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(small_wheel)], capture_output=True, text=True)
    assert 'is consistent with the following platform tag: "manylinux_2_17_x86_64"' in out.stdout.replace("\n", " ")
    with zipfile.ZipFile(small_wheel) as zf:
        names = set(zf.namelist())
        assert {"small_kernels/__init__.py", "small_kernels/__init__.pyi", "small_kernels/py.typed",
                "small_kernels/manifest.json", "small_kernels/_native.abi3.so"} <= names  # fmt: skip
        metadata = zf.read("small_kernels-0.2.0.dist-info/METADATA").decode()
        notice = zf.read("small_kernels-0.2.0.dist-info/licenses/AOTPACK-RUNTIME-LICENSE").decode()
    assert "Requires-Dist" not in metadata and "Requires-Python: >=3.9" in metadata
    assert "License-Expression: MIT\n" in metadata and "License-File: AOTPACK-RUNTIME-LICENSE\n" in metadata
    assert notice.startswith("This package embeds the runtime of aotpack") and "Apache License" in notice
    assert not [n for n in names if n.endswith(".libs/")], "nothing was grafted: the runtime needs no library"


def dynamic(so: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """An ELF file's dynamic tags (name -> values) and its defined dynamic symbols (name -> version)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerSymSection
    from elftools.elf.sections import SymbolTableSection

    with so.open("rb") as f:
        elf = ELFFile(f)
        tags: dict[str, list[str]] = {}
        for section in (s for s in elf.iter_sections() if isinstance(s, DynamicSection)):
            for tag in section.iter_tags():
                value = getattr(tag, {"DT_NEEDED": "needed", "DT_SONAME": "soname", "DT_RUNPATH": "runpath"}.get(
                    tag.entry.d_tag, "_"), None)  # fmt: skip
                if value is not None:
                    tags.setdefault(tag.entry.d_tag, []).append(value)
        versym = next(s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection))
        names = {}
        verdef = elf.get_section_by_name(".gnu.version_d")
        if isinstance(verdef, GNUVerDefSection):
            for definition, aux in verdef.iter_versions():
                names[definition.entry.vd_ndx] = next(aux).name
        defined = {}
        dynsym = elf.get_section_by_name(".dynsym")
        assert isinstance(dynsym, SymbolTableSection)
        for i, symbol in enumerate(dynsym.iter_symbols()):
            if symbol.entry.st_shndx != "SHN_UNDEF" and symbol.name:
                defined[symbol.name] = names.get(versym.get_symbol(i).entry.ndx, "")
    return tags, defined


def test_one_copy_of_the_runtime_serves_python_and_c(small_wheel, tmp_path):
    """The runtime, the tables and the images live in lib<package>.so (no Python, no CUDA), under a version
    node of the package's own; the extension holds only the binding and finds the library beside it."""
    with zipfile.ZipFile(small_wheel) as zf:
        zf.extractall(tmp_path)
    folder = tmp_path / "small_kernels"
    ext_tags, ext_symbols = dynamic(folder / "_native.abi3.so")
    lib_tags, lib_symbols = dynamic(folder / "libsmall_kernels.so")
    assert ext_tags["DT_RUNPATH"] == ["$ORIGIN"] and "libsmall_kernels.so" in ext_tags["DT_NEEDED"]
    assert set(ext_symbols) == {"PyInit__native"}, "nothing of the runtime is defined twice"
    assert lib_tags["DT_SONAME"] == ["libsmall_kernels.so"]
    # glibc only (libm: the dispatcher's log2, aot_measured.c): no Python, no CUDA
    assert set(lib_tags["DT_NEEDED"]) <= {"libc.so.6", "libdl.so.2", "libpthread.so.0", "libm.so.6"}, (
        "no Python, no CUDA"
    )
    assert {"aot_launch", "aot_unpack", "aot_kernel_add", "small_kernels_add"} <= set(lib_symbols)
    assert set(lib_symbols.values()) == {"AOTPACK_small_kernels"}
    assert not any(s.startswith("cu") and s[2:3].isupper() for s in lib_symbols), "the driver is dlopen'ed"
    magic = b"\x7fELF\x02\x01\x01"  # a kernel image's first bytes (the LZ4 block's first literals)
    assert (folder / "libsmall_kernels.so").read_bytes().find(magic, 1) > 0
    assert (folder / "_native.abi3.so").read_bytes().find(magic, 1) == -1, "the images are in the library only"


def test_abi3audit_finds_nothing(small_wheel):
    out = subprocess.run([sys.executable, "-m", "abi3audit", "--strict", "--summary", str(small_wheel)],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 extensions scanned; 0 ABI version mismatches and 0 ABI violations found" in " ".join(out.stderr.split())


def pythons() -> list[str]:
    """This interpreter, plus the oldest (3.9) and newest (3.13) CPython found on the machine."""
    found = {sys.executable}
    for minor in (9, 13):
        candidates = [
            shutil.which(f"python3.{minor}"),
            *map(str, Path("/root/.pyenv/versions").glob(f"3.{minor}.*/bin/python")),
        ]
        for candidate in candidates:
            if candidate and subprocess.run([candidate, "-c", "import venv"], capture_output=True).returncode == 0:
                found.add(candidate)
                break
    return sorted(found)


@pytest.mark.parametrize("python", pythons())
def test_installs_in_a_fresh_venv_and_imports_without_a_gpu(small_wheel, tmp_path, python):
    env_dir = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(env_dir)], check=True)
    py = str(env_dir / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", str(small_wheel)], check=True)
    code = """
import inspect, small_kernels as k
print(k.__version__, k.__all__)
print(inspect.signature(k.add))
m = k.__aotpack__["kernels"]["add"]
print(len(m["variants"]), m["targets"])
try:
    k.add(1 << 44, 1 << 44, 1 << 44, n_elements=16)
except k.CudaError as e:
    print("CudaError:", e)
"""
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "0.2.0 ['ClassMissWarning', 'CudaError', 'MissingVariant', 'activate', 'autotune', 'coverage', "
        "'deactivate', 'get_include', 'select', 'stats', 'torch_ops', 'warn_class_misses', 'add']"
    )
    assert lines[1] == "(x_ptr, y_ptr, out_ptr, n_elements=None, *, stream=None, variant=None)"
    assert lines[2] == "48 ['sm_80', 'sm_90a']"
    assert lines[3].startswith("CudaError: no NVIDIA driver: libcuda.so.1 could not be loaded")


def test_manifest_records_variants_and_toolchain(installed):
    manifest = json.loads((installed / "small_kernels" / "manifest.json").read_text())
    add = manifest["kernels"]["add"]
    import triton

    assert manifest["toolchain"]["triton"] == triton.__version__  # the release that built it, also per variant
    assert {v["compiler"]["triton"] for v in add["variants"]} == {triton.__version__}
    assert {"aotpack", "ptxas (sm_80)", "ptxas (sm_90a)", "image compression"} <= set(manifest["toolchain"])
    assert all(v["compiler"]["ptxas"].startswith("12.2 (nvidia-cuda-nvcc-cu12 12.2.") for v in add["variants"])
    ids = [v["id"] for v in add["variants"]]
    assert ids[0] == "add/T=fp32,BLOCK=256,w4,s1/sm_80/DDDD" and len(ids) == 48
    assert all(len(v["image_sha256"]) == 64 and v["entry"] == "add_kernel" for v in add["variants"])
    assert add["dispatch"] == [
        {"arch": None, "config": "BLOCK=256,w4,s1", "key": [4096], "specialization": None, "types": {}}
    ]


def test_cli_bad_recipe_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("package: x\nversion: 1\nkernels:\n  k:\n    triton: a.py:f\n    num_warp: 4\n")
    (tmp_path / "a.py").write_text("")
    out = tmp_path / "dist"
    assert cli.main(["build", str(bad), "-o", str(out)]) == RecipeError.exit_code
    err = capsys.readouterr().err
    assert f"aotpack: error: {bad}:6:5: unknown key 'num_warp' in kernels.k — did you mean 'num_warps'?" in err
    assert not out.exists()


def test_source_mismatch_is_reported_at_the_recipe(small_recipe, tmp_path):
    text = small_recipe.read_text().replace("      n_elements:", "      count:").replace("(n_elements", "(count")
    text = text.replace("extent: n_elements", "extent: count").replace("key: [n_elements]", "key: [count]")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(
        RecipeError,
        match=r"bad.yaml:9:7: kernels.add.args: list the kernel's runtime parameters"
        r" in its order: x_ptr, y_ptr, out_ptr, n_elements \(the recipe has x_ptr, y_ptr, out_ptr, count",
    ):
        build(bad, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_failed_variants_are_pruned_and_reported(tmp_path):
    (tmp_path / "k.py").write_text(
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def k(x_ptr, BLOCK: tl.constexpr):\n"
        "    tl.static_assert(BLOCK <= 64)\n"
        "    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)\n"
    )
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "package: prune_kit\nversion: '1'\ntargets: [sm_80]\nkernels:\n  k:\n    triton: k.py:k\n"
        "    args: {x_ptr: '*fp32'}\n    constexprs: {BLOCK: [64, 128]}\n    grid: [1]\n    specialize: none\n"
    )
    result = build(recipe, tmp_path / "dist", jobs=1)
    assert [p.variant_id for p in result.pruned] == ["k/BLOCK=128,w4,s3/sm_80"]
    assert result.pruned[0].reason == (
        "CompileTimeAssertionFailure in k (line 2 of the function): tl.static_assert(BLOCK <= 64)"
    )
    assert result.variants == 1
    with pytest.raises(CompileError, match=r"1 variant failed to compile \(--strict\)"):
        build(recipe, tmp_path / "dist2", jobs=1, strict=True)
    assert not (tmp_path / "dist2").exists()


def test_same_inputs_give_a_byte_identical_wheel(small_recipe, small_wheel, tmp_path):
    again = build(small_recipe, tmp_path / "again", jobs=2).wheel
    assert again.name == small_wheel.name
    assert hashlib.sha256(again.read_bytes()).hexdigest() == hashlib.sha256(small_wheel.read_bytes()).hexdigest()


def test_inspect_shows_provenance(small_wheel, small_recipe, capsys):
    assert cli.main(["inspect", str(small_wheel), "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["schema"] == "aotpack-manifest/3"
    add = ROOT / "examples" / "add.py"
    rel = os.path.relpath(add, small_recipe.parent)
    assert manifest["sources"][rel] == hashlib.sha256(add.read_bytes()).hexdigest()
    assert manifest["sources"]["small.yaml"] == hashlib.sha256(small_recipe.read_bytes()).hexdigest()
    # the oldest ptxas found that builds each target: CUDA 12.2's, from PyPI (an aotpack dependency)
    assert manifest["min_driver_cuda"] == {"sm_80": "12.2", "sm_90a": "12.2"}
    assert set(manifest["kernels"]["add"]["driver_floor_set_by"].values()) == {
        f"ptxas 12.2 (nvidia-cuda-nvcc-cu12 {importlib.metadata.version('nvidia-cuda-nvcc-cu12')})"
    }
    assert manifest["toolchain"]["ptxas (sm_90a)"].startswith("12.2 (nvidia-cuda-nvcc-cu12 12.2.")
    assert manifest["toolchain"]["host C compiler"].startswith("zig cc ")
    assert cli.main(["inspect", str(small_wheel)]) == 0
    text = capsys.readouterr().out
    assert "targets (and the NVIDIA driver their code needs): sm_80 (CUDA 12.2+), sm_90a (CUDA 12.2+)" in text
    assert "add     " in text and "n_elements (pow2)" in text and "sm_80:24 sm_90a:24" in text
    assert "  add DDDD: x_ptr=D y_ptr=D out_ptr=D n_elements=D\n  add DDD_: x_ptr=D y_ptr=D out_ptr=D\n" in text
    assert "  add _DDD: y_ptr=D out_ptr=D n_elements=D\n" in text and "  add ____: nothing assumed\n" in text


def test_inspect_refuses_other_wheels(tmp_path, capsys):
    other = tmp_path / "x-1-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("x/__init__.py", "")
    assert cli.main(["inspect", str(other)]) == 6
    assert "has no manifest.json: it was not built by aotpack" in capsys.readouterr().err


def test_mutation_is_read_off_the_code_and_checked_against_the_recipe(small_recipe, installed, tmp_path):
    manifest = json.loads((installed / "small_kernels" / "manifest.json").read_text())
    assert manifest["kernels"]["add"]["mutates"] == ["out_ptr"]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        small_recipe.read_text().replace("    autotune: true\n", "    autotune: true\n    mutates: [x_ptr]\n")
    )
    with pytest.raises(RecipeError) as info:
        build(wrong, tmp_path / "dist", jobs=2)
    assert str(info.value) == (
        f"{wrong}:5:3: kernels.add.mutates: the kernel writes out_ptr, which 'mutates' does not list; "
        "it lists x_ptr, which no store in the kernel reaches"
    )
    assert not (tmp_path / "dist").exists()


def test_a_variant_the_runtime_cannot_launch_fails_the_build(small_recipe, tmp_path, monkeypatch):
    """A compiled variant that needs what the runtime cannot provide (backends/triton/ `_needs`
    returns the reason) stops the build, naming the variant and the need, and writes nothing."""
    from aotpack.backends import Pruned
    from aotpack.pipeline import build as pipeline

    def compile_all(variants, compilers, **_):
        return [(v, Pruned(variant_id=v.id, reason="descriptor argument 1 needs an im2col tensor map, which "
                           "aotpack cannot encode", fatal=v.id.endswith("sm_90a/DDDD"))) for v in variants]  # fmt: skip

    monkeypatch.setattr(pipeline, "compile_all", compile_all)
    with pytest.raises(CompileError) as info:
        build(small_recipe, tmp_path / "dist", jobs=1, use_cache=False)
    message = str(info.value)
    assert message.startswith(f"4 variants compiled but cannot be launched by aotpack's runtime; change their "
                              f"configs or options in {small_recipe}:\n")  # fmt: skip
    assert "  add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD: descriptor argument 1 needs an im2col tensor map" in message
    assert not (tmp_path / "dist").exists()


def test_plan_into_a_closed_pipe_stops_quietly(small_recipe, tmp_path):
    """`aotpack plan recipe | head -1`: the reader leaves early; no traceback, exit 0. The grid is
    made large enough (about a megabyte of ids) that writing surely outlasts the pipe's buffer."""
    blocks = ", ".join(str(256 * (i + 1)) for i in range(200))
    text = small_recipe.read_text().replace("{BLOCK: [256, 1024]}", f"{{BLOCK: [{blocks}]}}")
    text = text.replace("num_stages: [1]", "num_stages: [1, 2, 3, 4, 5, 6, 7, 8]")
    text = text.replace("{BLOCK: 1024}", "{BLOCK: 1024, num_stages: 1}").replace(
        "{BLOCK: 256}", "{BLOCK: 256, num_stages: 1}"
    )
    big = tmp_path / "big.yaml"
    big.write_text(text)
    proc = subprocess.Popen([sys.executable, "-m", "aotpack", "plan", str(big)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"add/")
    proc.stdout.close()  # like head after its first line
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err


def test_what_killed_builds_left_is_swept_by_the_next(small_recipe, small_wheel, tmp_path, monkeypatch):
    """A kill -9 during the final copy leaves .aotpack-tmp-<pid>-* in the output folder, and one during
    the build its work folder in the system's temporary folder: the next build removes those of
    processes that are gone, and keeps a live one's."""
    import os
    import tempfile

    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    (out / f".aotpack-tmp-{dead}-x1").write_bytes(b"half a wheel")
    (tmp / f"aotpack-{dead}-y2").mkdir()
    (tmp / f"aotpack-{dead}-y2" / "kernels.c").write_text("")
    live = out / f".aotpack-tmp-{os.getpid()}-z3"
    live.write_bytes(b"being copied")
    wheel = build(small_recipe, out, jobs=2).wheel
    assert wheel.read_bytes() == small_wheel.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == sorted([wheel.name, live.name])
    assert list(tmp.iterdir()) == []


def test_a_cuda_floor_no_toolchain_meets_fails_saying_what_to_install(small_recipe, tmp_path, capsys):
    from aotpack.errors import ToolNotFound

    out = tmp_path / "dist"
    assert cli.main(["build", str(small_recipe), "-o", str(out), "--cuda", "12.0"]) == ToolNotFound.exit_code
    err = capsys.readouterr().err
    assert "no ptxas builds sm_80 for drivers from CUDA 12.0 (found ptxas 12.2 (nvidia-cuda-nvcc-cu12 12.2." in err
    assert "pip install 'nvidia-cuda-nvcc-cu12==12.0.*'" in err and not out.exists()
    with pytest.raises(SystemExit):
        cli.main(["build", str(small_recipe), "--cuda", "twelve"])
    assert "'twelve' is not a CUDA version (such as 12.2)" in capsys.readouterr().err


def test_a_cuda_floor_builds_with_the_newest_ptxas_within_it(small_recipe, tmp_path):
    """--cuda names the oldest driver the wheel must load on: the newest ptxas no newer than it assembles the
    cubins (its code, the JIT's where it is the ptxas Triton runs), and the manifest says so; without it, the
    oldest (CUDA 12.2's from PyPI)."""
    from aotpack.backends.triton.compiler import ptxas_candidates, ptxas_for

    cuda12 = max(p.cuda for p in ptxas_candidates() if p.cuda < 13000)  # Triton's CUDA 12 ptxas
    assert cuda12 > 12020, "the installed Triton ships a CUDA 12 ptxas newer than 12.2"
    (newest,) = ptxas_for("sm_90a", ptxas_candidates(), cuda12)
    assert newest.cuda == cuda12
    floor = f"{cuda12 // 1000}.{cuda12 % 1000 // 10}"
    out = tmp_path / "dist"
    assert cli.main(["build", str(small_recipe), "-o", str(out), "--cuda", floor]) == 0
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        manifest = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith("/manifest.json"))))
    assert manifest["min_driver_cuda"] == {"sm_80": floor, "sm_90a": floor}
    assert manifest["toolchain"]["ptxas (sm_90a)"].startswith(f"{floor} (triton ")
    assert set(manifest["kernels"]["add"]["driver_floor_set_by"].values()) == {newest.label}
