"""Several aotpack packages active in one process (a kernel library's wheel beside a model's), each with its own copy
of the runtime: one guard serves both packages' Triton cache entries, the strictest fallback holds while a package
asks it, deactivating one leaves the other's part in place, and deactivating the last gives everything back. Before,
the second guard stood behind the first, which stood behind itself: the next lookup raised RecursionError."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aotpack import runtime

pytestmark = pytest.mark.unit

PROGRAM = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    import pkga._aotpack_activate as a, pkgb._aotpack_activate as b
    from triton import knobs
    from triton.runtime.cache import FileCacheManager
    from triton.runtime.jit import JITFunction

    original, out = JITFunction.run, {}

    def lookup(key, name):
        try:
            return "served" if (knobs.cache.manager_class or FileCacheManager)(key).get_group(name) else "missed"
        except Exception as exc:
            return type(exc).__name__

    def now():
        return {"manager": os.environ.get("TRITON_CACHE_MANAGER"), "fallback": os.environ.get("AOTPACK_FALLBACK"),
                "entries": [os.path.basename(os.path.dirname(f)) for f in
                            filter(None, os.environ.get("AOTPACK_CACHE_ENTRIES", "").split(os.pathsep))],
                "a": lookup("A" * 52, "ka.json"), "b": lookup(sys.argv[4] * 52, "kb.json"),
                "other": lookup("C" * 52, "c.json")}

    a.activate([], "jit", LookupError, [sys.argv[2]], [], package="pkga")
    b.activate([], "error", KeyError, [sys.argv[3]], [], package="pkgb")
    b.activate([], "error", KeyError, [sys.argv[3]], [], package="pkgb")  # (twice: counted)
    out["both"] = now()
    b.deactivate("pkgb")
    out["b_once"] = now()
    b.deactivate("pkgb")
    sys.argv[4] = "D"
    out["a_alone"] = now()
    sys.argv[4] = "E"  # (a key of pkgb's not looked up yet: the one looked up is in the program's cache now)
    a.deactivate("pkga")
    out["none"] = {**now(), "run": JITFunction.run is original, "host": hasattr(sys, "_aotpack_activation")}
    print(json.dumps(out))
""")


def package(tmp_path: Path, name: str, keys: str, kernel: str) -> tuple[Path, Path]:
    """A package as a wheel lays it out: its copy of the runtime's Python, and the Triton cache entries it holds (of
    ``kernel``, one under each key: a letter 52 times)."""
    folder = tmp_path / "site" / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for file in runtime.PYTHON_FILES:
        shutil.copy(Path(runtime.__file__).parent / file, folder / file)
    for key in keys:
        entry = folder / "_triton_cache" / (key * 52)
        entry.mkdir(parents=True)
        (entry / f"{kernel}.json").write_text(json.dumps({"name": kernel}))
        (entry / f"{kernel}.cubin").write_bytes(b"\x7fELF")
    return folder, folder / "_triton_cache"


def test_two_packages_share_one_guard_and_take_back_their_own_parts(tmp_path):
    pytest.importorskip("triton")
    _, cache_a = package(tmp_path, "pkga", "A", "ka")
    _, cache_b = package(tmp_path, "pkgb", "BDE", "kb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "AOTPACK_"))}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "site"), str(cache_a), str(cache_b), "B"],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    guard = "pkga._aotpack_guard:Guard"  # the copy that activated first guards for both
    assert out["both"] == {"manager": guard, "fallback": "error", "entries": ["pkga", "pkgb"], "a": "served",
                           "b": "served", "other": "CompilationRefused"}  # fmt: skip
    assert out["b_once"] == out["both"]  # activated twice, deactivated once: still active
    assert out["a_alone"] == {"manager": guard, "fallback": "jit", "entries": ["pkga"], "a": "served",
                              "b": "missed", "other": "missed"}  # fmt: skip
    # (pkga's entry stays in the program's cache, where it was put when served, under the key it was recorded for)
    assert out["none"] == {"manager": None, "fallback": None, "entries": [], "a": "served", "b": "missed",
                           "other": "missed", "run": True, "host": False}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "fallback", "becomes", "said"),
    [
        ("1", "error", "jit", "AOTPACK_REHEARSAL=1 (aotpack rehearse): activate(fallback='error') lists each"),
        ("1", "jit", "jit", None),
        ("yes", "error", "error", "AOTPACK_REHEARSAL='yes' is ignored: aotpack rehearse sets it to 1"),
        ("0", "error", "error", "AOTPACK_REHEARSAL='0' is ignored"),
    ],
)
def test_a_rehearsal_turns_error_into_jit_only_as_rehearse_sets_it_and_says_so(monkeypatch, value, fallback, becomes,
                                                                                said):  # fmt: skip
    """AOTPACK_REHEARSAL left set where a program is served would turn fallback="error" into listing compilations:
    only the value aotpack rehearse sets counts, and either way a warning names the variable."""
    import warnings

    from aotpack.runtime import _aotpack_activate

    monkeypatch.setenv("AOTPACK_REHEARSAL", value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _aotpack_activate._rehearsed(fallback) == becomes
    assert [str(w.message)[: len(said)] for w in caught] == ([said] if said else [])
