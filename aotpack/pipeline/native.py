"""Generated C + the runtime -> ``lib<package>.so`` and the CPython extension module ``_native.abi3.so``.

The runtime, the kernel tables and the images live once, in ``lib<package>.so``: it has no Python in
it, so any C or C++ program can link or dlopen it, and its C API is the package's C API. The
extension holds only the Python binding and links that library through its SONAME and an ``$ORIGIN``
run path, so a process that uses both gets one runtime (one module cache, one autotuning memo). One
shared object serving both was the alternative; it would need every Python symbol looked up by hand
at run time, since a C host has no libpython to resolve them against.

The library's symbols carry a version node named after the package (``AOTPACK_<package>``): the
extension binds to exactly that library's runtime even when another aotpack package's library is
already in the process; ``-Bsymbolic`` keeps the library's own calls inside it.

The C is compiled by zig's clang (``ziglang`` from PyPI) for glibc 2.17, so the wheel qualifies for
manylinux2014 whatever the build host's glibc; on the limited API of CPython 3.9 (abi3), so one
wheel serves every CPython from 3.9 on. No CUDA headers or libraries are needed: the runtime
dlopens the driver. zig cross-compiles: any host builds for every machine of PLATFORMS (the cubins are
the same; only this C differs), with no other toolchain installed.
"""

from __future__ import annotations

import importlib.util
import platform
import sys
import sysconfig
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .. import _temp, _tools, runtime
from ..errors import ToolNotFound

GLIBC = "2.17"
# the wheel platforms aotpack builds for (a wheel's platform tag before repair): the machine zig and auditwheel name
PLATFORMS = {"linux_x86_64": "x86_64", "linux_aarch64": "aarch64"}
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}  # an ELF header's e_machine (EM_X86_64, EM_AARCH64)


def host_platform() -> str:
    """This machine's platform, the default: ``linux_`` and its machine (x86_64, aarch64)."""
    return f"linux_{platform.machine()}"


def elf_machine(data: bytes) -> str | None:
    """The machine of an ELF object's bytes (one of ELF_MACHINES), None for another or for no ELF."""
    if len(data) < 20 or data[:4] != b"\x7fELF" or data[5] != 1:  # little-endian objects only
        return None
    number = int.from_bytes(data[18:20], "little")
    return next((name for name, code in ELF_MACHINES.items() if code == number), None)


LIMITED_API = "0x03090000"
WARNINGS = ("-Wall", "-Wextra", "-Werror")


# the dispatcher's estimates (aot_measured.c) are selection.py's, operation for operation, on every machine:
# aarch64's clang fuses a multiply and an add into one rounding (FMA is baseline there, not on x86-64) unless
# told not to, and a near tie between two configs then goes the other way
FP_CONTRACT = "-ffp-contract=off"

# what the runtime links beside the driver it dlopens: glibc's dl, pthread and m (the dispatcher's log2)
SYSTEM_LIBRARIES = ("-ldl", "-lpthread", "-lm")


@dataclass(frozen=True, kw_only=True)
class NativeBuild:
    """What to compile, planned as data."""

    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    output: Path
    link: tuple[str, ...] = ()  # linker arguments (libraries, run path, SONAME, version script)
    machine: str = "x86_64"

    def command(self, compiler: tuple[str, ...]) -> tuple[str, ...]:
        return (
            *compiler, "-target", f"{self.machine}-linux-gnu.{GLIBC}", "-shared", "-fPIC", "-O2", "-std=c11",
            *WARNINGS, "-g0", "-fvisibility=hidden", FP_CONTRACT, f"-DPy_LIMITED_API={LIMITED_API}",
            *(f"-I{d}" for d in self.include_dirs), "-o", str(self.output),
            *(str(s) for s in self.sources), *self.link, *SYSTEM_LIBRARIES,
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


def python_include(build_dir: Path, machine: str = platform.machine()) -> tuple[Path, ...]:
    """The folders the extension's C needs for Python.h. Debian's and Ubuntu's system Pythons keep
    pyconfig.h per architecture (``#include <x86_64-linux-gnu/python3.X/pyconfig.h>``, under
    /usr/include): that one folder is linked into the build folder, so the host's /usr/include, whose
    glibc headers would shadow the glibc 2.17 ones the compiler targets, is never searched. Built for another
    machine, Python.h asks for that machine's folder (``aarch64-linux-gnu/...``): the host's serves, since
    what the limited API's structures depend on is the same on every machine of PLATFORMS (64-bit,
    little-endian, LP64)."""
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
    (alias / f"{machine}-linux-gnu").mkdir(parents=True, exist_ok=True)
    link = alias / f"{machine}-linux-gnu" / include.name
    if not link.is_symlink():
        link.symlink_to(per_arch, target_is_directory=True)
    return (include, Path(alias.name))  # relative, as the build runs in build_dir


def runtime_text(name: str) -> str:
    """A file of the runtime every generated wheel ships."""
    return resources.files("aotpack").joinpath("runtime").joinpath(name).read_text()


def copy_runtime(folder: Path) -> tuple[Path, ...]:
    """Write the shipped runtime sources into ``folder``; returns the .c files."""
    files = []
    for name in runtime.C_FILES:
        target = folder / name
        _temp.write_file(target, runtime_text(name))
        files.append(target)
    return tuple(f for f in files if f.suffix == ".c")


def plan_libraries(package: str, python_dirs: tuple[Path, ...], machine: str = "x86_64",
                   ) -> tuple[NativeBuild, NativeBuild]:  # fmt: skip
    """The C API library (runtime, tables, images, C API), then the extension that links it. Paths are
    relative and the compiler runs in the build folder: file names end up in the binaries, and a
    temporary folder's name would make two builds differ."""
    library = f"lib{package}.so"
    return (
        NativeBuild(
            sources=tuple(map(Path, ("kernels.c", "capi.c", *runtime.RUNTIME_SOURCES))),
            include_dirs=(Path("."),),
            output=Path(library),
            link=(f"-Wl,-soname,{library}", f"-Wl,--version-script={VERSION_SCRIPT}", "-Wl,-Bsymbolic"),
            machine=machine,
        ),
        NativeBuild(
            sources=tuple(map(Path, ("module.c", *runtime.BINDING_SOURCES))),
            include_dirs=(Path("."), *python_dirs),
            output=Path("_native.abi3.so"),
            link=("-L.", f"-l{package}", "-Wl,-rpath,$ORIGIN"),
            machine=machine,
        ),
    )


VERSION_SCRIPT = "library.map"


def version_script(package: str) -> str:
    """Every exported symbol of the library (the runtime's, marked AOT_API, and the C API) in one
    version node of the package's own."""
    return f"AOTPACK_{package} {{\n  global: *;\n}};\n"


def compile_libraries(build_dir: Path, generated: dict[str, str], package: str, machine: str,
                      ) -> tuple[Path, Path]:  # fmt: skip
    """Compile the generated C (name -> text) with the runtime into the C API library
    (``lib<package>.so``) and the Python extension (``_native.abi3.so``) that uses it, for ``machine``; returns
    the extension's path, then the library's."""
    copy_runtime(build_dir)
    for name, text in sorted({**generated, VERSION_SCRIPT: version_script(package)}.items()):
        _temp.write_file(build_dir / name, text)
    plans = plan_libraries(package, python_include(build_dir, machine), machine)
    for plan in plans:
        _tools.run(
            plan.command(zig_cc()),
            cwd=str(build_dir),
            hint="the generated C failed to compile; please report this as a bug",
        )
    return build_dir / plans[1].output, build_dir / plans[0].output
