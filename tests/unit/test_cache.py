"""Cache keys: stable for the same inputs, new for anything that changes the output."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from aotpack import _temp
from aotpack.backends import Artifact, DriverFloor, LaunchNeeds, Pruned, TmaLayout
from aotpack.backends import recipes as recipe
from aotpack.backends.triton import toolchain
from aotpack.commands import cli
from aotpack.errors import CompileError, UsageError
from aotpack.pipeline import build as pipeline
from aotpack.pipeline import cache
from aotpack.plan import variants as plan

from ..shared import GOOD, put_in_the_way


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
    path = tmp_path / "variants" / "ab" / f"{'ab' * 32}{cache.VARIANT_SUFFIX}"
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
    folder = tmp_path / "c" / "wheels" / ("ab" * 32)
    folder.mkdir(parents=True)
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    (folder / f".tmp-{dead}-abc").write_bytes(b"half")
    live = folder / f".tmp-{os.getpid()}-def"
    live.write_bytes(b"being written")
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"wheel")
    store.store_wheel("ab" * 32, wheel, {"variants": 1, "pruned": []})
    assert sorted(p.name for p in folder.iterdir()) == sorted([live.name, "w.whl", "build.json"])


def test_variants_depend_on_the_compile_stages_and_wheels_on_everything():
    root = Path(cache.__file__).parent.parent
    everything = {p.relative_to(root).as_posix() for p in cache.own_files(compile_stage=False)}
    compiling = {p.relative_to(root).as_posix() for p in cache.own_files(compile_stage=True)}
    assert {"runtime/aot_runtime.c", "codegen/c.py", "pipeline/native.py"} <= everything
    assert {"backends/triton/compiler.py", "plan/variants.py", "recipe/read.py"} <= compiling
    assert not any(
        p.startswith(("runtime/", "codegen/")) or p in {"pipeline/native.py", "pipeline/wheel.py"} for p in compiling
    )
    assert cache.aotpack_digest(compile_stage=True) != cache.aotpack_digest()


def test_sizes_are_read_as_people_write_them(monkeypatch):
    """(Every form refused, and the same refusal by each command: tests/unit/test_values.py.)"""
    assert [cache.parse_size(t) for t in ("500M", "10G", "1.5k", "2GB", "4096", "0")] == [
        500 * 2**20, 10 * 2**30, 1536, 2 * 2**30, 4096, 0,
    ]  # fmt: skip
    for bad in ("", "ten", "-1G", "10Q", "1e30T", "nan"):
        with pytest.raises(ValueError, match=r"^expected a cache size: bytes in ASCII digits"):
            cache.parse_size(bad)
    monkeypatch.setenv("AOTPACK_CACHE_SIZE", "lots")
    with pytest.raises(UsageError, match=r"^\$AOTPACK_CACHE_SIZE: expected a cache size: .*; got 'lots'; set it so, or "
                       "unset it for 10G$"):  # fmt: skip
        cache.size_limit()
    for unset in ("", None):
        monkeypatch.setenv("AOTPACK_CACHE_SIZE", "") if unset == "" else monkeypatch.delenv("AOTPACK_CACHE_SIZE")
        assert cache.size_limit() == 10 * 2**30


def filled(root: Path, count: int) -> cache.Cache:
    """A cache of `count` variant entries, entry i last used at time 1000 + i."""
    store = cache.Cache(root)
    for i in range(count):
        key = f"{i:02x}" * 32
        store.store(key, Pruned(variant_id=f"k/{i}/sm_80", reason="x" * 1000))
        os.utime(root / "variants" / key[:2] / f"{key}{cache.VARIANT_SUFFIX}", (1000 + i, 1000 + i))
    return store


def test_trimming_drops_the_least_recently_used_first_and_a_hit_counts_as_use(tmp_path):
    store = filled(tmp_path, 6)
    size = store.entries()[0].bytes
    assert store.load(f"{0:02x}" * 32) is not None  # the oldest, used now
    trimmed = store.trim(3 * size)
    assert (len(trimmed.dropped), trimmed.freed, trimmed.failed) == (3, 3 * size, ())
    kept = sorted(e.path.name[:2] for e in store.entries())
    assert kept == ["00", "04", "05"]
    assert json.loads((tmp_path / "size.json").read_text())["bytes"] == 3 * size
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"wheel" * 100)
    store.store_wheel("ff" * 32, wheel, {"variants": 1})
    assert [e.path.name for e in store.entries() if e.path.is_dir()] == ["ff" * 32]  # a folder, one unit
    assert len(store.trim(0).dropped) == 4 and store.entries() == []


def test_a_build_walks_the_cache_only_when_it_may_be_over_its_bound(tmp_path, monkeypatch):
    """The last count plus what was stored since decides; a stale or missing count is redone."""
    store = filled(tmp_path, 4)
    size = store.entries()[0].bytes
    assert store.keep_within(10 * size) == (0, 0)  # no count yet: counted
    walks: list[cache.Cache] = []

    def walk(self: cache.Cache) -> list[cache.Entry]:
        walks.append(self)
        return []

    monkeypatch.setattr(cache.Cache, "entries", walk)
    store.store("aa" * 32, Pruned(variant_id="k/a/sm_80", reason="x" * 1000))
    assert store.keep_within(10 * size) == (0, 0) and not walks  # 5 entries of 10: no walk
    assert json.loads((tmp_path / "size.json").read_text())["bytes"] == 5 * size
    store.store("bb" * 32, Pruned(variant_id="k/b/sm_80", reason="x" * 1000))
    store.keep_within(5 * size)
    assert walks == [store]  # may be over: walked
    monkeypatch.undo()
    stamp = json.loads((tmp_path / "size.json").read_text())
    (tmp_path / "size.json").write_text(json.dumps({**stamp, "counted": time.time() - 2 * 86400}))
    assert store.keep_within(5 * size) == (1, size)  # a day-old count is redone (and the walk trims)


def test_the_cache_command_shows_trims_and_clears(tmp_path, capsys):
    filled(tmp_path, 3)
    tool = tmp_path / "toolchains" / "triton-3.8.0"  # a Triton release kept for --triton (toolchain.py)
    (tool / "triton").mkdir(parents=True)
    (tool / toolchain.STAMP).write_text(json.dumps({"version": "3.8.0", "bytes": 5000}))
    unfinished = tmp_path / "toolchains" / ".installing-x"  # an install killed halfway: no stamp, not listed
    unfinished.mkdir()
    os.utime(tool / toolchain.STAMP, (1, 1))  # used longest ago: the first a trim drops
    assert cli.main(["cache", "--cache-dir", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"{tmp_path}: 3 compiled variants, 0 wheels and 1 Triton toolchain (3.8.0), ")
    assert "($AOTPACK_CACHE_SIZE)" in shown
    assert cli.main(["cache", "--cache-dir", str(tmp_path), "--trim", "4000"]) == 0
    assert capsys.readouterr().out.startswith("dropped 1 entry (0.0 MB); ") and not tool.exists()
    assert cli.main(["cache", "--cache-dir", str(tmp_path), "--clear"]) == 0
    assert capsys.readouterr().out.startswith("dropped 3 entries (")
    assert cache.Cache(tmp_path).entries() == []
    with pytest.raises(SystemExit):
        cli.main(["cache", "--cache-dir", str(tmp_path), "--trim", "lots"])
    assert "argument --trim: expected a cache size: bytes in ASCII digits" in capsys.readouterr().err


FAILING_NVCC = """\
#!/bin/sh
case "$1" in
  --version) echo 'Cuda compilation tools, release 12.4, V12.4.131';;
  --list-gpu-code) echo 'sm_80 sm_90';;
  --list-gpu-arch) echo 'compute_80 compute_90';;
  *) echo "scale.cu(2): error: expected a ';'" >&2; exit 1;;
