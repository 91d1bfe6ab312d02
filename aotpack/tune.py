"""``aotpack tune``: measure every variant of a built package on this GPU, per key, and write a
tuning table per arch for ``aotpack build`` to bake in.

It drives the installed wheel (forcing each variant with ``variant=``), so the GPU host needs the
wheel, torch and the recipe's tuning hooks, and reads the recipe as a build does: the Triton kernels'
modules (and so Triton) must import, though nothing is compiled. For each kernel with a
``tune:`` section, each type binding and each key: the inputs hook makes three input sets (the
timed runs rotate among them), every candidate variant runs once on poisoned outputs and is checked
against the reference (the reference hook, or else the default config's variant) by relative error,
then timed with CUDA events around each launch, after a warm-up, with L2 flushed before every run;
the median wins. Rows are written for the class the inputs select and every less specialized class
they also satisfy.
"""

from __future__ import annotations

import ctypes
import datetime
import importlib
import logging
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _sources, expr, recipe, tables
from .errors import AotpackError, RecipeError

log = logging.getLogger("aotpack")
INPUT_SETS = 3
L2_FLUSH_BYTES = 256 << 20


class TuneError(AotpackError):
    """Tuning could not run (no GPU, package not installed, a hook failed)."""

    exit_code = 7


@dataclass(frozen=True, kw_only=True)
class Options:
    warmup: int = 5
    reps: int = 30
    kernels: tuple[str, ...] = ()


def _hook(source: recipe.Source) -> Callable[..., Any]:
    fn = _sources.load(source)
    if not callable(fn):
        raise TuneError(f"tuning hook {source} is not a function")
    return fn  # type: ignore[no-any-return]


def _driver_cuda() -> str:
    try:
        version = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version))
        return f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        return "unknown"


def bucket(kernel: recipe.Kernel, key: Sequence[int]) -> tuple[int, ...]:
    """Key values as the dispatcher compares them (pow2: the next power of two; 0 and 1, often
    flags, stay apart)."""
    if kernel.bucket == "pow2":
        return tuple(v if v <= 1 else expr.next_pow2(v) for v in key)
    return tuple(key)


def _relative_error(torch: Any, outs: Sequence[Any], refs: Sequence[Any]) -> float:
    worst = 0.0
    for out, ref in zip(outs, refs, strict=True):
        out64, ref64 = out.double(), ref.double()
        if torch.isnan(out64).any():
            return float("inf")
        worst = max(worst, ((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30)).item())
    return worst


def _time(torch: Any, launch: Callable[[int], None], flush: Any, opts: Options) -> float:
    """Median microseconds of one launch; L2 flushed before each, input sets rotated."""
    for i in range(opts.warmup):
        launch(i)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(opts.reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(opts.reps)]
    for i in range(opts.reps):
        flush.zero_()
        starts[i].record()
        launch(i)
        ends[i].record()
    torch.cuda.synchronize()
    times: list[float] = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return statistics.median(times) * 1000.0


def _launcher(obj: Any, sets: list[Any], variant: str, prepare: Callable[[Any], None]) -> Callable[[int], None]:
    def launch(i: int) -> None:
        args = sets[i % INPUT_SETS][0]
        prepare(args)
        obj(*args, variant=variant)

    return launch


def _preparer(kernel: recipe.Kernel, sets: list[Any]) -> Callable[[Any], None]:
    """What the kernel's @triton.autotune asks for before each run: its reset_to_zero arguments
    zeroed, its restore_value arguments put back as the inputs hook made them."""
    names = [kernel.args[i].name for i in kernel.call_order]
    originals = {id(args): {n: args[names.index(n)].clone() for n in kernel.restore_value if n in names[: len(args)]}
                 for args, _ in sets}  # fmt: skip

    def prepare(args: Any) -> None:
        for name in kernel.reset_to_zero:
            if name in names[: len(args)]:
                args[names.index(name)].zero_()
        for name, original in originals[id(args)].items():
            args[names.index(name)].copy_(original)

    return prepare


