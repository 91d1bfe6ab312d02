"""The Python side of every aotpack-generated package (shipped unchanged in each wheel).

A kernel is a callable object: calling it launches (the call goes straight to the C binding),
``kernel.select(...)`` tells which variant a call would launch, ``kernel.variants`` lists them.
"""

from __future__ import annotations

import functools
from typing import Any


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
    ``run`` (Triton's ``JITFunction.run`` signature) is the C runner itself: no Python frame per launch."""

    __slots__ = ("__name__", "_manifest", "_run", "_runner", "_spec")

    def __init__(self, name: str, native: Any, manifest: Manifest) -> None:
        self.__name__ = name
        self._manifest = manifest
        self._runner = getattr(native, "_runner_" + name)
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
                (tuple(c["constexprs"][n] for n in consts), c["num_warps"], c["num_stages"]): index
                for index, c in enumerate(entry["configs"])
            }
            self._spec = (names, tuple(bool(is_arg) for _, is_arg in entry["params"]), dict(entry["defaults"]),
                          configs, dict(entry["options"]), _LAUNCH_OPTIONS, _plain)  # fmt: skip
        return self._runner((*self._spec, fallback))

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

    @property
    def variants(self) -> list[str]:
        """The ids of the kernel's variants."""
        return [v["id"] for v in self._entry["variants"]]

    def __repr__(self) -> str:
        return f"<kernel {self.__name__}[grid]: {len(self.variants)} variants>"


def _plain(value: Any) -> Any:
    """A constexpr as the configs hold it: a tl.constexpr(0) the caller passes is 0."""
    return value.value if type(value).__name__ == "constexpr" else value


# launch options of Triton's JIT that select other code (num_warps and num_stages pick the config)
_LAUNCH_OPTIONS = ("num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid", "launch_pdl")


_active: dict[int, tuple[Any, Any]] = {}  # id(JITFunction) -> (the function, its own run, or None)


def activate(launchers: list[Launcher], fallback: str | None = None) -> list[str]:
    """Make the original ``@triton.jit`` functions launch these kernels: their ``run`` (which
    ``fn[grid](...)`` calls) becomes the launcher's, so call sites in the user's or a library's code
    run the built variants with no compilation. Autotuned kernels get the configs their autotuner
    picked in the recording, per key, in the autotuner's own cache. A call no variant matches exactly
    raises MissingVariant (``fallback="error"``, the default without Triton), or runs Triton's JIT
    (``fallback="jit"``, the default with Triton), logged once per new class. Returns the names."""
    import importlib.util
    import logging

    have_triton = importlib.util.find_spec("triton") is not None
    fallback = fallback or ("jit" if have_triton else "error")
    if fallback not in ("jit", "error"):
        raise ValueError(f"activate(fallback={fallback!r}): expected 'jit' or 'error'")
    if fallback == "jit" and not have_triton:
        raise ValueError("activate(fallback='jit') needs Triton installed; use fallback='error'")
    log = logging.getLogger("aotpack")
    done = []
    for launch in launchers:
        wrapped = _function(launch.function)
        jit = wrapped
        while not hasattr(jit, "params") and hasattr(jit, "fn"):  # inside @triton.autotune / @triton.heuristics
            jit = jit.fn
        if id(jit) in _active:
            continue
        original = jit.run
        seen: set[str] = set()

        def jit_instead(message: str, args: tuple[Any, ...], kwargs: dict[str, Any], _original: Any = original,
                        _seen: set[str] = seen) -> Any:  # fmt: skip
            if message not in _seen:
                _seen.add(message)
                log.warning("%s; running Triton's JIT for it", message)
            return _original(*args, **kwargs)

        run = launch.runner(jit_instead if fallback == "jit" else None)
        _active[id(jit)] = (jit, jit.__dict__.get("run"))
        jit.run = run
        _seed_autotuner(wrapped, launch.tuned)
        done.append(launch.__name__)
    return done


def deactivate() -> None:
    """Give the ``@triton.jit`` functions their own ``run`` back."""
    for jit, own in _active.values():
        if own is None:
            del jit.run
        else:
            jit.run = own
    _active.clear()


def _function(where: dict[str, Any]) -> Any:
    """The published kernel object a launcher stands in for: by module, or by file (the module
    already imported from that file, else imported now)."""
    import importlib
    import importlib.util
    import os
    import sys

    if where["module"]:
        module = importlib.import_module(where["module"])
    else:
        path = os.path.realpath(where["path"])
        found = [m for m in list(sys.modules.values()) if os.path.realpath(getattr(m, "__file__", None) or "") == path]
        if found:
            module = found[0]
        else:
            spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import the kernel's file {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    return getattr(module, where["name"])


