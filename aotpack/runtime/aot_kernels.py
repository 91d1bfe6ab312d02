"""The Python side of every aotpack-generated package (shipped unchanged in each wheel).

A kernel is a callable object: calling it launches (the call goes straight to the C binding),
``kernel.select(...)`` tells which variant a call would launch, ``kernel.variants`` lists them.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from typing import Any

try:  # a module of a package: aotpack.runtime, or a generated package
    from . import _aotpack_desc as _desc
    from . import _aotpack_jit as _jit
    from . import _aotpack_tune as _tune
except ImportError:  # a top-level module beside aotpack record's agent
    import _aotpack_desc as _desc  # type: ignore[import-not-found,no-redef]
    import _aotpack_jit as _jit  # type: ignore[import-not-found,no-redef]
    import _aotpack_tune as _tune  # type: ignore[import-not-found,no-redef]

# the source identity and compilations as JSON: for this module, and through it for the record agent and aotpack
jit_of, identity_of, identity, describe = _jit.jit_of, _jit.identity_of, _jit.identity, _jit.describe
payload, source_names, source_text, picks = _jit.payload, _jit.source_names, _jit.source_text, _jit.picks
tuner_of, name_function_constexprs = _jit.tuner_of, _jit.name_function_constexprs
wrap_tuner_runs, pick_of, KeyTap, copy_entry = _jit.wrap_tuner_runs, _jit.pick_of, _jit.KeyTap, _jit.copy_entry
# runtime autotuning and its cache file: what a generated package's autotune() calls
autotune, save_autotune, CACHE_FORMAT = _tune.autotune, _tune.save_autotune, _tune.CACHE_FORMAT


class Manifest:
    """The package's manifest.json, read on first use: a launch never needs it, so importing the
    package does not pay for parsing it (hundreds of KB for a large build)."""

    __slots__ = ("_data", "_package")

    def __init__(self, package: str) -> None:
        self._package = package
        self._data: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self._data is None:  # two threads may both read it; either result is the same
            import json
            from importlib import resources

            self._data = json.loads(resources.files(self._package).joinpath("manifest.json").read_text())
        return self._data


class Kernel:
    """A kernel of this package. Call it with the kernel's arguments to launch it."""

    __slots__ = ()
    # set on each kernel's own class by kernel(): instances hold nothing but the C kernel
    __name__: str
    _function: Any  # the binding's function: the signature and docstring
    _select: Any
    _choose: Any
    _manifest: Manifest

    @property
    def variants(self) -> list[str]:
        """The ids of the kernel's variants."""
        return [v["id"] for v in self._manifest()["kernels"][self.__name__]["variants"]]

    def select(self, *args: Any, **kwargs: Any) -> str:
        """The id of the variant the dispatcher would launch, without launching.

        With the kernel's arguments (``k.select(x, y, out)``): exactly what that call launches, on
        the arguments' device. With key values by name, dtypes by type variable and an optional
        ``device`` (``k.select(M=512, N=512, K=512, T="fp16")``): the table's choice for that key on
        that device, for arguments that satisfy the divisibility hints.
        """
        if args or not kwargs:  # the call's own arguments: the binding selects (no manifest needed)
            return str(self._select(*args, **kwargs))
        entry = self._manifest()["kernels"][self.__name__]
        key_names = [name for name, _ in entry["key"]]
        typevars = list(entry["types"])
        if not set(kwargs) <= set(key_names) | set(typevars) | {"device"}:
            return str(self._select(*args, **kwargs))
        missing = [n for n in key_names if n not in kwargs]
        if missing:
            raise TypeError(f"{self.__name__}.select(): give the key values {', '.join(missing)}")
        bindings = [dict(b) for b in entry["bindings"]]
        types = {v: kwargs[v] for v in typevars if v in kwargs}
        matches = [i for i, b in enumerate(bindings) if all(b[v] == t for v, t in types.items())]
        if len(matches) != 1:
            choices = "; ".join(", ".join(f"{v}={t}" for v, t in b.items()) for b in bindings)
            raise TypeError(f"{self.__name__}.select(): name the types, one of: {choices}")
        key = tuple(int(kwargs[n]) for n in key_names)
        return str(self._choose(key, matches[0], int(kwargs.get("device", 0))))

    @property
    def __signature__(self) -> Any:
        import inspect

        return inspect.signature(self._function)

    def __repr__(self) -> str:
        return f"<kernel {self.__name__}: {len(self.variants)} variants>"


