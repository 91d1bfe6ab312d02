"""``fallback="error"`` for every compilation in the process tree, not only the JIT's: whatever calls
``triton.compile`` (Triton's JIT, Inductor in the program and in its compile workers, a DSL) asks Triton's cache
manager for the kernel first, and a kernel the cache does not hold is compiled next. ``activate()`` makes Triton
use ``Guard`` as its cache manager through ``TRITON_CACHE_MANAGER``, which every process the program starts
inherits: a lookup that misses raises ``CompilationRefused`` before anything is compiled (``fallback="error"``),
or is said and kept for ``coverage()`` (``fallback="jit"``). A kernel Triton's cache holds loads from it: no
compilation. The program's own cache manager, if it had one, still serves every lookup behind the guard.

What the packages hold of Triton's cache (the kernels ``aotpack record`` copied out of it: Inductor's, a DSL's,
keyed by Triton's own cache key, ``<folder>/<key>/<files>``) serves every lookup of a key they hold, ahead of the
program's cache: ``AOTPACK_CACHE_ENTRIES`` (folders joined by ``os.pathsep``, inherited like the manager's name)
says where they are, and at a key's first lookup in a process the entry is put into the program's cache (its group
rewritten to the new paths, since a group holds absolute ones), replacing what is there, before Triton reads it: an
entry planted in the program's cache under a key a package holds is never loaded. A hit: Triton compiles nothing,
and Inductor finds the cubin where it looks, ``TRITON_CACHE_DIR/<key>/<name>.cubin``. The key covers Triton's
version and files, the source, the options, the target and ptxas: another Triton, torch (Inductor's source) or GPU
misses, and is refused. One exception, by design: a kernel the packages hold compiled by another ptxas of the
recorded program, all else in its key the same (``_aotpack_held.same_kernel``: Inductor's compile workers and the
process starting them use different ptxas, and which compiles a kernel is decided while the program runs), is served
from that entry where the program's cache misses.

A runtime module (runtime/__init__.py says what that means). At load it imports triton: it subclasses Triton's
cache manager, so it is imported only where Triton is."""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from triton import knobs
from triton.runtime.cache import CacheManager, FileCacheManager

from . import _aotpack_held as _held
from . import _aotpack_jit as _jit
from ._aotpack_env import (
    CACHE_ENTRIES,
    COMPILED_DIR,
    FALLBACK,
    PROGRAMS_MANAGER,
    RECORD_DIR,
    RECORDED_MANAGER,
    TRITON_MANAGER,
    read_named,
)

MAX_SPOOLED = 1 << 20  # bytes read of one process's list: a worker compiles hundreds of kernels, not millions


class CompilationRefused(RuntimeError):
    """Triton was asked to compile a kernel while a package was activated with ``fallback="error"``."""


class _Guarding:
    """This process's guard and recorder. ``reset()`` gives back what ``install()`` changed; what compiled stays
    listed (``compiled()``: a report written at exit holds it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread = threading.local()  # .jit, .recorded: the JIT's hook let this thread's next compilation through
        self.compiled: list[dict[str, Any]] = []  # what this process compiled outside the JIT while fallback="jit"
        self.said: set[str] = set()  # kernels whose compilation was logged
        self.installed_in: int | None = None  # the process that installed the guard (the others spool)
        self.here: Any = None  # a manager class the program set in this process (knobs), serving behind the guard
        self.undo: Callable[[], None] | None = None  # what install() changed, given back
        self.spool: str | None = None  # this process's spool folder (removed at its exit)
        self.copied: set[str] = set()  # (aotpack record's Recorder) the keys whose entries were copied
        self.served: set[tuple[str, str]] = set()  # (key, file) the packages' copy was put into the program's cache
        self.substituted: set[str] = set()  # entries put under a key they were not recorded for (_forget_at_exit)
        self.forgetter: int | None = None  # the process that removes them at its exit

    def reset(self) -> None:
        self.served.clear()  # (activated again: the packages' copies are put again)
        undo, self.undo = self.undo, None
        if undo is not None:
            undo()


_state = _Guarding()


def _named(env: str) -> Any:
    """The manager class an environment variable names (MODULE:CLASS), or Triton's own; an ImportError naming the
    variable the program set (TRITON_CACHE_MANAGER: aotpack keeps its value under ``env``) where it names none."""
    named = os.environ.get(env)
    if not named:
        return FileCacheManager
    module, _, name = named.partition(":")
    try:  # (ValueError: an empty module name)
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        found = exc
    if not isinstance(found, type):
        raise ImportError(f"{TRITON_MANAGER}={named[:200]!r} (kept by aotpack as {env}) names no cache manager class "
                          f"(MODULE:CLASS): {str(found)[:200]}; set it to a class Triton can use, or unset it")
    return found


def _jit_took(which: str) -> bool:
    """Whether the JIT's hook said this thread's compilation is the JIT's own (``jit_compiles``): asked once per
    compilation, by its first lookup, for the guard (``jit``) or the recorder (``recorded``)."""
    took = bool(getattr(_state.thread, which, False))
    setattr(_state.thread, which, False)
    return took


class _Behind(CacheManager):  # type: ignore[misc]
    """A cache manager with the program's own behind it (``_programs``), which stores and finds everything."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        self.key = key
        self.looking = not (override or dump)  # (the managers for TRITON_KERNEL_OVERRIDE and dumps: no lookups)
        self.inner = self._programs()(key, override=override, dump=dump)

    def _programs(self) -> Any:
        raise NotImplementedError

    def get_group(self, filename: str) -> Any:
        return self.inner.get_group(filename)

    def get_file(self, filename: str) -> Any:
        return self.inner.get_file(filename)

    def put(self, data: Any, filename: str, binary: bool = True) -> Any:
        return self.inner.put(data, filename, binary)

    def put_group(self, filename: str, group: Any) -> Any:
        return self.inner.put_group(filename, group)

    def __getattr__(self, name: str) -> Any:  # what a manager of the program's offers besides
        return getattr(self.inner, name)


