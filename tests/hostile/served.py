"""The served surface: every environment variable the runtime reads (``aotpack/runtime/_aotpack_env.py``), each set
to every kind of bad value, in the processes a served program has: the one that imports a built package, activates
it with ``fallback="error"``, calls a kernel (on the fake driver, ``tests/integration/fake_libcuda.c``), asks Triton
for a kernel outside the JIT and exits (``serve``); and one it starts, which inherits the guard through the
environment and asks Triton for a kernel (``worker``, as Inductor's compile workers do).

A case is GOOD when the program runs to its end (exit 0, no traceback), Triton's compilation is still refused
(``fallback="error"`` holds whatever the variable says; a cache manager that cannot load is an error naming the
variable), any warning the runtime gives names the variable, within its budget (the program's own CPU time plus
seconds), and nothing outside the case's folder changed. These cases need a built package: ``installed_cases``
takes its site folder and the fake driver's; ``tests/integration/test_served_corpus.py`` builds both and runs them
(``python -m tests.hostile --served`` too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from aotpack.runtime import _aotpack_env

from ..integration.helpers import CAI_ARRAY
from .generator import ROOT, Case, Special, fixed

PACKAGE = "small_kernels"  # tests/fixtures/small.yaml's package
ARRAYS = CAI_ARRAY + 'x, y, o = (Array(A + i * 0x1000000, (4096,), "<f4") for i in range(3))\n'
ASK_TRITON = """
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget

@triton.jit
def other(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

try:
    source = triton.compiler.ASTSource(other, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 16})
    triton.compile(source, target=GPUTarget("cuda", 90, 32))
    print("COMPILED")
except Exception as exc:
    print("refused", type(exc).__name__, str(exc).splitlines()[0][:300])
