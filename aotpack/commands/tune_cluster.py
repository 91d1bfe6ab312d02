"""``aotpack tune --executor dask://HOST:PORT``: the tuning units on a Dask cluster's GPU workers.

Each worker is one GPU (a worker process that sees one GPU and runs one task at a time:
`CUDA_VISIBLE_DEVICES=i dask worker ADDRESS --nthreads 1`, or dask-cuda's workers), with torch and the same
build of the package installed; the tuning hooks' files travel with the tasks. Every worker is checked first:
one kind of GPU, one build of the package, one task at a time, no two workers on one GPU."""

from __future__ import annotations

import hashlib
import importlib
import socket
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from .. import model
from .._version import __version__
from ..errors import UsageError
from ..pipeline import distributed
from ..recipe import tables
from .tune_measure import L2_FLUSH_BYTES, Options, Unit, driver_cuda, same_kind, tune_unit


@dataclass(frozen=True)
class TuneTask:
    """One tuning unit (tune_measure.Unit) for a worker, with the files of its kernel's tuning hooks."""

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
            "driver_cuda": driver_cuda(), "torch": torch.__version__, "aotpack": __version__,
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


def tune_on(address: str, package: str, work: list[Unit], opts: Options, kept: tables.Table | None = None,
            ) -> tuple[dict[str, str], list[Any]]:  # fmt: skip
    """Each unit's (arch, rows), run on the cluster's GPU workers; and the GPU they ran on (first, that it is of
    the kept table's kind)."""
    with distributed.connect(address) as client:
        gpu = check_gpus(client, package, address)
        if kept is not None:
            same_kind(kept, gpu["device"])
        pool = client.get_executor(pure=False)
        futures = [
            pool.submit(run_tune, tune_task(package, kernel, binding, key, opts)) for kernel, binding, key in work
        ]
        return gpu, [f.result() for f in futures]
