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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol, cast

from .. import _temp, backends, codegen, facts, limits, model, runtime, selection, values
from .._version import __version__
from ..backends import Artifact, Compiler, Outcome, Pruned, compile_all, compilers_for, targets_of
from ..backends import recipes as recipe
from ..codegen import c as codegen_c
from ..codegen import capi as codegen_capi
from ..codegen import compress
from ..codegen import python as codegen_py
from ..errors import CompileError, RecipeError, UsageError, WheelError
from ..model import Backend
from ..plan import variants as plan
from ..recipe import tables
from ..words import plural
from . import cache, distributed, native, repair, wheel

log = logging.getLogger("aotpack")
WORK_TEMP = "aotpack-"  # a build's work folder in the system's temporary folder
# what a build and its compile workers keep in the system's temporary folder, each named for its process
# (_temp.temp_prefix): the next build removes those of killed processes (sweep_temp)
TEMP_NAMES = (WORK_TEMP, *backends.TEMP_PREFIXES)
Built = list[tuple[plan.Variant, Outcome]]  # every variant planned, with its outcome, in plan order


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """What ``aotpack build`` is asked besides the recipe (the CLI's flags, build_meta's settings)."""

    out_dir: Path
    jobs: int | None = None  # compile processes (default: one per CPU)
    strict: bool = False  # a variant that fails to compile fails the build
    select: tuple[str, ...] = ()  # --only: globs over variant ids
    winners_only: bool = False  # only the configs the dispatch tables pick
    keep_build_dir: Path | None = None
    nvcc: str | None = None
    cache_dir: Path | None = None  # default: cache.default_dir()
    use_cache: bool = True
    line_info: bool = False
    cuda_floor: int | None = None  # overrides the recipe's `cuda:`
    executor: str | None = None  # dask://HOST:PORT: compile on that cluster (distributed.py)
    platform: str | None = None  # the wheel's platform, one of native.PLATFORMS (default: this machine's)


class Progress(Protocol):
    """Told the plan once, then each outcome as it arrives (``cached``: taken from the cache)."""

    def planned(self, variants: Sequence[plan.Variant]) -> None: ...

    def __call__(self, variant: plan.Variant, outcome: Outcome, cached: bool) -> None: ...


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    wheel: Path
    variants: int
    pruned: tuple[Pruned, ...]
    cached: bool = False  # the whole wheel came from the cache (nothing changed)

    def said(self, seconds: float) -> str:
        """The line a build ends with (``aotpack build``'s, and the PEP 517 backend's under pip -v)."""
        pruned = f", {len(self.pruned)} pruned" if self.pruned else ""
        cached = ", unchanged: from the cache" if self.cached else ""
        size = self.wheel.stat().st_size / 1e6
        return f"built {self.wheel} ({size:.2f} MB, {plural(self.variants, 'variant')}{pruned}{cached}, {seconds:.0f}s)"


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """The compilers found for a build, and every version that goes into the manifest and cache keys."""

    compilers: dict[Backend, Compiler]
    by_backend: dict[Backend, dict[str, str]]
    versions: dict[str, str]
    cuda_floor: int | None

    def versions_of(self, kernel: model.Kernel) -> dict[str, str]:
        """The versions of the toolchain that compiles the kernel (its variants' cache keys hold them)."""
        return backends.entry_of(self.by_backend, kernel)


@dataclass(frozen=True)
class _Keys:
    """The build's cache (None: --no-cache), each variant's key and the wheel's, and the most bytes
    the cache may hold after the build."""

    store: cache.Cache | None
    variants: dict[str, str]
    wheel: str
    limit: int = 0


def build(recipe_path: str | Path, out_dir: str | Path, *, progress: Progress | None = None,
          **options: Any) -> BuildResult:  # fmt: skip
    """``aotpack build`` as a function: ``options`` are the fields of ``BuildOptions``."""
    return run(recipe.load(recipe_path), BuildOptions(out_dir=Path(out_dir), **options), progress)


