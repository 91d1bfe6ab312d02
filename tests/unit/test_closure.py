"""A recorded function written out with its closure: every @triton.jit function and constant it reads, through
modules too (``tle.program_id``), so that the written-out file needs only Triton. The library here is a fake of
FlagGems' shape: its ``__init__`` raises without a device, its generated kernels read a helper module of
@triton.jit functions, constants and a libdevice builtin (``tle.div_rn``). The written-out file imports without
the library and keeps the function's source identity (what activate() finds its call sites by)."""

import importlib
import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from aotpack.runtime import _aotpack_identity, _aotpack_source

DEVICE = "FAKELIB_DEVICE"  # without it, importing the fake library raises as FlagGems does on a host without a GPU

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_only"  # fakelib/, and generated.py using it


@pytest.fixture
def library(monkeypatch):
    """The fake library on sys.path (importable while the device variable is set), and its generated kernel
    module imported under a made-up name (as FlagGems' pointwise_dynamic imports one)."""
    monkeypatch.syspath_prepend(str(FOLDER))
    monkeypatch.setenv(DEVICE, "1")
    spec = importlib.util.spec_from_file_location(f"_gen_{uuid.uuid4().hex}", FOLDER / "generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for loaded in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
        sys.modules.pop(loaded)


def _load(path: Path, text: str) -> ModuleType:
    """``text`` written to ``path`` and imported from there, under the file's name."""
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_without_library(text: str, folder: Path, monkeypatch) -> ModuleType:
    """The written-out file imported where importing the library raises."""
    for loaded in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.delenv(DEVICE)
    with pytest.raises(RuntimeError, match="No device"):
        importlib.import_module("fakelib")
    module = _load(folder / f"written_{uuid.uuid4().hex}.py", text)
    assert not [m for m in sys.modules if m.startswith("fakelib")], "the written-out file imported the library"
    return module


def test_the_closure_needs_only_triton_and_keeps_the_source_identity(library, tmp_path, monkeypatch):
    module = library
    text = _aotpack_source._closure(module.kernel)
    assert text is not None
    assert text.splitlines()[0].startswith(f"# {module.__name__}:kernel: written out by aotpack")
    assert "fakelib" not in "".join(line for line in text.splitlines() if line.startswith(("import", "from")))
    # the modules read through are namespaces of what is read of them, under their own names (Triton's
    # DependenciesFinder tells modules by name); the builtin is Triton's own, with its decorator options
    assert "fakelib.ext = type(triton)('fakelib.ext')" in text and "tle = fakelib.ext" in text
    assert "fakelib.ext.div_rn = triton.language.extra.cuda.libdevice.div_rn" in text
    assert "fakelib.ext.WIDTH = tl.constexpr(4)" in text and "fakelib.ext.ZERO = 0" in text
    assert "fakelib.ext.sub.SCALE = tl.constexpr(2.5)" in text and "\nSCALE = tl.constexpr(2.5)" in text
    assert "@triton.jit(noinline=True)\ndef twice(" in text and "@triton.jit(do_not_specialize=['n'])" in text
    assert "def promote_to_tensor(" in text  # a helper's own callee
    original = _aotpack_identity.identity(module.kernel)
    written = load_without_library(text, tmp_path, monkeypatch)
    assert type(written.tle) is ModuleType and written.tle.program_id is written.program_id
    assert written.fakelib.ext.sub.twice is written.twice
    assert _aotpack_identity.identity(written.kernel) == original
    assert _aotpack_identity.identity(written.program_id) == _aotpack_identity.identity(module.tle.program_id)


def test_a_global_hidden_by_a_parameter_is_not_needed(library, tmp_path, monkeypatch):
    module = library
    text = _aotpack_source._closure(module.hides_a_library_object)
    assert text is not None and "HANDLE" not in text.split("@triton.jit")[0]
    original = _aotpack_identity.identity(module.hides_a_library_object)
    written = load_without_library(text, tmp_path, monkeypatch)
    assert _aotpack_identity.identity(written.hides_a_library_object) == original


@pytest.mark.parametrize(
    "function",
    ["two_program_ids", "shadowing", "reads_a_library_object"],
)
def test_a_closure_that_would_change_a_name_or_needs_the_library_is_not_written(library, function):
    """Two helpers named program_id; a helper's constant named as the kernel's parameter (the written-out
    kernel would read it: another identity); an object only the library has."""
    module = library
    assert _aotpack_source._closure(getattr(module, function)) is None
    # today's form then: the library's modules imported by name (the build host needs the library)
    described = _aotpack_source.describe(getattr(module, function))
    text = _aotpack_source.source_text(described["source"])
    assert "\nimport fakelib" in text and text.startswith(f"# {module.__name__}:{function}: ")


def test_a_kernel_of_an_installed_module_is_written_out_too(library, monkeypatch):
    """Recorded by module path, it would need the library (whose import needs a GPU) on the build host."""
    monkeypatch.setattr(_aotpack_source, "_installed_roots", lambda: (str(FOLDER) + "/",))
    ops = importlib.import_module("fakelib.ops")
    assert _aotpack_source._importable(ops.scale.fn)
    described = _aotpack_source.describe(ops.scale)
    assert (described["module"], described["qualname"]) == ("fakelib.ops", "scale")
    text = _aotpack_source.source_text(described["source"])
    assert text.startswith("# fakelib.ops:scale: written out") and "def program_id(" in text


def test_a_kernel_that_takes_a_freed_kernel_s_id_gets_its_own_description(library, monkeypatch):
    """An object's id is reused once the object is gone: a kernel a program generates after another was freed may
    take its id, and must not be recorded as that one (the suite saw it: a generated module's kernel described
    for ``fakelib.ops.scale`` when that test ran after the one that generated it). Here the freed kernel's entry
    is put at the id directly."""
    monkeypatch.setattr(_aotpack_source, "_state", _aotpack_source._Sources())
    ops = importlib.import_module("fakelib.ops")
    stale = {"module": library.__name__, "qualname": "gone", "name": "gone", "params": [], "identity": ""}
    _aotpack_source._state.described[id(ops.scale)] = (object(), stale)
    described = _aotpack_source.describe(ops.scale)
    assert (described["module"], described["qualname"]) == ("fakelib.ops", "scale")
    assert _aotpack_source.describe(ops.scale) is described  # and it is kept for the same function


SUMS = """
import triton
import triton.language as tl


@triton.jit
def half(x):
    return x * 0.5


@triton.jit
def row_sum(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr, half(tl.sum(tl.load(x_ptr + offs), axis=0)))
"""


def test_triton_s_own_functions_count_by_name_not_by_their_release_s_source(tmp_path, monkeypatch):
    """A kernel calling ``tl.sum`` is the same kernel under Triton 3.6 and 3.9, whose ``tl.sum`` sources differ
    (liger-kernel's RMSNorm, built on a host with 3.9 and served with 3.6, was not found); a function of the
    program's that it calls still counts by its source."""
    triton = pytest.importorskip("triton")
    module = _load(tmp_path / f"sums_{uuid.uuid4().hex}.py", SUMS)
    before = _aotpack_identity.identity(module.row_sum)
    own = _aotpack_identity.jit_of(triton.language.sum)
    monkeypatch.setattr(own, "_src", own.src + "\n# another release's body\n")  # (src is read-only)
    assert _aotpack_identity.identity(module.row_sum) == before
    monkeypatch.setattr(module.half, "_src", module.half.src.replace("0.5", "0.25"))
    assert _aotpack_identity.identity(module.row_sum) != before
