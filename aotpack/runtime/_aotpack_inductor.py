"""torch.compile's own caches, recorded and served: what lets a recording serve sizes it never saw.

Inductor generates a graph's kernels from the sizes it first meets (its size hints pick the block sizes, the
warps, the divisibility); a process that starts at other sizes generates other kernels, which no recording
holds. Its caches hold what settles that: Dynamo's profile of which sizes changed (its "PGO" code state, kept
only under a job id: ``torch.compiler.config.job_id``), so that a fresh process compiles those dimensions
dynamic from the first call, and Inductor's compiled graphs (FX graph and AOTAutograd caches, autotuning
picks), found by their symbolic shapes whatever the sizes. ``aotpack record`` runs the program under a job id
and, at each process's exit, saves these through torch's own API (``torch.compiler.save_cache_artifacts``);
``activate()`` loads them back (``load_cache_artifacts``) under the same job id, so that the program's graphs
are the recorded ones and their Triton kernels the package's, at any size their guards accept.

A set is ``<sha256>.bin`` (torch's bytes) and ``<sha256>.json``: the torch that saved it, its job id, and the
settings of Inductor's cache key that come from the environment (``SETTINGS``), which another process may
have otherwise (a ``CXX``): where one differs, or torch is another release, the set is not loaded and a
warning says why (its graphs then compile as they would without it, and ``fallback="error"`` refuses their
kernels). torch unpickles the bytes: they are code from the recording, as the package's kernels are.

Standard library only here; torch is imported only where a package ships a set (torch.compile needs it)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import threading
import warnings
from typing import Any

JOB_ID = "aotpack"  # the job id aotpack record runs a program under, where it sets none itself
# Inductor settings in its cache key that the environment sets: (config attribute, what sets it)
SETTINGS = (("cpp.cxx", "CXX"),
            ("bundle_triton_into_fx_graph_cache", "TORCHINDUCTOR_BUNDLE_TRITON_INTO_FX_GRAPH_CACHE"))
MAX_BYTES = 1 << 30  # a set larger than this is not one torch wrote for a program (aotpack's limits.py reads it)
MAX_META = 1 << 16  # its .json: four fields
# how a graph's code calls for one of Inductor's C++ kernels for the CPU (a graph's code is text in the set):
# Inductor builds those with a C++ compiler when the graph loads, which no package can stand in for
CPP_KERNEL = b"async_compile.cpp_pybinding("

_loaded: set[str] = set()  # digests loaded in this process
_lock = threading.Lock()


def _settings(torch: Any) -> dict[str, str]:
    """The values of ``SETTINGS`` in this process, as the set's .json holds them."""
    importlib.import_module("torch._inductor.config")  # (torch imports Inductor lazily)
    out = {}
    for name, _ in SETTINGS:
        value: Any = torch._inductor.config
        for part in name.split("."):
            value = getattr(value, part, None)
        out[name] = repr(value)
    return out


def save(folder: str) -> str | None:
    """This process's artifacts (what torch.compile compiled or loaded here), written into ``folder`` as a set;
    its digest, or None where torch compiled nothing here (a compile worker, a program without torch.compile)."""
    compiler = sys.modules.get("torch.compiler")
    if compiler is None or "torch._inductor.config" not in sys.modules:
        return None
    import torch

    saved = compiler.save_cache_artifacts()
    if not saved:
        return None
    data = saved[0]
    digest = hashlib.sha256(data).hexdigest()
    meta = {"torch": torch.__version__, "job_id": compiler.config.job_id, "settings": _settings(torch),
            "cpp_kernels": data.count(CPP_KERNEL)}  # fmt: skip
    os.makedirs(folder, exist_ok=True)
    for name, content in ((f"{digest}.bin", data), (f"{digest}.json", json.dumps(meta, sort_keys=True).encode())):
        part = os.path.join(folder, f".{name}.{os.getpid()}")
        with open(part, "wb") as f:
            f.write(content)
        os.replace(part, os.path.join(folder, name))
    return digest