def _measure(
    torch: Any,
    obj: Any,
    kernel: recipe.Kernel,
    key: tuple[int, ...],
    types: dict[str, str],
    spec: str | None,
    candidates: list[dict[str, Any]],
    sets: list[Any],
    refs: Any,
    opts: Options,
    flush: Any,
) -> tables.Row:
    """Check and time each candidate on the key's inputs; the row names the fastest correct one."""
    assert kernel.tune is not None
    args, outputs = sets[0]
    if refs is None:  # no reference hook: what the package launches today is the reference
        for i in outputs:
            args[i].fill_(float("nan"))
        obj(*args)
        refs = [args[i].clone() for i in outputs]
    timings: dict[str, float] = {}
    rejected: dict[str, str] = {}
    refused = ""
    prepare = _preparer(kernel, sets)
    for variant in candidates:
        for i in outputs:
            args[i].fill_(float("nan"))
        prepare(args)
        try:
            obj(*args, variant=variant["id"])
        except ValueError as exc:  # the runtime refuses these inputs for it (built for other `equals:` values)
            refused = str(exc)
            continue
        torch.cuda.synchronize()
        err = _relative_error(torch, [args[i] for i in outputs], refs)
        if not err <= kernel.tune.rtol:
            rejected[variant["config"]] = f"relative error {err:.3g} > {kernel.tune.rtol:g}"
            continue
        timings[variant["config"]] = _time(torch, _launcher(obj, sets, variant["id"], prepare), flush, opts)
    if not timings:
        raise TuneError(
            f"{kernel.name}: no {spec or ''} variant passed the check at key {key} {types}: "
            f"{rejected or 'every variant refused these inputs: ' + refused}"
        )
    best = min(timings, key=timings.__getitem__)
    log.info("%s %s %s %s: %s (%.2f us)", kernel.name, types, key, spec or "", best, timings[best])
    return tables.Row(
        key=bucket(kernel, key),
        types=tuple(sorted(types.items())),
        config=best,
        specialization=spec,
        median_us=tuple(sorted(timings.items())),
        rejected=tuple(sorted(rejected.items())),
    )


def tune_kernel(
    torch: Any, package: Any, kernel: recipe.Kernel, opts: Options, flush: Any
) -> tuple[str, list[tables.Row]]:
    """Rows for one kernel; returns (the arch the device runs, rows)."""
    spec = kernel.tune
    assert spec is not None
    make_inputs = _hook(spec.inputs)
    reference = _hook(spec.reference) if spec.reference else None
    obj = getattr(package, kernel.name)
    manifest = package.__aotpack__["kernels"][kernel.name]
    rows: list[tables.Row] = []
    arch = ""
    keys: dict[tuple[int, ...], tuple[int, ...]] = {}
    for key in spec.keys:
        slot = bucket(kernel, key)
        if slot in keys:
            log.warning("%s: keys %s and %s share the bucket %s; tuning the first", kernel.name, keys[slot], key, slot)
        else:
            keys[slot] = key
    for binding in kernel.bindings:
        types = dict(binding)
        for key in keys.values():
            named = dict(zip((n for n, _ in kernel.key), key, strict=True))
            sets = [make_inputs(named, types) for _ in range(INPUT_SETS)]
            args = sets[0][0]
            chosen = next(v for v in manifest["variants"] if v["id"] == obj.select(*args))
            arch = chosen["target"]
            # rows for the class these inputs select and for every class they also satisfy (one that
            # assumes less: the best tile differs once loads cannot be vectorized); a kernel with one
            # class gets rows for any
            classes = manifest["specializations"]
            specs: list[str | None] = [None]
            if len(classes) > 1:
                specs = [c["name"] for c in classes if c["assumes"].items() <= chosen["assumes"].items()]
            refs = reference(args) if reference else None
            for spec_name in specs:
                candidates = [
                    v for v in manifest["variants"]
                    if v["target"] == arch and v["types"] == types
                    and (spec_name is None or v["specialization"] == spec_name)
                ]  # fmt: skip
                rows.append(_measure(torch, obj, kernel, key, types, spec_name, candidates, sets, refs, opts, flush))
    return arch, rows


def tune(recipe_path: str | Path, out_dir: str | Path, opts: Options = Options()) -> Path:
    """Tune every kernel with a ``tune:`` section; returns the table written for this GPU's arch."""
    rec = recipe.load(recipe_path)
    try:
        import torch
    except ImportError:
        raise TuneError("aotpack tune measures with torch: pip install torch (a CUDA build)") from None
    if not torch.cuda.is_available():
        raise TuneError("aotpack tune needs a CUDA GPU, and torch sees none")
    try:
        package = importlib.import_module(rec.package)
    except ImportError:
        raise TuneError(f"install the wheel built from {recipe_path} first: {rec.package} is not importable") from None
    chosen = [k for k in rec.kernels if k.tune and (not opts.kernels or k.name in opts.kernels)]
    if not chosen:
        raise RecipeError(f"{recipe_path}: no kernel to tune: give kernels a 'tune:' section")
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    results: list[tuple[str, tuple[tables.Row, ...]]] = []
    archs = set()
    for kernel in chosen:
        arch, rows = tune_kernel(torch, package, kernel, opts, flush)
        archs.add(arch)
        results.append((kernel.name, tuple(rows)))
    if len(archs) != 1:
        raise TuneError(f"kernels ran code for different archs ({', '.join(sorted(archs))}); tune them separately")
    (arch,) = archs
    table = tables.Table(
        package=rec.package, arch=arch, device=torch.cuda.get_device_name(), driver_cuda=_driver_cuda(),
        date=datetime.date.today().isoformat(), kernels=tuple(sorted(results)),
    )  # fmt: skip
    return tables.write(table, Path(out_dir) / f"{rec.package}.{arch}.json")
