"""The CUDA backend: nvcc compiles each variant of a .cu kernel to a cubin (or PTX) per target.

Each variant is one small generated translation unit that includes the user's source, takes the
address of the entry (which instantiates a template entry such as ``rmsnorm<__half, 256>``) and is
compiled with the variant's ``-D`` defines plus ``AOTPACK_HINTED`` (1 for the variant that may assume
the recipe's ``:16`` hints). The entry's mangled symbol is read from ptxas's report (or the PTX) and
matched to the recipe's name, demangled with c++filt where it is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ... import _temp, _tools, facts
from ...errors import RecipeError, ToolFailed, ToolNotFound
from ...model import Kernel
from ...plan.variants import Variant
from ..base import Artifact, DriverFloor, Outcome, Pruned

_VERSION = re.compile(r"release (\d+)\.(\d+)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for")
_PTX_ENTRY = re.compile(r"^\.(?:visible|weak)?\s*\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)
_REGISTERS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
SCRATCH_TEMP = "aotpack-nvcc-"  # a compile's scratch folder in the temporary folder (swept when its process is gone)


def find_nvcc(explicit: str | None = None) -> Path:
    """--nvcc, then $CUDA_HOME/bin/nvcc, then PATH, then the nvidia-cuda-nvcc package from PyPI."""
    candidates: list[tuple[str, Path | None]] = []
    if explicit:
        candidates.append(("--nvcc", Path(explicit)))
    if os.environ.get("CUDA_HOME"):
        candidates.append(("$CUDA_HOME", Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"))
    which = shutil.which("nvcc")
    candidates.append(("PATH", Path(which) if which else None))
    for site in map(Path, sys.path):
        for layout in ("nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc"):
            if (site / layout).is_file():
                candidates.append(("nvidia-cuda-nvcc", site / layout))
    for _, path in candidates:
        if path is not None and path.is_file() and os.access(path, os.X_OK):
            return path
    if explicit:
        raise ToolNotFound(f"--nvcc {explicit} is not an executable file")
    raise ToolNotFound(
        "nvcc not found (looked at $CUDA_HOME/bin, PATH and the nvidia-cuda-nvcc package); CUDA kernels need "
        "it: run pip install 'aotpack[cuda]' (nvcc 13.0 from PyPI, pinned there: its wheels need a CUDA 13.0 "
        "driver; PyPI has no CUDA 12 nvcc), install a CUDA toolkit, or pass --nvcc PATH",
        extra="cuda",
    )


@cache
def _nvcc_facts(nvcc: Path) -> tuple[tuple[int, int], frozenset[str], frozenset[str]]:
    """(version, machine-code archs, PTX archs) of an nvcc."""
    out = _tools.run([str(nvcc), "--version"])
    m = _VERSION.search(out)
    if m is None:
        raise ToolNotFound(f"cannot read the version of {nvcc} from:\n{out}")
    codes = frozenset(_tools.run([str(nvcc), "--list-gpu-code"]).split())
    archs = frozenset(_tools.run([str(nvcc), "--list-gpu-arch"]).split())
    return (int(m[1]), int(m[2])), codes, archs


def nvcc_can_build(target: str, codes: frozenset[str], archs: frozenset[str]) -> bool:
    """Whether nvcc lists the target (an 'a' target is built when its base arch is listed)."""
    t = facts.target(target)
    base = t.arch.name.rstrip("a")
    return (f"compute_{base[3:]}" in archs) if t.ptx else (base in codes)


@dataclass(frozen=True, kw_only=True)
class NvccJob:
    """One nvcc invocation, planned as data."""

    nvcc: str
    wrapper: Path
    output: Path
    target: str
    include_dirs: tuple[Path, ...]
    defines: tuple[tuple[str, str], ...]
    flags: tuple[str, ...]

    def argv(self) -> tuple[str, ...]:
        t = facts.target(self.target)
        digits = t.arch.name[len("sm_") :]
        kind = ("-ptx",) if t.ptx else ("-cubin", "--resource-usage")
        return (
            self.nvcc, *kind, f"-gencode=arch=compute_{digits},code={self.target}", "-O3", "-std=c++17",
            *(f"-I{d}" for d in self.include_dirs), *(f"-D{n}={v}" for n, v in self.defines), *self.flags,
            "-o", str(self.output), str(self.wrapper),
        )  # fmt: skip


def entry_name(variant: Variant) -> str:
    """The recipe's entry with the variant's types and defines filled in."""
    kernel = variant.kernel
    assert kernel.cuda is not None
    values = {var: facts.dtypes()[dtype].cuda for var, dtype in variant.binding}
    values.update({name: str(value).lower() if isinstance(value, bool) else str(value)
                   for name, value in variant.config.constexprs})  # fmt: skip
    return kernel.cuda.entry.format(**values)


def wrapper_source(variant: Variant) -> str:
    """The file nvcc compiles: the kernel's source, the entry's address taken, and its parameter count checked
    against the recipe's arguments (the launch passes exactly those; a count that differs would read past them)."""
    assert variant.kernel.source.path is not None
    kernel, entry = variant.kernel, entry_name(variant)
    count = sum(1 for a in kernel.args if not a.launch_only)
    return (
        f"// generated by aotpack for {variant.id}\n"
        f'#include "{kernel.source.path}"\n'
        "template <typename... A> constexpr int aotpack_arity(void (*)(A...)) { return sizeof...(A); }\n"
        f'static_assert(aotpack_arity(&{entry}) == {count}, "aotpack: the recipe gives kernel {kernel.name} {count} '
        f'arguments (those not launch_only); its entry takes another number");\n'
        f"void *aotpack_entry = (void *)&{entry};\n"
    )


