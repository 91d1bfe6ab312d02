"""What ``aotpack record`` runs inside the recorded program: Triton's hooks, writing each compilation as it
happens.

``aotpack record`` starts the program as a child process whose ``PYTHONPATH`` leads with a folder holding a
``sitecustomize.py`` that calls ``main`` (the program's own ``sitecustomize``, if any, still runs after it) and a
package of the runtime's files, this one among them, and ``AOTPACK_RECORD_DIR`` naming where to write. Every Python
process of the workload (workers it spawns too) installs the hooks as soon as it imports Triton, and appends one
JSON line per event to ``<dir>/<run>-<pid>.jsonl``: ``compile`` (the function, its signature, constants,
attributes, options and target, as Triton's ``jit_cache_hook`` gives them, each value encoded by ``encode``) as it
happens, so that a program that crashes keeps what it compiled; ``cached``: a kernel ``triton.compile`` returned to
another caller (Inductor under torch.compile, a DSL; compiled or loaded from Triton's cache), whose cache entry,
every file, is copied at once into ``<dir>/triton-cache/<key>/`` (a compile worker may end without running
``atexit``), and so is each module Triton builds with a C compiler or loads from its cache (a kernel launcher, its
driver's utilities: a program served without a C compiler needs them); ``launches`` and ``picks`` (what each
``@triton.autotune`` chose) at exit. aotpack, the parent, reads them into typed events (``aotpack/record/events.py``)
and turns them into a recipe.

A function that a fresh process could not import by its module path (defined in ``__main__``, generated into a
temporary module, loaded from a file outside any installed package, made with ``exec``) is written out as
source (``_aotpack_source.describe``): the function and every ``@triton.jit`` function and constant it reads, by
name, the way Triton's JIT reads them for its cache key; the first event that needs it carries its text.

A runtime module (runtime/__init__.py says what that means): the standard library and the program's own Triton;
never aotpack, which the program's Python may not have, and which must not be imported there even where it is: it
imports multiprocessing, whose alias of the main module (``__mp_main__``) would then come before torch's modules in
``sys.modules``, and pickle names an object like ``torch.contiguous_format`` by the first module it finds holding
it: Inductor's cache keys (a hash of such pickles) would be other than in the program served, and no graph it
recorded would be found. A hook that fails writes a ``skipped`` line and lets the program go on.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import _aotpack_imports as imports
from . import _aotpack_inductor as inductor
from . import _aotpack_jit as compilations
from ._aotpack_env import RECORD_DIR, RECORD_TESTED
from ._aotpack_identity import jit_of
from ._aotpack_source import describe, source_names, source_text
from ._aotpack_tuners import KeyTap, pick_of, picks, wrap_tuner_runs

ENTRIES = "triton-cache"  # beside the events: the cache entries of kernels compiled outside the JIT, by key
INDUCTOR = "torch-compile"  # beside the events: torch.compile's caches, a set per process (_aotpack_inductor)


def _guard() -> Any:
    """The guard's module (aotpack record's Recorder): it imports Triton at load, so only once Triton is imported."""
    from . import _aotpack_guard

    return _aotpack_guard


def _entry_folder(key: str) -> str | None:
    """Where Triton keeps the cache entry ``key`` (its cache folder's ``<key>/``): the only folder its files are
    copied from (a group file lists absolute paths). None where this Triton does not say."""
    cache = getattr(sys.modules.get("triton.knobs"), "cache", None)
    folder = getattr(cache, "dir", None)
    return os.path.join(folder, key) if isinstance(folder, str) and folder else None


def _recorder_serves() -> bool:
    """Whether Triton's cache manager in this process is aotpack record's Recorder (_aotpack_guard), which copies
    the entries of other callers' kernels itself (the listener copies them where a program set another)."""
    knobs = sys.modules.get("triton.knobs")
    return getattr(getattr(getattr(knobs, "cache", None), "manager_class", None), "__name__", None) == "Recorder"


class Agent:
    """Triton's hooks, chained after any already installed; each event goes to ``sink`` (by default a line of
    ``<folder>/<run>-<pid>.jsonl``). A compile event carries a ``number`` (launch counts refer to it) and the text of
    each written-out source the first time it is needed."""

    def __init__(self, folder: str | None = None, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.entries: str | None = None  # where the cache entries of other callers' kernels are copied
        self.inductor: str | None = None  # where torch.compile's caches are saved at exit
        if folder is not None:
            os.makedirs(folder, exist_ok=True)
            self.path = compilations.events_file(folder)
            self.entries = os.path.join(folder, ENTRIES)
            self.inductor = os.path.join(folder, INDUCTOR)
        self.sink = sink or self._append
        self.compiled = 0
        self._sent: set[str] = set()  # sources whose text went out already
        self._launches: dict[int, int] = {}  # compile number -> launches
        self._handles: dict[Any, int | None] = {}
        self._keys: dict[tuple[int, str], int] = {}
        self._functions: dict[int, Any] = {}
        self._previous: Any = None
        self._previous_listener: Any = None
        self._jit = threading.local()  # .fn: the function the JIT's hook saw this thread compile next
        self._cached: set[str] = set()  # cache keys copied already by this process
        self._unname: Any = None
        self._unbuild: Any = None
        self._untap: Any = None
        self._tapped: dict[int, dict[str, dict[str, Any]]] = {}  # function -> its autotuners' picks seen, by key
        self._lock = threading.Lock()

    def _append(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, sort_keys=True, default=repr) + "\n"
        with self._lock, open(self.path, "a") as f:
            f.write(line)

    def on_compile(self, *, key: Any, repr: str, fn: Any, compile: dict[str, Any], is_manual_warmup: bool,
                   already_compiled: bool) -> Any:  # fmt: skip
        self._jit.fn = getattr(fn, "jit_function", None)  # its triton.compile is this one's: no cached event
        try:
            if _recorder_serves():  # nor does the Recorder copy its entry
                _guard().jit_compiles()
            event = compilations.payload(key, fn, compile)
            with self._lock:
                event["number"] = self.compiled
                self.compiled += 1
                self._keys[(id(fn.jit_function), str(key))] = event["number"]
                self._functions[id(fn.jit_function)] = fn.jit_function
            self.sink(self._with_sources(event))
        except Exception as exc:  # a form this Triton hooks differently: say so, never break the run
            function = f"{getattr(fn, 'module', '?')}:{getattr(fn, 'name', '?')}"
            self.sink({"event": "skipped", "function": function, "why": f"{type(exc).__name__}: {exc}"})
        if self._previous is None:
            return None
        return self._previous(key=key, repr=repr, fn=fn, compile=compile, is_manual_warmup=is_manual_warmup,
                              already_compiled=already_compiled)  # fmt: skip

    def on_compiled(self, *, src: Any, metadata: Any, metadata_group: Any, times: Any, cache_hit: Any,
                    **more: Any) -> Any:  # fmt: skip
        """``knobs.compilation.listener``: every ``triton.compile``, compiled or a cache hit (a warm cache must not
        hide a kernel), in every process. The JIT's own (its hook fired first, in this thread, for this
        function) is recorded as a compile event already; any other's cache entry is copied now."""
        jit, self._jit.fn = getattr(self._jit, "fn", None), None
        if (jit is None or getattr(src, "fn", None) is not jit) and not _recorder_serves():  # (it copies them)
            try:
                self._copy_entry(dict(metadata), dict(metadata_group))
            except Exception as exc:  # never into the program: said
                name = (metadata or {}).get("name", "?") if isinstance(metadata, dict) else "?"
                self.sink({"event": "skipped", "function": f"triton.compile of {name}",
                           "why": f"its Triton cache entry was not copied: {type(exc).__name__}: {exc}"})  # fmt: skip
        if self._previous_listener is not None:
            return self._previous_listener(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                                           cache_hit=cache_hit, **more)  # fmt: skip
        return None

    def _copy_entry(self, metadata: dict[str, Any], group: dict[str, str], key: str | None = None) -> None:
        """Every file of the kernel's cache entry into ``<entries>/<key>/`` (each atomically), then its event."""
        folders = {os.path.dirname(path) for path in group.values()}
        if len(folders) != 1 or self.entries is None:
            raise ValueError(f"its files are not in one cache folder: {sorted(folders)}")
        key = key or os.path.basename(folders.pop())
        if key in self._cached:
            return
        compilations.copy_entry(os.path.join(self.entries, key), group, home=_entry_folder(key))
        self._cached.add(key)
        target = metadata.get("target")
        arch = target.get("arch") if isinstance(target, dict) else getattr(target, "arch", None)
        backend = target.get("backend") if isinstance(target, dict) else getattr(target, "backend", None)
        version = metadata.get("triton_version") or importlib.metadata.version("triton")
        self.sink({"event": "cached", "name": str(metadata.get("name")), "key": key, "files": sorted(group),
                   "triton": str(version), "target": f"{backend}:{arch}" if target else "host"})  # fmt: skip

    def _with_sources(self, event: dict[str, Any]) -> dict[str, Any]:
        """The event, with the text of every written-out source it names and no earlier event carried."""
        names = [n for n in source_names(event) if n not in self._sent]
        self._sent.update(names)
        return {**event, "sources": {n: source_text(n) for n in names}} if names else event

    def on_launch(self, metadata: Any) -> None:
        try:
            handle = metadata.get()["function"] if hasattr(metadata, "get") else None
        except Exception:  # launch metadata a kernel computes itself may fail; counting is best effort
            return
        if handle is None:
            return
        if handle not in self._handles:
            self._handles[handle] = self._number_of(handle)
        number = self._handles[handle]
        if number is not None:
            self._launches[number] = self._launches.get(number, 0) + 1

    def _number_of(self, handle: Any) -> int | None:
        for jit_id, jit in self._functions.items():
            for caches in getattr(jit, "device_caches", {}).values():
                for key, kernel in caches[0].items():
                    if getattr(kernel, "function", None) == handle:
                        return self._keys.get((jit_id, str(key)))
        return None

    def install(self, knobs: Any = None) -> None:
        if knobs is None:
            knobs = importlib.import_module("triton.knobs")
        self._previous = knobs.runtime.jit_cache_hook
        knobs.runtime.jit_cache_hook = self.on_compile
        knobs.runtime.launch_enter_hook.add(self.on_launch)
        compilation: Any = getattr(knobs, "compilation", None)
        if self.entries is not None and not hasattr(compilation, "listener"):
            self.sink({"event": "skipped", "function": "triton.compile",
                       "why": "this Triton has no knobs.compilation.listener: kernels compiled outside its JIT "
                       "(Inductor under torch.compile) are not recorded"})  # fmt: skip
        elif self.entries is not None:
            self._previous_listener = compilation.listener
            compilation.listener = self.on_compiled
        if hasattr(sys.modules.get("triton.runtime.build"), "get_cache_manager"):  # else when it is imported
            self.watch_builds(sys.modules["triton.runtime.build"])
        if "triton.runtime.jit" in sys.modules:  # else when it is imported (imports.when_imported)
            self.adapt(sys.modules["triton.runtime.jit"])
        autotuner = sys.modules.get("triton.runtime.autotuner")
        if hasattr(autotuner, "Autotuner"):  # (else still being imported, knobs first: tapped once it is)
            self.tap(autotuner)

    def watch_builds(self, build_module: Any) -> None:
        """Triton's cache manager as ``triton.runtime.build`` asks for it (by its module global, in every
        release): each module it builds or finds there is copied (``_Modules``)."""
        if self.entries is None or self._unbuild is not None:
            return
        original, agent = build_module.get_cache_manager, self

        def get_cache_manager(key: Any) -> Any:
            return _Modules(original(key), agent)

        build_module.get_cache_manager = get_cache_manager
        self._unbuild = lambda: setattr(build_module, "get_cache_manager", original)

    def copy_module(self, key: Any, filename: str, path: Any) -> None:
        """A module Triton built or found in its cache, copied into ``<entries>/<key>/`` with its event."""
        try:
            if not isinstance(key, str) or not isinstance(path, str) or key in self._cached:
                return
            self._copy_entry({"name": filename, "target": None}, {filename: path}, key)
        except Exception as exc:  # never into the program: said
            self.sink({"event": "skipped", "function": f"Triton's module {filename}",
                       "why": f"it was not copied: {type(exc).__name__}: {exc}"})  # fmt: skip

    def adapt(self, jit_module: Any) -> None:
        """What this Triton release needs so that the hook sees every compilation (name_function_constexprs)."""
        self._unname = compilations.name_function_constexprs(jit_module)

    def tap(self, autotuner_module: Any) -> None:
        """Every autotuner's run (Triton's and libraries' subclasses) shows which key it ran and what it picked
        (``KeyTap``), also where its cache cannot be read back at exit."""
        if self._untap is None:
            self._untap = wrap_tuner_runs(autotuner_module.Autotuner, self._tapping)

    def _tapping(self, original: Any) -> Any:
        agent = self

        def tuner_run(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            cache = tuner.__dict__.get("cache")
            if cache is None or isinstance(cache, KeyTap):  # (another thread's run is tapping it)
                return original(tuner, *args, **kwargs)
            tap = tuner.cache = KeyTap(cache)
            try:
                return original(tuner, *args, **kwargs)
            finally:
                tuner.cache = cache
                agent._picked(tuner, tap)

        return tuner_run

    def _picked(self, tuner: Any, tap: Any) -> None:
        try:
            jit, config = jit_of(tuner), getattr(tuner, "best_config", None)
            if jit is None or config is None or not tap.keys or not isinstance(tap.keys[-1], tuple):
                return
            pick = pick_of(tap.keys[-1], config)
            with self._lock:
                self._tapped.setdefault(id(jit), {})[json.dumps(pick["key"], default=repr)] = pick
                self._functions.setdefault(id(jit), jit)
        except Exception as exc:  # never into the program: said, as a hook that failed
            self.sink({"event": "skipped", "function": f"{type(tuner).__name__}", "why": f"autotuner picks: {exc}"})

    def uninstall(self) -> None:
        from triton import knobs

        knobs.runtime.jit_cache_hook = self._previous
        knobs.runtime.launch_enter_hook.remove(self.on_launch)
        if self.entries is not None and getattr(knobs.compilation, "listener", None) == self.on_compiled:
            knobs.compilation.listener = self._previous_listener
        if self._unname is not None:
            self._unname()
        if self._untap is not None:
            self._untap()
        if self._unbuild is not None:
            self._unbuild()

    def finish(self) -> None:
        """At exit (or when a recording stops): launch counts, what each autotuner picked, and what torch.compile
        compiled in this process (its caches' artifacts)."""
        if self.inductor is not None:
            try:
                inductor.save(self.inductor)
            except Exception as exc:  # the program's exit goes on; what it compiled is recorded still
                self.sink({"event": "skipped", "function": "torch.compile's caches", "why": f"not saved: {exc!r:.300}"})
        if self._launches:
            self.sink({"event": "launches", "counts": {str(k): v for k, v in sorted(self._launches.items())}})
        for number, jit in list(self._functions.items()):
            seen = list(self._tapped.get(number, {}).values())  # what its autotuners' runs picked
            try:
                read = picks(jit)  # and what their caches hold (picks loaded from disk too)
            except Exception as exc:  # a cache aotpack cannot read: said unless the runs showed every pick
                read = []
                if not seen:
                    function = f"{getattr(jit, '__module__', '?')}:{getattr(jit, '__name__', '?')}"
                    self.sink({"event": "skipped", "function": function, "why": f"autotuner picks: {exc}"})
            chosen = seen + [p for p in read if p["key"] not in [s["key"] for s in seen]]
            try:
                if chosen:
                    self.sink(self._with_sources({"event": "picks", "function": describe(jit),
                                                  "picks": chosen}))  # fmt: skip
            except Exception as exc:  # the program's exit goes on
                function = f"{getattr(jit, '__module__', '?')}:{getattr(jit, '__name__', '?')}"
                self.sink({"event": "skipped", "function": function, "why": f"autotuner picks: {exc}"})


class _Modules:
    """Triton's cache manager for the modules ``triton.runtime.build`` makes (a kernel launcher, the driver's
    utilities): each one it finds there or puts there after building it is copied by the agent."""

    def __init__(self, inner: Any, agent: Agent) -> None:
        self.inner, self.agent = inner, agent

    def get_file(self, filename: str) -> Any:
        path = self.inner.get_file(filename)
        if path is not None:
            self.agent.copy_module(getattr(self.inner, "key", None), filename, path)
        return path

    def put(self, data: Any, filename: str, binary: bool = True) -> Any:
        path = self.inner.put(data, filename, binary=binary)
        self.agent.copy_module(getattr(self.inner, "key", None), filename, path)
        return path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# ---------------------------------------------------------------- starting in a recorded process


def start(folder: str, knobs: Any = None) -> Agent:
    """Install the agent now (Triton imported) and write what it saw at exit; with a Triton release aotpack is
    not tested with, say so and record nothing (its hooks may hand over other things)."""
    agent = Agent(folder)
    tested = [t for t in os.environ.get(RECORD_TESTED, "").split(",") if t]
    version = importlib.metadata.version("triton")
    if tested and ".".join(version.split(".")[:2]) not in tested:
        agent.sink({"event": "refused", "why": f"the program runs Triton {version}; aotpack records with Triton "
                    f"{', '.join(t + '.x' for t in tested)}: run it where one of them is installed"})  # fmt: skip
        return agent
    agent.sink({"event": "triton", "version": version})  # the release whose code the recording is (triton:)
    agent.install(knobs)
    atexit.register(agent.finish)
    return agent


def _when_triton_is_imported(folder: str) -> None:
    agents: list[Agent] = []

    def started(knobs: Any) -> None:
        agents.append(start(folder, knobs))

    def adapted(jit_module: Any) -> None:  # imported after knobs (Triton's own order); before: install() adapts
        if agents:
            agents[0].adapt(jit_module)

    def tapped(autotuner_module: Any) -> None:  # imported after knobs; before: install() taps
        if agents:
            agents[0].tap(autotuner_module)

    def built(build_module: Any) -> None:  # imported after knobs; before: install() watches
        if agents:
            agents[0].watch_builds(build_module)

    imports.when_imported({"triton.knobs": started, "triton.runtime.jit": adapted, "triton.runtime.autotuner": tapped,
                           "triton.runtime.build": built})  # fmt: skip


def main(here: str) -> None:
    """In each Python process of a recorded program, as it starts: the ``sitecustomize`` aotpack record puts in the
    folder ``here``, first on the program's ``PYTHONPATH``, calls this (record/program.py)."""
    folder = os.environ.get(RECORD_DIR)
    if folder:
        imports.when_imported({"torch._inductor.async_compile": inductor.record_cpp})  # its C++ kernels, kept at exit
        inductor.stable_code_ids()  # Dynamo's profile keyed as in a served process
        if "triton.knobs" in sys.modules:
            start(folder, sys.modules["triton.knobs"])
        else:
            _when_triton_is_imported(folder)
    imports.chain_sitecustomize(here)
