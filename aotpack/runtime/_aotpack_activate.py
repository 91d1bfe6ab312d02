"""``activate()``: the original ``@triton.jit`` functions of recorded kernels launch a package's variants, and what
else would compile is served, refused or listed (``fallback``); ``deactivate()`` gives back what it changed, and
``coverage()`` lists what compiled while active.

A runtime module (runtime/__init__.py says what that means): standard library only; Triton imported where it is
installed, when activating.

The modules whose state activate() sets up each hold it in one object with a ``reset()`` that ``deactivate()`` calls:
this one's (``_state``: what it patched), the guard's (``_aotpack_guard``: Triton's cache manager and the environment
the processes started inherit) and Inductor's (``_aotpack_inductor``: its C++ kernels' policy).

Several packages in one process (a kernel library's wheel beside a model's) each ship a copy of this runtime: the copy
that activates first does so for every package (``sys._aotpack_activation`` names it), so that one patch and one
guard serve them all, their launchers and cache entries joined. The strictest fallback asked wins (``"error"`` over
``"jit"``); ``deactivate()`` of one package takes back its part alone, and that of the last gives everything back."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from typing import Any

from . import _aotpack_folders as _folders
from ._aotpack_env import REHEARSAL
from ._aotpack_identity import identity_of, jit_of
from ._aotpack_jit import name_function_constexprs, payload
from ._aotpack_source import source_names, source_text
from ._aotpack_tuners import tuner_of, wrap_tuner_runs

HOST = "_aotpack_activation"  # the attribute of sys naming the runtime copy that activates every package


class _Package:
    """One activated package's part: what its activate() gave, and how often it was called (as often as deactivate()
    must be to take it back)."""

    def __init__(self, launchers: list[Any], fallback: str, missing: type[Exception], caches: list[str]) -> None:
        self.count = 0
        self.launchers, self.fallback, self.missing, self.caches = launchers, fallback, missing, caches


class _Activation:
    """What ``activate()`` changed, so that ``deactivate()`` can give it back: the launchers by source identity,
    JITFunction.run and Autotuner.run as they were, the functions given a run of their own, the compile hook; and
    the packages activated, whose parts make the launchers, the cache entries and the fallback."""

    def __init__(self) -> None:
        self.packages: dict[str, _Package] = {}
        self.missing: type[Exception] = LookupError  # what a refused JIT compilation raises: a package's own
        self.launchers: dict[str, tuple[Any, Any]] = {}  # identity -> (launcher, its runner once made)
        self.jit_run: Any = None
        self.untune: Any = None  # gives Autotuner and its subclasses their runs back
        self.patched: list[Any] = []  # weak references to JITFunctions given a run of their own
        self.hook: Any = None  # the jit_cache_hook installed
        self.previous_hook: Any = None
        self.fallback = "error"
        self.coverage: list[dict[str, Any]] = []  # what Triton compiled while active, as record_agent writes it
        self.logged: set[str] = set()
        self.unname: Any = None  # the undo of name_function_constexprs, where this release needs it
        self.caches: list[str] = []  # the activated packages' Triton cache entries (folders; _aotpack_guard)


class _Active:
    """This process's activation: None, or what activate() changed (one for every package activated)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: _Activation | None = None


_state = _Active()


def _rehearsed(fallback: str) -> str:
    """Under ``aotpack rehearse`` (REHEARSAL=1), each compilation is listed, not the first refused: said where that
    turns fallback="error" into "jit", so that the variable left set where a program is served does not go unseen.
    Any other value is said, and has no effect."""
    import warnings

    value = os.environ.get(REHEARSAL, "")
    if value != "1":
        warnings.warn(f"{REHEARSAL}={value[:40]!r} is ignored: aotpack rehearse sets it to 1", RuntimeWarning, 3)
        return fallback
    if fallback == "error":
        warnings.warn(f"{REHEARSAL}=1 (aotpack rehearse): activate(fallback='error') lists each compilation instead "
                      "of refusing it; unset it where the program is served", RuntimeWarning, 3)  # fmt: skip
    return "jit"


