"""torch.compile's kernels, recorded and served: Inductor compiles by calling ``triton.compile(ASTSource(...))``
itself, mostly in compile-worker processes. ``aotpack record`` copies the Triton cache entry of each such kernel
(keyed by Triton's cache key), ``aotpack build`` ships them, and the wheel's ``activate()`` serves them as cache
hits: the same calls in a fresh process with an empty Triton cache compile nothing. Here plain ``triton.compile``
calls stand in for Inductor's, in the program and in a process it starts, on this GPU-less host (Triton compiles
for a target without a device)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from aotpack import build, manifest

from .helpers import install_wheel

triton = pytest.importorskip("triton")
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def first(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def second(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def compile_it(fn, block):  # as Inductor's CachingAutotuner._precompile_config does
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    return triton.compile(ASTSource(fn, signature, {(3,): block}), target=GPUTarget("cuda", 90, 32))
"""

PROGRAM = """
import subprocess, sys
import cached_kernels as k
print(k.compile_it(k.first, 64).hash)
worker = "import cached_kernels as k; print(k.compile_it(k.second, 128).hash)"  # a compile worker
print(subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True, check=True).stdout.strip())
if sys.argv[1:] == ["more"]:
    k.compile_it(k.first, 256)
"""

SERVE = """
import os, sys
import served, cached_kernels as k
from served._aotpack_guard import CompilationRefused
served.activate(fallback="error")
print(k.compile_it(k.first, 64).hash)
worker = "import cached_kernels as k; print(k.compile_it(k.second, 128).hash)"
import subprocess
print(subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True, check=True).stdout.strip())
other_ptxas = {**os.environ, **{f"TRITON_{tool}_PATH": os.environ[f"OTHER_{tool}"] for tool in ("PTXAS", "PTXAS_BLACKWELL")}}
other = worker.replace("print(k.compile_it(k.second, 128).hash)", "c = k.compile_it(k.second, 128); import hashlib; "
                       "print(c.hash, hashlib.sha256(c.asm['cubin']).hexdigest())")
print(subprocess.run([sys.executable, "-c", other], env=other_ptxas, capture_output=True, text=True,
                     check=True).stdout.strip())  # a compile worker whose ptxas is another (torch's)
try:
    k.compile_it(k.first, 32)  # not recorded
    print("compiled")
except CompilationRefused as exc:
    print("refused", "first" in str(exc))
print(sorted(os.listdir(os.environ["TRITON_CACHE_DIR"])))
"""


