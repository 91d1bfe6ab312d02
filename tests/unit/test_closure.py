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

from aotpack.runtime import _aotpack_jit

DEVICE = "FAKELIB_DEVICE"  # without it, importing the fake library raises as FlagGems does on a host without a GPU

LIBRARY = {
    "__init__.py": f"""
import os
if not os.environ.get({DEVICE!r}):
    raise RuntimeError("No device were detected on your machine!")
""",
    "ext.py": """
import triton
from triton import language as tl
import triton.language.extra.cuda.libdevice as shim
from fakelib import sub

WIDTH = tl.constexpr(4)
ZERO = 0
HANDLE = object()  # only the library has it


@triton.jit
def program_id(axis: int) -> tl.tensor:
    return tl.program_id(axis).to(tl.int64)


@triton.jit
def promote_to_tensor(x):
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()


div_rn = shim.div_rn  # a name swapped for the libdevice builtin, as FlagGems' use_tl_extra does
""",
    "sub.py": """
import triton
import triton.language as tl

SCALE = tl.constexpr(2.5)


@triton.jit(noinline=True)
def twice(x):
    return x * SCALE
""",
    "other.py": """
import triton
import triton.language as tl


@triton.jit
def program_id(axis: int) -> tl.tensor:
    return tl.program_id(axis)
""",
    "ops.py": """
import triton
import triton.language as tl
import fakelib.ext as tle


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tle.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * tle.WIDTH, mask=offs < n)
""",
}

KERNEL = """
import triton
import triton.language as tl
import fakelib
import fakelib.ext as tle
import fakelib.other as other

HANDLE = tle.HANDLE


@triton.jit(do_not_specialize=["n"])
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tle.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if tle.is_floating(x):
        x = tle.div_rn(x, 3.0) + tle.WIDTH + tle.ZERO
    x = fakelib.ext.sub.twice(x) + tle.sub.SCALE
    tl.store(out_ptr + offs, x, mask=offs < n)


@triton.jit
def two_program_ids(x_ptr):  # two helpers named program_id, of two modules: one file cannot hold both
    tl.store(x_ptr + tle.program_id(0), other.program_id(0))


@triton.jit
def shadowing(x_ptr, SCALE: tl.constexpr):  # a parameter named as a constant twice() reads (a global there)
    tl.store(x_ptr, fakelib.ext.sub.twice(SCALE))


@triton.jit
def reads_a_library_object(x_ptr):
    tl.store(x_ptr, tle.HANDLE)


@triton.jit
def hides_a_library_object(x_ptr, HANDLE):  # the library's HANDLE is a global, hidden by the parameter
    tl.store(x_ptr + tle.program_id(0), HANDLE)
"""


@pytest.fixture
def library(tmp_path, monkeypatch):
    """The fake library on sys.path (importable while the device variable is set), and a kernel module
    generated under a made-up name that uses it (as FlagGems' pointwise_dynamic writes and imports one)."""
    site = tmp_path / "site"
    (site / "fakelib").mkdir(parents=True)
    for name, text in LIBRARY.items():
        (site / "fakelib" / name).write_text(text)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(DEVICE, "1")
    name = f"_gen_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(KERNEL)
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module, site
    for loaded in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
        sys.modules.pop(loaded)


def load_without_library(text: str, folder: Path, monkeypatch) -> ModuleType:
    """The written-out file imported where importing the library raises."""
    for loaded in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.delenv(DEVICE)
    with pytest.raises(RuntimeError, match="No device"):
        importlib.import_module("fakelib")
    path = folder / f"written_{uuid.uuid4().hex}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not [m for m in sys.modules if m.startswith("fakelib")], "the written-out file imported the library"
    return module


def test_the_closure_needs_only_triton_and_keeps_the_source_identity(library, tmp_path, monkeypatch):
    module, _ = library
    text = _aotpack_jit._closure(module.kernel)
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
    original = _aotpack_jit.identity(module.kernel)
    written = load_without_library(text, tmp_path, monkeypatch)
    assert type(written.tle) is ModuleType and written.tle.program_id is written.program_id
    assert written.fakelib.ext.sub.twice is written.twice
    assert _aotpack_jit.identity(written.kernel) == original
    assert _aotpack_jit.identity(written.program_id) == _aotpack_jit.identity(module.tle.program_id)


def test_a_global_hidden_by_a_parameter_is_not_needed(library, tmp_path, monkeypatch):
    module, _ = library
    text = _aotpack_jit._closure(module.hides_a_library_object)
    assert text is not None and "HANDLE" not in text.split("@triton.jit")[0]
    original = _aotpack_jit.identity(module.hides_a_library_object)
    written = load_without_library(text, tmp_path, monkeypatch)
    assert _aotpack_jit.identity(written.hides_a_library_object) == original


@pytest.mark.parametrize(
    "function",
    ["two_program_ids", "shadowing", "reads_a_library_object"],
)
def test_a_closure_that_would_change_a_name_or_needs_the_library_is_not_written(library, function):
    """Two helpers named program_id; a helper's constant named as the kernel's parameter (the written-out
    kernel would read it: another identity); an object only the library has."""
    module, _ = library
    assert _aotpack_jit._closure(getattr(module, function)) is None
    # today's form then: the library's modules imported by name (the build host needs the library)
    described = _aotpack_jit.describe(getattr(module, function))
    text = _aotpack_jit.source_text(described["source"])
    assert "\nimport fakelib" in text and text.startswith(f"# {module.__name__}:{function}: ")


def test_a_kernel_of_an_installed_module_is_written_out_too(library, monkeypatch):
    """Recorded by module path, it would need the library (whose import needs a GPU) on the build host."""
    _, site = library
    monkeypatch.setattr(_aotpack_jit, "_installed_roots", lambda: (str(site.resolve()),))
    ops = importlib.import_module("fakelib.ops")
    assert _aotpack_jit._importable(ops.scale.fn)
    described = _aotpack_jit.describe(ops.scale)
    assert (described["module"], described["qualname"]) == ("fakelib.ops", "scale")
    text = _aotpack_jit.source_text(described["source"])
    assert text.startswith("# fakelib.ops:scale: written out") and "def program_id(" in text
