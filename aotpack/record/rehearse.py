"""Rehearsing a deployment before a server meets it: the recording's wheel (built here, or given) installed in a
folder of its own, and a second program (the deployment's traffic sample: other shapes, other requests) run with
the package activated before the program starts, in empty Triton and Inductor caches and a HOME of its own, as on a
fresh serving machine. Every activation in it lists what compiles instead of refusing the first (``AOTPACK_REHEARSAL``:
``fallback="jit"``), and each process reports at exit (``AOTPACK_REPORT``): every compilation a served process would
meet, in it or in the processes it starts (Inductor's compile workers), each with what compiled and why — a JIT call
no variant matches, a Triton kernel no package holds (and what differs from the nearest one recorded), a C module
Triton would build with a C compiler, an Inductor C++ build. None listed: the program is served with no compilation,
so with no C compiler either (a build needing one is listed like any compilation)."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._temp import write_file
from ..errors import RecordError
from ..manifest import read_wheel
from ..runtime import _aotpack_env
from .misses import read_reports
from .program import Outcome, command, run_child

# the first module every Python process of the rehearsed program imports: the package activated, then the program's
# own sitecustomize (the runtime's chain_sitecustomize)
BOOT = '''"""aotpack rehearse: the package activated before the rehearsed program starts."""
import os
import {package} as _package
from {package}._aotpack_imports import chain_sitecustomize

_package.activate(fallback="jit")
chain_sitecustomize(os.path.dirname(os.path.abspath(__file__)))
'''


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A compilation the rehearsed program met: its kind (``jit``: Triton's JIT; ``kernel``: a Triton kernel outside
    the JIT, Inductor's or a DSL's; ``module``: a C module Triton builds; ``cpp``: an Inductor C++ build), what, in
    which process, and why it was not served."""

    kind: str
    name: str
    process: int | None
    why: str


@dataclass(frozen=True, kw_only=True)
class Rehearsal:
    outcome: Outcome
    package: str
    findings: tuple[Finding, ...]


def rehearse(argv: list[str], wheel: Path, work: Path) -> Rehearsal:
    """Run the program ``argv`` with ``wheel``'s package activated in a fresh environment under ``work``; what it
    compiled."""
    cmd = command(argv)
    package = str(read_wheel(wheel)["package"])
    site, boot = work / "site", work / "boot"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)  # (the build's own wheel: every name inside it is the package's)
    write_file(boot / "sitecustomize.py", BOOT.format(package=package))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTPACK_") and k != _aotpack_env.TRITON_MANAGER}
    env.update({"PYTHONPATH": os.pathsep.join(filter(None, [str(boot), str(site), os.environ.get("PYTHONPATH")])),
                "HOME": str(work / "home"), "TRITON_CACHE_DIR": str(work / "triton-cache"),
                "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor-cache"), _aotpack_env.REPORT: str(work / "reports"),
                _aotpack_env.REHEARSAL: "1"})  # fmt: skip
    (work / "home").mkdir(parents=True, exist_ok=True)
    outcome = run_child(cmd, env)
    reports = work / "reports"
    events = read_reports([reports]).compilations if reports.is_dir() else []
    if not reports.is_dir() and outcome.ok:
        raise RecordError(f"the rehearsed program never imported {package} (no report was written): rehearse the "
                          "program that serves with it")  # fmt: skip
    return Rehearsal(outcome=outcome, package=package, findings=tuple(_finding(e) for e in events))


def _finding(event: dict[str, Any]) -> Finding:
    if event.get("event") == "compile":  # Triton's JIT, as coverage() and aotpack record have it
        function: dict[str, Any] = event["function"] if isinstance(event.get("function"), dict) else {}
        signature = ", ".join(f"{k}: {v}" for k, v in (event.get("signature") or {}).items())
        constants = ", ".join(f"{json.dumps(v)}" for _, v in event.get("constants") or [])
        return Finding(kind="jit", name=f"{function.get('module', '?')}:{function.get('qualname', '?')}",
                       process=None, why=f"no variant of a package matched its call ({signature}; constexprs "
                       f"{constants or 'none'}; num_warps={event.get('num_warps')}, num_stages="
                       f"{event.get('num_stages')})")  # fmt: skip
    kind = str(event.get("kind") or "kernel")
    pid = event.get("pid")
    return Finding(kind=kind, name=str(event.get("name", "?")), process=pid if isinstance(pid, int) else None,
                   why=str(event.get("why") or "no activated package holds it"))  # fmt: skip
