"""What a process's calls of a package ran that Triton's JIT would have compiled otherwise, and what the JIT compiled
while the package was active (``stats()``), written at exit where ``AOTPACK_REPORT`` names a folder; ``aotpack record
--report`` reads these reports into the recipe (record/misses.py).

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

from typing import Any

from ._aotpack_activate import coverage
from ._aotpack_env import REPORT


class ClassMissWarning(UserWarning):
    """A call ran a less specialized class than Triton's JIT would compile for it (see ``stats()``)."""


REPORT_FORMAT = "aotpack-report/1"


def stats(native: Any, package: str, version: str, kernels: list[str]) -> dict[str, Any]:
    """What this process's calls ran that Triton's JIT would have compiled otherwise: per kernel, class
    run and the JIT's class, the calls (``class_misses``), and calls past the runtime's table of pairs
    (``class_misses_lost``); and what Triton's JIT compiled while activated with ``fallback="jit"``
    (``compilations``, as ``aotpack record`` reads them). A class named here goes into the recipe's ``classes:``;
    ``aotpack record --report`` does both."""
    rows, lost = [], 0
    for name in kernels:
        found, gone = native._misses(name)
        lost += gone
        rows += [(name, jit, ran, calls) for ran, jit, calls in found]
    misses = [{"kernel": name, "ran": ran, "jit": jit, "calls": calls} for name, jit, ran, calls in sorted(rows)]
    return {"format": REPORT_FORMAT, "package": package, "version": version, "class_misses": misses,
            "class_misses_lost": lost, "compilations": coverage()}  # fmt: skip


def report_at_exit(folder: str, stats: Any) -> None:
    """At exit, write ``stats()`` into ``folder`` as ``<package>.<pid>.json`` (AOTPACK_REPORT): one file per
    process, so that a workload's workers do not overwrite each other; ``aotpack record`` reads them."""
    import atexit

    atexit.register(write_report, folder, stats)


def write_report(folder: str, stats: Any) -> None:
    """Write the report (at exit): a folder that cannot hold it (a file, a device, one not writable, a name too
    long) is said in a warning naming the variable, never a traceback."""
    import json
    import os
    import tempfile

    report = stats()
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{report['package']}.{os.getpid()}.json")
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".aotpack-tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        import warnings

        warnings.warn(f"aotpack: {REPORT}={folder}: the report of {report['package']} was not written ({exc})",
                      RuntimeWarning, stacklevel=2)  # fmt: skip