class Compiled:
    """What a launcher's ``run`` returns, as Triton's ``JITFunction.run`` returns the CompiledKernel it launched:
    libraries keep it and launch through it later (FlagGems' LibEntry: ``kernel[grid](*args)``), every parameter
    by position (Triton 3.6) or the runtime arguments alone (3.7 on); either launches this config again."""

    __slots__ = ("_constexprs", "_names", "_options", "_runtime", "run")

    def __init__(self, names: tuple[str, ...], runtime: tuple[bool, ...], config: dict[str, Any]) -> None:
        self._names = names
        self._runtime = tuple(n for n, is_arg in zip(names, runtime) if is_arg)
        self._constexprs = {n: _Keyed(_keyed(v)) for n, v in config["constexprs"].items()}
        self._options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
        self.run: Any = None  # the runner, once made

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **_: Any) -> Any:  # (CompiledKernel's runner takes stream=: the caller's is current)
            if len(args) == len(self._runtime) < len(self._names):
                given = dict(zip(self._runtime, args))
                return self.run(**given, **self._constexprs, grid=grid, **self._options)
            return self.run(*args, grid=grid, **self._options)

        return launch


def kernel(name: str, native: Any, manifest: Manifest) -> Kernel:
    """The kernel object: the one instance of a class of its own over the binding's ``_Kernel`` (whose
    call goes from the interpreter straight to C, no Python frame or ``__call__`` lookup between) and
    ``Kernel``, with the kernel's docstring."""
    function = getattr(native, name)
    namespace = {"__slots__": (), "__doc__": function.__doc__, "__name__": name, "_function": function,
                 "_select": getattr(native, "_select_" + name), "_choose": getattr(native, "_choose_" + name),
                 "_manifest": manifest}  # fmt: skip
    cls = type(name, (native._Kernel, Kernel), namespace)
    made: Kernel = cls(name)
    return made


