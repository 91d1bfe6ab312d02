"""The pipeline in one place: recipe -> plan -> compile -> codegen -> native -> wheel -> repair.

Nothing is written to the output directory until the wheel is repaired and checked; it then
appears there in one atomic rename.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import __version__, codegen, native, plan, recipe, repair, wheel
from .codegen import c as codegen_c
from .codegen import python as codegen_py
from .compilers import Artifact, Outcome, Pruned, compile_all, compilers_for
from .errors import CompileError

log = logging.getLogger("aotpack")
Progress = Callable[[plan.Variant, Outcome], None]


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    wheel: Path
    variants: int
    pruned: tuple[Pruned, ...]


def build(
    recipe_path: str | Path,
    out_dir: str | Path,
    *,
    jobs: int | None = None,
    strict: bool = False,
    select: tuple[str, ...] = (),
    keep_build_dir: Path | None = None,
    progress: Progress | None = None,
    nvcc: str | None = None,
    winners_only: bool = False,
) -> BuildResult:
    rec = recipe.load(recipe_path)
    variants = plan.plan_variants(rec, select, winners_only=winners_only)
    compilers = compilers_for((k.backend for k in rec.kernels), nvcc=nvcc)
    versions: dict[str, str] = {"aotpack": __version__}
    min_driver: dict[tuple[str, str], int] = {}
    for backend, compiler in compilers.items():
        mine = [k for k in rec.kernels if k.backend == backend]
        compiler.check(mine)
        versions.update(compiler.versions())
        for kernel in mine:
            for target in kernel.targets:
                min_driver[kernel.name, target] = compiler.min_driver_cuda(target)
    log.info("compiling %d variants of %d kernels", len(variants), len(rec.kernels))
    outcomes = compile_all(variants, compilers, jobs=jobs, progress=progress)
    pruned = tuple(o for o in outcomes.values() if isinstance(o, Pruned))
    if pruned and strict:
        lines = "\n".join(f"  {p.variant_id}: {p.reason}" for p in pruned)
        raise CompileError(f"{len(pruned)} variants failed to compile (--strict):\n{lines}")
    for kernel in rec.kernels:
        tried = [v for v in variants if v.kernel is kernel]
        if not any(isinstance(outcomes[v.id], Artifact) for v in tried):
            reasons = "\n".join(
                f"  {p.variant_id}: {p.reason}" for p in pruned if p.variant_id.startswith(kernel.name + "/")
            )
            raise CompileError(f"{kernel.where}: kernel {kernel.name!r}: no variant compiled:\n{reasons}")
    inputs = codegen.BuildInput(
        recipe=rec, kernels=codegen.group(rec, variants, outcomes, min_driver), versions=tuple(sorted(versions.items()))
    )
    with tempfile.TemporaryDirectory(prefix="aotpack-") as tmp:
        work = keep_build_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        wheel_path = package(inputs, work, Path(out_dir))
    built = sum(len(kb.variants) for kb in inputs.kernels)
    return BuildResult(wheel=wheel_path, variants=built, pruned=pruned)


def package(inputs: codegen.BuildInput, work: Path, out_dir: Path) -> Path:
    """Generate, compile and pack the wheel; repair it into out_dir."""
    rec = inputs.recipe
    docs = {kb.kernel.name: codegen_py.docstring(kb) for kb in inputs.kernels}
    generated = {"kernels.c": codegen_c.kernels_c(inputs), "module.c": codegen_c.module_c(inputs, docs)}
    log.info("compiling the extension module")
    so = native.compile_extension(work, generated)
    pkg = rec.package
    files = (
        (f"{pkg}/__init__.py", codegen_py.init_py(inputs).encode()),
        (f"{pkg}/__init__.pyi", codegen_py.init_pyi(inputs).encode()),
        (f"{pkg}/py.typed", b""),
        (f"{pkg}/manifest.json", codegen_py.manifest_json(inputs, __version__).encode()),
        (f"{pkg}/_native.abi3.so", so.read_bytes()),
        (f"{pkg}/_aotpack_runtime.py", native.runtime_text("aot_kernels.py").encode()),
    )
    spec = wheel.WheelSpec(
        distribution=pkg, version=rec.version, tag="cp39-abi3-linux_x86_64", summary=rec.summary,
        requires_python=">=3.9", generator=f"aotpack {__version__}", files=files,
    )  # fmt: skip
    raw = wheel.write_wheel(spec, work / "raw")
    log.info("repairing %s with auditwheel", raw.name)
    return repair.repair(raw, out_dir)
