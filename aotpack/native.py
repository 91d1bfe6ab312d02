"""Generated C + the runtime -> the CPython extension module ``_native.abi3.so``.

The C is compiled by zig's clang (``ziglang`` from PyPI) for glibc 2.17, so the wheel qualifies for
manylinux2014 whatever the build host's glibc; on the limited API of CPython 3.9 (abi3), so one
wheel serves every CPython from 3.9 on. No CUDA headers or libraries are needed: the runtime
dlopens the driver.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from . import _tools
from .errors import ToolNotFound

RUNTIME_FILES = ("aot_runtime.h", "aot_runtime.c", "aot_python.h", "aot_python.c")
GLIBC = "2.17"
LIMITED_API = "0x03090000"
WARNINGS = ("-Wall", "-Wextra", "-Werror")


@dataclass(frozen=True, kw_only=True)
class NativeBuild:
    """What to compile, planned as data."""

    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    output: Path
    machine: str = "x86_64"

    def command(self, compiler: tuple[str, ...]) -> tuple[str, ...]:
        return (
            *compiler, "-target", f"{self.machine}-linux-gnu.{GLIBC}", "-shared", "-fPIC", "-O2", "-std=c11",
            *WARNINGS, "-g0", "-fvisibility=hidden", f"-DPy_LIMITED_API={LIMITED_API}",
            *(f"-I{d}" for d in self.include_dirs), "-o", str(self.output),
            *(str(s) for s in self.sources), "-ldl", "-lpthread",
        )  # fmt: skip


def zig_cc() -> tuple[str, ...]:
    if importlib.util.find_spec("ziglang") is None:
        raise ToolNotFound("the C compiler aotpack uses is missing; run: pip install ziglang")
    return (sys.executable, "-m", "ziglang", "cc")


def zig_version() -> str:
    """The version of zig's clang, which compiles every wheel's C."""
    import importlib.metadata

    if importlib.util.find_spec("ziglang") is None:
        raise ToolNotFound("the C compiler aotpack uses is missing; run: pip install ziglang")
    return f"zig cc {importlib.metadata.version('ziglang')} (target glibc {GLIBC})"


def python_include(build_dir: Path) -> tuple[Path, ...]:
    """The folders the extension's C needs for Python.h. Debian's and Ubuntu's system Pythons keep
    pyconfig.h per architecture (``#include <x86_64-linux-gnu/python3.X/pyconfig.h>``, under
    /usr/include): that one folder is linked into the build folder, so the host's /usr/include, whose
    glibc headers would shadow the glibc 2.17 ones the compiler targets, is never searched."""
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        raise ToolNotFound(
            f"Python.h not found in {include}; install the Python development headers (e.g. python3-dev)"
        )
    multiarch = sysconfig.get_config_var("MULTIARCH")
    per_arch = include.parent / multiarch / include.name if multiarch else None
    if per_arch is None or not (per_arch / "pyconfig.h").is_file():
        return (include,)
    alias = build_dir / "python-multiarch"
    (alias / multiarch).mkdir(parents=True, exist_ok=True)
    link = alias / multiarch / include.name
    if not link.is_symlink():
        link.symlink_to(per_arch, target_is_directory=True)
    return (include, Path(alias.name))  # relative, as the build runs in build_dir


def runtime_text(name: str) -> str:
    """A file of the runtime every generated wheel ships."""
    return resources.files("aotpack").joinpath("runtime").joinpath(name).read_text()


def copy_runtime(folder: Path) -> tuple[Path, ...]:
    """Write the shipped runtime sources into ``folder``; returns the .c files."""
    files = []
    for name in RUNTIME_FILES:
        target = folder / name
        target.write_text(runtime_text(name))
        files.append(target)
    return tuple(f for f in files if f.suffix == ".c")


def compile_libraries(build_dir: Path, generated: dict[str, str], package: str) -> tuple[Path, Path]:
    """Compile the generated C (name -> text) with the runtime into the Python extension
    (``_native.abi3.so``) and the C API library (``lib<package>.so``, no Python in it, so that any
    C or C++ program can link or dlopen it); returns both paths."""
    copy_runtime(build_dir)
    for name, text in sorted(generated.items()):
        (build_dir / name).write_text(text)
    # relative paths, run in the build folder: file names end up in the binary, and a temporary
    # folder's name would make two builds differ
    plans = (
        NativeBuild(
            sources=tuple(map(Path, ("kernels.c", "module.c", "aot_runtime.c", "aot_python.c"))),
            include_dirs=(Path("."), *python_include(build_dir)),
            output=Path("_native.abi3.so"),
        ),
        NativeBuild(
            sources=tuple(map(Path, ("kernels.c", "capi.c", "aot_runtime.c"))),
            include_dirs=(Path("."),),
            output=Path(f"lib{package}.so"),
        ),
    )
    for plan in plans:
        _tools.run(
            plan.command(zig_cc()),
            cwd=str(build_dir),
            hint="the generated C failed to compile; please report this as a bug",
        )
    return build_dir / plans[0].output, build_dir / plans[1].output