class Launcher:
    """A kernel built from a recording (``launch: triton``), launched as Triton launches it:
    ``kernel[grid](*args, BLOCK=..., num_warps=..., num_stages=...)``, the grid a tuple of 1 to 3
    ints or a callable of the call's arguments by name (constexprs included), as Triton's is. The
    constexprs and options pick the config; the C runtime computes the call's specialization class
    as the JIT does and launches the variant built for exactly that class, or raises MissingVariant.
    ``run`` (Triton's ``JITFunction.run`` signature) is the C runner itself: no Python frame per launch, but
    for a kernel with tensor descriptor arguments, whose TensorDescriptors become tensors first (_aotpack_desc)."""

    __slots__ = ("__name__", "_manifest", "_missing", "_run", "_runner", "_spec")

    def __init__(self, name: str, native: Any, manifest: Manifest) -> None:
        self.__name__ = name
        self._manifest = manifest
        self._runner = getattr(native, "_runner_" + name)
        self._missing: type[Exception] = native.MissingVariant
        self._spec: tuple[Any, ...] | None = None
        self._run: Any = None

    @property
    def _entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = self._manifest()["kernels"][self.__name__]
        return entry

    @property
    def run(self) -> Any:
        """``run(*args, grid, warmup=False, **kwargs)``, as Triton's JITFunction has it."""
        if self._run is None:
            self._run = self.runner(None)
        return self._run

    def runner(self, fallback: Any) -> Any:
        """A C ``run`` that calls ``fallback(message, args, kwargs)`` instead of raising MissingVariant
        (None: raise)."""
        if self._spec is None:  # the runner's spec, as aot_python.h describes it (less the fallback)
            entry = self._entry
            names = tuple(n for n, _ in entry["params"])
            consts = [n for n, is_arg in entry["params"] if not is_arg]
            configs = {
                (tuple(_keyed(c["constexprs"][n]) for n in consts), c["num_warps"], c["num_stages"]): index
                for index, c in enumerate(entry["configs"])
            }
            self._spec = (names, tuple(bool(is_arg) for _, is_arg in entry["params"]), dict(entry["defaults"]),
                          configs, {**LAUNCH_DEFAULTS, **entry["options"]}, tuple(LAUNCH_DEFAULTS), _plain)  # fmt: skip
        names, runtime = self._spec[0], self._spec[1]
        compiled = tuple(Compiled(names, runtime, c) for c in self._entry["configs"])
        described = _desc.descriptors(self._entry["args"], names)
        run = self._runner((*self._spec, compiled, None if described else fallback))
        if described:  # (host tensor descriptors: the wrapper hands the runner their tensors, and falls back)
            run = _desc.wrap(run, fallback, self._missing, self.__name__, names, described, self._spec[2], _plain)
        for each in compiled:
            each.run = run
        return run

    def __getitem__(self, grid: Any) -> Any:
        return functools.partial(self.run, grid=grid)

    @property
    def function(self) -> dict[str, Any]:
        """Where the published ``@triton.jit`` function is: module or path, and name."""
        function: dict[str, Any] = self._entry["function"]
        return function

    @property
    def tuned(self) -> list[dict[str, Any]]:
        """The configs the recorded autotuner picked, per key."""
        tuned: list[dict[str, Any]] = self._entry["tuned"]
        return tuned

    def holds(self, config: Any) -> bool:
        """Whether a variant was built for an autotuner's ``triton.Config`` (its constexprs, warps and stages)."""
        given = {k: _plain(v) for k, v in config.kwargs.items()}
        for built in self._entry["configs"]:
            if (built["num_warps"], built["num_stages"]) == (config.num_warps, config.num_stages) and all(
                _keyed(v) == given[k] for k, v in built["constexprs"].items() if k in given
            ):
                return True
        return False

    @property
    def variants(self) -> list[str]:
        """The ids of the kernel's variants."""
        return [v["id"] for v in self._entry["variants"]]

    def __repr__(self) -> str:
        return f"<kernel {self.__name__}[grid]: {len(self.variants)} variants>"


def _plain(value: Any) -> Any:
    """A constexpr a call passes, as configs are keyed: a tl.constexpr(0) is 0, a dtype ("dtype", "fp16"), a
    @triton.jit function ("function", its source identity), a tuple ("tuple", (...))."""
    kind = type(value).__name__
    if kind == "_Keyed":
        return value.key
    if kind == "constexpr" and hasattr(value, "value"):
        return _plain(value.value)
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(_plain(v) for v in value))
    if kind == "dtype":
        torch = type(value).__module__ == "torch"
        return ("torch_dtype", str(value)[6:]) if torch else ("dtype", str(value))
    jit = jit_of(value)
    if jit is not None:
        return ("function", identity_of(jit))
    return value


class _Keyed:
    """A constexpr given as its config key already (``Compiled`` launching a config again)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key


def _keyed(value: Any) -> Any:
    """A constexpr as the manifest holds it (manifest.const_json), keyed as _plain keys a call's."""
    if isinstance(value, dict):
        ((tag, inner),) = value.items()
        return ("tuple", tuple(_keyed(v) for v in inner)) if tag == "tuple" else (tag, inner)
    return value


# launch options of Triton's JIT that select other code, and its defaults (num_warps and num_stages pick the config)
LAUNCH_DEFAULTS = {"num_ctas": 1, "maxnreg": None, "enable_fp_fusion": True, "launch_cooperative_grid": False,
                   "launch_pdl": False}  # fmt: skip