def _seed_autotuner(wrapped: Any, tuned: list[dict[str, Any]]) -> None:
    """Put the recorded picks into the @triton.autotune wrapper's cache (key -> its own Config
    object), so that it launches them without timing anything."""
    tuner = wrapped
    while tuner is not None and not (hasattr(tuner, "cache") and hasattr(tuner, "configs")):
        tuner = getattr(tuner, "fn", None)
    if tuner is None:
        return
    for pick in tuned:
        for config in tuner.configs:
            same = dict(config.kwargs) == pick["kwargs"] and config.num_warps == pick["num_warps"]
            if same and config.num_stages == pick["num_stages"]:
                tuner.cache[tuple(pick["key"])] = config
                break


CACHE_FORMAT = "aotpack-autotune/2"
_saved_at_exit: set[str] = set()


_TUNE_PER = {"bucket": 1, "key": 2}  # aot_tune_mode in aot_runtime.h


def autotune(
    native: Any, manifest: dict[str, Any], enabled: bool = True, cache: str | None = None, per: str = "bucket"
) -> None:
    """Switch runtime autotuning on or off for the kernels the recipe allows it for (a key the
    baked table lacks is timed over every config on first sight, never during graph capture), per
    bucket of the key or per distinct key value. With ``cache``, keys tuned by earlier processes are
    loaded now, and this process's are merged into the file at exit (and when tuning is switched off)."""
    if per not in _TUNE_PER:
        raise ValueError(f"autotune(per={per!r}): expected 'bucket' or 'key'")
    if cache is not None:
        _load(native, manifest, cache)
        if cache not in _saved_at_exit:
            import atexit

            atexit.register(save_autotune, native, manifest, cache)
            _saved_at_exit.add(cache)
    native._autotune(_TUNE_PER[per] if enabled else 0)
    if not enabled:
        for path in _saved_at_exit:
            save_autotune(native, manifest, path)


def _entries(native: Any, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, info in manifest["kernels"].items():
        for target, binding, spec, key, config in native._memo(name):
            out.append({"kernel": name, "target": target, "types": info["bindings"][binding],
                        "specialization": spec, "key": list(key), "config": config})  # fmt: skip
    return out


def _read(manifest: dict[str, Any], path: str) -> list[dict[str, Any]]:
    import json

    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    same_build = data.get("format") == CACHE_FORMAT and data.get("package") == manifest["package"]
    same_build = same_build and data.get("version") == manifest["version"]
    entries = data.get("entries", [])
    return entries if same_build and isinstance(entries, list) else []


def _load(native: Any, manifest: dict[str, Any], path: str) -> None:
    for e in _read(manifest, path):
        info = manifest["kernels"].get(e.get("kernel"))
        if info is None or e.get("types") not in info["bindings"]:
            continue
        binding = info["bindings"].index(e["types"])
        try:
            native._memo_put(e["kernel"], e["target"], binding, str(e["specialization"]), tuple(e["key"]), e["config"])
        except (ValueError, TypeError, KeyError):
            continue  # an entry this build cannot use


def save_autotune(native: Any, manifest: dict[str, Any], path: str) -> None:
    """Merge this process's tuned keys into ``path``: under an exclusive lock (many processes may
    save at once), written to a temporary file and renamed (a reader never sees half a file)."""
    import fcntl
    import json
    import os
    import tempfile

    mine = _entries(native, manifest)
    if not mine:
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = {}
        for e in [*_read(manifest, path), *mine]:
            ident = (e["kernel"], e["target"], json.dumps(e["types"], sort_keys=True), e["specialization"],
                     tuple(e["key"]))
            merged[ident] = e
        body = {"format": CACHE_FORMAT, "package": manifest["package"], "version": manifest["version"],
                "entries": [merged[k] for k in sorted(merged)]}  # fmt: skip
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".autotune-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(body, f, indent=1, sort_keys=True)
        os.replace(tmp, path)


class ClassMissWarning(UserWarning):
    """A call ran a less specialized class than Triton's JIT would compile for it (see ``stats()``)."""


REPORT_FORMAT = "aotpack-report/1"


def stats(native: Any, package: str, version: str, kernels: list[str]) -> dict[str, Any]:
    """What this process's calls ran that Triton's JIT would have compiled otherwise: per kernel, class
    run and the JIT's class, the calls (``class_misses``), and calls past the runtime's table of pairs
    (``class_misses_lost``). A class named here goes into the recipe's ``classes:``."""
    rows, lost = [], 0
    for name in kernels:
        found, gone = native._misses(name)
        lost += gone
        rows += [(name, jit, ran, calls) for ran, jit, calls in found]
    misses = [{"kernel": name, "ran": ran, "jit": jit, "calls": calls} for name, jit, ran, calls in sorted(rows)]
    return {"format": REPORT_FORMAT, "package": package, "version": version, "class_misses": misses,
            "class_misses_lost": lost}  # fmt: skip


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
            kind = Optional[kind]  # noqa: UP045 - torch.library reads typing.Optional
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
