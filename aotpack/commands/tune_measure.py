"""What ``aotpack tune`` does on a GPU for one kernel, type binding and key: the inputs hook makes three
input sets (the timed runs rotate among them), every candidate variant runs once on poisoned outputs and is
checked against the reference (the reference hook, or else the default config's variant) by relative error,
then timed with CUDA events around each launch, after a warm-up, with L2 flushed before every run; the
median wins. Rows are made for the class the inputs select and every less specialized class they also
satisfy."""

from __future__ import annotations

import ctypes
import logging
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import model
from ..errors import TuneError
from ..recipe import sources as _sources
from ..recipe import tables

log = logging.getLogger("aotpack")
INPUT_SETS = 3
L2_FLUSH_BYTES = 256 << 20


@dataclass(frozen=True, kw_only=True)
class Options:
    warmup: int = 5
    reps: int = 30
    kernels: tuple[str, ...] = ()
    budget: float | None = None  # seconds on this host's GPUs: no key starts past them
    deadline: float | None = None  # time.time() past which no unit starts (from budget, when the work starts)


def _hook(source: model.Source) -> Callable[..., Any]:
    fn = _sources.load(source)
    if not callable(fn):
        raise TuneError(f"tuning hook {source} is not a function")
    return fn  # type: ignore[no-any-return]


def driver_cuda() -> str:
    try:
        version = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version))
        return f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        return "unknown"


def _relative_error(torch: Any, outs: Sequence[Any], refs: Sequence[Any]) -> float:
    worst = 0.0
    for out, ref in zip(outs, refs, strict=True):
        out64, ref64 = out.double(), ref.double()
        if torch.isnan(out64).any():
            return float("inf")
        worst = max(worst, ((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30)).item())
    return worst


def median_us(torch: Any, launch: Callable[[int], None], flush: Any, opts: Options) -> float:
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


def _preparer(kernel: model.Kernel, sets: list[Any]) -> Callable[[Any], None]:
    """What the kernel's @triton.autotune asks for before each run: its reset_to_zero arguments
    zeroed, its restore_value arguments put back as the inputs hook made them."""
    names = [kernel.args[i].name for i in kernel.call_order]
    reset, restore = (kernel.triton.reset_to_zero, kernel.triton.restore_value) if kernel.triton else ((), ())
    originals = {id(args): {n: args[names.index(n)].clone() for n in restore if n in names[: len(args)]}
                 for args, _ in sets}  # fmt: skip

    def prepare(args: Any) -> None:
        for name in reset:
            if name in names[: len(args)]:
                args[names.index(name)].zero_()
        for name, original in originals[id(args)].items():
            args[names.index(name)].copy_(original)

    return prepare


def _measure(
    torch: Any,
    obj: Any,
    kernel: model.Kernel,
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
        timings[variant["config"]] = median_us(torch, _launcher(obj, sets, variant["id"], prepare), flush, opts)
        log.debug("%s %s %s: %s (%.2f us)", kernel.name, types, key, variant["id"], timings[variant["config"]])  # -v
    if not timings:
        raise TuneError(
            f"{kernel.name}: no {spec or ''} variant passed the check at key {key} {types}: "
            f"{rejected or 'every variant refused these inputs: ' + refused}"
        )
    best = min(timings, key=timings.__getitem__)
    log.info("%s %s %s %s: %s (%.2f us)", kernel.name, types, key, spec or "", best, timings[best])
    return tables.Row(
        key=key,
        types=tuple(sorted(types.items())),
        config=best,
        specialization=spec,
        median_us=tuple(sorted(timings.items())),
        rejected=tuple(sorted(rejected.items())),
    )


def tune_unit(
    torch: Any, package: Any, kernel: model.Kernel, binding: tuple[tuple[str, str], ...], key: tuple[int, ...],
    opts: Options, flush: Any,
) -> tuple[str, list[tables.Row]]:  # fmt: skip
    """Rows for one binding and key; returns (the arch the device runs, rows)."""
    spec = kernel.tune
    assert spec is not None
    make_inputs = _hook(spec.inputs)
    reference = _hook(spec.reference) if spec.reference else None
    obj = getattr(package, kernel.name)
    manifest = package.__aotpack__["kernels"][kernel.name]
    types = dict(binding)
    named = dict(zip((n for n, _ in kernel.key), key, strict=True))
    sets = [make_inputs(named, types) for _ in range(INPUT_SETS)]
    args = sets[0][0]
    chosen = next(v for v in manifest["variants"] if v["id"] == obj.select(*args))
    arch = chosen["target"]
    # rows for the class these inputs select and for every class they also satisfy (one that assumes
    # less: the best tile differs once loads cannot be vectorized); a kernel with one class gets rows for any
    built = manifest["specializations"]
    specs: list[str | None] = [None]
    if len(built) > 1:
        specs = [c["name"] for c in built if c["assumes"].items() <= chosen["assumes"].items()]
    refs = reference(args) if reference else None
    rows = []
    for spec_name in specs:
        candidates = [
            v for v in manifest["variants"]
            if v["target"] == arch and v["types"] == types and (spec_name is None or v["specialization"] == spec_name)
        ]  # fmt: skip
        rows.append(_measure(torch, obj, kernel, key, types, spec_name, candidates, sets, refs, opts, flush))
    return arch, rows


Unit = tuple[model.Kernel, tuple[tuple[str, str], ...], tuple[int, ...]]  # kernel, binding, key


def same_kind(kept: tables.Table, device: str) -> None:
    """That a table given to ``--keep`` was measured on this kind of GPU."""
    if kept.device != device:
        raise TuneError(f"--keep: the table was measured on {kept.device}, this GPU is {device}: a table holds one "
                        "kind of GPU's times; tune without --keep, or keep a table of this GPU's kind")  # fmt: skip
