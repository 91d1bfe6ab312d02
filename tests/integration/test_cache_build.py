"""The build cache end to end: no-op rebuilds, partial rebuilds, and a build killed midway."""

import hashlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from aotpack import build

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
        while len(list(store.rglob("*.pickle"))) < kept + 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)  # kill it in the middle of compiling
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL, "the build should still have been running"
        assert not list(out.glob("*.whl"))
        entries = list(store.rglob("*.pickle"))
        for entry in entries:
            pickle.loads(entry.read_bytes())  # every entry on disk is whole
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