def run(rec: model.Recipe, options: BuildOptions, progress: Progress | None = None) -> BuildResult:
    """The pipeline, step by step: plan, find the toolchain, reuse a cached wheel or compile what
    the cache lacks, check the outcomes, generate and package the wheel."""
    sweep_temp()
    options = dataclasses.replace(options, platform=wheel_platform(options))  # checked before anything compiles
    _modules_run_on(rec, native.PLATFORMS[wheel_platform(options)])
    rec, variants = plan.select(rec, options.select, winners_only=options.winners_only)
    if progress is not None:
        progress.planned(variants)
    tools = toolchain(rec, options)
    sources = provenance(rec)
    keys = _cache_keys(rec, variants, tools, sources, options)
    hit = _cached_wheel(keys, options)
    if hit is not None:
        return hit
    built = _compile(rec, variants, tools, keys, options, progress)
    pruned = _check_outcomes(rec, built, options.strict)
    _check_mutation(rec, built)
    rec, built = _fitted(rec, built)
    inputs = codegen.BuildInput(recipe=rec, kernels=codegen.group(rec, built),
                                versions=tuple(sorted(tools.versions.items())), sources=sources)  # fmt: skip
    return _package_into(inputs, pruned, keys, options)


def _fitted(rec: model.Recipe, built: Built) -> tuple[model.Recipe, Built]:
    """The recipe and its compiled variants with the dispatch rules between measured keys chosen (tables.fit),
    once compiled (a rule may count programs in waves of each variant's blocks per multiprocessor), for the
    kernels this build generates code for: seconds for the demo's tables, spent neither when a listing reads
    the recipe nor for a cached wheel or the kernels --only leaves out (a variant's code reads no rule)."""
    compiled: dict[str, list[tuple[selection.Group, int, int]]] = {}
    for v, o in built:
        if isinstance(o, Artifact):
            group = (v.target, tuple(sorted(v.binding)), v.specialization)
            compiled.setdefault(v.kernel.name, []).append((group, v.kernel.configs.index(v.config),
                                                           o.blocks_per_sm(v.target)))  # fmt: skip
    blocks = {k.name: selection.blocks(compiled.get(k.name, []), len(k.configs)) for k in rec.kernels}
    fitted = {k.name: k for k in tables.fit(list(rec.kernels), blocks)}
    return (dataclasses.replace(rec, kernels=tuple(fitted[k.name] for k in rec.kernels)),
            [(dataclasses.replace(v, kernel=fitted[v.kernel.name]), o) for v, o in built])  # fmt: skip


def sweep_temp() -> None:
    """Remove what killed builds and their compile workers left in the system's temporary folder
    (a worker's private Triton cache, an nvcc scratch folder, a work folder): a compile worker
    sweeps only when it compiles, and a build may take everything from the cache."""
    folder = Path(tempfile.gettempdir())
    for base in TEMP_NAMES:
        _temp.sweep(folder, base)


def toolchain(rec: model.Recipe, options: BuildOptions) -> Toolchain:
    floor = options.cuda_floor if options.cuda_floor is not None else rec.cuda_floor
    compilers = compilers_for(rec.kernels, nvcc=options.nvcc, line_info=options.line_info, cuda_floor=floor)
    versions: dict[str, str] = {
        "aotpack": __version__, "host C compiler": native.zig_version(), "image compression": compress.version(),
    }  # fmt: skip
    by_backend = {backend: dict(compiler.versions()) for backend, compiler in compilers.items()}
    for found in by_backend.values():
        versions.update(found)
    return Toolchain(compilers=compilers, by_backend=by_backend, versions=versions, cuda_floor=floor)


def _cache_keys(
    rec: model.Recipe,
    variants: Sequence[plan.Variant],
    tools: Toolchain,
    sources: tuple[tuple[str, str], ...],
    options: BuildOptions,
) -> _Keys:
    if not options.use_cache:
        return _Keys(None, {}, "")
    store = cache.Cache(options.cache_dir or cache.default_dir())
    limit = cache.size_limit()  # read before the work: a bad $AOTPACK_CACHE_SIZE fails at once
    # a kernel whose code holds no path of its sources: its cache entries serve any checkout
    digests = {k.name: cache.source_digest(k, portable=backends.of(k).portable(options.line_info)) for k in rec.kernels}
    keys = {v.id: cache.variant_key(v, tools.versions_of(v.kernel), digests[v.kernel.name]) for v in variants}
    # every input file, tuning hooks included (the manifest records them all), and the variants
    wheel_key = store.wheel_key(sources, [*keys.values(), f"strict={options.strict}", *tools.versions.values(),
                                          f"platform={wheel_platform(options)}"])  # fmt: skip
    return _Keys(store, keys, wheel_key, limit)