class Guard(_Behind):
    """Triton's cache manager while a package is active: the program's manager behind it (set in this process,
    or named by TRITON_CACHE_MANAGER), and a lookup of a kernel it does not hold refused (or said) before
    Triton compiles it."""

    def _programs(self) -> Any:
        return _state.here if _state.here is not None else _named(PROGRAMS_MANAGER)

    def get_group(self, filename: str) -> Any:
        group = self.inner.get_group(filename)
        if not self.looking:
            return group
        jit = _jit_took("jit")
        _state.thread.seen = self.key  # (the check behind the manager: this compilation's lookup was the guard's)
        if (self.key, filename) not in _state.served and _held.file(self.key, filename):  # the package's copy wins
            group = self._packaged(filename) or group
        elif not (group or {}).get(filename):
            group = self._packaged(filename) or group
        if not jit and (not (group or {}).get(filename) or knobs.compilation.always_compile):
            _compiling(filename.removesuffix(".json"), self.key)
        return group

    def _packaged(self, filename: str) -> Any:
        """The entry a package holds for this key (or for this kernel compiled by another ptxas of the recorded
        program, ``_same_kernel``), put into the program's cache under this key (each file, then its group with
        the paths they have there), or None."""
        held = _held.file(self.key, filename)
        entry = os.path.dirname(held) if held else _held.same_kernel(filename.removesuffix(".json"), self.key)
        if entry is None:
            return None
        _state.served.add((self.key, filename))
        group = {}
        for name in sorted(os.listdir(entry)):
            if not name.startswith("__grp__") and name != _jit.KEY_PARTS:
                data = read_named(os.path.join(entry, name), _jit.MAX_ENTRY_FILE)  # (a FIFO planted there: no wait)
                group[name] = self.inner.put(data, name, binary=True)
        self.inner.put_group(filename, group)
        if not held:  # another ptxas's entry under the key this one asked for: not left behind (_forget_at_exit)
            _forget_at_exit(getattr(self.inner, "cache_dir", None))
        return self.inner.get_group(filename)

    def get_file(self, filename: str) -> Any:
        """A file; a module Triton builds with a C compiler (a launcher, its driver's utilities) that the program's
        cache lacks comes from the packages' entries where they hold it (a program served without a compiler)."""
        path = self.inner.get_file(filename)
        first = (self.key, filename) not in _state.served
        held = _held.file(self.key, filename) if (path is None or first) and self.looking else None
        if held is None:
            return path
        _state.served.add((self.key, filename))
        return self.inner.put(read_named(held, _jit.MAX_ENTRY_FILE), filename, binary=True)