class _Activation:
    """What ``activate()`` changed, so that ``deactivate()`` can give it back: the launchers by source identity,
    JITFunction.run and Autotuner.run as they were, the functions given a run of their own, the compile hook."""

    def __init__(self) -> None:
        self.launchers: dict[str, tuple[Launcher, Any]] = {}  # identity -> (launcher, its runner once made)
        self.jit_run: Any = None
        self.untune: Any = None  # gives Autotuner and its subclasses their runs back
        self.unguard: Any = None  # gives Triton's cache manager back (_aotpack_guard)
        self.patched: list[Any] = []  # weak references to JITFunctions given a run of their own
        self.hook: Any = None  # the jit_cache_hook installed
        self.previous_hook: Any = None
        self.fallback = "error"
        self.coverage: list[dict[str, Any]] = []  # what Triton compiled while active, as record_agent writes it
        self.logged: set[str] = set()
        self.unname: Any = None  # the undo of name_function_constexprs, where this release needs it
        self.caches: list[str] = []  # the activated packages' Triton cache entries (folders; _aotpack_guard)


_activation: _Activation | None = None
_activation_lock = threading.Lock()


def activate(launchers: list[Launcher], fallback: str | None, missing: type[Exception],
             caches: list[str] | None = None, graphs: list[str] | None = None) -> list[str]:  # fmt: skip
    """Make the original ``@triton.jit`` functions launch these kernels: every JITFunction, whether it exists now
    or is created later (a module imported or generated afterwards, under any name), is matched by its source
    identity on its first launch, and its ``run`` (what ``fn[grid](...)`` calls) becomes the launcher's when it
    is one of them; ``@triton.autotune`` wrappers around one get the recorded picks. While active, any
    compilation by Triton's JIT (of these kernels' calls no variant matches, or of any other kernel) raises
    ``missing`` before compiling (``fallback="error"``, the default without Triton), or compiles, logged once
    per kernel and kept for ``coverage()`` (``fallback="jit"``, the default with Triton). ``caches``: folders of
    Triton cache entries the package holds (what other callers of triton.compile compiled when it was recorded),
    served to every process as cache hits. ``graphs``: folders of torch.compile's caches the package holds,
    loaded into torch's (_aotpack_inductor; one that cannot be is warned about, never raised). Returns the
    names."""
    global _activation
    have_triton = importlib.util.find_spec("triton") is not None
    fallback = fallback or ("jit" if have_triton else "error")
    if fallback not in ("jit", "error"):
        raise ValueError(f"activate(fallback={fallback!r}): expected 'jit' or 'error'")
    if fallback == "jit" and not have_triton:
        raise ValueError("activate(fallback='jit') needs Triton installed; use fallback='error'")
    with _activation_lock:
        state = _activation or _Activation()
        state.fallback = fallback
        state.caches += [c for c in caches or () if c not in state.caches]
        for launch in launchers:
            state.launchers.setdefault(launch.function["identity"], (launch, None))
        if have_triton:
            if _activation is None:
                _patch(state, missing)
            for ref in state.patched:  # functions already matched take the fallback now given on their next launch
                jit = ref()
                if jit is not None:
                    jit.__dict__.pop("run", None)
            state.patched.clear()
            state.launchers = {i: (launch, None) for i, (launch, _) in state.launchers.items()}
            if state.unguard is not None:
                state.unguard()
            # every other caller of triton.compile, in every process; the packages' Triton cache entries served
            state.unguard = _guard().install(fallback, state.caches)
        _activation = state
    _inductor().guard_cpp(fallback, missing)  # Inductor's C++ kernels: served, refused or listed like the others
    for folder in graphs or ():
        _serve_graphs(folder, fallback)
    return [launch.__name__ for launch in launchers]


def _inductor() -> Any:
    """torch.compile's recorded caches and Inductor's C++ kernels (standard library; it imports torch only where a
    package ships caches)."""
    try:
        from . import _aotpack_inductor as inductor
    except ImportError:  # a top-level module beside aotpack record's agent
        import _aotpack_inductor as inductor  # type: ignore[import-not-found,no-redef]
    return inductor


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


def _patch(state: _Activation, missing: type[Exception]) -> None:
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
            raise missing(_refused(where, getattr(fn, "jit_function", None), hook))
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


