"""The pipeline in one place: recipe -> plan -> compile -> codegen -> native -> wheel -> repair.

Nothing is written to the output directory until the wheel is repaired and checked; it then
appears there in one atomic rename. Compiled variants and finished wheels are cached by content
(``cache.py``): a rebuild compiles only what changed, and a no-op rebuild copies the wheel.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from . import _temp, cache, codegen, compress, distributed, limits, model, mutation, native, plan, recipe, repair, wheel
from ._version import __version__
from .codegen import c as codegen_c
from .codegen import python as codegen_py
from .compilers import Artifact, Outcome, Pruned, compile_all, compilers_for, targets_of
from .errors import CompileError, RecipeError

log = logging.getLogger("aotpack")
WORK_TEMP = "aotpack-"  # a build's work folder in the system's temporary folder
Progress = Callable[[plan.Variant, Outcome, bool], None]  # (variant, outcome, taken from the cache)


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    wheel: Path
    variants: int
    pruned: tuple[Pruned, ...]
    cached: bool = False  # the whole wheel came from the cache (nothing changed)


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
    cache_dir: Path | None = None,
    use_cache: bool = True,
    line_info: bool = False,
    cuda_floor: int | None = None,
    executor: str | None = None,
) -> BuildResult:
    rec = recipe.load(recipe_path)
    _temp.sweep(Path(tempfile.gettempdir()), WORK_TEMP)  # the work folders of killed builds
    rec, variants = plan.select(rec, select, winners_only=winners_only)
    floor = cuda_floor if cuda_floor is not None else rec.cuda_floor
    compilers = compilers_for(rec.kernels, nvcc=nvcc, line_info=line_info, cuda_floor=floor)
    versions: dict[str, str] = {
        "aotpack": __version__, "host C compiler": native.zig_version(), "image compression": compress.version(),
    }  # fmt: skip
    toolchains: dict[str, dict[str, str]] = {}
    for backend, compiler in compilers.items():
        toolchains[backend] = dict(compiler.versions())
        versions.update(toolchains[backend])

    sources = provenance(rec)
    store = cache.Cache(cache_dir or cache.default_dir()) if use_cache else None
    keys: dict[str, str] = {}
    wheel_key = ""
    if store is not None:
        digests = {k.name: cache.source_digest(k) for k in rec.kernels}
        keys = {v.id: cache.variant_key(v, toolchains[v.kernel.backend], digests[v.kernel.name]) for v in variants}
        # every input file, tuning hooks included (the manifest records them all), and the variants
        wheel_key = store.wheel_key(sources, [*keys.values(), f"strict={strict}", *versions.values()])
        hit = store.wheel(wheel_key)
        if hit is not None:
            log.info("nothing changed: the wheel comes from the cache (%s)", store.root)
            info = hit[1]
            pruned_info = cast(list[dict[str, str]], info.get("pruned", []))  # never fatal: the build failed
            return BuildResult(
                wheel=cache.copy_into(hit[0], Path(out_dir)), variants=cast(int, info["variants"]),
                pruned=tuple(Pruned(variant_id=p["variant_id"], reason=p["reason"]) for p in pruned_info), cached=True,
            )  # fmt: skip

    outcomes: dict[str, Outcome] = {}
    misses = []
    for v in variants:
        found = store.load(keys[v.id]) if store is not None else None
        if found is None:
            misses.append(v)
            continue
        outcomes[v.id] = found
        if progress is not None:
            progress(v, found, True)
    if misses:
        for backend, compiler in compilers.items():
            compiler.check({v.kernel.name: v.kernel for v in misses if v.kernel.backend == backend}.values())
        log.info("compiling %d variants of %d kernels (%d cached)", len(misses), len(rec.kernels), len(outcomes))

        def finished(v: plan.Variant, o: Outcome) -> None:
            if store is not None:  # at once: a build killed later keeps what it compiled
                store.store(keys[v.id], o)
            if progress is not None:
                progress(v, o, False)

        if executor is None:
            outcomes.update(compile_all(misses, compilers, jobs=jobs, progress=finished))
        else:  # a Dask cluster whose workers have this toolchain (distributed.py)
            settings = distributed.Settings(targets_of(rec.kernels), nvcc, line_info, floor)
            outcomes.update(distributed.compile_on(executor, misses, compilers, settings, progress=finished))
    outcomes = {v.id: outcomes[v.id] for v in variants}

    pruned = tuple(o for o in outcomes.values() if isinstance(o, Pruned))
    unlaunchable = [p for p in pruned if p.fatal]
    if unlaunchable:
        lines = "\n".join(f"  {p.variant_id}: {p.reason}" for p in unlaunchable)
        raise CompileError(
            f"{len(unlaunchable)} variants compiled but cannot be launched by aotpack's runtime; change "
            f"their configs or options in {rec.path}:\n{lines}"
        )
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
    _check_mutation(rec, outcomes)
    inputs = codegen.BuildInput(
        recipe=rec,
        kernels=codegen.group(rec, variants, outcomes),
        versions=tuple(sorted(versions.items())),
        sources=sources,
    )
    built = sum(len(kb.variants) for kb in inputs.kernels)
    with tempfile.TemporaryDirectory(prefix=_temp.temp_prefix(WORK_TEMP)) as tmp:
        work = keep_build_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        repaired = package(inputs, work)
        if store is not None:
            info = {"variants": built, "pruned": [dataclasses.asdict(p) for p in pruned]}
            store.store_wheel(wheel_key, repaired, info)
        wheel_path = cache.copy_into(repaired, Path(out_dir))
    return BuildResult(wheel=wheel_path, variants=built, pruned=pruned)


def _check_mutation(rec: model.Recipe, outcomes: dict[str, Outcome]) -> None:
    """A recipe's ``mutates:`` must agree with what the Triton code writes (read off its TTIR)."""
    for kernel in rec.kernels:
        if kernel.mutates is None or kernel.backend != "triton":
            continue
        mine = [o for o in outcomes.values() if isinstance(o, Artifact) and o.variant_id.startswith(kernel.name + "/")]
        found = mutation.recorded(o.metadata for o in mine)
        missing, extra = sorted(set(found) - set(kernel.mutates)), sorted(set(kernel.mutates) - set(found))
        if missing or extra:
            what = [f"the kernel writes {', '.join(missing)}, which 'mutates' does not list"] if missing else []
            what += [f"it lists {', '.join(extra)}, which no store in the kernel reaches"] if extra else []
            raise RecipeError(f"kernels.{kernel.name}.mutates: {'; '.join(what)}", kernel.where)