class Recorder(_Behind):
    """Triton's cache manager while ``aotpack record`` runs a program, named in ``TRITON_CACHE_MANAGER`` and so
    in every process the program starts, whether or not the agent runs there (a compile worker forked before it,
    a listener another library replaced): each kernel entry Triton stores after compiling, or finds when it looks,
    is copied into ``<events>/triton-cache/<key>/`` with a ``cached`` event, as the agent's listener copies it;
    not the JIT's own compilations (the agent records those as compile events)."""

    jit = False  # this compilation is the JIT's (its first lookup asked)

    def _programs(self) -> Any:
        return _named(RECORDED_MANAGER)

    def get_group(self, filename: str) -> Any:
        group = self.inner.get_group(filename)
        if self.looking:
            self.jit = _jit_took("recorded")
            if (group or {}).get(filename) and not self.jit:
                _recorded(self.key, filename, group, getattr(self.inner, "cache_dir", None))
        return group

    def put_group(self, filename: str, group: Any) -> Any:
        stored = self.inner.put_group(filename, group)
        if self.looking and not self.jit and isinstance(group, dict) and filename in group:
            _recorded(self.key, filename, group, getattr(self.inner, "cache_dir", None))
        return stored


def _recorded(key: str, filename: str, group: dict[str, str], home: Any) -> None:
    """The entry's files into the recording's ``triton-cache/<key>/`` (each atomically) with what its key was
    made of (``key_parts``, where the compile is on this thread's stack), then its ``cached`` event in this
    process's events file; never raises into the program (a failure is a ``skipped`` event). ``home``: the
    entry's folder, where the program's manager says (Triton's own does): its files are read only from there."""

    folder = os.environ.get(RECORD_DIR)
    if not folder or key in _state.copied:
        return
    _state.copied.add(key)
    name = filename.removesuffix(".json")
    try:
        parts = _jit.key_parts(key)  # (once per entry: after the check above)
        written = {_jit.KEY_PARTS: json.dumps(parts, sort_keys=True).encode()} if parts else {}
        _jit.copy_entry(os.path.join(folder, "triton-cache", key), group, written,
                        home if isinstance(home, str) else None)  # fmt: skip
        with open(group[filename]) as f:
            target = json.load(f).get("target") or {}
        version = importlib.import_module("triton").__version__
        files = sorted([*group, *written])
        event = {"event": "cached", "name": name, "key": key, "files": files, "triton": str(version),
                 "target": f"{target.get('backend')}:{target.get('arch')}"}  # fmt: skip
    except Exception as exc:  # never into the program: said
        event = {"event": "skipped", "function": f"triton.compile of {name}",
                 "why": f"its Triton cache entry was not copied: {type(exc).__name__}: {exc}"}  # fmt: skip
    line = json.dumps(event, sort_keys=True, default=repr) + "\n"
    with open(_jit.events_file(folder), "a") as f:
        f.write(line)


def _compiling(name: str, key: str, module: bool = False, behind: str = "") -> None:
    """Triton is about to compile kernel ``name`` (or, ``module``, build its C module ``name`` with a C compiler)
    under the cache key ``key``: refused under fallback="error", listed and said under "jit". ``behind``: why the
    guard did not see it first (the check behind the manager saw it)."""
    where = (f"{name} (Triton cache key {key}) in process {os.getpid()} ({os.path.basename(sys.argv[0] or 'python')})"
             f"{'' if module else _held.others(name, key)}")  # fmt: skip
    held = f"{behind}: the packages' entries are not served through it" if behind else "no activated package holds it"
    what = (f"build its C module {where} with a C compiler (a kernel launcher, or its driver's utilities)" if module
            else f"compile {where}, outside Triton's JIT (Inductor for torch.compile, or another caller of "
            "triton.compile)")  # fmt: skip
    if os.environ.get(FALLBACK) == "error":
        raise CompilationRefused(
            f"Triton would {what}, and {held}; activate(fallback='error') allows no compilation in this process or "
            "the processes it starts. Record it (`aotpack record -o RECIPE -- python PROGRAM` with the same torch "
            "and Triton, at these shapes; record keeps every module Triton builds or finds; under torch.compile, a "
            "recording serves other sizes of each dimension it saw take two values or more, while the compiled "
            "function's file is as recorded: Dynamo keys its recorded profile on that file's content) and rebuild, or "
            "run with fallback='jit' to compile it and list it in coverage()"
        )
    event = {"event": "compiled", "name": name, "key": key, "pid": os.getpid(), "kind": "module" if module else
             "kernel", "why": held + ("" if module else _held.others(name, key))}  # fmt: skip
    spool = os.environ.get(COMPILED_DIR)
    if spool and _state.installed_in != os.getpid():  # a process the activating one started: list it there
        _spool(spool, event)
    else:
        _state.compiled.append(event)
    if name not in _state.said:
        _state.said.add(name)
        logging.getLogger("aotpack").warning("%s: Triton %s (%s)", where, "builds it with a C compiler" if module
                                             else "compiles it outside the JIT", held)  # fmt: skip


