"""A recording of a library whose import needs a GPU builds on a host where importing it raises: `aotpack record`
writes out each kernel with its closure (tests/fixtures/gpu_only: a library of FlagGems' shape, a generated kernel
reading its helper module as ``tle``, and one of its ops modules), and `aotpack build` of that recording, in a
process where importing the library raises, builds the wheel; its kernels keep the recorded functions' source
identities (what activate() finds the call sites by)."""

import importlib.util
import json
import os
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from types import SimpleNamespace

import yaml

from aotpack import manifest
from aotpack.runtime import _aotpack_identity

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "fixtures" / "gpu_only"
DEVICE = "FAKELIB_DEVICE"


def generated(name: str):
    """The generated kernel module, imported under a made-up name (as FlagGems' pointwise_dynamic does)."""
    spec = importlib.util.spec_from_file_location(name, FOLDER / "generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hook(jit):
    """The keyword arguments Triton's JIT passes its jit_cache_hook for a call with aligned fp32 pointers, an
    odd n and BLOCK=256."""
    signature = {p.name: "constexpr" if p.is_constexpr else "*fp32" if p.name.endswith("_ptr") else "i32"
                 for p in jit.params}  # fmt: skip
    constants = {(i,): 256 for i, p in enumerate(jit.params) if p.is_constexpr}
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(jit.params) if p.name.endswith("_ptr")}
    spec = {"options": {"num_warps": 4, "num_stages": 3, "num_ctas": 1}, "target": {"arch": 90}}
    compile = {"signature": signature, "constants": constants, "configs": [attrs], "num_warps": 4,
               "num_stages": 3, "specialization_data": json.dumps(spec)}  # fmt: skip
    return {"key": str(uuid.uuid4()), "repr": "", "fn": SimpleNamespace(module=jit.fn.__module__,
            name=jit.fn.__qualname__, jit_function=jit), "compile": compile, "is_manual_warmup": False,
            "already_compiled": False}  # fmt: skip


PROGRAM = """
import sys
from triton import knobs
sys.path.insert(0, {tests!r})
from integration.test_record_anywhere import generated, hook
import fakelib.ops
knobs.runtime.jit_cache_hook(**hook(generated("_gen_module_abs_rank_1").kernel))  # what the JIT calls on a GPU
knobs.runtime.jit_cache_hook(**hook(fakelib.ops.scale))
"""


def run(*command: str, device: bool) -> subprocess.CompletedProcess[str]:
    """``python command`` with the library on the path, importable only with ``device``."""
    env = {k: v for k, v in os.environ.items() if k != DEVICE}
    env["PYTHONPATH"] = os.pathsep.join([str(FOLDER), str(ROOT)])
    if device:
        env[DEVICE] = "1"
    return subprocess.run([sys.executable, *command], capture_output=True, text=True, cwd=ROOT, env=env)


def test_a_recording_of_a_library_that_needs_a_gpu_builds_where_it_cannot_be_imported(tmp_path, monkeypatch):
    program = tmp_path / "serve.py"
    program.write_text(PROGRAM.format(tests=str(ROOT / "tests")))
    recipe = tmp_path / "r.yaml"
    done = run("-m", "aotpack", "record", "-o", str(recipe), "--package", "gems", "--", "python", str(program),
               device=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    kernels = yaml.safe_load(recipe.read_text())["kernels"]
    assert sorted(k["triton"].partition(":")[2] for k in kernels.values()) == ["kernel", "scale"]
    for kernel in kernels.values():
        assert kernel["triton"].startswith("kernels/")
        written = (tmp_path / kernel["triton"].partition(":")[0]).read_text()
        assert "import fakelib" not in written and "= type(triton)('fakelib.ext')  # the module's namespace" in written
    assert (
        "# fakelib.ops:scale: written out by aotpack"
        in (tmp_path / kernels["scale"]["triton"].partition(":")[0]).read_text()
    )

    refused = run("-c", "import fakelib", device=False)
    assert refused.returncode != 0 and "No device were detected" in refused.stderr
    built = run("-m", "aotpack", "build", str(recipe), "-o", str(tmp_path / "dist"), "-j", "2", device=False)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("gems-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert any(n.endswith("_native.abi3.so") for n in zf.namelist())
    identities = json.dumps(manifest.read_wheel(wheel))

    monkeypatch.syspath_prepend(str(FOLDER))
    monkeypatch.setenv(DEVICE, "1")
    try:
        import fakelib.ops

        for jit in (generated(f"_gen_{uuid.uuid4().hex}").kernel, fakelib.ops.scale):
            assert _aotpack_identity.identity(jit) in identities  # activate() finds the original call sites
    finally:
        for loaded in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
            sys.modules.pop(loaded)
