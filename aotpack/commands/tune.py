"""``aotpack tune``: measure every variant of a built package on this GPU, per key, and write a
tuning table per arch for ``aotpack build`` to bake in.

It drives the installed wheel (forcing each variant with ``variant=``), so the GPU host needs the
wheel, torch and the recipe's tuning hooks, and reads the recipe as a build does: the Triton kernels'
modules (and so Triton) must import, though nothing is compiled. For each kernel with a ``tune:``
section, each type binding and each key (tune_keys.py), the variants are timed on this host's GPU or
GPUs (tune_measure.py) or on a Dask cluster's (tune_cluster.py), and the rows go in one table per arch.
"""

from __future__ import annotations

import datetime
import importlib
import logging
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import limits, manifest, model, selection
from ..backends import recipes as recipe
from ..errors import RecipeError, TuneError, UsageError
from ..recipe import tables
from . import inspect, tune_keys
from .tune_cluster import tune_on
from .tune_measure import L2_FLUSH_BYTES, Options, Unit, driver_cuda, same_kind, tune_unit

log = logging.getLogger("aotpack")


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
    kernels = {kernel.name: kernel for kernel, _, _ in work}
    checks = {name: set(tune_keys.validation(kernel)) for name, kernel in kernels.items()}
    for (kernel, _, _), result in zip(work, results, strict=True):
        if result is None:  # past the budget
            continue
        arch, rows = result
        previous = out.setdefault(kernel.name, (arch, []))
        if previous[0] != arch:
            raise TuneError(f"{kernel.name}: the GPUs ran code for {previous[0]} and {arch}; tune them separately")
        marked = checks[kernel.name]
        previous[1].extend(replace(r, validation=True) if marked and r.key in marked else r for r in rows)
    return out


def tune(
    recipe_path: str | Path, out_dir: str | Path, opts: Options | None = None, devices: str | None = None,
    executor: str | None = None, keep: str | Path | None = None,
) -> Path:  # fmt: skip
    """Tune every kernel with a ``tune:`` section; returns the table written for this GPU's arch.
    ``devices`` ("all", or indices such as "0,1"): spread the work over one process per GPU;
    ``executor`` (dask://HOST:PORT): over the GPU workers of a Dask cluster instead of this host;
    ``keep`` (a table this GPU's kind wrote): its rows stay, and only the keys it lacks are timed."""
    opts = opts or Options()
    rec = recipe.load(recipe_path)
    chosen = _chosen(rec, recipe_path, opts.kernels)
    try:
        kept = tables.read(Path(keep)) if keep is not None else None
    except tables.TableError as exc:
        raise UsageError(f"--keep: {exc}") from None
    if executor is not None:
        if devices is not None:
            raise UsageError("give --devices (this host's GPUs) or --executor (a cluster's), not both")
        if opts.budget is not None:
            raise UsageError("--budget bounds this host's GPUs' work; with --executor, narrow the recipe's keys")
    elif opts.budget is not None:
        opts = replace(opts, deadline=time.time() + opts.budget)

    def run(work: list[Unit]) -> tuple[dict[str, str], list[Any]]:
        if executor is not None:
            return tune_on(executor, rec.package, work, opts, kept)
        return _tune_here(rec.package, str(recipe_path), work, opts, devices, kept)

    units = {k.name: tune_keys.units(k) for k in chosen}
    timed = _kept(kept, keep, rec, chosen, units)
    work: list[Unit] = [(k, binding, key) for k in chosen for binding, key in units[k.name]
                        if (k.name, tuple(sorted(binding)), key) not in timed]  # fmt: skip
    gpu, results = run(work)
    for round_ in range(tune_keys.REFINE_ROUNDS):
        if any(r is None for r in results):  # past the budget
            break
        table = _table(rec, gpu, work, results, kept)
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
    table = _table(rec, gpu, work, results, kept)
    written = tables.write(table, Path(out_dir) / f"{rec.package}.{table.arch}.json")
    _say_rules(_tuned(table, rec), rec.package)
    return written