esac
"""
CUDA_KERNEL = """\
  scale:
    cuda: {source}
    entry: "scale<{{T}}>"
    types: {{T: [fp16]}}
    args: {{x: "*T", n: i32}}
    grid: [n]
    block: [128]
    gencode: [sm_80]
"""


class Cached:
    """A build's progress: whether each variant came from the cache."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def planned(self, variants) -> None:
        pass

    def __call__(self, variant, outcome, cached: bool) -> None:
        self.seen.append(cached)


def test_a_cached_failure_is_reported_at_the_recipe_being_built(tmp_path):
    """Two recipes at different paths, their kernel at different lines, build the same failing
    variant: the second takes the failure from the cache, and its messages name its own recipe's
    place, never the place of the recipe that compiled it first (issue 29)."""
    nvcc = tmp_path / "bin" / "nvcc"  # fails every compile, as a syntax error in the source would
    nvcc.parent.mkdir()
    nvcc.write_text(FAILING_NVCC)
    nvcc.chmod(0o755)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cu").write_text("template <typename T> __global__ void scale(T *x, int n) {}\n")
    first = tmp_path / "a" / "r.yaml"
    second = tmp_path / "b" / "deeper" / "other.yaml"
    first.parent.mkdir()
    second.parent.mkdir(parents=True)
    first.write_text("package: kit_a\nversion: '1'\nkernels:\n" + CUDA_KERNEL.format(source="../kernels/scale.cu"))
    second.write_text(
        "# the same kernel, built by another project\npackage: kit_b\nversion: '2'\nsummary: another\n\nkernels:\n"
        + CUDA_KERNEL.format(source="../../kernels/scale.cu")
    )
    options = {"jobs": 1, "cache_dir": tmp_path / "cache", "nvcc": str(nvcc)}
    failure = "scale/T=fp16,base/sm_80: nvcc failed: scale.cu(2): error: expected a ';'"
    compiled = Cached()
    with pytest.raises(CompileError) as info:
        pipeline.build(first, tmp_path / "d1", progress=compiled, **options)
    assert compiled.seen == [False]
    assert str(info.value) == f"{first}:4:3: kernel 'scale': no variant compiled:\n  {failure}"
    for strict, message in [
        (False, f"{second}:7:3: kernel 'scale': no variant compiled:\n  {failure}"),
        (True, f"1 variant failed to compile (--strict):\n  {second}:7:3: {failure}"),
    ]:
        cached = Cached()
        with pytest.raises(CompileError) as info:
            pipeline.build(second, tmp_path / "d2", progress=cached, strict=strict, **options)
        assert cached.seen == [True], "the failure comes from the cache"
        assert str(info.value) == message