def _normalize(name: str) -> str:
    return re.sub(r"\s+", "", name)


def _demangled_base(demangled: str) -> str:
    """'void scale<__half, 256>(__half*, int)' -> 'scale<__half,256>'."""
    depth = 0
    for i, ch in enumerate(demangled):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            demangled = demangled[:i]
            break
    head = demangled.strip()
    if head.startswith("void "):
        head = head[len("void ") :]
    return _normalize(head)


def resolve_entry(wanted: str, symbols: list[str], demangled: list[str]) -> str:
    """The mangled symbol among ``symbols`` that ``wanted`` names (exact, demangled, or the one
    instantiation of the template)."""
    if wanted in symbols:
        return wanted
    target = _normalize(wanted)
    for sym, dem in zip(symbols, demangled, strict=True):
        if _demangled_base(dem) == target:
            return sym
    base = target.split("<")[0]
    same = [sym for sym, dem in zip(symbols, demangled, strict=True) if _demangled_base(dem).split("<")[0] == base]
    if len(same) == 1:
        return same[0]
    shown = ", ".join(demangled) or "none"
    raise LookupError(f"entry {wanted!r} is not among the compiled kernels ({shown})")


def _define_clash(variant: Variant) -> str:
    """A hint when a define is also declared as a name in the source (the -D macro replaces it)."""
    assert variant.kernel.source.path is not None
    text = variant.kernel.source.path.read_text(errors="replace")
    clashes = [
        name for name, _ in variant.config.constexprs
        if re.search(rf"\b(?:int|unsigned|size_t|bool|auto|typename|class)\s+{re.escape(name)}\b", text)
    ]  # fmt: skip
    if not clashes:
        return ""
    names = ", ".join(clashes)
    return (
        f" (note: defines reach nvcc as -D macros, and {variant.kernel.source.path.name} declares {names}; rename it)"
    )


def _demangle(symbols: list[str]) -> list[str]:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None or not symbols:
        return symbols
    out = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True, check=False).stdout
    lines = out.splitlines()
    return lines if len(lines) == len(symbols) else symbols