def _chosen(rec: model.Recipe, recipe_path: str | Path, names: Sequence[str]) -> list[model.Kernel]:
    """The kernels to tune: those with a ``tune:`` section (of ``names``, where given)."""
    tunable = [k.name for k in rec.kernels if k.tune]
    unknown = [name for name in names if name not in tunable]
    if tunable and unknown:
        raise UsageError(f"--kernel {unknown[0]}: {recipe_path} has no kernel of that name with a 'tune:' section "
                         f"(those with one: {', '.join(tunable)})")  # fmt: skip
    chosen = [k for k in rec.kernels if k.tune and (not names or k.name in names)]
    if not chosen:
        raise RecipeError(f"{recipe_path}: no kernel to tune: give a kernel a 'tune:' section (kernels.<name>.tune: "
                          "its inputs hook and the keys to time; docs/tuning.md)")  # fmt: skip
    return chosen


def _kept(kept: tables.Table | None, keep: str | Path | None, rec: model.Recipe, chosen: Sequence[model.Kernel],
          units: dict[str, list[tuple[tuple[tuple[str, str], ...], tuple[int, ...]]]],
          ) -> set[tuple[str, tuple[tuple[str, str], ...], tuple[int, ...]]]:  # fmt: skip
    """The (kernel, types, key) a kept table timed, after checking that it is the package's and that the keys to
    time (``units``: tune_keys.units per kernel) go in it (the build refuses a table past limits.MAX_MEASURED_KEYS
    keys of a kernel)."""
    if kept is None:
        return set()
    if kept.package != rec.package:
        raise UsageError(f"--keep {keep}: the table is for package {kept.package}, the recipe builds {rec.package}")
    timed = {(name, tuple(sorted(r.types)), r.key) for name, rows in kept.kernels for r in rows}
    for k in chosen:
        assert k.tune is not None
        total = len({key for name, _, key in timed if name == k.name} | {key for _, key in units[k.name]})
        if total + k.tune.refine > limits.MAX_MEASURED_KEYS:
            raise UsageError(f"--keep {keep}: {k.name} would have {total + k.tune.refine} keys ({k.tune.refine} of "
                             f"them refined), and a table holds at most {limits.MAX_MEASURED_KEYS} of a kernel "
                             "(limits.MAX_MEASURED_KEYS): lower its refine:, or tune without --keep")  # fmt: skip
    return timed


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
    # a key makes a row per type binding and class it is timed in: no more keys than the table's rows hold
    timed = tables.timed_rows(now)
    most = max(Counter(r.key for r in timed if r.arch == arch).values(), default=1)
    room = (limits.MAX_MEASURED_ROWS - len(timed)) // most
    if room < count:
        log.warning("%s: refining stops %d keys short: the table would pass the %d rows a kernel's may hold "
                    "(limits.MAX_MEASURED_ROWS)", kernel.name, count - max(room, 0),
                    limits.MAX_MEASURED_ROWS)  # fmt: skip
        count = max(room, 0)
    keys = tune_keys.refinements(here, count, [*spec.keys, *(r.key for r in (*now.rules, *now.validation))])
    if keys:
        log.warning("%s: timing %d more keys where the fastest config changes between the %d timed (round %d of %d)",
                    kernel.name, len(keys), len({r.key for r in here.rules if r.median_us}), round_ + 1,
                    tune_keys.REFINE_ROUNDS)  # fmt: skip
    return [(kernel, binding, key) for key in keys for binding in kernel.bindings]


def _table(rec: model.Recipe, gpu: dict[str, str], work: list[Unit], results: list[Any],
           kept: tables.Table | None = None) -> tables.Table:  # fmt: skip
    """The table of what was timed (a unit past the budget: left out), after the kept table's rows."""
    per_kernel = _per_kernel(work, results)
    archs = {arch for arch, _ in per_kernel.values()} | ({kept.arch} if kept else set())
    if not archs:
        raise TuneError("no key was timed before the budget ran out, and no table was written: give --budget more "
                        "seconds")  # fmt: skip
    if len(archs) != 1:
        if kept is not None:
            raise TuneError(f"--keep: the table is for {kept.arch}, and this GPU runs {rec.package}'s code for "
                            f"{(archs - {kept.arch}).pop()}: keep a table of this kind of GPU")  # fmt: skip
        raise TuneError(f"kernels ran code for different archs ({', '.join(sorted(archs))}); tune them separately")
    if kept is not None:
        same_kind(kept, gpu["device"])
    rows = {name: list(got) for name, got in (kept.kernels if kept else ())}
    for name, (_, new) in per_kernel.items():
        rows.setdefault(name, []).extend(new)
    (arch,) = archs
    return tables.Table(
        package=rec.package, arch=arch, device=gpu["device"], driver_cuda=gpu["driver_cuda"],
        date=datetime.date.today().isoformat(), sms=int(gpu["sms"]) if gpu.get("sms") else None,
        kernels=tuple(sorted((name, tuple(got)) for name, got in rows.items())),
    )  # fmt: skip