def runtime_notice() -> bytes:
    """The notice of the aotpack runtime every wheel embeds (its C runtime and Python module), with
    aotpack's license text as aotpack's own distribution carries it."""
    import importlib.metadata

    # every aotpack found on the path: a checkout's aotpack.egg-info may shadow the installed dist-info
    found = (d.read_text(name) for d in importlib.metadata.distributions(name="aotpack")
             for name in ("licenses/LICENSE", "LICENSE"))  # fmt: skip
    text = next((t for t in found if t), None)
    if text is None:
        raise CompileError("aotpack's LICENSE is missing from its installation; reinstall aotpack")
    head = (f"This package embeds the runtime of aotpack {__version__} (aot_runtime.c, aot_python.c and\n"
            "_aotpack_runtime.py, compiled into its shared objects or copied beside them), licensed under\n"
            "the Apache License, Version 2.0, whose text follows.\n\n")  # fmt: skip
    return (head + text).encode()


def provenance(rec: model.Recipe) -> tuple[tuple[str, str], ...]:
    """Every file the build read, relative to the recipe, with its sha256."""
    files = {rec.path.resolve(), *rec.tables}
    for kernel in rec.kernels:
        files.update(cache.source_files(kernel))
        if kernel.tune:
            files.update(s.path for s in (kernel.tune.inputs, kernel.tune.reference) if s is not None and s.path)
    base = rec.path.resolve().parent
    return tuple(sorted((os.path.relpath(f, base), cache.file_digest(f)) for f in files))


def package(inputs: codegen.BuildInput, work: Path) -> Path:
    """Generate, compile and pack the wheel; returns it repaired (in ``work``)."""
    rec = inputs.recipe
    docs = {kb.kernel.name: codegen_py.docstring(kb) for kb in inputs.kernels}
    pkg = rec.package
    header = codegen_c.capi_h(inputs, docs)
    generated = {
        "kernels.c": codegen_c.kernels_c(inputs),
        "module.c": codegen_c.module_c(inputs, docs),
        "capi.c": codegen_c.capi_c(inputs),
        f"{pkg}.h": header,
        "aot_limits.h": limits.header(),
    }
    log.info("compiling the extension module and the C API library")
    so, library = native.compile_libraries(work, generated, pkg)
    files = (
        (f"{pkg}/__init__.py", codegen_py.init_py(inputs).encode()),
        (f"{pkg}/__init__.pyi", codegen_py.init_pyi(inputs).encode()),
        (f"{pkg}/py.typed", b""),
        (f"{pkg}/manifest.json", codegen_py.manifest_json(inputs, __version__).encode()),
        (f"{pkg}/_native.abi3.so", so.read_bytes()),
        (f"{pkg}/lib{pkg}.so", library.read_bytes()),
        (f"{pkg}/include/{pkg}.h", header.encode()),
        (f"{pkg}/_aotpack_runtime.py", native.runtime_text("aot_kernels.py").encode()),
    )
    spec = wheel.WheelSpec(
        distribution=pkg, version=rec.version, tag="cp39-abi3-linux_x86_64", summary=rec.summary,
        requires_python=">=3.9", generator=f"aotpack {__version__}", files=files, license=rec.license,
        license_files=(("AOTPACK-RUNTIME-LICENSE", runtime_notice()),),
    )  # fmt: skip
    raw = wheel.write_wheel(spec, work / "raw")
    log.info("repairing %s with auditwheel", raw.name)
    return repair.repair(raw, work / "repaired")