def _host(claim: bool = False) -> Any:
    """The runtime copy that activates every package of this process, where it is another than this one; with
    ``claim``, this one becomes it where none is yet."""
    mine = sys.modules[__name__]
    host = sys.__dict__.setdefault(HOST, mine) if claim else sys.__dict__.get(HOST, mine)
    return None if host is mine else host


def activate(launchers: list[Any], fallback: str | None, missing: type[Exception], caches: list[str] | None = None,
             graphs: list[str] | None = None, package: str = "") -> list[str]:  # fmt: skip
    """Make the original ``@triton.jit`` functions launch these kernels: every JITFunction, whether it exists now
    or is created later (a module imported or generated afterwards, under any name), is matched by its source
    identity on its first launch, and its ``run`` (what ``fn[grid](...)`` calls) becomes the launcher's when it
    is one of them; ``@triton.autotune`` wrappers around one get the recorded picks. While active, any
    compilation by Triton's JIT (of these kernels' calls no variant matches, or of any other kernel) raises
    ``missing`` before compiling (``fallback="error"``, the default without Triton), or compiles, logged once
    per kernel and kept for ``coverage()`` (``fallback="jit"``, the default with Triton). ``caches``: folders of
    Triton cache entries the package holds (what other callers of triton.compile compiled when it was recorded),
    served to every process as cache hits. ``graphs``: folders of torch.compile's caches the package holds,
    loaded into torch's (_aotpack_inductor; one that cannot be is warned about, never raised). ``package``: whose
    part this is (the module docstring: several packages). Returns the names."""
    host = _host(claim=True)
    if host is not None:
        result: list[str] = host.activate(launchers, fallback, missing, caches, graphs, package=package)
        return result
    have_triton = importlib.util.find_spec("triton") is not None
    fallback = fallback or ("jit" if have_triton else "error")
    fallback = _rehearsed(fallback) if have_triton and os.environ.get(REHEARSAL) else fallback
    if fallback not in ("jit", "error"):
        raise ValueError(f"activate(fallback={fallback!r}): expected 'jit' or 'error'")
    if fallback == "jit" and not have_triton:
        raise ValueError("activate(fallback='jit') needs Triton installed; use fallback='error'")
    with _state.lock:
        state = _state.current or _Activation()
        part = state.packages.setdefault(package, _Package(launchers, fallback, missing, list(caches or ())))
        part.count += 1
        part.launchers, part.fallback, part.missing = launchers, fallback, missing  # (activated again: as now asked)
        part.caches += [c for c in caches or () if c not in part.caches]
        if have_triton and _state.current is None:
            _patch(state)
        _state.current = state
        _apply(state, have_triton)
    for folder in graphs or ():
        _serve_graphs(folder, state.fallback)
    return [launch.__name__ for launch in launchers]


def _apply(state: _Activation, have_triton: bool) -> None:
    """The activated packages' parts joined: their launchers (a package activated earlier first), their cache
    entries, the strictest fallback; every function matched already takes them on its next launch."""
    parts = list(state.packages.values())
    state.fallback = "error" if any(p.fallback == "error" for p in parts) else "jit"
    state.missing = next((p.missing for p in parts if p.fallback == state.fallback), parts[0].missing)
    state.caches = list(dict.fromkeys(c for p in parts for c in p.caches))
    launchers: dict[str, tuple[Any, Any]] = {}
    for part in parts:
        for launch in part.launchers:
            launchers.setdefault(launch.function["identity"], (launch, None))
    state.launchers = launchers
    if have_triton:
        for ref in state.patched:  # functions matched already take the launchers and fallback now on their next launch
            jit = ref()
            if jit is not None:
                jit.__dict__.pop("run", None)
        state.patched.clear()
        # every other caller of triton.compile, in every process; the packages' Triton cache entries served
        _guard().install(state.fallback, state.caches)
    _inductor().guard_cpp(state.fallback, state.missing)  # Inductor's C++ kernels: served, refused or listed alike


