"""Compiling on a Dask cluster: ``aotpack build --executor dask://HOST:PORT``.

A worker needs aotpack and the same toolchain, nothing else. Before any work is sent, every worker
reports its toolchain (aotpack's release and compile stages, Python, each backend's compiler
versions, found on the worker as a local build finds them) and a cluster that differs anywhere is
refused, naming the worker and the difference. A task carries its kernel's source files as bytes
(the kernel's folder and include folders: workers need not see the recipe's folder); a kernel named
by an importable module must be installed on the workers, and the worker checks that its files are
the same. What comes back is the compiled variant as data; the build puts it into the local cache
and goes on as a local build does, so the wheel is byte-identical to a local one.

Dask's ``Client.get_executor()`` is a ``concurrent.futures.Executor``: it replaces the local process
pool and nothing else changes. Ray is not supported: it has no ``concurrent.futures`` executor, and
aotpack would have to schedule the tasks itself."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from .. import _temp
from .._version import __version__
from ..backends import Compiler, Outcome, compile_all, compilers_for_targets, entry_of
from ..errors import ToolNotFound, UsageError
from ..model import Backend, Kernel
from ..plan.variants import Variant
from . import cache as cache_

SCHEMES = ("dask://", "tcp://", "tls://")


@dataclass(frozen=True)
class Settings:
    """How the build found its compilers; a worker finds its own from the same settings."""

    targets: tuple[tuple[Backend, tuple[str, ...]], ...]  # per backend (backends.targets_of)
    nvcc: str | None
    line_info: bool
    cuda_floor: int | None


@dataclass(frozen=True)
class Task:
    """One variant to compile remotely, with its kernel's source files (relative path, bytes)."""

    settings: Settings
    variant: Variant
    files: tuple[tuple[str, bytes], ...]
    root: str  # the folder the files were relative to here (only used to remap paths; "" for a module)
    digest: str  # of the files' contents, or of an importable module's files


@cache
def _compilers(settings: Settings) -> Mapping[Backend, Compiler]:
    return compilers_for_targets(settings.targets, settings.nvcc, settings.line_info, settings.cuda_floor)


def toolchain(compilers: Mapping[Backend, Compiler]) -> dict[str, str]:
    """What must be equal on every machine that compiles for one build, given its compilers."""
    out = {
        "aotpack": __version__,
        "aotpack compile stages": cache_.aotpack_digest(compile_stage=True)[:16],
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
    }
    for compiler in compilers.values():
        out.update(compiler.versions())
    return out


def fingerprint(settings: Settings) -> dict[str, str]:
    """A worker's toolchain: its compilers found from the build's settings, as a local build finds them."""
    return toolchain(_compilers(settings))


