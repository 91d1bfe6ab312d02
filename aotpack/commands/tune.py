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
import hashlib
import importlib
import logging
import multiprocessing
import os
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from .. import model, selection
from .._version import __version__
from ..backends import recipes as recipe
from ..errors import RecipeError, TuneError, UsageError
from ..pipeline import distributed
from ..recipe import sources as _sources
from ..recipe import tables
from . import inspect, tune_keys

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


def _driver_cuda() -> str:
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
        timings[variant["config"]] = _time(torch, _launcher(obj, sets, variant["id"], prepare), flush, opts)
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


# ---------------------------------------------------------------- many GPUs (--devices)
#
# This process tunes on the first GPU while one spawned process per other GPU starts (importing torch
# and the package, a few seconds each); every process takes the next unit from one shared counter, so
# a GPU that started late or runs slow units takes fewer. The results go back in the units' order.

_worker: dict[str, Any] = {}  # in a device's worker process: what _take needs, from _claim_device


def _claim_device(devices: Any, counter: Any, package_name: str, work: list[Unit], opts: Options) -> None:
    """A worker's start: take one GPU (before torch initializes CUDA here) and what every unit needs."""
    os.environ["CUDA_VISIBLE_DEVICES"] = devices.get()
    import torch

    package = importlib.import_module(package_name)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    _worker.update(torch=torch, package=package, flush=flush, counter=counter, work=work, opts=opts)


def _take(counter: Any, work: list[Unit], run: Callable[[Unit], Any], deadline: float | None) -> list[tuple[int, Any]]:
    """Run units until none is left or the deadline passed: (index, result) for each this process ran. A
    failure stops the others at their next unit."""
    done: list[tuple[int, Any]] = []
    while True:
        with counter.get_lock():
            index = counter.value
            counter.value = index + 1
        if index >= len(work):
            return done
        if deadline is not None and time.time() > deadline:
            continue  # past the budget: the unit is left out (None)
        try:
            done.append((index, run(work[index])))
        except BaseException:
            with counter.get_lock():
                counter.value = len(work)
            raise


def _take_in_worker() -> list[tuple[int, Any]]:
    w = _worker

    def run(unit: Unit) -> tuple[str, list[tables.Row]]:
        return tune_unit(w["torch"], w["package"], *unit, w["opts"], w["flush"])

    return _take(w["counter"], w["work"], run, w["opts"].deadline)


def _on_devices(
    package: str, work: list[Unit], opts: Options, devices: list[tuple[int, str]], here: Callable[[Unit], Any]
) -> list[Any]:
    """Each unit's (arch, rows), spread over the GPUs: ``here`` runs a unit on ``devices[0]`` in this
    process, one spawned process per other GPU runs the rest."""
    context = multiprocessing.get_context("spawn")
    claims = context.Queue()
    for _, name in devices[1:]:
        claims.put(name)
    counter = context.Value("q", 0)
    others = len(devices) - 1
    with ProcessPoolExecutor(others, mp_context=context, initializer=_claim_device,
                             initargs=(claims, counter, package, work, opts)) as pool:  # fmt: skip
        futures = [pool.submit(_take_in_worker) for _ in range(others)]
        results = dict(_take(counter, work, here, opts.deadline))
        for future in futures:
            results.update(future.result())
    return [results.get(i) for i in range(len(work))]


# ---------------------------------------------------------------- a Dask cluster's GPUs (--executor)
#
# `aotpack tune --executor dask://HOST:PORT`: each worker is one GPU (a worker process that sees one
# GPU and runs one task at a time: `CUDA_VISIBLE_DEVICES=i dask worker ADDRESS --nthreads 1`, or
# dask-cuda's workers), with torch and the same build of the package installed; the tuning hooks'
# files travel with the tasks. Every worker is checked first: one kind of GPU, one build of the
# package, one task at a time, no two workers on one GPU.


@dataclass(frozen=True)
class TuneTask:
    """One tuning unit (tune.Unit) for a worker, with the files of its kernel's tuning hooks."""

    package: str
    kernel: model.Kernel
    binding: tuple[tuple[str, str], ...]
    key: tuple[int, ...]
    opts: Options
    files: tuple[tuple[str, bytes], ...]
    root: str
    digest: str


@cache
def _hook_files(kernel: model.Kernel) -> distributed.Shipment:
    """(files, root, digest) of a kernel's tuning hooks given as files: each hook's file and the Python
    files beside it, as for a kernel's sources (a hook in an importable module must be installed on the
    workers)."""
    assert kernel.tune is not None
    folders = sorted({s.path.parent for s in (kernel.tune.inputs, kernel.tune.reference) if s and s.path})
    if not folders:
        return (), "", ""
    return distributed.pack(sorted(f for folder in folders for f in folder.glob("*.py") if f.is_file()), folders)


