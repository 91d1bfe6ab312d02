"""Cache keys: stable for the same inputs, new for anything that changes the output."""

import dataclasses
import os
import shutil
from pathlib import Path

from aotpack import cache, plan, recipe
from aotpack.compilers import Pruned

from ..shared import GOOD


def variants(folder: Path, text: str = GOOD) -> tuple[plan.Variant, ...]:
    return plan.plan_variants(recipe.parse(text, folder / "r.yaml"))


def key(v: plan.Variant, toolchain=None, portable=True) -> str:
    return cache.variant_key(v, toolchain or {"triton": "3.9.0"}, cache.source_digest(v.kernel, portable))


def test_keys_are_stable_and_distinct(kernel_dir):
    first, second = variants(kernel_dir), variants(kernel_dir)
    assert [key(v) for v in first] == [key(v) for v in second]
    assert len({key(v) for v in first}) == len(first)


def test_keys_change_with_what_changes_the_output(kernel_dir):
    v = variants(kernel_dir)[0]
    base = key(v)
    assert key(v, {"triton": "3.9.1"}) != base
    (kernel_dir / "helpers.py").write_text("SCALE = 2\n")  # a helper module beside the kernel
    assert key(v) != base
    hinted_off = variants(kernel_dir, GOOD.replace('"*T:16"', '"*T"').replace('"i32:16"', '"i32"'))[0]
    assert key(hinted_off) != key(v)
    (kernel_dir / "notes.txt").write_text("not source\n")
    assert key(variants(kernel_dir)[0]) == key(v)


def test_the_same_triton_sources_in_another_folder_have_the_same_keys(kernel_dir, tmp_path):
    """Another checkout (or a CI runner's workspace) hits the cache: the kernel's files are named by
    their place beside it, unless the code can hold their paths (line info, CUDA)."""
    other = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(kernel_dir, other)
    here, there = variants(kernel_dir)[0], variants(other)[0]
    assert key(here) == key(there)
    assert key(here, portable=False) != key(there, portable=False)
    (other / "helpers.py").write_text("SCALE = 2\n")  # the same names with other contents: another key
    assert key(here) != key(variants(other)[0])


def test_entries_round_trip_and_damage_is_a_miss(tmp_path):
    store = cache.Cache(tmp_path)
    outcome = Pruned(variant_id="k/base/sm_80", reason="out of registers")
    store.store("ab" * 32, outcome)
    assert store.load("ab" * 32) == outcome
    path = tmp_path / "variants" / "ab" / f"{'ab' * 32}.pickle"
    path.write_bytes(path.read_bytes()[:5])
    assert store.load("ab" * 32) is None and not path.exists()
    assert store.load("cd" * 32) is None
    assert not list(tmp_path.rglob(".tmp-*"))


def test_wheel_entries(tmp_path):
    store = cache.Cache(tmp_path / "c")
    wheel = tmp_path / "k-1-cp39-abi3-linux_x86_64.whl"
    wheel.write_bytes(b"zip")
    key = store.wheel_key([("r.yaml", "ab" * 32), ("t.json", "cd" * 32)], ["k1", "k2"])
    assert store.wheel(key) is None
    store.store_wheel(key, wheel, {"variants": 2, "pruned": [dataclasses.asdict(Pruned(variant_id="v", reason="r"))]})
    hit = store.wheel(key)
    assert hit is not None
    found, info = hit
    assert found.read_bytes() == b"zip" and info["variants"] == 2
    assert store.wheel_key([("r.yaml", "ab" * 32), ("t.json", "cd" * 32)], ["k1", "k3"]) != key
    assert store.wheel_key([("r.yaml", "ab" * 32), ("t.json", "ef" * 32)], ["k1", "k2"]) != key
    copied = cache.copy_into(found, tmp_path / "out")
    assert copied.read_bytes() == b"zip" and not list((tmp_path / "out").glob(".aotpack-tmp-*"))


def test_a_killed_writer_leaves_nothing_the_next_write_keeps(tmp_path):
    """Entries are written under a temporary name that carries the writer's PID; a write into the
    same folder removes those of writers that are gone, never a live one's."""
    store = cache.Cache(tmp_path / "c")
    folder = tmp_path / "c" / "wheels" / "k"
    folder.mkdir(parents=True)
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    (folder / f".tmp-{dead}-abc").write_bytes(b"half")
    live = folder / f".tmp-{os.getpid()}-def"
    live.write_bytes(b"being written")
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"wheel")
    store.store_wheel("k", wheel, {"variants": 1, "pruned": []})
    assert sorted(p.name for p in folder.iterdir()) == sorted([live.name, "w.whl", "build.json"])


def test_variants_depend_on_the_compile_stages_and_wheels_on_everything():
    root = Path(cache.__file__).parent
    everything = {p.relative_to(root).as_posix() for p in cache.own_files(compile_stage=False)}
    compiling = {p.relative_to(root).as_posix() for p in cache.own_files(compile_stage=True)}
    assert {"runtime/aot_runtime.c", "codegen/c.py", "native.py"} <= everything
    assert {"compilers/triton.py", "plan.py", "recipe.py"} <= compiling
    assert not any(p.startswith(("runtime/", "codegen/")) or p in {"native.py", "wheel.py"} for p in compiling)
    assert cache.aotpack_digest(compile_stage=True) != cache.aotpack_digest()