def test_a_build_sweeps_what_killed_builds_and_their_compile_workers_left(kernel_dir, tmp_path, monkeypatch):
    """The next build removes a killed compile worker's private folder (a Triton cache, an nvcc
    scratch folder) and a killed build's work folder; a live process's, a folder of another name,
    and whatever a symlink named like aotpack's points at all stay (issue 29)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    left = [temp / f"{base}{dead}-x1y2" for base in pipeline.TEMP_NAMES]
    live = [temp / f"{base}{os.getpid()}-x1y2" for base in pipeline.TEMP_NAMES]
    for folder in [*left, *live]:
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "file").write_text("compiled")
    unrelated = temp / "aotpack-triton-cache-of-someone"  # aotpack's word, but no process in its name
    other = temp / "other-12345-tool"
    elsewhere = tmp_path / "elsewhere"
    for folder in (unrelated, other, elsewhere):
        folder.mkdir()
        (folder / "sentinel").write_text("keep")
    link = temp / f"aotpack-triton-{dead}-link"
    link.symlink_to(elsewhere, target_is_directory=True)
    (kernel_dir / "r.yaml").write_text(GOOD)
    with pytest.raises(UsageError, match="--only no-such-variant: no variant id matches"):
        pipeline.build(kernel_dir / "r.yaml", tmp_path / "dist", select=("no-such-variant",))
    assert not any(folder.exists() for folder in left)
    assert all((folder / "sub" / "file").read_text() == "compiled" for folder in live)
    assert (unrelated / "sentinel").exists() and (other / "sentinel").exists()
    assert link.is_symlink() and (elsewhere / "sentinel").read_text() == "keep"
    assert sorted(p.name for p in temp.iterdir()) == sorted(p.name for p in [*live, unrelated, other, link])


def _snapshot(folder: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every file, link and folder under ``folder`` (links not followed): its bytes, link target or kind, and mtime."""
    found: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        kind = os.readlink(path) if path.is_symlink() else "folder" if path.is_dir() else path.read_bytes()
        found[str(path.relative_to(folder))] = (kind, st.st_mtime_ns)
    return found