def tune_task(package: str, kernel: model.Kernel, binding: tuple[tuple[str, str], ...], key: tuple[int, ...],
              opts: Options) -> TuneTask:  # fmt: skip
    files, root, digest = _hook_files(kernel)
    return TuneTask(package, kernel, binding, key, opts, files, root, digest)


def gpu_fingerprint(package: str) -> dict[str, str]:
    """What a tuning worker has: its GPU (kind, and which one), driver, torch, and the package's build."""
    try:
        import torch

        if not torch.cuda.is_available():
            return {"error": "torch sees no CUDA GPU"}
        module = importlib.import_module(package)
        built = Path(module.__file__ or "").with_name("manifest.json").read_bytes()
    except Exception as exc:  # reported by name for this worker, not raised inside Dask
        return {"error": f"{type(exc).__name__}: {exc}"}
    props = torch.cuda.get_device_properties(0)
    return {"device": torch.cuda.get_device_name(0), "gpu": f"{socket.gethostname()}/{getattr(props, 'uuid', 0)}",
            "driver_cuda": _driver_cuda(), "torch": torch.__version__, "aotpack": __version__,
            "package": hashlib.sha256(built).hexdigest()[:16]}  # fmt: skip


def check_gpus(client: Any, package: str, address: str) -> dict[str, str]:
    """The cluster's GPU workers, checked: returns one worker's report (the GPU the table is for)."""
    threads = {w: info.get("nthreads", 1) for w, info in client.scheduler_info()["workers"].items()}
    busy = sorted(w for w, n in threads.items() if n != 1)
    if busy:
        raise UsageError(f"--executor {address}: worker {busy[0]} runs {threads[busy[0]]} tasks at once; tuning "
                         "needs one per GPU: start one worker per GPU with --nthreads 1")  # fmt: skip
    reports: dict[str, dict[str, str]] = client.run(gpu_fingerprint, package)
    if not reports:
        raise UsageError(f"--executor {address}: the cluster has no workers")
    for worker, report in sorted(reports.items()):
        if "error" in report:
            raise UsageError(f"--executor {address}: worker {worker} cannot tune {package}: {report['error']}; each "
                             f"worker needs a CUDA GPU, torch and the wheel of {package} installed")  # fmt: skip
    seen: dict[str, str] = {}
    for worker, report in sorted(reports.items()):
        if report["gpu"] in seen:
            raise UsageError(f"--executor {address}: workers {seen[report['gpu']]} and {worker} share one GPU; give "
                             "each worker its own (CUDA_VISIBLE_DEVICES)")  # fmt: skip
        seen[report["gpu"]] = worker
    first = min(reports)
    distributed.check(
        {w: {k: v for k, v in r.items() if k != "gpu"} for w, r in reports.items()},
        {k: v for k, v in reports[first].items() if k != "gpu"},
        address,
    )
    return reports[first]


_gpu: dict[str, Any] = {}  # in a tuning worker: torch, the package, the L2 flush buffer