def _cached_wheel(keys: _Keys, options: BuildOptions) -> BuildResult | None:
    """The wheel of an identical earlier build, copied into the output folder."""
    hit = keys.store.wheel(keys.wheel) if keys.store is not None else None
    if hit is None or keys.store is None:
        return None
    log.info("nothing changed: the wheel comes from the cache (%s)", keys.store.root)
    info = hit[1]
    pruned_info = cast(list[dict[str, str]], info.get("pruned", []))  # never fatal: the build failed
    return BuildResult(
        wheel=cache.copy_into(hit[0], options.out_dir), variants=cast(int, info["variants"]),
        pruned=tuple(Pruned(variant_id=p["variant_id"], reason=p["reason"]) for p in pruned_info), cached=True,
    )  # fmt: skip


def _compile(
    rec: model.Recipe,
    variants: Sequence[plan.Variant],
    tools: Toolchain,
    keys: _Keys,
    options: BuildOptions,
    progress: Progress | None,
) -> Built:
    """Every variant's outcome: from the cache, else compiled (locally or on the cluster) and cached."""
    found: dict[str, Outcome] = {}
    misses = []
    for v in variants:
        outcome = keys.store.load(keys.variants[v.id]) if keys.store is not None else None
        if outcome is None:
            misses.append(v)
            continue
        found[v.id] = outcome
        if progress is not None:
            progress(v, outcome, True)
    if misses:
        backends.check_all(tools.compilers, {v.kernel.name: v.kernel for v in misses}.values())
        log.info("compiling %s of %s (%d cached)", plural(len(misses), "variant"), plural(len(rec.kernels), "kernel"),
                 len(found))  # fmt: skip
        misses = compile_order(misses)

        def finished(v: plan.Variant, o: Outcome) -> None:
            if keys.store is not None:  # at once: a build killed later keeps what it compiled
                keys.store.store(keys.variants[v.id], o)
            if progress is not None:
                progress(v, o, False)

        if options.executor is None:
            compiled = compile_all(misses, tools.compilers, jobs=options.jobs, progress=finished)
        else:  # a Dask cluster whose workers have this toolchain (distributed.py)
            settings = distributed.Settings(targets_of(rec.kernels), options.nvcc, options.line_info, tools.cuda_floor)
            compiled = distributed.compile_on(options.executor, misses, tools.compilers, settings, progress=finished)
        found.update((v.id, o) for v, o in compiled)
    return [(v, found[v.id]) for v in variants]


def compile_order(variants: Sequence[plan.Variant]) -> list[plan.Variant]:
    """The variants in the order they are compiled: each kernel's spread evenly over the run (the i-th of a
    kernel's n at (i + 1/2)/n of the way, ties in plan order), so every kernel's pace is sampled from the start
    and the build's ETA knows what each costs early, not only once the plan reaches it (commands/progress.py).
    The wheel does not depend on it: outcomes are put back in plan order."""
    count = Counter(v.kernel.name for v in variants)
    seen: Counter[str] = Counter()
    placed = []
    for i, v in enumerate(variants):
        placed.append((Fraction(2 * seen[v.kernel.name] + 1, 2 * count[v.kernel.name]), i))
        seen[v.kernel.name] += 1
    return [variants[i] for _, i in sorted(placed)]