def _tuned(table: tables.Table, rec: model.Recipe) -> dict[str, model.Kernel]:
    """The table's kernels with its rows (for its arch, the recipe's own timed rows are what it replaces), by
    name."""
    tuned = {name for name, _ in table.kernels}
    kernels = [replace(k, rules=tuple(r for r in k.rules if not (r.median_us and r.arch == table.arch)),
                       validation=tuple(r for r in k.validation if r.arch != table.arch))
               for k in rec.kernels if k.name in tuned]  # fmt: skip
    try:
        return {k.name: k for k in tables.apply(table, kernels, rec.package)}
    except tables.TableError as exc:  # a kept table's rows the recipe no longer takes (a config left its grid)
        raise TuneError(f"the table's rows do not go with {rec.path}: {exc}") from None


def _say_rules(tuned: dict[str, model.Kernel], package_name: str) -> None:
    """Each kernel's dispatch rule fitted to what was measured, as a build of the recipe fits it (with the
    installed package's variants' blocks per multiprocessor), and its held-out error (aotpack/selection.py)."""
    for kernel in tables.fit(list(tuned.values()), _blocks(package_name, tuned)):
        sel = manifest.selection_of(kernel)
        if sel is None:
            log.warning("%s: fewer than %d keys per types and class were measured; the dispatcher keeps the nearest "
                        "row's config (sample more keys: tune.sample)", kernel.name, selection.MIN_ROWS)  # fmt: skip
            continue
        for line in inspect.selection_lines(kernel.name, sel):
            log.warning("%s", line.strip())


def _blocks(package_name: str, kernels: dict[str, model.Kernel]) -> dict[str, selection.Blocks] | None:
    """Per kernel, its variants' blocks per multiprocessor as the installed package's manifest gives them; None
    where this host has no such package (tuned on a cluster's workers): the rule printed is then fitted without
    them, and a build may choose another."""
    try:
        built: manifest.Manifest = importlib.import_module(package_name).__aotpack__
        blocks: dict[str, selection.Blocks] = {name: manifest.blocks_of(built, k) for name, k in kernels.items()}
    except Exception as exc:  # an optional reading: whatever the package's import or manifest raises, tuning stands
        log.warning("%s's manifest could not be read here (%s): the rule below is fitted without its variants' "
                    "blocks per multiprocessor (a build fits it with them)", package_name, exc)  # fmt: skip
        return None
    if not any(any(b) for per_group in blocks.values() for b in per_group.values()):
        log.warning(
            "%s's manifest gives no variant's blocks per multiprocessor (an older aotpack built it): the "
            "rule below is fitted without them; rebuild it for the rule a build fits",
            package_name,
        )
    return blocks


def _tune_here(
    package_name: str, recipe_path: str, work: list[Unit], opts: Options, devices: str | None,
    kept: tables.Table | None = None,
) -> tuple[dict[str, str], list[Any]]:  # fmt: skip
    """Each unit's (arch, rows) on this host's GPU (or GPUs), and the GPU they ran on; first, that the GPU is of
    the kept table's kind."""
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
    if kept is not None:
        same_kind(kept, torch.cuda.get_device_name())
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def here(unit: Unit) -> tuple[str, list[tables.Row]]:
        return tune_unit(torch, package, *unit, opts, flush)

    if len(gpus) > 1:
        results = _on_devices(package_name, work, opts, gpus, here)
    else:
        results = [None if opts.deadline is not None and time.time() > opts.deadline else here(u) for u in work]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return {"device": torch.cuda.get_device_name(), "driver_cuda": driver_cuda(), "sms": str(sms)}, results