def _outside(tmp_path: Path) -> Path:
    """What links in the cache point at: cache-shaped folders and files that are not the cache's."""
    outside = tmp_path / "outside"
    for rel in ("shard/" + "cd" * 32 + ".pickle", "variants/ef/" + "ef" * 32 + ".pickle", "wheel/w.whl",
                "wheel/build.json", "wheels/k/w.whl", "tool/.aotpack-toolchain.json", "tool/triton/__init__.py",
                "toolchains/triton-3.7.0/.aotpack-toolchain.json", "big.whl", "stamp.json", "size.json"):  # fmt: skip
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        (outside / rel).write_bytes(b"not the cache's " * 1000)
    for stamp in ("tool/.aotpack-toolchain.json", "stamp.json", "toolchains/triton-3.7.0/.aotpack-toolchain.json"):
        (outside / stamp).write_text(json.dumps({"version": "3.8.1", "bytes": 10**9}))
    os.utime(outside / "wheel" / "build.json", (1, 1))
    return outside


def _linked_cache(root: Path, outside: Path) -> dict[str, Path]:
    """A cache holding a link in each place a folder or file of it can be; the real entries beside them."""
    filled(root, 2)
    links = {
        "variants/ab/" + "ab" * 32 + cache.VARIANT_SUFFIX: outside / "big.whl",  # a variant's file
        "variants/cd": outside / "shard",  # a shard
        "wheels/k1": outside / "wheel",  # a wheel's folder
        "toolchains/triton-3.8.1": outside / "tool",  # a toolchain
        "toolchains/triton-3.9.0/.aotpack-toolchain.json": outside / "stamp.json",  # a toolchain's stamp
        "size.json": outside / "size.json",
        "dangling": outside / "no-such-file",
    }
    (root / "toolchains" / "triton-3.9.0" / "triton").mkdir(parents=True)
    real_wheel = root / "wheels" / "k2"
    real_wheel.mkdir(parents=True)
    (real_wheel / "build.json").write_text('{"wheel": "w.whl"}')
    links["wheels/k2/w.whl"] = outside / "big.whl"  # a link inside a real wheel folder: removed with the folder
    for rel, target in links.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(target)
    return links


@pytest.mark.parametrize("command", [["--clear"], ["--trim", "0"], ["--trim", "1K"], []])
def test_cache_maintenance_removes_links_never_what_they_point_at(tmp_path, command, capsys):
    """`aotpack cache` lists a link in the cache as an entry of no bytes, and --clear or --trim removes the link
    itself: the files and folders it points at keep their bytes and times (and are never counted)."""
    outside = _outside(tmp_path)
    before = _snapshot(outside)
    root = tmp_path / "cache"
    links = _linked_cache(root, outside)
    listing = cache.Cache(root).entries()
    assert sorted(str(e.path.relative_to(root)) for e in listing if e.link) == sorted(set(links) - {"wheels/k2/w.whl"})
    assert all(e.bytes == 0 for e in listing if e.link)
    assert sum(e.bytes for e in listing) < 5000, "nothing outside is counted"
    assert toolchain.kept(root) == [], "a toolchain or stamp that is a link is none"
    assert cli.main(["cache", "--cache-dir", str(root), *command]) == 0
    out = capsys.readouterr().out
    if not command:
        assert out.startswith(f"{root}: 2 compiled variants, 1 wheel and 0 Triton toolchains, 7 links (not followed;")
    elif command[-1] == "1K":  # the oldest go until at most 1K is left: the entries of no bytes may stay
        assert sum(e.bytes for e in cache.Cache(root).entries()) <= 1024
    else:
        assert not any(os.path.lexists(root / rel) for rel in links if rel != "size.json"), out
        assert not (root / "wheels" / "k2").exists()
        assert not (root / "size.json").is_symlink(), "the count left is written in the link's place"
    assert _snapshot(outside) == before