def _check_outcomes(rec: model.Recipe, built: Built, strict: bool) -> tuple[Pruned, ...]:
    """The pruned variants, once the build may go on: none unlaunchable, none at all with ``strict``,
    and every kernel left with a variant. A reason names no place in a recipe (it is cached for every
    recipe that builds the variant): each message names this recipe's."""
    failed = [(v, o) for v, o in built if isinstance(o, Pruned)]
    pruned = tuple(o for _, o in failed)
    unlaunchable = [p for p in pruned if p.fatal]
    if unlaunchable:
        lines = "\n".join(f"  {p.variant_id}: {p.reason}" for p in unlaunchable)
        raise CompileError(
            f"{plural(len(unlaunchable), 'variant')} compiled but cannot be launched by aotpack's runtime; change "
            f"their configs or options in {rec.path}:\n{lines}"
        )
    if pruned and strict:
        lines = "\n".join(f"  {v.kernel.where}: {p.variant_id}: {p.reason}" for v, p in failed)
        raise CompileError(f"{plural(len(pruned), 'variant')} failed to compile (--strict):\n{lines}")
    for kernel in rec.kernels:
        mine = [o for v, o in built if v.kernel is kernel]
        if not any(isinstance(o, Artifact) for o in mine):
            reasons = "\n".join(f"  {p.variant_id}: {p.reason}" for p in mine if isinstance(p, Pruned))
            raise CompileError(f"{kernel.where}: kernel {kernel.name!r}: no variant compiled:\n{reasons}")
    return pruned


def _package_into(
    inputs: codegen.BuildInput, pruned: tuple[Pruned, ...], keys: _Keys, options: BuildOptions
) -> BuildResult:
    """Package the wheel in a work folder, cache it, and copy it into the output folder."""
    built = sum(len(kb.variants) for kb in inputs.kernels)
    with tempfile.TemporaryDirectory(prefix=_temp.temp_prefix(WORK_TEMP)) as tmp:
        work = options.keep_build_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        repaired = package(inputs, work, wheel_platform(options))
        if keys.store is not None:
            info = {"variants": built, "pruned": [dataclasses.asdict(p) for p in pruned]}
            keys.store.store_wheel(keys.wheel, repaired, info)
            dropped, freed = keys.store.keep_within(keys.limit)
            if dropped:
                log.info("the cache holds at most %s: dropped its %d least recently used entries (%.1f MB)",
                         cache.size_setting(), dropped, freed / 1e6)  # fmt: skip
        wheel_path = cache.copy_into(repaired, options.out_dir)
    return BuildResult(wheel=wheel_path, variants=built, pruned=pruned)


def _check_mutation(rec: model.Recipe, built: Built) -> None:
    """A recipe's ``mutates:`` must agree with what the compiled code writes, where its backend can tell
    (Triton's, read off its TTIR)."""
    for kernel in rec.kernels:
        found = backends.of(kernel).writes(o for v, o in built if v.kernel is kernel and isinstance(o, Artifact))
        if kernel.mutates is None or found is None:
            continue
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
    shipped = ", ".join(runtime.PYTHON_FILES)
    head = (f"This package embeds the runtime of aotpack {__version__} (its C, aot_*.c, compiled into the\n"
            f"shared objects; its Python, {shipped}, copied beside them), licensed\n"
            "under the Apache License, Version 2.0, whose text follows.\n\n")  # fmt: skip
    return (head + text).encode()


def provenance(rec: model.Recipe) -> tuple[tuple[str, str], ...]:
    """Every file the build read, relative to the recipe, with its sha256."""
    files = {rec.path.resolve(), *rec.tables, *(e.folder / f for e in rec.triton_cache for f in e.files),
             *(s.folder / f for s in rec.inductor_cache for f in s.files),
             *(rec.project.files if rec.project else ())}  # fmt: skip
    for kernel in rec.kernels:
        files.update(cache.source_files(kernel))
        if kernel.tune:
            files.update(s.path for s in (kernel.tune.inputs, kernel.tune.reference) if s is not None and s.path)
    base = rec.path.resolve().parent
    return tuple(sorted((os.path.relpath(f, base), cache.file_digest(f)) for f in files))