def contents_digest(files: list[Path], root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(os.path.relpath(path, root).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _module_digest(kernel: Kernel) -> str:
    """The digest of an importable module's files as installed here, relative to their folder."""
    files = cache_.source_files(kernel)
    return contents_digest(files, files[0].parent if files else Path("."))


Shipment = tuple[tuple[tuple[str, bytes], ...], str, str]  # files (relative path, bytes), their root, digest


def pack(files: list[Path], folders: list[Path]) -> Shipment:
    """Files for a worker, relative to the folders' common root (kept to move paths on the worker)."""
    root = Path(os.path.commonpath([str(f) for f in folders]))
    return tuple((os.path.relpath(f, root), f.read_bytes()) for f in files), str(root), contents_digest(files, root)


def unpacked(files: tuple[tuple[str, bytes], ...], digest: str, root: str) -> Callable[[Path], Path]:
    """On a worker: where a path under the shipped root is here (the files written once per worker)."""
    folder = materialize(files, digest)
    return lambda path: folder / os.path.relpath(path, root)


@cache
def _shipped(kernel: Kernel) -> Shipment:
    """(files, root, digest) of a kernel's sources: the files themselves for a kernel in a file,
    only the digest for one in an importable module (the workers have it installed)."""
    if kernel.source.path is None:
        return (), "", _module_digest(kernel)
    folders = [kernel.source.path.parent, *(kernel.cuda.include_dirs if kernel.cuda else ())]
    return pack(cache_.source_files(kernel), folders)


def task(settings: Settings, variant: Variant) -> Task:
    files, root, digest = _shipped(variant.kernel)
    return Task(settings=settings, variant=variant, files=files, root=root, digest=digest)


STAGING = ".staging-"  # a digest folder being written (named for its process: see _temp.sweep)
UNUSED_DAYS = 7  # a digest folder no task has used for this long goes when another is written


def materialize(files: tuple[tuple[str, bytes], ...], digest: str) -> Path:
    """Shipped files in a folder of this worker named by their digest (written once per worker; each
    use marks it, and folders unused for a week go when a new one is written)."""
    folder = Path(tempfile.gettempdir()) / f"aotpack-sources-{os.getuid()}" / digest[:32]
    done = folder / ".complete"
    if done.exists():
        cache_.mark_used(done)
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    _temp.sweep(folder.parent, STAGING)  # what killed writers left
    _drop_unused(folder.parent)
    staging = Path(tempfile.mkdtemp(prefix=_temp.temp_prefix(STAGING), dir=folder.parent))
    for name, data in files:
        _temp.write_file(staging / name, data)
    _temp.write_file(staging / done.name, b"")
    try:
        os.replace(staging, folder)
    except OSError:  # another process of this worker wrote it first
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _drop_unused(parent: Path) -> None:
    cutoff = time.time() - UNUSED_DAYS * 86400
    for child in parent.iterdir():
        with suppress(OSError):  # a folder being written has no marker yet; one gone meanwhile is fine
            if not child.name.startswith(STAGING) and (child / ".complete").stat().st_mtime < cutoff:
                shutil.rmtree(child, ignore_errors=True)


def _localized(t: Task) -> Variant:
    """The variant with its kernel's paths moved to where this worker has the files."""
    kernel = t.variant.kernel
    if kernel.source.path is None:
        if _module_digest(kernel) != t.digest:
            raise ToolNotFound(
                f"{kernel.where}: kernel {kernel.name!r}: module {kernel.source.module} on worker "
                f"{_worker_name()} differs from the build machine's; install the same release there"
            )
        return t.variant
    moved = unpacked(t.files, t.digest, t.root)
    source = replace(kernel.source, path=moved(kernel.source.path))
    cuda = replace(kernel.cuda, include_dirs=tuple(moved(d) for d in kernel.cuda.include_dirs)) if kernel.cuda else None
    return replace(t.variant, kernel=replace(kernel, source=source, cuda=cuda))


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "this process"


def run(t: Task) -> Outcome:
    """Compile one task on a worker."""
    variant = _localized(t)
    return entry_of(_compilers(t.settings), variant.kernel).compile(variant)


def compile_on(
    address: str,
    variants: Iterable[Variant],
    compilers: Mapping[Backend, Compiler],
    settings: Settings,
    progress: Callable[[Variant, Outcome], None] | None = None,
) -> list[tuple[Variant, Outcome]]:
    """backends.compile_all on the Dask cluster at ``address``, ``compilers`` being the ones this
    machine found from ``settings`` (every worker must report the same toolchain)."""
    with connect(address) as client:
        check(client.run(fingerprint, settings), toolchain(compilers), address)
        return compile_all(variants, compilers, executor=client.get_executor(pure=False), progress=progress,
                           task=lambda v: (run, task(settings, v)))  # fmt: skip


@contextmanager
def connect(address: str) -> Iterator[Any]:
    """A Dask client of the scheduler at ``address`` (closed on leaving)."""
    if not address.startswith(SCHEMES):
        raise UsageError(f"--executor {address}: expected dask://HOST:PORT (the Dask scheduler's address)")
    try:
        from distributed import Client
    except ImportError:
        raise ToolNotFound("--executor dask://...: Dask is not installed here; pip install 'aotpack[dask]'") from None
    scheduler = "tcp://" + address.removeprefix("dask://") if address.startswith("dask://") else address
    try:
        client: Any = Client(scheduler, timeout="20s")  # type: ignore[no-untyped-call]
    except OSError as e:
        raise UsageError(f"--executor {address}: cannot reach the Dask scheduler ({e})") from None
    try:
        yield client
    finally:
        client.close()


def check(workers: Mapping[str, dict[str, str]], here: dict[str, str], address: str) -> None:
    """Refuse a cluster with no workers or with a worker whose toolchain differs from this machine's."""
    if not workers:
        raise UsageError(f"--executor {address}: the cluster has no workers")
    for worker, theirs in sorted(workers.items()):
        differences = [f"{key}: {theirs.get(key, 'missing')} there, {value} here" for key, value in here.items()
                       if theirs.get(key) != value]  # fmt: skip
        differences += [f"{key}: {value} there, missing here" for key, value in theirs.items() if key not in here]
        if differences:
            raise UsageError(f"--executor {address}: worker {worker} has another toolchain; install the same "
                             f"releases on every worker:\n  " + "\n  ".join(differences))  # fmt: skip