@pytest.mark.parametrize("command", [["--clear"], ["--trim", "0"], []])
def test_the_cache_s_own_folders_as_links_are_removed_as_links(tmp_path, command, capsys):
    """variants/, wheels/ and toolchains/ each a link to a folder shaped like them: three entries of no bytes."""
    outside = _outside(tmp_path)
    before = _snapshot(outside)
    root = tmp_path / "cache"
    root.mkdir()
    (root / cache.MARKER).write_text(cache.MARKER_TEXT)  # a cache aotpack made, whose folders were made links since
    for name in ("variants", "wheels", "toolchains"):
        (root / name).symlink_to(outside / name)
    assert [(e.path.name, e.bytes, e.link) for e in sorted(cache.Cache(root).entries(), key=lambda e: e.path)] == [
        ("toolchains", 0, True), ("variants", 0, True), ("wheels", 0, True),
    ]  # fmt: skip
    assert toolchain.kept(root) == []
    assert cli.main(["cache", "--cache-dir", str(root), *command]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dropped 3 entries (0.0 MB); " if command else f"{root}: 0 compiled variants, 0 wheels and 0 "
                          "Triton toolchains, 3 links (not followed; --clear removes the links), 0.0 MB")  # fmt: skip
    assert sorted(p.name for p in root.iterdir()) == (
        [cache.MARKER, "size.json"] if command else [cache.MARKER, "toolchains", "variants", "wheels"]
    )
    assert _snapshot(outside) == before


def test_the_cache_folder_itself_may_be_a_link(tmp_path, capsys):
    real = tmp_path / "real"
    filled(real, 3)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert cache.Cache(link).root == real
    assert cli.main(["cache", "--cache-dir", str(link), "--clear"]) == 0
    assert capsys.readouterr().out.startswith(f"dropped 3 entries (0.0 MB); {real}: 0 compiled variants")
    assert link.is_symlink() and real.is_dir() and not list((real / "variants").rglob("*" + cache.VARIANT_SUFFIX))


def test_a_folder_swapped_for_a_link_after_the_listing_is_not_followed(tmp_path):
    """Between the listing and the removal a shard or wheel folder becomes a link to a folder holding the same
    names: the removal goes through no link (a variant's file in a linked shard stays, and is said; a wheel
    folder that became a link is the link, removed)."""
    store = filled(tmp_path / "cache", 2)
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"wheel")
    store.store_wheel("ff" * 32, wheel, {"variants": 1})
    listing = store.entries()
    outside = tmp_path / "outside"
    for entry in listing:
        parent = entry.path.parent if entry.path.is_file() else entry.path
        shutil.move(parent, outside / parent.name)  # the same names, elsewhere
        parent.symlink_to(outside / parent.name)
    before = _snapshot(outside)
    trimmed = store.trim(0, listing)
    assert [e.path.parent.name for e in trimmed.dropped] == ["wheels"] and len(trimmed.failed) == 2
    assert all(f.endswith("is no longer a folder: not followed") for f in trimmed.failed)
    assert _snapshot(outside) == before and not (tmp_path / "cache" / "wheels" / ("ff" * 32)).is_symlink()