def _serve_graphs(folder: str, fallback: str) -> None:
    """torch.compile's recorded caches loaded; where torch or its API is missing or fails, a warning (the package's
    kernels are served or refused one by one still)."""
    import warnings

    try:
        _inductor().serve(folder, fallback)
    except Exception as exc:  # an optional integration: never the reason activate() fails
        warnings.warn(
            f"torch.compile's recorded caches in {folder} were not loaded: {exc!r:.300}", RuntimeWarning, stacklevel=3
        )


def _patch(state: _Activation) -> None:
    import types
    import weakref

    from triton import knobs
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    state.jit_run = JITFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:  # the first launch of each JITFunction
        found = state.launchers.get(identity_of(self))
        if found is None:
            own = types.MethodType(state.jit_run, self)
        else:
            launch, runner = found
            if runner is None:
                runner = launch.runner(_jit_instead(state, self) if state.fallback == "jit" else None)
                state.launchers[identity_of(self)] = (launch, runner)
            own = runner
        self.run = own
        state.patched.append(weakref.ref(self))
        return own(*args, **kwargs)

    def compiling(**hook: Any) -> Any:
        fn = hook.get("fn")
        where = f"{getattr(fn, 'module', '?')}:{getattr(fn, 'name', '?')}"
        if state.fallback == "error":
            raise state.missing(_refused(where, getattr(fn, "jit_function", None), hook))
        try:
            state.coverage.append(payload(hook["key"], fn, hook["compile"]))
        except Exception:  # reporting is best effort; the compile goes on
            pass
        _guard().jit_compiles()
        if where not in state.logged:
            state.logged.add(where)
            import logging

            logging.getLogger("aotpack").warning("%s: Triton's JIT compiles it (no activated package has this "
                                                 "call); record it into the recipe to build it", where)  # fmt: skip
        return state.previous_hook(**hook) if state.previous_hook else None

    JITFunction.run = run
    _seed_tuners(state, Autotuner)
    state.previous_hook, state.hook = knobs.runtime.jit_cache_hook, compiling
    knobs.runtime.jit_cache_hook = compiling
    state.unname = name_function_constexprs(sys.modules[JITFunction.__module__])


def _seed_tuners(state: _Activation, autotuner: Any) -> None:
    """Every @triton.autotune wrapper seeds the recorded picks before it times anything: Triton's Autotuner, and
    each subclass with a run of its own (libraries' autotuners), those defined now and those defined later. Under
    ``fallback="error"`` it times only the configs built (a key the recording never saw: the JIT would compile
    the others to time them)."""

    def seeding(original: Any) -> Any:
        def tuner_run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.__dict__.get("_aotpack_seeded"):
                self._aotpack_seeded = True
                inner = jit_of(self)
                found = state.launchers.get(identity_of(inner)) if inner is not None else None
                if found is not None:
                    _seed_autotuner(self, found[0].tuned)
                    built = [c for c in self.configs if found[0].holds(c)] if state.fallback == "error" else []
                    if built:
                        self.configs = built
            return original(self, *args, **kwargs)

        return tuner_run

    state.untune = wrap_tuner_runs(autotuner, seeding)


def _inductor() -> Any:
    """torch.compile's recorded caches and Inductor's C++ kernels (imported when first needed: a package's import
    stays small)."""
    from . import _aotpack_inductor

    return _aotpack_inductor


def _guard() -> Any:
    """The cache manager that refuses (or says) what callers of triton.compile other than the JIT compile; it
    imports Triton at load, so only where Triton is."""
    from . import _aotpack_guard

    return _aotpack_guard