def test_kernels_compiled_outside_the_jit_are_recorded_shipped_and_served_with_no_compilation(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "cached_kernels.py").write_text(KERNELS)
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "code")]), "HOME": str(tmp_path),
           "TRITON_CACHE_DIR": str(tmp_path / "recorded-cache")}  # fmt: skip
    for name in ("TRITON_CACHE_MANAGER", "AOTPACK_FALLBACK", "AOTPACK_CACHE_MANAGER", "AOTPACK_CACHE_ENTRIES"):
        env.pop(name, None)
    recipe = tmp_path / "r" / "recipe.yaml"
    recipe.parent.mkdir()
    cmd = [sys.executable, "-m", "aotpack", "record", "-o", str(recipe), "--package", "served", "--", "python",
           str(tmp_path / "prog.py")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 compilations of 0 kernels, 0 launches, 2 Triton cache entries" in done.stdout
    hashes = [line for line in done.stdout.splitlines() if len(line) == 64]
    assert len(hashes) == 2
    data = yaml.safe_load(recipe.read_text())
    assert data["triton_cache"] == "triton-cache" and data["kernels"] == {}
    keys = sorted(p.name for p in (recipe.parent / "triton-cache").iterdir())
    assert len(keys) == 2
    assert all((recipe.parent / "triton-cache" / key / "first.cubin").is_file() or
               (recipe.parent / "triton-cache" / key / "second.cubin").is_file() for key in keys)  # fmt: skip
    # recorded again with a warm Triton cache (hits count) and one kernel more: merged, the entries added
    again = subprocess.run([*cmd, "more"], capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    now = sorted(p.name for p in (recipe.parent / "triton-cache").iterdir())
    assert len(now) == 3 and set(keys) < set(now)
    assert yaml.safe_load(recipe.read_text()) == data
    plan = subprocess.run([sys.executable, "-m", "aotpack", "plan", str(recipe)], capture_output=True, text=True,
                          env=env)  # fmt: skip
    assert (
        f"triton_cache: 3 Triton cache entries shipped as recorded (3 kernels compiled by Triton {triton.__version__} "
        "for cuda:90)" in plan.stderr
    ), plan.stderr

    wheel = build(recipe, tmp_path / "dist", jobs=1).wheel
    listed = manifest.read_wheel(wheel)
    jsonschema.validate(listed, manifest.json_schema())
    assert [(e["key"], e["triton"], e["target"]) for e in listed["triton_cache"]] == [
        (key, triton.__version__, "cuda:90") for key in now
    ]
    rebuilt = build(recipe, tmp_path / "dist2", jobs=1, use_cache=False).wheel
    assert rebuilt.read_bytes() == wheel.read_bytes()  # reproducible
    inspected = subprocess.run([sys.executable, "-m", "aotpack", "inspect", str(wheel)], capture_output=True,
                               text=True, env=env)  # fmt: skip
    assert "Triton cache entries: 3 (3 cuda:90)" in inspected.stdout, inspected.stderr
    site = install_wheel(wheel, tmp_path / "site")
    assert sorted(p.name for p in (site / "served" / "_triton_cache").iterdir()) == now
    serve_env = {**env, "PYTHONPATH": os.pathsep.join([str(site), str(tmp_path / "code")]),
                 "TRITON_CACHE_DIR": str(tmp_path / "fresh-cache"), **other_ptxas(tmp_path)}  # fmt: skip
    served = subprocess.run([sys.executable, "-c", textwrap.dedent(SERVE)], capture_output=True, text=True,
                            env=serve_env, timeout=300)  # fmt: skip
    assert served.returncode == 0, served.stderr[-3000:]
    first, second, second_by_other_ptxas, refused, landed = served.stdout.splitlines()
    assert [first, second] == hashes  # the kernels recorded, loaded from the cache: no compilation refused
    # the same kernel under another ptxas: another key, served from the recorded entry (byte for byte), no compile;
    # removed from the program's cache at that process's exit (not left under a key it was not recorded for)
    other_key, other_cubin = second_by_other_ptxas.split()
    assert other_key != second
    recorded_cubin = next((recipe.parent / "triton-cache").glob("*/second.cubin")).read_bytes()
    assert other_cubin == hashlib.sha256(recorded_cubin).hexdigest()
    assert [p.read_bytes() for p in (tmp_path / "fresh-cache").glob("*/second.cubin")] == [recorded_cubin]
    assert refused == "refused True"  # a kernel the package does not hold stays refused
    assert set(keys) <= set(eval(landed))  # the entries landed in the program's own Triton cache


def other_ptxas(tmp_path: Path) -> dict[str, str]:
    """OTHER_PTXAS, OTHER_PTXAS_BLACKWELL: Triton's ptxas, behind a script whose ``--version`` says another build
    (what Triton's key takes of ptxas), as torch's ptxas is to Inductor's compile workers."""
    from triton import knobs

    out = {}
    for tool, knob in (("PTXAS", knobs.nvidia.ptxas), ("PTXAS_BLACKWELL", knobs.nvidia.ptxas_blackwell)):
        script = tmp_path / f"other-{tool.lower()}"
        script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then "{knob.path}" --version; echo another build; '
                          f'exit 0; fi\nexec "{knob.path}" "$@"\n')  # fmt: skip
        script.chmod(0o755)
        out[f"OTHER_{tool}"] = str(script)
    return out


MODULE = r'''
import os, sys
from triton.runtime import build
SRC = """
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tiny", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_tiny(void) { return PyModule_Create(&m); }
"""
if sys.argv[1:] == ["serve"]:
    from aotpack.runtime import _aotpack_activate
    _aotpack_activate.activate([], "error", LookupError, [os.environ["ENTRIES"]])
print(build.compile_module_from_src(SRC, "tiny").__file__)
'''


def test_a_module_triton_builds_with_a_c_compiler_is_recorded_and_served_where_there_is_none(tmp_path):
    """A kernel's launcher and Triton's driver utilities are C that Triton compiles on first use (then caches):
    recorded where a compiler is, served where none is."""
    import shutil

    if not (shutil.which("gcc") or shutil.which("cc") or shutil.which("clang")):
        pytest.skip("no C compiler to build the module while recording")
    (tmp_path / "prog.py").write_text(MODULE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "TRITON_CACHE_DIR": str(tmp_path / "c1")}
    for name in ("TRITON_CACHE_MANAGER", "AOTPACK_FALLBACK", "AOTPACK_CACHE_MANAGER", "AOTPACK_CACHE_ENTRIES", "CC"):
        env.pop(name, None)
    recipe = tmp_path / "r" / "recipe.yaml"
    recipe.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "aotpack", "record", "-o", str(recipe), "--", "python",
                           str(tmp_path / "prog.py")], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    entries = recipe.parent / "triton-cache"
    (key,) = [p.name for p in entries.iterdir()]
    (module,) = [p.name for p in (entries / key).iterdir()]
    assert module.startswith("tiny.") and module.endswith(".so")
    # no C compiler; `file` stays (Triton's platform_key, in a module's cache key, has platform.architecture()
    # run it: a machine without it gives other keys)
    (tmp_path / "bin").mkdir()
    if shutil.which("file"):
        (tmp_path / "bin" / "file").symlink_to(shutil.which("file") or "")
    bare = {**env, "TRITON_CACHE_DIR": str(tmp_path / "c2"), "PATH": str(tmp_path / "bin"),
            "CC": str(tmp_path / "bin" / "cc"), "ENTRIES": str(entries)}  # fmt: skip
    served = subprocess.run([sys.executable, str(tmp_path / "prog.py"), "serve"], capture_output=True, text=True,
                            env=bare, timeout=300)  # fmt: skip
    assert served.returncode == 0, served.stderr[-3000:]
    assert served.stdout.strip() == str(tmp_path / "c2" / key / module)
    assert (tmp_path / "c2" / key / module).read_bytes() == (entries / key / module).read_bytes()
    # the wheel ships the module as recorded; its tag is the lowest its glibc allows (auditwheel's), and nothing
    # is grafted beside it
    import zipfile

    from aotpack.pipeline import repair

    assert "targets" not in yaml.safe_load(recipe.read_text())  # modules alone: no target, and it builds as written
    wheel = build(recipe, tmp_path / "dist", jobs=1, use_cache=False).wheel
    tag = next(t for t in repair.platform_tags(wheel) if t.startswith("manylinux_"))
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    assert f'"{tag}"' in " ".join(shown.stdout.split()), shown.stdout  # the tag auditwheel finds the module needs
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(f"/_triton_cache/{key}/{module}") for n in names), names
    assert not [n for n in names if ".libs/" in n], names