def _guard() -> Any:
    """The cache manager that refuses (or says) what callers of triton.compile other than the JIT compile; it
    imports Triton."""
    try:
        from . import _aotpack_guard as guard
    except ImportError:  # a top-level module beside aotpack record's agent
        import _aotpack_guard as guard  # type: ignore[import-not-found,no-redef]
    return guard


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


def deactivate() -> None:
    """Undo ``activate()``: JITFunction.run, Autotuner.run and the compile hook as they were, and every
    function's own run."""
    global _activation
    with _activation_lock:
        state, _activation = _activation, None
        if state is not None:
            _inductor().guard_cpp(None, RuntimeError)  # its C++ kernels the packages hold still served
        if state is None or state.jit_run is None:
            return
        from triton import knobs
        from triton.runtime.jit import JITFunction

        JITFunction.run = state.jit_run
        if state.untune is not None:
            state.untune()
        if state.unguard is not None:
            state.unguard()
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
    written-out source's text in the first event that names it)."""
    events = list(_activation.coverage) if _activation is not None else []
    if "triton" in sys.modules:  # and what callers of triton.compile other than the JIT compiled (Inductor), in
        events += _guard().compiled + _guard().spooled()  # this process and in those it started (compile workers)
    events += _inductor().compiled  # and Inductor's C++ kernels (built where their graph loads: this process)
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
    import json
    import os
    import tempfile

    report = stats()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{report['package']}.{os.getpid()}.json")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".aotpack-tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def register_torch_ops(native: Any, manifest: dict[str, Any]) -> list[str]:
    """Register every kernel whose writes are known as ``torch.ops.<package>.<kernel>`` through
    torch.library, with a schema that marks the tensors it writes and a fake (meta) implementation,
    so that torch.compile traces it without a graph break and CUDA graphs capture it. Returns the
    names registered; kernels are registered once per process. A kernel torch cannot take (an
    argument type its schemas lack, a name it refuses) is skipped with a warning naming it and why:
    the kernel itself still works."""
    import warnings

    import torch

    package = manifest["package"]
    done = []
    for name, info in manifest["kernels"].items():
        qualname = f"{package}::{name}"
        if info["mutates"] is None or info.get("launch") == "triton" or qualname in _registered:
            continue  # writes unknown, Triton's launch syntax (no op schema for a grid), or done
        try:
            _registered[qualname] = _register(torch, qualname, getattr(native, name), info)
        except Exception as exc:  # torch.library raises assorted types; the package must still import
            warnings.warn(f"{package}: kernel {name} is not registered as torch.ops.{package}.{name}: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)  # fmt: skip
            continue
        done.append(name)
    return done


_SCHEMA_TYPES = {"int": int, "float": float, "bool": bool}


def _register(torch: Any, qualname: str, function: Any, info: dict[str, Any]) -> Any:
    import inspect
    from typing import Optional

    params = []
    # the kernel's Python order: arguments without a default, then those with one
    for arg in sorted(info["args"], key=lambda a: "default" in a):
        kind: Any = torch.Tensor if arg["kind"] == "tensor" else _SCHEMA_TYPES[arg["kind"]]
        if "default" in arg or arg.get("optional", False):  # left out, or (optional tensors) None
            kind = Optional[kind]  # torch.library reads typing.Optional
        default = None if "default" in arg else inspect.Parameter.empty
        params.append(inspect.Parameter(arg["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind,
                                        default=default))  # fmt: skip

    launch = _launcher(function)

    def fake(*args: Any, **kwargs: Any) -> None:
        return None

    for fn in (launch, fake):  # the schema torch.library infers from
        setattr(fn, "__signature__", inspect.Signature(params, return_annotation=None))  # noqa: B010
        fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    op = torch.library.custom_op(qualname, launch, mutates_args=tuple(info["mutates"]), device_types="cuda")
    op.register_fake(fake)
    return op


def _launcher(function: Any) -> Any:
    def launch(*args: Any, **kwargs: Any) -> None:
        function(*args, **kwargs)

    return launch


_registered: dict[str, Any] = {}