"""
PROGRAMS = {
    "serve": f"import {PACKAGE} as k\nk.activate(fallback='error')\n{ARRAYS}\nk.add(x, y, o)\n{ASK_TRITON}\n"
    "print(k.stats()['class_misses'])\nprint('SERVED')\n",
    "worker": f"{ASK_TRITON}\nprint('SERVED')\n",
}
# what a process the activating one started inherits (_aotpack_guard.install)
WORKER_ENV = (("TRITON_CACHE_MANAGER", f"{PACKAGE}._aotpack_guard:Guard"), ("AOTPACK_FALLBACK", "error"),
              ("AOTPACK_CACHE_ENTRIES", f"{{site}}/{PACKAGE}/_triton_cache"))  # fmt: skip
BASE_ENV = (("PYTHONPATH", "{site}"), ("LD_LIBRARY_PATH", "{driver}"), ("FAKE_CUDA_LOG", "{case}/out/cuda.log"),
            ("TRITON_DEFAULT_FP_FUSION", "1"), ("TRITON_CACHE_DIR", "{case}/out/triton"))  # fmt: skip

# Each variable the runtime reads: what it holds, and the programs in which a value of it is read
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    _aotpack_env.AUTOTUNE: ("text", ("serve",)),
    _aotpack_env.AUTOTUNE_CACHE: ("file", ("serve",)),
    _aotpack_env.WARN_CLASS_MISSES: ("text", ("serve",)),
    _aotpack_env.REPORT: ("folder", ("serve",)),
    _aotpack_env.REHEARSAL: ("text", ("serve",)),
    _aotpack_env.TRITON_MANAGER: ("class", ("serve",)),
    _aotpack_env.FALLBACK: ("text", ("serve",)),
    _aotpack_env.PROGRAMS_MANAGER: ("class", ("serve", "worker")),
    _aotpack_env.CACHE_ENTRIES: ("folders", ("serve", "worker")),
    _aotpack_env.COMPILED_DIR: ("folder", ("serve", "worker")),
    _aotpack_env.RECORD_DIR: ("folder", ("serve", "worker")),
    _aotpack_env.RECORD_RUN: ("text", ("serve",)),
    _aotpack_env.RECORD_TESTED: ("text", ("serve",)),
    _aotpack_env.RECORDED_MANAGER: ("class", ("serve", "worker")),
}

TEXT = {"empty": "{empty}", "control": "x\x1b[2J", "non-utf8": "caf\udce9", "huge": "z" * 100_000, "word": "x",
        "zero": "0", "one": "1", "newline": "a\nb", "negative": "-1"}  # fmt: skip
CLASSES = {"no-module": "nosuchmodule:Manager", "no-class": "os:nosuchclass", "not-a-class": "os:sep",
           "no-colon": "os", "empty-module": ":Manager", "control": "os\x1b[2J:X", "huge": "m" * 100_000,
           "empty": "{empty}"}  # fmt: skip
LONG = "{case}/" + "n" * 300
DEEP = b"[" * 100_000 + b"]" * 100_000


def _paths(file: bool) -> dict[str, tuple[str, dict[str, bytes | Special], str]]:
    """(value, files of the case, needs) by mutation: a path that is not what the variable wants."""
    out: dict[str, tuple[str, dict[str, bytes | Special], str]] = {
        "fifo": ("{case}/it", {"it": Special("fifo")}, ""),
        "dev-zero": ("/dev/zero", {}, ""),
        "dev-null": ("/dev/null", {}, ""),
        "dangling": ("{case}/it", {"it": Special("symlink", target="nowhere")}, ""),
        "too-long": (LONG, {}, ""),
        "missing-parent": ("{case}/no/such/it", {}, ""),
        "relative": ("rel", {}, ""),
        "control": ("{case}/a\x1b[2Jb", {}, ""),
        "empty": ("{empty}", {}, ""),
    }
    if file:
        out.update({
            "folder": ("{case}/it", {"it": Special("dir")}, ""),
            "wrong-shape": ("{case}/it", {"it": b"[1]"}, ""),
            "wrong-table": ("{case}/it", {"it": b'{"add": {"x": [1, "a"]}}'}, ""),
            "deep": ("{case}/it", {"it": DEEP}, ""),
            "not-json": ("{case}/it", {"it": b"\xff\xfe{"}, ""),
            "huge-file": ("{case}/it", {"it": Special("sparse", size=3 << 30)}, ""),
            "unreadable": ("{case}/it", {"it": Special("unreadable", data=b"{}")}, "non-root"),
            "link-outside": ("{case}/it", {"it": Special("symlink", target="@outside/SENTINEL")}, ""),
        })  # fmt: skip
    else:
        out.update({
            "a-file": ("{case}/it", {"it": b"a file\n"}, ""),
            "readonly": ("{case}/it", {"it": Special("readonly")}, "non-root"),
        })  # fmt: skip
    return out


def _values(kind: str) -> Iterator[tuple[str, str, dict[str, bytes | Special], str]]:
    if kind == "text":
        yield from ((m, v, {}, "") for m, v in TEXT.items())
    elif kind == "class":
        yield from ((m, v, {}, "") for m, v in CLASSES.items())
    elif kind in ("file", "folder"):
        yield from ((m, v, files, needs) for m, (v, files, needs) in _paths(kind == "file").items())
    else:  # folders joined by os.pathsep
        for m, (v, files, needs) in _paths(False).items():
            yield m, v, files, needs
        yield "many", ":".join(f"{{case}}/f{i}" for i in range(1000)), {}, ""  # (an argument holds 128 KiB)
        yield "separators", "::::", {}, ""


def cases() -> Iterator[Case]:
    for var, (kind, programs) in KINDS.items():
        for program in programs:
            for mutation, value, files, needs in _values(kind):
                made: dict[str, bytes | Special] = {"prog.py": PROGRAMS[program].encode(), **files}
                rehearsal = var == _aotpack_env.REHEARSAL and value == "1"  # (what aotpack rehearse sets)
                env = (*BASE_ENV, *(WORKER_ENV if program == "worker" else ()), (var, value))
                # a folder the runtime writes into is made where the variable names it, relative to the program's
                # folder too: that is the variable's meaning (a file or anything else there is another matter)
                made_there = ("no", "rel", "a\x1b[2Jb") if kind == "folder" else ()
                yield Case(id=f"served/{program}/{var}/{mutation}", surface="served", base=program, key=var,
                           mutation=mutation, make_files=fixed(made), expect="served", command="served",
                           program="prog.py", names=(var,), env=env, needs=needs, budget=3.0, may_write=made_there,
                           # a rehearsal lists what compiles (it does not refuse it), and says so naming the variable
                           must_say="COMPILED" if rehearsal else "refused",
                           reason="a served program runs to its end, Triton's compilations refused")  # fmt: skip


def prepare(folder: Path) -> tuple[Path, Path]:
    """The small package built and installed under ``folder``, and the fake driver built there: (site, driver)."""
    import subprocess
    import sys

    from aotpack import build
    from tests.shared import SMALL_ANYWHERE

    from ..integration.helpers import install_wheel

    (folder / "small.yaml").write_text(SMALL_ANYWHERE)
    site = install_wheel(build(folder / "small.yaml", folder / "dist", jobs=2).wheel, folder / "site")
    (folder / "driver").mkdir()
    subprocess.run([sys.executable, "-m", "ziglang", "cc", "-shared", "-fPIC", "-O1", "-o",
                    str(folder / "driver" / "libcuda.so.1"), str(ROOT / "tests/integration/fake_libcuda.c"),
                    "-lpthread"], check=True)  # fmt: skip
    return site, folder / "driver"
