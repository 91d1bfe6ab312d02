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
have otherwise (a ``CXX``): where one differs because this process's environment leaves it unset, the recorded
value is taken (``_adopt``); where the environment here sets another, or torch is another release, the set is not
loaded and a warning says why (its graphs then compile as they would without it, and ``fallback="error"`` refuses their
kernels). torch unpickles the bytes: they are code from the recording, as the package's kernels are.

Inductor's C++ kernels for the CPU (a graph's code calls ``async_compile.cpp_pybinding(argtypes, source)``, which
Inductor builds with a C++ compiler as the graph loads, even from its cache) are recorded as the shared objects
Inductor built in the recorded process: ``<sha256 of the object>.cpp`` beside the set, zlib-compressed (an ELF
file in a wheel would be auditwheel's to repair, and it links libtorch, which only the program's process
provides), listed in the set's .json by a key of their argument types and source (``cpp_key``). ``activate()``
then answers ``cpp_pybinding`` for a kernel the packages hold with that object (checked, written into a folder
the process makes for it alone and loaded from there by Inductor's own loader, ``_cpp_kernel``): no compiler runs.
Inductor builds them for the recording's CPU (``-march=native``) against its Python, so they are served only under
the same Python ABI (``SOABI``) on a CPU with every feature flag of the recording's (``/proc/cpuinfo``); elsewhere,
and for a kernel no package holds, Inductor compiles it (``fallback="jit"``, listed in ``coverage()``) or it is
refused (``fallback="error"``).

A runtime module (runtime/__init__.py says what that means): standard library only; torch is imported only where a
package ships a set (torch.compile needs it)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import os
import sys
import sysconfig
import threading
import warnings
import zlib
from collections.abc import Callable
from typing import Any

from . import _aotpack_folders as _folders
from ._aotpack_imports import when_imported

JOB_ID = "aotpack"  # the job id aotpack record runs a program under, where it sets none itself
# Inductor settings in its cache key that the environment sets: (config attribute, what sets it)
SETTINGS = (
    ("cpp.cxx", "CXX"),
    ("bundle_triton_into_fx_graph_cache", "TORCHINDUCTOR_BUNDLE_TRITON_INTO_FX_GRAPH_CACHE"),
)
MAX_BYTES = 1 << 30  # a set larger than this is not one torch wrote for a program (aotpack's limits.py reads it)
MAX_META = 1 << 16  # its .json: four fields and the table of its C++ kernels (at most MAX_CPP_KERNELS)
# how a graph's code calls for one of Inductor's C++ kernels for the CPU (a graph's code is text in the set):
# Inductor builds those with a C++ compiler when the graph loads, which no package can stand in for
CPP_KERNEL = b"async_compile.cpp_pybinding("
CPP_SUFFIX = ".cpp"  # a C++ kernel's shared object beside the sets: <sha256 of the object>.cpp, zlib-compressed
MAX_CPP_BYTES = 1 << 26  # one C++ kernel's shared object (Inductor's are tens of KiB)
MAX_CPP_KERNELS = 384  # C++ kernels one set lists: 136 bytes each in its .json, which stays within MAX_META
CPU_INFO = "/proc/cpuinfo"

class _Graphs:
    """This process's torch.compile caches and Inductor's C++ kernels: what was loaded, recorded or served, and
    activate()'s policy for the C++ kernels no package holds (``guard_cpp``), which ``reset()`` gives back. The sets
    loaded stay loaded and the kernels held stay served: torch keeps what it loaded, and a loaded graph calls them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loaded: dict[str, dict[str, str]] = {}  # digests loaded in this process -> the SETTINGS taken (_adopt)
        self.cpp_seen: dict[str, Any] = {}  # aotpack record: cpp_key -> what cpp_pybinding first returned for it
        self.cpp_held: dict[str, str] = {}  # activate(): cpp_key -> the package's compressed object it serves
        self.cpp_loaded: dict[str, Any] = {}  # cpp_key -> the kernel, loaded
        self.fallback: str | None = None  # activate()'s, for the C++ kernels no package holds (guard_cpp)
        self.refused: type[Exception] = RuntimeError
        self.waiting = False  # for Inductor to be imported
        self.waiting_pgo = False  # for Dynamo's profile to be imported (stable_code_ids)
        self.said_kernels = 0  # C++ kernels _compiles listed whose build _builds has not seen yet
        self.compiled: list[dict[str, Any]] = []  # C++ kernels Inductor compiled here while fallback="jit"
        self.job: str | None = None  # the recorded job id this process took (serve), given back by reset()
        self.adopted: dict[str, tuple[Any, str, Any]] = {}  # SETTINGS taken from a set (_adopt): name -> what it was

    def reset(self) -> None:
        self.fallback, self.refused = None, RuntimeError
        compiler = sys.modules.get("torch.compiler")
        if self.job is not None and getattr(getattr(compiler, "config", None), "job_id", None) == self.job:
            compiler.config.job_id = None  # type: ignore[union-attr]  # (the program's own: none)
        for owner, attr, value in self.adopted.values():
            setattr(owner, attr, value)
        self.adopted.clear()


_state = _Graphs()


def compiled() -> list[dict[str, Any]]:
    """The C++ kernels Inductor compiled in this process while fallback="jit" (``coverage()``)."""
    return list(_state.compiled)


def reset() -> None:
    """Give back what activate() changed of torch.compile: the policy for the C++ kernels no package holds
    (compiled, not listed), the settings and job id taken from a set (Inductor's cache folder: _aotpack_folders)."""
    _state.reset()


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
    objects = _built_cpp()
    if objects:
        flags = _cpu_flags()
        meta["cpp"] = {"soabi": _soabi(), "cpu": None if flags is None else sorted(flags),
                       "kernels": {key: name for key, (name, _) in sorted(objects.items())}}  # fmt: skip
    files = [(f"{name}{CPP_SUFFIX}", zlib.compress(obj, 9)) for name, obj in objects.values()]
    files += [(f"{digest}.bin", data), (f"{digest}.json", json.dumps(meta, sort_keys=True).encode())]
    for name, content in files:  # (the .json last: a set is whole once it is there)
        part = os.path.join(folder, f".{name}.{os.getpid()}")
        with open(part, "wb") as f:
            f.write(content)
        os.replace(part, os.path.join(folder, name))
    return digest


def cpp_key(argtypes: Any, source: str) -> str:
    """What names one of Inductor's C++ kernels across processes: its argument types and its source (which
    Inductor keys its build on too, with its compiler's command line, which a process without one cannot make)."""
    return hashlib.sha256(json.dumps([list(argtypes), source]).encode()).hexdigest()


def _soabi() -> str:
    return str(sysconfig.get_config_var("SOABI"))


def _cpu_flags() -> frozenset[str] | None:
    """This CPU's feature flags (x86's ``flags``, Arm's ``Features``, of its first processor), or None where the
    system does not say."""
    try:
        with open(CPU_INFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return None


def stable_code_ids() -> None:
    """Dynamo's profile (which sizes changed, per compiled frame) keys a frame by its code and, since torch 2.12 or
    so, by a hash of the functions its closure holds: ``hash()`` of their code objects, which differs in every
    process (Python salts the hash of each string, and before 3.12 that of None). A frame of a decorated function
    (transformers wraps every model's ``forward``) was then never found in a recorded profile: a served process
    compiled it static at its first sizes, then again (a Qwen2, torch 2.13: 4 graphs compiled at sizes the recording
    covered; 0 with this). Here the closure's functions count by their name, line, names and bytecode instead, the
    same in every process of one Python, in aotpack record's processes and in a served one (``activate()``): from
    now, or once Dynamo's profile module is imported. Kept after ``deactivate()``: a profile already read keys on
    it."""
    module = sys.modules.get("torch._dynamo.pgo")
    if module is not None:
        _stable_cells(module)
    elif not _state.waiting_pgo:
        _state.waiting_pgo = True
        when_imported({"torch._dynamo.pgo": _stable_cells})


def _stable_cells(pgo: Any) -> None:
    original = getattr(pgo, "_get_cell_hash_content", None)
    if original is None or getattr(original, "_aotpack", False):
        return  # (a torch whose profile keys no closure: nothing differs between processes)

    def cell_content(cell: Any) -> int:
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            return 0
        code = getattr(content, "__code__", None) if callable(content) else None
        if code is None:
            return 0  # (torch's own counts only functions; hash(None) of other cells differed between processes)
        name = getattr(code, "co_qualname", code.co_name)
        text = "\0".join([name, str(code.co_firstlineno), *code.co_names, *code.co_varnames]).encode()
        return int.from_bytes(hashlib.sha256(text + b"\0" + code.co_code).digest()[:8], "little")

    cell_content._aotpack = True  # type: ignore[attr-defined]
    pgo._get_cell_hash_content = cell_content


def record_cpp(async_compile: Any) -> None:
    """aotpack record, as ``torch._inductor.async_compile`` is imported: each C++ kernel Inductor builds or loads
    here is noted, and ``save`` keeps its shared object."""
    cls: Any = getattr(async_compile, "AsyncCompile", None)
    original = getattr(cls, "cpp_pybinding", None)
    if original is None or getattr(original, "_aotpack", False):
        return

    def cpp_pybinding(self: Any, argtypes: Any, source_code: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, argtypes, source_code, *args, **kwargs)
        if not args and not kwargs and isinstance(source_code, str):  # (a form this file knows)
            _state.cpp_seen.setdefault(cpp_key(argtypes, source_code), result)
        return result

    cpp_pybinding._aotpack = True  # type: ignore[attr-defined]
    cls.cpp_pybinding = cpp_pybinding


def _built_cpp() -> dict[str, tuple[str, bytes]]:
    """The shared object of each C++ kernel this process loaded (cpp_key -> its sha256 and bytes); one that cannot
    be read is left out (its graph then needs a compiler where it is served, as the set's count says)."""
    out: dict[str, tuple[str, bytes]] = {}
    for key, result in list(_state.cpp_seen.items()):
        try:
            kernel = result.result() if hasattr(result, "result") else result  # (a future where compiled in a pool)
            with open(kernel.__self__.__file__, "rb") as f:  # the module Inductor loaded it from
                obj = f.read(MAX_CPP_BYTES + 1)
        except Exception:  # a kernel that never loaded, a form this torch gives otherwise: not kept
            continue
        if len(obj) <= MAX_CPP_BYTES and len(out) < MAX_CPP_KERNELS:
            out[key] = (hashlib.sha256(obj).hexdigest(), obj)
    return out


def serve(folder: str, fallback: str = "jit") -> list[str]:
    """Load every set in ``folder`` (a package's ``_inductor_cache``) not loaded yet in this process; the job id
    it was recorded under becomes this process's where it has none, and the C++ kernels it holds are served
    (``guard_cpp`` answers Inductor with them). Returns why a set, or its C++ kernels, cannot serve here, each
    also warned (activate() goes on: its kernels are still served or refused one by one). ``fallback``:
    activate()'s, said of Inductor's C++ kernels that no package can serve here."""
    names = sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json"))
    if not names:
        return []
    stable_code_ids()  # (before torch compiles anything: the recorded profile keys on it)
    import torch
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    unsafe = _folders.inductor_cache(default_cache_dir())  # (what torch reads back is loaded there)
    if unsafe:
        warnings.warn(unsafe, RuntimeWarning, stacklevel=3)
        return [unsafe]
    skipped = []
    with _state.lock:
        if _state.loaded and _state.job is not None and torch.compiler.config.job_id is None:
            torch.compiler.config.job_id = _state.job  # (activated again after a deactivate())
        for digest in names:
            if digest in _state.loaded:  # (loaded before a deactivate(): what it needs taken again)
                for name, env in SETTINGS:
                    if name in _state.loaded[digest]:
                        _adopt(torch, name, env, _state.loaded[digest][name])
                continue
            taken: dict[str, str] = {}
            loaded, why = _load(torch, os.path.join(folder, digest), fallback, taken)
            if why:
                skipped.append(why)
                warnings.warn(why, RuntimeWarning, stacklevel=3)
            if loaded:
                _state.loaded[digest] = taken
    return skipped


def _load(torch: Any, stem: str, fallback: str, taken: dict[str, str]) -> tuple[bool, str | None]:
    """Whether the set loaded, and why it did not, or why its C++ kernels cannot serve here; the recorded
    settings it took go into ``taken``."""
    where = f"torch.compile's recorded caches {os.path.basename(stem)[:12]} ({os.path.dirname(stem)})"
    try:
        with open(stem + ".json", "rb") as f:
            meta = json.loads(f.read(MAX_META))
        if os.path.getsize(stem + ".bin") > MAX_BYTES:
            return False, f"{where}: larger than {MAX_BYTES >> 20} MiB: not loaded"
        with open(stem + ".bin", "rb") as f:
            data = f.read()
    except (OSError, ValueError) as exc:
        return False, f"{where}: unreadable ({exc}): not loaded"
    if not isinstance(meta, dict) or hashlib.sha256(data).hexdigest() != os.path.basename(stem):
        return False, f"{where}: damaged (its bytes are not the ones recorded): not loaded"
    if meta.get("torch") != torch.__version__:
        return False, (
            f"{where}: recorded with torch {meta.get('torch')}, this is torch {torch.__version__}: not loaded "
            "(record the program again with this torch)"
        )
    have = _settings(torch)
    settings = meta.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    for name, env in SETTINGS:
        if name not in settings or settings[name] == have[name]:
            continue
        if _adopt(torch, name, env, settings[name]):
            taken[name] = settings[name]
        else:
            return False, (
                f"{where}: Inductor's {name} was {settings[name]} when recorded and is {have[name]} here (set "
                f"by {env}): its graphs would not be found; not loaded (run with {env} as when recorded, or unset)"
            )
    job = meta.get("job_id")
    if isinstance(job, str) and torch.compiler.config.job_id is None:
        torch.compiler.config.job_id = _state.job = job  # Dynamo reads the recorded profile under it
    if torch.compiler.load_cache_artifacts(data) is None:
        return False, f"{where}: torch could not read it: not loaded"
    count = meta.get("cpp_kernels")
    if not isinstance(count, int) or count <= 0:
        return True, None
    held, why = _servable(os.path.dirname(stem), meta.get("cpp"))
    _state.cpp_held.update(held)  # (a kernel the recording did not keep is said where its graph loads: _compiles)
    return True, None if held else _said_cpp(where, count, why, fallback)


def _adopt(torch: Any, name: str, env: str, recorded: Any) -> bool:
    """Take the recorded value of a setting of Inductor's cache key where this process's environment leaves it at
    its default (``env`` unset): a recording machine's ``CXX`` (a conda environment's, an image's) would otherwise
    hide every recorded graph from a served machine, which has no compiler and no reason to name one. Kept until
    ``reset()``. Under fallback="jit" a C++ build Inductor then makes looks for the recorded compiler. Whether it
    was taken: not where ``env`` is set here (the program's choice), another set's value was taken, or the recorded
    value is no Python literal."""
    if env in os.environ or name in _state.adopted or not isinstance(recorded, str):
        return False  # (taken from another set already: the two disagree)
    try:
        value = ast.literal_eval(recorded)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    *path, attr = name.split(".")
    owner = torch._inductor.config
    for part in path:
        owner = getattr(owner, part)
    _state.adopted.setdefault(name, (owner, attr, getattr(owner, attr)))
    setattr(owner, attr, value)
    return True


def _servable(folder: str, table: Any) -> tuple[dict[str, str], str]:
    """The C++ kernels a set's ``cpp`` table holds that this process can load (cpp_key -> the compressed object),
    and why the others cannot be."""
    if not isinstance(table, dict) or not isinstance(table.get("kernels"), dict):
        return {}, "the recording kept none of their shared objects"
    if table.get("soabi") != _soabi():
        return {}, f"they were built for Python's ABI {table.get('soabi')}, this Python is {_soabi()}"
    need, have = table.get("cpu"), _cpu_flags()
    if not isinstance(need, list) or have is None:
        side = "the recording's" if have is not None else f"this ({CPU_INFO} is unreadable)"
        return {}, f"they were built for the recording's CPU, and {side} CPU's features are not known"
    lacking = sorted(set(map(str, need)) - have)
    if lacking:
        shown = ", ".join(lacking[:8]) + (", ..." if len(lacking) > 8 else "")
        return {}, f"they were built for the recording's CPU (-march=native), whose features this CPU lacks: {shown}"
    held = {k: os.path.join(folder, v + CPP_SUFFIX) for k, v in table["kernels"].items()
            if isinstance(k, str) and isinstance(v, str) and _hex64(k) and _hex64(v)}  # fmt: skip
    return held, "the recording kept none of their shared objects"


def _hex64(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _said_cpp(where: str, count: int, why: str, fallback: str) -> str:
    """Inductor's C++ kernels of a set that no package can serve here: compiled as their graph loads (a C++
    compiler needed), or refused there under fallback="error"."""
    held = (f"Inductor's C++ kernels for the CPU in {where} (its graphs' code calls for them {count} "
            f"time{'s' * (count > 1)}) cannot be served here ({why})")
    if fallback == "error":
        return f"{held}; fallback='error' refuses them when their graph loads (record the program where it is served)"
    import shutil

    import torch

    names = [c for c in getattr(torch._inductor.config.cpp, "cxx", ()) or () if isinstance(c, str)]
    found = next(filter(None, map(shutil.which, names)), None)
    if found is None:
        return (f"{held}: Inductor compiles them when their graph loads, with a C++ compiler: none found "
                f"({', '.join(names) or 'none named'}; CXX names another); such a graph fails when it loads. Install "
                "one where the program is served, or record the program there")  # fmt: skip
    return f"{held}: Inductor compiles them with {found} when their graph loads"


def guard_cpp(fallback: str | None, refused: type[Exception]) -> None:
    """activate(): Inductor's C++ kernels go through ``_answer``: served where a package holds them, else compiled
    (``fallback="jit"``, listed in ``compiled``; None, after deactivate(): not listed) or refused with ``refused``
    (``fallback="error"``); and every other C++ build of Inductor's (a graph's C++ wrapper, ``cpp_wrapper=True``, or
    a max-autotune candidate) through ``_check_builds`` alike. Inductor is imported by the program when it
    compiles; they are put in place then (``when_imported``)."""
    _state.fallback, _state.refused = fallback, refused
    later: dict[str, Callable[[Any], None]] = {}
    for name, put in (("torch._inductor.async_compile", _answer), ("torch._inductor.cpp_builder", _check_builds)):
        module = sys.modules.get(name)
        if module is not None:
            put(module)
        else:
            later[name] = put
    if later and not _state.waiting:
        _state.waiting = True
        when_imported(later)


def _answer(async_compile: Any) -> None:
    cls: Any = getattr(async_compile, "AsyncCompile", None)
    original = getattr(cls, "cpp_pybinding", None)
    if original is None or getattr(original, "_aotpack_answers", False):
        return

    def cpp_pybinding(self: Any, argtypes: Any, source_code: Any, *args: Any, **kwargs: Any) -> Any:
        key = cpp_key(argtypes, source_code) if not args and not kwargs and isinstance(source_code, str) else None
        why = "no activated package holds it"
        if key is not None and key in _state.cpp_held:
            try:
                return _cpp_kernel(key)
            except (OSError, ImportError, ValueError, AttributeError) as exc:  # (AttributeError: another torch's API)
                why = f"the package's copy did not load: {exc}"
        _compiles(key, why)
        return original(self, argtypes, source_code, *args, **kwargs)

    cpp_pybinding._aotpack_answers = True  # type: ignore[attr-defined]
    cls.cpp_pybinding = cpp_pybinding


def _check_builds(cpp_builder: Any) -> None:
    cls: Any = getattr(cpp_builder, "CppBuilder", None)
    original = getattr(cls, "build", None)
    if original is None or getattr(original, "_aotpack", False):
        return

    def build(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _state.fallback is not None and not _probing():
            _builds(self)
        return original(self, *args, **kwargs)

    build._aotpack = True  # type: ignore[attr-defined]
    cls.build = build


def _probing() -> bool:
    """Whether Inductor is probing the CPU's vector extensions (it compiles a few lines with each; allowed: a
    served graph's code is never generated, and a refusal of what a probe finds comes where a graph is built)."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "check_build" and frame.f_globals.get("__name__") == "torch._inductor.cpu_vec_isa":
            return True
        frame = frame.f_back
    return False


def _builds(builder: Any) -> None:
    """Inductor is about to run a C++ compiler (outside a C++ kernel ``_answer`` saw: a graph's C++ wrapper, an
    autotuning candidate): refused under fallback="error", listed under "jit"."""
    target = getattr(builder, "get_target_file_path", None)
    built = os.path.basename(str(target())) if callable(target) else "?"
    with _state.lock:
        if _state.fallback == "jit" and not built.endswith(".so"):  # (a header or an object: part of a build listed)
            return
        if _state.fallback == "jit" and _state.said_kernels:  # the build of a kernel _compiles listed (they pair
            _state.said_kernels -= 1  # up in order; its build may come later, when its graph's future resolves)
            return
    _refuse_or_list(
        f"Inductor's C++ build {built}",
        None,
        "a graph's C++ wrapper, an autotuning candidate, or a kernel no package holds",
        "Inductor would run a C++ compiler for {where} ({why})",
        "with the same Inductor settings",
        "Inductor runs a C++ compiler",
    )


def _compiles(key: str | None, why: str) -> None:
    """Inductor is about to build one of its C++ kernels: refused under fallback="error", listed under "jit"."""
    if _state.fallback == "jit":
        with _state.lock:
            _state.said_kernels += 1
    _refuse_or_list(
        f"Inductor's C++ kernel {key[:16] if key else '(of a form aotpack does not know)'}",
        key,
        why,
        "Inductor would compile {where} with a C++ compiler ({why})",
        "on a CPU with the features of this one",
        f"Inductor compiles it with a C++ compiler ({why})",
    )


def _refuse_or_list(name: str, key: str | None, why: str, refusal: str, record_with: str, warning: str) -> None:
    """One C++ compilation Inductor is about to make: refused under fallback="error" (``refusal`` names it, with
    ``{where}`` and ``{why}``; ``record_with`` says what a recording must share with this process), listed
    under "jit" with ``warning``."""
    where = f"{name} in process {os.getpid()} ({os.path.basename(sys.argv[0] or 'python')})"
    if _state.fallback == "error":
        raise _state.refused(
            refusal.format(where=where, why=why) + "; activate(fallback='error') allows no compilation in this "
            "process. Record the program (`aotpack record -o RECIPE -- python PROGRAM`) with this torch and Python, "
            f"{record_with}, and rebuild; or run with fallback='jit' to build it (a C++ compiler needed) and list "
            "it in coverage()"
        )
    if _state.fallback is None:
        return
    _state.compiled.append({"event": "compiled", "name": name, "key": key, "pid": os.getpid(), "kind": "cpp",
                            "why": why})  # fmt: skip
    import logging

    logging.getLogger("aotpack").warning("%s: %s", where, warning)


def _cpp_kernel(key: str) -> Any:
    """The C++ kernel a package holds under ``key``, loaded once per process. Its compressed object is read from
    the installed package once, checked (its sha256 is its name), and the bytes checked are written into a folder
    this process creates for it alone (``tempfile.mkdtemp``: mode 0700, a name no one predicts), loaded from there
    by Inductor's own loader (it loads from files), and the folder removed (the loaded library stays mapped).
    Nothing is read back from a shared folder such as Inductor's cache, where another user could have planted or
    swapped a file."""
    with _state.lock:
        kernel = _state.cpp_loaded.get(key)
        if kernel is not None:
            return kernel
        path = _state.cpp_held[key]
        with open(path, "rb") as f:
            packed = f.read(MAX_CPP_BYTES + 1)
        name = os.path.basename(path)[: -len(CPP_SUFFIX)]
        try:
            obj = unpack_cpp(packed, name)
        except ValueError as exc:
            raise ValueError(f"{path} {exc}") from None
        import shutil
        import tempfile

        from torch._inductor.codecache import CppPythonBindingsCodeCache as Bindings

        folder = tempfile.mkdtemp(prefix="aotpack-cpp-")
        try:
            target = os.path.join(folder, name + ".so")
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o500)
            with os.fdopen(fd, "wb") as f:
                f.write(obj)
            kernel = _state.cpp_loaded[key] = getattr(Bindings._load_library(target, key), Bindings.entry_function)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return kernel


def unpack_cpp(packed: bytes, name: str) -> bytes:
    """A C++ kernel's shared object as a set stores it (zlib), checked: whole, within MAX_CPP_BYTES, and the bytes
    whose sha256 is ``name``; a ValueError says what is wrong (the recipe reader checks each one with this too)."""
    inflate = zlib.decompressobj()
    try:
        obj = inflate.decompress(packed, MAX_CPP_BYTES + 1)
    except zlib.error as exc:
        raise ValueError(f"is damaged ({exc})") from None
    if len(obj) > MAX_CPP_BYTES:
        raise ValueError(f"inflates past {MAX_CPP_BYTES >> 20} MiB")
    if not inflate.eof or hashlib.sha256(obj).hexdigest() != name:
        raise ValueError("is damaged (its bytes are not the ones recorded: the sha256 of what it holds is its name)")
    return obj
