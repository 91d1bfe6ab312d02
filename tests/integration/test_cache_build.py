"""The build cache end to end: no-op rebuilds, partial rebuilds, a build killed midway, and a failure
cached by one recipe reported by another."""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aotpack import build
from aotpack.backends.cuda.compiler import find_nvcc
from aotpack.errors import CompileError, ToolNotFound
from aotpack.pipeline import cache

ROOT = Path(__file__).resolve().parents[2]


def project(tmp_path: Path, small_recipe: Path) -> Path:
    """A copy of the small recipe with its kernel beside it (so the test may edit the source)."""
    folder = tmp_path / "proj"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "add.py", folder / "add.py")
    (folder / "r.yaml").write_text(small_recipe.read_text().replace(f"{ROOT / 'examples'}/add.py", "add.py"))
    return folder / "r.yaml"


class Seen:
    """A build's progress: whether each variant came from the cache."""

    def __init__(self, seen: list[bool]) -> None:
        self.seen = seen

    def planned(self, variants) -> None:
        pass

    def __call__(self, variant, outcome, cached: bool) -> None:
        self.seen.append(cached)


def test_rebuilds_compile_only_what_changed(tmp_path, small_recipe):
    recipe = project(tmp_path, small_recipe)
    seen: list[bool] = []
    first = build(recipe, tmp_path / "d1", jobs=2, cache_dir=tmp_path / "c", progress=Seen(seen))
    assert not first.cached and seen == [False] * 48
    again = build(recipe, tmp_path / "d2", jobs=2, cache_dir=tmp_path / "c")
    assert again.cached and again.variants == 48
    assert again.wheel.read_bytes() == first.wheel.read_bytes()
    (recipe.parent / "helpers.py").write_text("# a helper module beside the kernel\n")
    seen.clear()
    third = build(recipe, tmp_path / "d3", jobs=2, cache_dir=tmp_path / "c", progress=Seen(seen))
    assert not third.cached and seen == [False] * 48, "a changed helper module invalidates the kernel"
    text = recipe.read_text().replace("    dispatch:\n", "    dispatch:\n      - {key: [64], config: {BLOCK: 1024}}\n")
    recipe.write_text(text)
    seen.clear()
    fourth = build(recipe, tmp_path / "d4", jobs=2, cache_dir=tmp_path / "c", progress=Seen(seen))
    assert not fourth.cached and seen == [True] * 48, "a new dispatch row changes the wheel, not the cubins"


def test_a_killed_build_leaves_no_partial_wheel_and_no_corrupt_entry(tmp_path, small_recipe):
    recipe = project(tmp_path, small_recipe)
    text = recipe.read_text().replace("BLOCK: [256, 1024]", "BLOCK: [128, 256, 512, 1024]")
    text = text.replace("num_warps: [4]", "num_warps: [2, 4]").replace("{BLOCK: 1024}", "{BLOCK: 1024, num_warps: 4}")
    recipe.write_text(text.replace("{BLOCK: 256}", "{BLOCK: 256, num_warps: 4}"))  # 64 variants
    out, store = tmp_path / "dist", tmp_path / "cache"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")}  # cold: the build takes a while
    cmd = [sys.executable, "-m", "aotpack", "build", str(recipe), "-o", str(out), "--cache-dir", str(store), "-j", "2"]
    kept = 0
    for _ in range(2):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while (
            len(list(store.rglob("*" + cache.VARIANT_SUFFIX))) < kept + 4
            and time.monotonic() < deadline
            and proc.poll() is None
        ):
            time.sleep(0.02)  # kill it in the middle of compiling
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL, "the build should still have been running"
        assert not list(out.glob("*.whl"))
        entries = list(store.rglob("*" + cache.VARIANT_SUFFIX))
        for entry in entries:
            cache.decode(entry.read_bytes())  # every entry on disk is whole
        assert len(entries) >= kept, "what a killed build compiled stays cached"
        kept = len(entries)
    assert 0 < kept < 64
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1 and hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "no temporary files in the output folder"


def test_a_changed_tuning_hook_rebuilds_the_wheel(tmp_path, small_recipe):
    """The manifest records every input file's sha256, so the cached wheel must not outlive one,
    even one no kernel compiles (a tuning hook in a folder of its own)."""
    recipe = project(tmp_path, small_recipe)
    hooks = recipe.parent / "tuning" / "hooks.py"
    hooks.parent.mkdir()
    hooks.write_text("def inputs(key, types):\n    return (), ()\n")
    text = recipe.read_text().replace(
        "    autotune: true\n", "    autotune: true\n    tune: {inputs: tuning/hooks.py:inputs, keys: [[4096]]}\n"
    )
    recipe.write_text(text)
    first = build(recipe, tmp_path / "d1", jobs=2, cache_dir=tmp_path / "c")
    hooks.write_text("def inputs(key, types):\n    return (), (0,)\n")
    seen: list[bool] = []
    again = build(recipe, tmp_path / "d2", jobs=2, cache_dir=tmp_path / "c", progress=Seen(seen))
    assert not first.cached and not again.cached
    assert seen == [True] * 48, "the cubins did not change"
    assert again.wheel.read_bytes() != first.wheel.read_bytes()


def _has_nvcc() -> bool:
    try:
        find_nvcc()
    except ToolNotFound:
        return False
    return True


BROKEN_KERNEL = "template <typename T> __global__ void scale(T *x, int n) { x[0] = ; }\n"
CUDA_RECIPE = """\
kernels:
  scale:
    cuda: {source}
    entry: "scale<{{T}}>"
    types: {{T: [fp32]}}
    args: {{x: "*T", n: i32}}
    grid: [n]
    block: [128]
    gencode: [sm_80]
"""


@pytest.mark.skipif(not _has_nvcc(), reason="needs nvcc")
def test_a_cached_compile_failure_names_the_recipe_being_built(tmp_path):
    """A real nvcc failure, cached by the first of two recipes (at different paths, the kernel at
    different lines) that share the variant: the second's error names its own recipe and line."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cu").write_text(BROKEN_KERNEL)
    first, second = tmp_path / "one" / "r.yaml", tmp_path / "two" / "nested" / "kit.yaml"
    first.parent.mkdir()
    second.parent.mkdir(parents=True)
    first.write_text("package: one\nversion: '1'\n" + CUDA_RECIPE.format(source="../kernels/scale.cu"))
    second.write_text("# another project\npackage: two\nversion: '2'\n\n\n"
                      + CUDA_RECIPE.format(source="../../kernels/scale.cu"))  # fmt: skip
    seen: list[bool] = []
    with pytest.raises(CompileError, match="no variant compiled") as info:
        build(first, tmp_path / "d1", jobs=1, cache_dir=tmp_path / "c", progress=Seen(seen))
    assert seen == [False] and str(info.value).startswith(f"{first}:4:3: kernel 'scale': no variant compiled:\n")
    seen.clear()
    with pytest.raises(CompileError, match="no variant compiled") as info:
        build(second, tmp_path / "d2", jobs=1, cache_dir=tmp_path / "c", progress=Seen(seen))
    message = str(info.value)
    assert seen == [True], "the failure comes from the cache"
    assert message.startswith(f"{second}:7:3: kernel 'scale': no variant compiled:\n  scale/T=fp32,base/sm_80: ")
    assert f"nvcc failed: {tmp_path}/kernels/scale.cu(1): error: expected an expression" in message
    assert str(first.parent) not in message and ":4:3" not in message