def run_tune(t: TuneTask) -> Any:
    """Tune one unit on this worker's GPU: tune.tune_unit with the hooks where this worker has them."""
    if not _gpu:
        import torch

        _gpu.update(torch=torch, flush=torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda"))
    package = importlib.import_module(t.package)
    return tune_unit(_gpu["torch"], package, localized(t), t.binding, t.key, t.opts, _gpu["flush"])


def localized(t: TuneTask) -> model.Kernel:
    """The task's kernel with its tuning hooks moved to where this worker has their files."""
    spec = t.kernel.tune
    if not t.files or spec is None:
        return t.kernel
    here = distributed.unpacked(t.files, t.digest, t.root)

    def moved(source: model.Source) -> model.Source:
        return source if source.path is None else replace(source, path=here(source.path))

    reference = moved(spec.reference) if spec.reference else None
    return replace(t.kernel, tune=replace(spec, inputs=moved(spec.inputs), reference=reference))


def tune_on(address: str, package: str, work: list[Unit], opts: Options) -> tuple[dict[str, str], list[Any]]:
    """Each unit's (arch, rows), run on the cluster's GPU workers; and the GPU they ran on."""
    with distributed.connect(address) as client:
        gpu = check_gpus(client, package, address)
        pool = client.get_executor(pure=False)
        futures = [
            pool.submit(run_tune, tune_task(package, kernel, binding, key, opts)) for kernel, binding, key in work
        ]
        return gpu, [f.result() for f in futures]


def visible_devices(torch: Any, asked: str) -> list[tuple[int, str]]:
    """Each GPU asked for ("all" or indices such as "0,1"): its index here and its CUDA_VISIBLE_DEVICES
    value for a child process (this process's own CUDA_VISIBLE_DEVICES, if any, maps them)."""
    count = torch.cuda.device_count()
    try:
        indices = list(range(count)) if asked == "all" else [int(i) for i in asked.split(",")]
    except ValueError:
        raise UsageError(f"--devices {asked}: give 'all' or GPU indices such as 0,1") from None
    bad = [i for i in indices if not 0 <= i < count]
    if bad or len(set(indices)) != len(indices) or not indices:
        raise UsageError(f"--devices {asked}: this machine has GPUs 0 to {count - 1}; name each once")
    names = {torch.cuda.get_device_name(i) for i in indices}
    if len(names) > 1:
        raise UsageError(f"--devices {asked}: the GPUs differ ({', '.join(sorted(names))}); a table is for one kind")
    mapped = os.environ.get("CUDA_VISIBLE_DEVICES")
    own = [d.strip() for d in mapped.split(",")] if mapped else None
    return [(i, own[i] if own else str(i)) for i in indices]


def _per_kernel(work: list[Unit], results: list[Any]) -> dict[str, tuple[str, list[tables.Row]]]:
    """Per kernel, the arch its code ran as and its rows, in the units' order (the table's)."""
    out: dict[str, tuple[str, list[tables.Row]]] = {}
    for (kernel, _, _), result in zip(work, results, strict=True):
        if result is None:  # past the budget
            continue
        arch, rows = result
        previous = out.setdefault(kernel.name, (arch, []))
        if previous[0] != arch:
            raise TuneError(f"{kernel.name}: the GPUs ran code for {previous[0]} and {arch}; tune them separately")
        previous[1].extend(rows)
    return out


def tune(
    recipe_path: str | Path, out_dir: str | Path, opts: Options = Options(), devices: str | None = None,
    executor: str | None = None,
) -> Path:  # fmt: skip
    """Tune every kernel with a ``tune:`` section; returns the table written for this GPU's arch.
    ``devices`` ("all", or indices such as "0,1"): spread the work over one process per GPU;
    ``executor`` (dask://HOST:PORT): over the GPU workers of a Dask cluster instead of this host."""
    rec = recipe.load(recipe_path)
    tunable = [k.name for k in rec.kernels if k.tune]
    unknown = [name for name in opts.kernels if name not in tunable]
    if tunable and unknown:
        raise UsageError(f"--kernel {unknown[0]}: {recipe_path} has no kernel of that name with a 'tune:' section "
                         f"(those with one: {', '.join(tunable)})")  # fmt: skip
    chosen = [k for k in rec.kernels if k.tune and (not opts.kernels or k.name in opts.kernels)]
    if not chosen:
        raise RecipeError(f"{recipe_path}: no kernel to tune: give a kernel a 'tune:' section (kernels.<name>.tune: "
                          "its inputs hook and the keys to time; docs/tuning.md)")  # fmt: skip
    if executor is not None:
        if devices is not None:
            raise UsageError("give --devices (this host's GPUs) or --executor (a cluster's), not both")
        if opts.budget is not None:
            raise UsageError("--budget bounds this host's GPUs' work; with --executor, narrow the recipe's keys")
    elif opts.budget is not None:
        opts = replace(opts, deadline=time.time() + opts.budget)

    def run(work: list[Unit]) -> tuple[dict[str, str], list[Any]]:
        if executor is not None:
            return tune_on(executor, rec.package, work, opts)
        return _tune_here(rec.package, str(recipe_path), work, opts, devices)

    work: list[Unit] = [(k, binding, key) for k in chosen for binding, key in tune_keys.units(k)]
    gpu, results = run(work)
    for round_ in range(tune_keys.REFINE_ROUNDS):
        if any(r is None for r in results):  # past the budget
            break
        table = _table(rec, gpu, work, results)
        tuned = _tuned(table, rec)
        more = [unit for k in chosen for unit in _refining(k, tuned, table.arch, round_)]
        if not more:
            break
        gpu, got = run(more)
        work, results = work + more, results + got
    left = sum(r is None for r in results)
    if left:
        log.warning("the budget (%g s) ran out: %d of %d keys not timed (the table holds the others)",
                    opts.budget, left, len(work))  # fmt: skip
    table = _table(rec, gpu, work, results)
    written = tables.write(table, Path(out_dir) / f"{rec.package}.{table.arch}.json")
    _say_rules(_tuned(table, rec))
    return written


def _refining(kernel: model.Kernel, tuned: dict[str, model.Kernel], arch: str, round_: int) -> list[Unit]:
    """This round's share of the kernel's ``refine`` keys (tune_keys.refinements: where the fastest config changes
    between the keys timed so far on this arch), each with every type binding."""
    spec = kernel.tune
    assert spec is not None
    count = tune_keys.share(spec.refine, round_ + 1) - tune_keys.share(spec.refine, round_)
    now = tuned.get(kernel.name)
    if not count or now is None:
        return []
    here = replace(now, rules=tuple(r for r in now.rules if r.arch == arch))
    keys = tune_keys.refinements(here, count, [*spec.keys, *(r.key for r in now.rules)])
    if keys:
        log.warning("%s: timing %d more keys where the fastest config changes between the %d timed (round %d of %d)",
                    kernel.name, len(keys), len({r.key for r in here.rules if r.median_us}), round_ + 1,
                    tune_keys.REFINE_ROUNDS)  # fmt: skip
    return [(kernel, binding, key) for key in keys for binding in kernel.bindings]


def _table(rec: model.Recipe, gpu: dict[str, str], work: list[Unit], results: list[Any]) -> tables.Table:
    """The table of what was timed (a unit past the budget: left out)."""
    per_kernel = _per_kernel(work, results)
    archs = {arch for arch, _ in per_kernel.values()}
    if not archs:
        raise TuneError("no key was timed before the budget ran out, and no table was written: give --budget more "
                        "seconds")  # fmt: skip
    if len(archs) != 1:
        raise TuneError(f"kernels ran code for different archs ({', '.join(sorted(archs))}); tune them separately")
    (arch,) = archs
    return tables.Table(
        package=rec.package, arch=arch, device=gpu["device"], driver_cuda=gpu["driver_cuda"],
        date=datetime.date.today().isoformat(), sms=int(gpu["sms"]) if gpu.get("sms") else None,
        kernels=tuple(sorted((name, tuple(rows)) for name, (_, rows) in per_kernel.items())),
    )  # fmt: skip


def _tuned(table: tables.Table, rec: model.Recipe) -> dict[str, model.Kernel]:
    """The table's kernels with its rows (for its arch, the recipe's own timed rows are what it replaces), by
    name."""
    tuned = {name for name, _ in table.kernels}
    kernels = [replace(k, rules=tuple(r for r in k.rules if not (r.median_us and r.arch == table.arch)))
               for k in rec.kernels if k.name in tuned]  # fmt: skip
    return {k.name: k for k in tables.apply(table, kernels, rec.package)}


def _say_rules(tuned: dict[str, model.Kernel]) -> None:
    """Each kernel's dispatch rule fitted to what was measured, and its held-out error (aotpack/selection.py)."""
    for kernel in tables.fit(list(tuned.values())):
        sel = selection.entry(kernel)
        if sel is None:
            log.warning("%s: fewer than %d keys per types and class were measured; the dispatcher keeps the nearest "
                        "row's config (sample more keys: tune.sample)", kernel.name, selection.MIN_ROWS)  # fmt: skip
            continue
        for line in inspect.selection_lines(kernel.name, sel):
            log.warning("%s", line.strip())


def _tune_here(
    package_name: str, recipe_path: str, work: list[Unit], opts: Options, devices: str | None
) -> tuple[dict[str, str], list[Any]]:
    """Each unit's (arch, rows) on this host's GPU (or GPUs), and the GPU they ran on."""
    try:
        import torch
    except ImportError:
        raise TuneError("aotpack tune measures with torch: pip install torch (a CUDA build)") from None
    if not torch.cuda.is_available():
        raise TuneError("aotpack tune needs a CUDA GPU, and torch sees none")
    try:
        package = importlib.import_module(package_name)
    except ImportError:
        raise TuneError(f"install the wheel built from {recipe_path} first: {package_name} is not importable") from None
    gpus = visible_devices(torch, devices) if devices is not None else []
    if gpus:
        torch.cuda.set_device(gpus[0][0])
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def here(unit: Unit) -> tuple[str, list[tables.Row]]:
        return tune_unit(torch, package, *unit, opts, flush)

    if len(gpus) > 1:
        results = _on_devices(package_name, work, opts, gpus, here)
    else:
        results = [None if opts.deadline is not None and time.time() > opts.deadline else here(u) for u in work]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return {"device": torch.cuda.get_device_name(), "driver_cuda": _driver_cuda(), "sms": str(sms)}, results