@pytest.mark.parametrize("kind", ["file", "dev-null", "fifo", "dangling", "under-a-file", "loop"])
def test_a_cache_folder_that_is_not_one_is_refused(tmp_path, kind, capsys):
    where = tmp_path / "cache"
    message = {
        "file": f"the cache folder {where} is a file, not a folder; remove it, or give another with --cache-dir",
        "fifo": f"the cache folder {where} is a FIFO, not a folder; remove it, or give another with --cache-dir",
        "dev-null": "the cache folder /dev/null is a device, not a folder; remove it, or give another with --cache-dir",
        "dangling": f"the cache folder {where} is a link to {tmp_path / 'nothing'}, which does not exist; make that "
        "folder, remove the link, or give another with --cache-dir",
        "under-a-file": f"the cache folder {where}/sub cannot be used (Not a directory); give another with --cache-dir",
        "loop": f"the cache folder {where} cannot be used (",  # Python's words for a loop of links vary
    }[kind]
    put_in_the_way(where, "file" if kind == "under-a-file" else kind, tmp_path / "nothing")
    folder = {"dev-null": "/dev/null", "under-a-file": f"{where}/sub"}.get(kind, str(where))
    for extra in ([], ["--clear"], ["--trim", "0"]):
        assert cli.main(["cache", "--cache-dir", folder, *extra]) == 2
        err = capsys.readouterr().err
        assert err == f"aotpack: error: {message}\n" or (
            kind == "loop" and err.startswith(f"aotpack: error: {message}")
        )
    assert kind not in ("file", "under-a-file") or where.read_text() == "mine"


def test_a_missing_cache_folder_is_an_empty_cache(tmp_path, capsys):
    assert cli.main(["cache", "--cache-dir", str(tmp_path / "none"), "--clear"]) == 0
    assert capsys.readouterr().out.startswith(f"dropped 0 entries (0.0 MB); {tmp_path / 'none'}: 0 compiled variants")
    assert not (tmp_path / "none").exists()