def serve(folder: str, fallback: str | None = None) -> list[str]:
    """Load every set in ``folder`` (a package's ``_inductor_cache``) not loaded yet in this process; the job id
    it was recorded under becomes this process's where it has none. Returns why a set was not loaded, each
    also warned (activate() goes on: its kernels are still served or refused one by one). ``fallback``:
    activate()'s, said of where Inductor's C++ kernels compile anyway."""
    names = sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json"))
    if not names:
        return []
    import torch

    skipped = []
    with _lock:
        for digest in names:
            if digest in _loaded:
                continue
            why = _load(torch, os.path.join(folder, digest), fallback)
            if why:
                skipped.append(why)
                warnings.warn(why, RuntimeWarning, stacklevel=3)
            else:
                _loaded.add(digest)
    return skipped


def _load(torch: Any, stem: str, fallback: str | None) -> str | None:
    where = f"torch.compile's recorded caches {os.path.basename(stem)[:12]} ({os.path.dirname(stem)})"
    try:
        with open(stem + ".json", "rb") as f:
            meta = json.loads(f.read(MAX_META))
        if os.path.getsize(stem + ".bin") > MAX_BYTES:
            return f"{where}: larger than {MAX_BYTES >> 20} MiB: not loaded"
        with open(stem + ".bin", "rb") as f:
            data = f.read()
    except (OSError, ValueError) as exc:
        return f"{where}: unreadable ({exc}): not loaded"
    if not isinstance(meta, dict) or hashlib.sha256(data).hexdigest() != os.path.basename(stem):
        return f"{where}: damaged (its bytes are not the ones recorded): not loaded"
    if meta.get("torch") != torch.__version__:
        return (f"{where}: recorded with torch {meta.get('torch')}, this is torch {torch.__version__}: not loaded "
                "(record the program again with this torch)")
    have = _settings(torch)
    settings = meta.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    for name, env in SETTINGS:
        if name in settings and settings[name] != have[name]:
            return (f"{where}: Inductor's {name} was {settings[name]} when recorded and is {have[name]} here (set "
                    f"by {env}): its graphs would not be found; not loaded (run with {env} as when recorded)")
    job = meta.get("job_id")
    if isinstance(job, str) and torch.compiler.config.job_id is None:
        torch.compiler.config.job_id = job  # Dynamo reads the recorded profile under it (before its first compile)
    if torch.compiler.load_cache_artifacts(data) is None:
        return f"{where}: torch could not read it: not loaded"
    cpp = meta.get("cpp_kernels")
    if isinstance(cpp, int) and cpp > 0:
        _say_cpp(torch, where, cpp, fallback)
    return None


def _say_cpp(torch: Any, where: str, count: int, fallback: str | None) -> None:
    """Inductor's C++ kernels in the graphs: compiled when a graph loads, with a C++ compiler; said where there
    is none (the graph fails when it loads) or where fallback="error" promises no compilation (it covers
    Triton's)."""
    import shutil

    names = [c for c in getattr(torch._inductor.config.cpp, "cxx", ()) or () if isinstance(c, str)]
    found = next(filter(None, map(shutil.which, names)), None)
    held = f"{where}: its graphs hold {count} C++ kernel{'s' * (count > 1)} of Inductor's for the CPU"
    if found is None:
        warnings.warn(f"{held}, which Inductor compiles when such a graph loads, with a C++ compiler: none found "
                      f"({', '.join(names) or 'none named'}; CXX names another); such a graph fails when it loads. "
                      "Install one where the program is served", RuntimeWarning, stacklevel=4)  # fmt: skip
    elif fallback == "error":
        said = (f"{held}: Inductor compiles them with {found} when such a graph loads; fallback='error' refuses "
                "Triton's compilations, not Inductor's C++ ones")  # fmt: skip
        warnings.warn(said, RuntimeWarning, stacklevel=4)
