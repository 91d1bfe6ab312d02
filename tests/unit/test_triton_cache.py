"""Triton cache entries a package holds (what ``aotpack record`` copied out of Triton's cache: Inductor's kernels,
keyed by Triton's cache key): the guard serves a lookup the program's cache misses from them, put into the
program's cache with the group rewritten to the paths there; a key no package holds stays refused."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("triton")
pytestmark = pytest.mark.unit

KEY = "A" * 52


@pytest.fixture
def guard(tmp_path, monkeypatch):
    from triton import knobs

    from aotpack.runtime import _aotpack_guard

    monkeypatch.setattr(knobs.cache, "dir", str(tmp_path / "cache"))
    for name in ("TRITON_CACHE_MANAGER", "AOTPACK_FALLBACK", "AOTPACK_CACHE_MANAGER", "AOTPACK_CACHE_ENTRIES"):
        monkeypatch.delenv(name, raising=False)
    entry = tmp_path / "package" / "_triton_cache" / KEY
    entry.mkdir(parents=True)
    (entry / "k.json").write_text('{"name": "k"}')
    (entry / "k.cubin").write_bytes(b"\x7fELF cubin")
    undo = _aotpack_guard.install("error", [str(entry.parent)])
    yield _aotpack_guard
    undo()


def test_a_packaged_entry_lands_in_the_program_s_cache_with_its_group_rewritten(guard, tmp_path):
    group = guard.Guard(KEY).get_group("k.json")
    where = tmp_path / "cache" / KEY
    assert group == {"k.cubin": str(where / "k.cubin"), "k.json": str(where / "k.json")}
    assert (where / "k.cubin").read_bytes() == b"\x7fELF cubin"
    assert json.loads((where / "__grp__k.json").read_text()) == {"child_paths": group}
    assert guard.Guard(KEY).get_group("k.json") == group  # the program's cache holds it now


def test_a_key_no_package_holds_is_refused_and_install_s_undo_gives_the_environment_back(guard):
    assert os.environ["AOTPACK_CACHE_ENTRIES"].endswith("_triton_cache")
    with pytest.raises(guard.CompilationRefused, match="Triton would compile other"):
        guard.Guard("B" * 52).get_group("other.json")
    with pytest.raises(guard.CompilationRefused):  # the key holds another kernel's name: not served
        guard.Guard(KEY).get_group("other.json")
    guard.install("jit")()
    assert os.environ["AOTPACK_CACHE_ENTRIES"].endswith("_triton_cache")  # an undo restores what was there