def _spool(folder: str, event: dict[str, Any]) -> None:
    """Append ``event`` to this process's list in ``folder`` (one line of JSON; a file per process, so no two
    writers share one). Best effort: a list that cannot be written is said, the compilation goes on."""
    try:
        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")
    except OSError as exc:
        logging.getLogger("aotpack").warning("%s compiled in process %d is not listed for coverage(): %s",
                                             event["name"], os.getpid(), exc)  # fmt: skip


def compiled() -> list[dict[str, Any]]:
    """What compiled outside the JIT while fallback="jit": in this process, and in those it started (``spooled``)."""
    return _state.compiled + spooled()


def spooled() -> list[dict[str, Any]]:
    """What the processes this one started compiled outside the JIT while fallback="jit" (their lists in
    ``AOTPACK_COMPILED_DIR``), in the order of their process ids; empty in any process but the activating one."""
    folder = _state.spool  # (deactivate() takes the variable back; the lists stay until this process exits)
    if folder is None or _state.installed_in != os.getpid() or not os.path.isdir(folder):
        return []
    events = []
    for name in sorted(os.listdir(folder), key=lambda n: (len(n), n)):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                lines = f.read(MAX_SPOOLED).splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:  # (a line a process was writing when this read it)
                continue
            if isinstance(event, dict) and event.get("event") == "compiled":
                events.append(event)
    return events


def jit_compiles() -> None:
    """The JIT's hook let this thread's next compilation through: the guard does not say it again (the hook
    said it, fallback="jit"), the recorder does not copy it (the agent records it as a compile event)."""
    _state.thread.jit = _state.thread.recorded = True


def install(fallback: str, entries: list[str] | None = None) -> None:
    """Guard every lookup of this process (and the processes it starts) with ``fallback``, the packages' cache
    entries in ``entries`` (folders) serving behind the program's cache; ``reset()`` gives back what it changed (an
    earlier install is given back first)."""
    reset()
    _state.thread.jit = False  # (a mark no lookup of an earlier manager took)
    names = (TRITON_MANAGER, FALLBACK, PROGRAMS_MANAGER, CACHE_ENTRIES, COMPILED_DIR)
    was = {name: os.environ.get(name) for name in names}
    mine = f"{__name__}:Guard"
    programs = was[TRITON_MANAGER]
    if programs != mine:  # (activated again: the program's manager stays the one behind)
        if programs:
            os.environ[PROGRAMS_MANAGER] = programs
        os.environ[TRITON_MANAGER] = mine
    os.environ[FALLBACK] = fallback
    if entries:
        os.environ[CACHE_ENTRIES] = os.pathsep.join(entries)
    _state.installed_in = os.getpid()
    if fallback == "jit":
        os.environ[COMPILED_DIR] = _spool_folder()
    set_here = knobs.cache.__dict__.get("manager_class")  # a class the program set in this process, not by name
    if set_here is not None and set_here is not Guard:
        _state.here = set_here
        knobs.cache.manager_class = Guard
    _restart_compile_workers()
    unchecked = _check_behind()

    def undo() -> None:
        unchecked()
        for name, value in was.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if _state.here is not None and knobs.cache.__dict__.get("manager_class") is Guard:
            knobs.cache.manager_class, _state.here = _state.here, None
        _restart_compile_workers()

    _state.undo = undo


# ---------------------------------------------------------------- the check behind the cache manager
# A program may set another cache manager after activate() (knobs.cache.manager_class, or TRITON_CACHE_MANAGER), and
# the guard is no longer asked: the fallback holds all the same, at the two places Triton compiles: a backend's
# stages, which triton.compile adds only when it compiles, and the _build of triton.runtime.build, which runs the C
# compiler.


def _check_behind() -> Any:
    """Put the check behind the manager in place in this process (its backends' ``add_stages`` and Triton's module
    build); returns the undo."""
    import triton.backends
    import triton.runtime.build as build

    undo: list[Any] = []
    for backend in list(getattr(triton.backends, "backends", {}).values()):
        cls = getattr(backend, "compiler", None)
        original = getattr(cls, "add_stages", None)
        if original is not None and not getattr(original, "_aotpack", False):
            type.__setattr__(cls, "add_stages", _stages_checked(original))
            undo.append((cls, "add_stages", original))
    original = getattr(build, "_build", None)
    if original is not None and not getattr(original, "_aotpack", False):
        build._build = _build_checked(original)
        undo.append((build, "_build", original))

    def unchecked() -> None:
        for owner, name, was in reversed(undo):
            (type.__setattr__ if isinstance(owner, type) else setattr)(owner, name, was)

    return unchecked