def _recorded(file: Path) -> bytes:
    """A recorded file the wheel ships, read as the recipe reader checked it (``values.read_plain``): one swapped for
    a link or a hard link since is refused, never followed into a file of the host."""
    try:
        return values.read_plain(file)
    except OSError as exc:
        raise RecipeError(f"{file}: not the plain file of the recording it was when the recipe was read ({exc}); "
                          "record again") from None  # fmt: skip


def wheel_platform(options: BuildOptions) -> str:
    """The platform the wheel is built for: the option's, checked, else this machine's."""
    chosen = options.platform or native.host_platform()
    if chosen not in native.PLATFORMS:
        raise UsageError(f"platform {chosen!r}: aotpack builds wheels for {', '.join(native.PLATFORMS)}; name one of "
                         "them (--platform, or platform in [tool.aotpack])")  # fmt: skip
    return chosen


def _modules_run_on(rec: model.Recipe, machine: str) -> None:
    """A recording's Triton modules (machine code of the recording host's C compiler) run on that host's machine
    alone: a wheel for another one cannot ship them."""
    for entry in rec.triton_cache:
        if not entry.module:
            continue
        found = native.elf_machine((entry.folder / entry.files[0]).read_bytes()[:64])
        if found != machine:
            raise WheelError(
                f"{entry.folder / entry.files[0]}: a module Triton built for {found or 'another machine'}, which "
                f"a wheel for {machine} cannot ship; record on a {machine} host for that wheel"
            )


def package(inputs: codegen.BuildInput, work: Path, platform: str) -> Path:
    """Generate, compile and pack the wheel for ``platform``; returns it repaired (in ``work``)."""
    rec = inputs.recipe
    machine = native.PLATFORMS[platform]
    docs = {kb.kernel.name: codegen_py.docstring(kb) for kb in inputs.kernels}
    pkg = rec.package
    header = codegen_capi.capi_h(inputs, docs)
    generated = {
        "kernels.c": codegen_c.kernels_c(inputs),
        "module.c": codegen_c.module_c(inputs, docs),
        "capi.c": codegen_capi.capi_c(inputs),
        f"{pkg}.h": header,
        "aot_limits.h": limits.header(),
        "aot_vocabulary.h": codegen_c.vocabulary_h(),
    }
    log.info("compiling the extension module and the C API library")
    so, library = native.compile_libraries(work, generated, pkg, machine)
    files = (
        (f"{pkg}/__init__.py", codegen_py.init_py(inputs).encode()),
        (f"{pkg}/__init__.pyi", codegen_py.init_pyi(inputs).encode()),
        (f"{pkg}/py.typed", b""),
        (f"{pkg}/manifest.json", codegen_py.manifest_json(inputs, __version__).encode()),
        (f"{pkg}/_native.abi3.so", so.read_bytes()),
        (f"{pkg}/lib{pkg}.so", library.read_bytes()),
        (f"{pkg}/include/{pkg}.h", header.encode()),
        *((f"{pkg}/{name}", native.runtime_text(name).encode()) for name in runtime.PYTHON_FILES),
        # Triton cache entries as recorded, which activate() serves as cache hits (_aotpack_guard)
        *((f"{pkg}/_triton_cache/{e.key}/{f}", _recorded(e.folder / f)) for e in rec.triton_cache for f in e.files),
        # torch.compile's caches as recorded, which activate() loads into torch's (_aotpack_inductor)
        *((f"{pkg}/_inductor_cache/{f}", _recorded(s.folder / f)) for s in rec.inductor_cache for f in s.files),
    )
    licenses = (("AOTPACK-RUNTIME-LICENSE", runtime_notice()), *(rec.project.license_files if rec.project else ()))
    spec = wheel.WheelSpec(
        distribution=pkg, version=rec.version, tag=f"{facts.ABI3_TAG}-{platform}", summary=rec.summary,
        generator=f"aotpack {__version__}", files=files, license=rec.license, license_files=licenses,
        **wheel.project_fields(rec.project),
    )  # fmt: skip
    raw = wheel.write_wheel(spec, work / "raw")
    log.info("repairing %s with auditwheel", raw.name)
    return repair.repair(raw, work / "repaired", machine, recorded_modules=any(e.module for e in rec.triton_cache))