def _jit_instead(state: _Activation, jit: Any) -> Any:
    """The launcher's fallback: the JIT's own run for a call no variant matches (its compile goes through the
    hook, which logs it and keeps it for coverage())."""

    def instead(message: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return state.jit_run(jit, *args, **kwargs)

    return instead


def _refused(where: str, jit: Any, hook: dict[str, Any]) -> str:
    compile = hook.get("compile") or {}
    signature = ", ".join(f"{k}: {v}" for k, v in (compile.get("signature") or {}).items())
    constants = ", ".join(f"{'.'.join(map(str, k))}={v!r}" for k, v in (compile.get("constants") or {}).items())
    code = getattr(getattr(jit, "fn", None), "__code__", None)
    source = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
    return (f"Triton's JIT would compile {where}{source} for ({signature}) with constexprs {constants or 'none'}, "
            f"num_warps={compile.get('num_warps')}, num_stages={compile.get('num_stages')}; activate(fallback="
            "'error') allows no compilation. Add it to the recipe (aotpack record -o RECIPE -- <your program> "
            "merges into RECIPE) and rebuild")  # fmt: skip


def deactivate(package: str | None = None) -> None:
    """Undo ``activate()`` of ``package`` (every package: None): its part taken back, the others' in place (the
    module docstring); once no package is active, JITFunction.run, Autotuner.run and the compile hook as they were,
    every function's own run, and the state of the guard and of Inductor's C++ kernels (their ``reset()``)."""
    host = _host()
    if host is not None:
        host.deactivate(package)
        return
    with _state.lock:
        state = _state.current
        if state is not None and package is not None and package in state.packages:
            part = state.packages[package]
            part.count -= 1
            if part.count > 0:
                return
            del state.packages[package]
            if state.packages:
                _apply(state, state.jit_run is not None)
                return
        _state.current = None
        if sys.__dict__.get(HOST) is sys.modules[__name__]:
            del sys.__dict__[HOST]  # (a copy activating later hosts anew)
        if state is not None:
            _inductor().reset()  # (its C++ kernels the packages hold still served: a loaded graph calls them)
            _folders.reset()
        if state is None or state.jit_run is None:
            return
        from triton import knobs
        from triton.runtime.jit import JITFunction

        JITFunction.run = state.jit_run
        if state.untune is not None:
            state.untune()
        _guard().reset()
        if knobs.runtime.jit_cache_hook is state.hook:
            knobs.runtime.jit_cache_hook = state.previous_hook
        if state.unname is not None:
            state.unname()
        for ref in state.patched:
            jit = ref()
            if jit is not None:
                jit.__dict__.pop("run", None)


def coverage() -> list[dict[str, Any]]:
    """What Triton's JIT compiled while activated with ``fallback="jit"``, as ``aotpack record`` reads it (each
    written-out source's text in the first event that names it): in this process, whichever package activated."""
    host = _host()
    if host is not None:
        events: list[dict[str, Any]] = host.coverage()
        return events
    current = _state.current
    events = list(current.coverage) if current is not None else []
    if "triton" in sys.modules:  # and what callers of triton.compile other than the JIT compiled (Inductor), in
        events += _guard().compiled()  # this process and in those it started (compile workers)
    events += _inductor().compiled()  # and Inductor's C++ kernels (built where their graph loads: this process)
    out, sent = [], set()
    for event in events:
        names = [n for n in source_names(event) if n not in sent]
        sent.update(names)
        out.append({**event, "sources": {n: source_text(n) for n in names}} if names else event)
    return out


def _seed_autotuner(wrapped: Any, tuned: list[dict[str, Any]]) -> None:
    """Put the recorded picks into the @triton.autotune wrapper's cache (key -> its own Config
    object), so that it launches them without timing anything."""
    tuner = tuner_of(wrapped)
    if tuner is None:
        return
    for pick in tuned:
        for config in tuner.configs:
            same = dict(config.kwargs) == pick["kwargs"] and config.num_warps == pick["num_warps"]
            if same and config.num_stages == pick["num_stages"]:
                tuner.cache[tuple(pick["key"])] = config
                break