def _stages_checked(original: Any) -> Any:
    def add_stages(self: Any, *args: Any, **kwargs: Any) -> Any:
        _behind_the_manager()
        return original(self, *args, **kwargs)

    add_stages._aotpack = True  # type: ignore[attr-defined]
    return add_stages


def _build_checked(original: Any) -> Any:
    def _build(name: str, *args: Any, **kwargs: Any) -> Any:
        if os.environ.get(FALLBACK):
            local = _caller("compile_module_from_src", "triton.runtime.build")
            _compiling(str(name), _jit._folder_name(local.get("key")) or "?", module=True)
        return original(name, *args, **kwargs)

    _build._aotpack = True  # type: ignore[attr-defined]
    return _build


def _caller(function: str, module: str) -> dict[str, Any]:
    """The locals of the nearest call of ``module.function`` on this thread's stack ({} where there is none)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def _behind_the_manager() -> None:
    """triton.compile is about to compile. Where the guard's lookup came first, it decided; where the JIT compiles,
    its hook did (activate()); otherwise the cache manager in use is another than the guard: the fallback here."""
    if not os.environ.get(FALLBACK) or _caller("_do_compile", "triton.runtime.jit"):
        return
    local = _caller("compile", "triton.compiler.compiler")
    key = _jit._folder_name(local.get("hash")) or "?"
    if getattr(_state.thread, "seen", None) == key:
        return
    manager = knobs.cache.manager_class
    named = f"{getattr(manager, '__module__', '?')}.{getattr(manager, '__qualname__', manager)}"
    _compiling(str(getattr(local.get("src"), "name", "?")), key,
               behind=f"Triton's cache manager is {named}, set after activate(), which aotpack's guard is not before")


def reset() -> None:
    """Give back what ``install()`` changed: the environment the processes started inherit, and the manager class
    the program set in this process."""
    _state.reset()


def _forget_at_exit(folder: Any) -> None:
    """Remove, when this process exits, an entry the guard put into the program's cache under a key it was not recorded
    for (``_aotpack_held.same_kernel``: compiled by another ptxas): with aotpack gone, the program's own JIT
    would otherwise load it under this ptxas's key. A later lookup in any process puts it there again; a process
    killed before its exit leaves it (the cubin is still the same kernel's, compiled by the recorded program's
    ptxas)."""
    if not isinstance(folder, str):
        return
    with _state.lock:
        first = _state.forgetter is None
        _state.substituted.add(folder)
        _state.forgetter = os.getpid()
    if first:
        import atexit

        atexit.register(forget_substituted)


def forget_substituted() -> None:
    """The entries ``_forget_at_exit`` noted, removed (at the exit of the process that put them)."""
    import shutil

    with _state.lock:
        if os.getpid() != _state.forgetter:  # (not at a forked child's exit)
            return
        for made in sorted(_state.substituted):
            shutil.rmtree(made, True)
        _state.substituted.clear()


def _spool_folder() -> str:
    """The folder the processes this one starts list their compilations in: made once per process, removed when
    it exits."""
    if _state.spool is None or not os.path.isdir(_state.spool):
        import atexit
        import shutil
        import tempfile

        _state.spool = made = tempfile.mkdtemp(prefix="aotpack-compiled-")
        maker = os.getpid()

        def remove() -> None:  # (a report written at exit after this still lists what was spooled)
            if os.getpid() == maker:  # (not at a forked child's exit)
                _state.compiled.extend(spooled())
                _state.spool = None
                shutil.rmtree(made, True)

        atexit.register(remove)
    return _state.spool


def _restart_compile_workers() -> None:
    """Inductor's compile workers started before now have the environment as it was: stop them, and the next
    compilation starts them anew with this one (torch.compile's pools; a program without torch has none)."""
    inductor = sys.modules.get("torch._inductor.async_compile")
    if inductor is None or not getattr(inductor, "_pool_set", None):
        return
    shutdown = getattr(inductor, "shutdown_compile_workers", None)
    if shutdown is None:
        said = "torch.compile's compile workers started before activate() and this torch cannot restart them"
        logging.getLogger("aotpack").warning("%s: they compile unguarded; activate() first", said)
        return
    shutdown()


if os.environ.get(FALLBACK) and os.environ.get(TRITON_MANAGER) == f"{__name__}:Guard":
    _check_behind()  # (a process the activating one started, a compile worker: the check behind its manager too)