@dataclass(frozen=True)
class NvccCompiler:
    nvcc: Path

    @classmethod
    def find(cls, explicit: str | None = None, floor: int | None = None) -> NvccCompiler:
        """The nvcc to use; with a CUDA floor, one no newer than it (its cubins and PTX need a driver of
        its own release or newer)."""
        compiler = cls(find_nvcc(explicit))
        (major, minor), _, _ = _nvcc_facts(compiler.nvcc)
        if floor is not None and major * 1000 + minor * 10 > floor:
            raise ToolNotFound(
                f"nvcc {major}.{minor} builds CUDA kernels for drivers from CUDA {major}.{minor}, newer than the "
                f"CUDA floor {facts.cuda_text(floor)}; name the nvcc of a CUDA {facts.cuda_text(floor)} or older "
                "toolkit (--nvcc or $CUDA_HOME; PyPI has no CUDA 12 nvcc), or raise the floor (cuda: or --cuda)"
            )
        return compiler

    def versions(self) -> Mapping[str, str]:
        (major, minor), _, _ = _nvcc_facts(self.nvcc)
        return {"nvcc": f"{major}.{minor}"}  # the version, not where it is: no host path in the wheel

    def check(self, kernels: Iterable[Kernel]) -> None:
        (major, minor), codes, archs = _nvcc_facts(self.nvcc)
        for kernel in kernels:
            for target in kernel.targets:
                if not nvcc_can_build(target, codes, archs):
                    listed = ", ".join(sorted(codes | archs))
                    raise RecipeError(
                        f"kernels.{kernel.name}: nvcc {major}.{minor} ({self.nvcc}) cannot build {target}; it "
                        f"builds {listed}. Drop the target or use an nvcc that has it (--nvcc)",
                        kernel.where,
                    )

    def compile(self, variant: Variant) -> Outcome:
        kernel = variant.kernel
        assert kernel.cuda is not None
        (major, minor), _, _ = _nvcc_facts(self.nvcc)
        ptx = facts.target(variant.target).ptx
        with tempfile.TemporaryDirectory(prefix=_temp.temp_prefix(SCRATCH_TEMP)) as tmp:
            wrapper = Path(tmp) / "variant.cu"
            _temp.write_file(wrapper, wrapper_source(variant))
            defines = tuple(
                (n, str(v).lower() if isinstance(v, bool) else str(v)) for n, v in variant.config.constexprs
            )
            job = NvccJob(
                nvcc=str(self.nvcc), wrapper=wrapper, output=Path(tmp) / ("out.ptx" if ptx else "out.cubin"),
                target=variant.target, include_dirs=kernel.cuda.include_dirs,
                defines=(*defines, ("AOTPACK_HINTED", "1" if variant.hinted else "0")), flags=kernel.cuda.nvcc_flags,
            )  # fmt: skip
            try:
                report = _tools.run(job.argv())
            except ToolFailed as exc:
                lines = [ln for ln in exc.output.splitlines() if "error" in ln] or exc.output.splitlines()[-3:]
                reason = f"nvcc failed: {' | '.join(lines)}{_define_clash(variant)}"  # no recipe location: cached
                return Pruned(variant_id=variant.id, reason=reason)
            image = job.output.read_bytes()
        symbols = _PTX_ENTRY.findall(image.decode(errors="replace")) if ptx else _ENTRY.findall(report)
        try:
            entry = resolve_entry(entry_name(variant), symbols, _demangle(symbols))
        except LookupError as exc:
            return Pruned(variant_id=variant.id, reason=str(exc))
        details = {"entry_demangled": entry_name(variant)}
        registers = int((_REGISTERS.findall(report) or ["0"])[-1]) if not ptx else 0
        if not ptx:
            details["registers"] = str(registers or "?")
            spills = _SPILLS.findall(report)
            if spills:
                details["stack_bytes"], details["spill_stores"], details["spill_loads"] = spills[-1]
        static_shared = int((_SMEM.findall(report) or ["0"])[-1]) if not ptx else 0
        return Artifact(
            variant_id=variant.id,
            image=image,  # PTX is read as a C string: the generated literal ends in NUL
            entry=entry,
            shared=0,
            static_shared=static_shared,
            num_warps=0,
            registers=registers,
            extra_pointer_params=0,
            metadata=tuple(sorted(details.items())),
            driver_floor=DriverFloor(major * 1000 + minor * 10, f"nvcc {major}.{minor}"),
        )