@pytest.fixture
def open_tmp():
    """A folder every user can pass through (pytest's own is its owner's only), for commands run as nobody."""
    folder = Path(tempfile.mkdtemp())
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def as_nobody(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``aotpack argv`` run as the user nobody, who may read but not change what root made (we run as root);
    skipped where setpriv cannot switch users, or where nobody cannot import aotpack (a checkout or venv in a
    folder only its owner may enter, as ``mktemp -d`` makes)."""

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                               script], capture_output=True, text=True, check=False, cwd="/")  # fmt: skip

    probe = run("import aotpack.commands.cli")
    if probe.stderr.startswith("setpriv"):
        pytest.skip(f"cannot run as nobody: {probe.stderr}")
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot import aotpack from {sys.executable}: {probe.stderr.strip().splitlines()[-1:]}")
    return run(f"import sys; from aotpack.commands import cli; sys.exit(cli.main({argv!r}))")


def test_a_cache_that_cannot_be_cleared_says_so(open_tmp):
    """Run as another user: the cache is not theirs to change; nothing is claimed dropped."""
    filled(open_tmp / "cache", 2)
    done = as_nobody(["cache", "--cache-dir", str(open_tmp / "cache"), "--clear"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"aotpack: error: dropped 0 entries (0.0 MB); 2 could not be removed, such as {open_tmp}/cache/variants/"
    )
    assert done.stderr.endswith(
        f"{cache.VARIANT_SUFFIX}: Permission denied: make {open_tmp}/cache writable, or remove them yourself\n"
    )
    assert len(cache.Cache(open_tmp / "cache").entries()) == 2
    listed = as_nobody(["cache", "--cache-dir", str(open_tmp / "cache")])
    assert listed.returncode == 0 and listed.stdout.startswith(f"{open_tmp}/cache: 2 compiled variants")


def test_a_toolchain_stamp_is_written_whole(tmp_path, monkeypatch):
    """The stamp says a toolchain is finished: written by atomic_file, so a killed install leaves none."""
    written: list[Path] = []
    real = _temp.atomic_file

    def watched(path, *args, **kwargs):
        written.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(toolchain, "atomic_file", watched)
    house = tmp_path / "wheels"
    from ..shared import stand_in_wheel

    stand_in_wheel(house, "triton", "3.8.2")
    got = toolchain.ensure(toolchain.Request.parse("3.8"), tmp_path / "cache", house)
    assert [p.name for p in written] == [toolchain.STAMP] and (got.path / toolchain.STAMP).is_file()
    assert not list(got.path.glob(".aotpack-tmp-*"))


def _wheelhouse(root: Path) -> None:
    """A folder of the user's that is not aotpack's cache, holding what a clear would have removed."""
    for rel in ("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", "wheels/mine-1.0-py3-none-any.whl",
                f"variants/ab/{'ab' * 32}.pickle", f"wheels/{'cd' * 32}/build.json", "notes.txt"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"sentinel {rel}\n")
    (root / "link").symlink_to("wheels")


@pytest.mark.parametrize("command", [["--clear"], ["--trim", "0"], ["--trim", "1K"]])
def test_a_folder_aotpack_did_not_make_is_never_trimmed_or_cleared(tmp_path, command, capsys):
    """A wheelhouse given as --cache-dir keeps every file: refused, naming the folder and what to do."""
    root = tmp_path / "wheelhouse"
    _wheelhouse(root)
    before = _snapshot(root)
    assert cli.main(["cache", "--cache-dir", str(root), *command]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aotpack: error: the cache folder {root} is not one aotpack made: it has no CACHEDIR.TAG")
    assert "nothing in it was changed" in err and "--cache-dir" in err
    assert _snapshot(root) == before
    assert cli.main(["cache", "--cache-dir", str(root)]) == 0, "listing changes nothing and may show it"
    assert _snapshot(root) == before


def test_a_build_given_a_foreign_cache_is_refused_before_it_reads_writes_or_trims(tmp_path):
    root = tmp_path / "wheelhouse"
    _wheelhouse(root)
    before = _snapshot(root)
    store = cache.Cache(root)
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"PK")
    for act in (lambda: store.load("ab" * 32), lambda: store.wheel("cd" * 32), lambda: store.keep_within(0),
                lambda: store.store("ef" * 32, Pruned(variant_id="k/0/sm_80", reason="x")),
                lambda: store.store_wheel("ef" * 32, wheel, {})):  # fmt: skip
        with pytest.raises(UsageError, match="is not one aotpack made"):
            act()
    assert _snapshot(root) == before


@pytest.mark.parametrize("stranger", ["notes.txt", "wheels/mine.whl", "variants/ab/ab12.pickle", "variants/xyz",
                                      f"wheels/{'ab' * 32}/readme.md", "toolchains/triton-3.6.0/x.py", "link",
                                      "another-tool-tag"])  # fmt: skip
def test_an_old_cache_is_adopted_only_when_it_holds_nothing_else(tmp_path, stranger, capsys):
    """A cache made before the marker (aotpack's layout, no marker): adopted, marked and cleared; one thing it
    did not write in it (any place, a link, another tool's tag) and nothing is removed."""
    old = filled(tmp_path / "old", 3)
    (old.root / cache.MARKER).unlink()
    assert cache.foreign(old.root) is None
    assert cli.main(["cache", "--cache-dir", str(old.root), "--clear"]) == 0
    assert (old.root / cache.MARKER).read_text() == cache.MARKER_TEXT
    assert not list((old.root / "variants").rglob("*" + cache.VARIANT_SUFFIX))
    capsys.readouterr()

    other = filled(tmp_path / "other", 3)
    (other.root / cache.MARKER).unlink()
    path = other.root / stranger
    path.parent.mkdir(parents=True, exist_ok=True)
    if stranger == "link":
        path.symlink_to(other.root / "variants")
    elif stranger == "another-tool-tag":
        (other.root / cache.MARKER).write_text("Signature: 8a477f597d28d172789f06886806bc55\n# made by cargo\n")
    else:
        path.write_text("keep me")
    before = _snapshot(other.root)
    assert cli.main(["cache", "--cache-dir", str(other.root), "--clear"]) == 2
    assert "is not one aotpack made" in capsys.readouterr().err
    assert _snapshot(other.root) == before


def test_a_cache_aotpack_makes_is_marked(tmp_path):
    store = filled(tmp_path / "new", 1)
    assert (store.root / cache.MARKER).read_text() == cache.MARKER_TEXT
    (tmp_path / "empty").mkdir()
    assert cache.foreign(tmp_path / "empty") is None and cache.foreign(tmp_path / "none") is None


def _artifact() -> Artifact:
    return Artifact(variant_id="k/base/sm_90", image=b"\x7fELF" + bytes(range(256)) * 4, entry="k_0", shared=1024,
                    static_shared=0, num_warps=4, extra_pointer_params=2, metadata=(("ptxas", "12.2"), ("regs", "40")),
                    needs=LaunchNeeds(scratch=(64, 16), num_ctas=2, pdl=True,
                                      tma=(TmaLayout(box=(64, 32), swizzle=3, elem_type=6, elem_size=2),)),
                    writes=("y_ptr",), driver_floor=DriverFloor(cuda=12020, set_by="ptxas 12.2"))  # fmt: skip


def test_a_compiled_variant_is_stored_as_data_and_read_back_equal(tmp_path):
    for outcome in (_artifact(), Pruned(variant_id="k/x/sm_80", reason="out of resources", fatal=True)):
        data = cache.encode(outcome)
        assert data.startswith(cache.MAGIC) and cache.decode(data) == outcome
        store = cache.Cache(tmp_path)
        store.store("ab" * 32, outcome)
        assert store.load("ab" * 32) == outcome


def test_a_cache_entry_is_never_code_whoever_wrote_it(tmp_path):
    """A pickle in a variant's place (the cache's earlier format, or someone who can write the folder) is not
    unpickled: it is a miss, and its code never runs."""
    import pickle

    sentinel = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(sentinel), "w"))

    store = cache.Cache(tmp_path / "c")
    store.store("ab" * 32, Pruned(variant_id="k", reason="x"))
    path = tmp_path / "c" / "variants" / "ab" / f"{'ab' * 32}{cache.VARIANT_SUFFIX}"
    path.write_bytes(pickle.dumps(Payload()))
    assert store.load("ab" * 32) is None and not sentinel.exists() and not path.exists()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda h: h["Artifact"].update(num_warps="4"), "int"),  # another type
        (lambda h: h["Artifact"].update(num_warps=True), "int"),  # bool is not int
        (lambda h: h["Artifact"].update(extra=1), "Artifact"),  # a field it does not have
        (lambda h: h["Artifact"]["needs"].update(scratch=[1, 2, 3]), "tuple"),  # a tuple of another length
        (lambda h: h["Artifact"]["needs"]["tma"][0].update(box="64"), "tuple"),
        (lambda h: h["Artifact"].update(driver_floor={"cuda": 12020}), "DriverFloor"),  # a field missing
        (lambda h: h.update(Other={}), "damaged"),  # two kinds
        (lambda h: h.update(Pruned=h.pop("Artifact")), "Pruned"),  # a pruned variant with an image
    ],
)
def test_a_field_of_another_shape_is_a_miss_not_an_artifact(change, why):
    data = cache.encode(_artifact())
    start = len(cache.MAGIC) + 8
    end = start + int.from_bytes(data[len(cache.MAGIC) : start], "little")
    header = json.loads(data[start:end])
    change(header)
    text = json.dumps(header).encode()
    with pytest.raises(ValueError, match=why):
        cache.decode(cache.MAGIC + len(text).to_bytes(8, "little") + text + data[end:])
