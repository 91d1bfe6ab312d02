"""The Python side of every aotpack-generated package (shipped unchanged in each wheel).

A kernel is a callable object: calling it launches (the call goes straight to the C binding),
``kernel.select(...)`` tells which variant a call would launch, ``kernel.variants`` lists them.
"""

from __future__ import annotations

from typing import Any


class Kernel:
    """A kernel of this package. Call it with the kernel's arguments to launch it."""

    __slots__ = ("__name__", "_bindings", "_choose", "_key", "_select", "_typevars", "variants")

    def __init__(self, name: str, native: Any, manifest: dict[str, Any]) -> None:
        entry = manifest["kernels"][name]
        self.__name__ = name
        self._select = getattr(native, "_select_" + name)
        self._choose = getattr(native, "_choose_" + name)
        self._key = [name for name, _ in entry["key"]]
        self._typevars = list(entry["types"])
        self._bindings = [dict(b) for b in entry["bindings"]]
        self.variants = [v["id"] for v in entry["variants"]]

    def select(self, *args: Any, **kwargs: Any) -> str:
        """The id of the variant the dispatcher would launch, without launching.

        With the kernel's arguments (``k.select(x, y, out)``): exactly what that call launches, on
        the arguments' device. With key values by name, dtypes by type variable and an optional
        ``device`` (``k.select(M=512, N=512, K=512, T="fp16")``): the table's choice for that key on
        that device, for arguments that satisfy the divisibility hints.
        """
        names = set(self._key) | set(self._typevars) | {"device"}
        if args or not kwargs or not set(kwargs) <= names:
            return str(self._select(*args, **kwargs))
        missing = [n for n in self._key if n not in kwargs]
        if missing:
            raise TypeError(f"{self.__name__}.select(): give the key values {', '.join(missing)}")
        types = {v: kwargs[v] for v in self._typevars if v in kwargs}
        matches = [i for i, b in enumerate(self._bindings) if all(b[v] == t for v, t in types.items())]
        if len(matches) != 1:
            choices = "; ".join(", ".join(f"{v}={t}" for v, t in b.items()) for b in self._bindings)
            raise TypeError(f"{self.__name__}.select(): name the types, one of: {choices}")
        key = tuple(int(kwargs[n]) for n in self._key)
        return str(self._choose(key, matches[0], int(kwargs.get("device", 0))))

    @property
    def __signature__(self) -> Any:
        import inspect

        return inspect.signature(type(self).__call__)

    def __repr__(self) -> str:
        return f"<kernel {self.__name__}: {len(self.variants)} variants>"


def kernel(name: str, native: Any, manifest: dict[str, Any]) -> Kernel:
    """The kernel object: a one-off subclass whose __call__ is the C function itself (so a launch
    costs one extra lookup, not a Python frame) and whose docstring is the kernel's."""
    function = getattr(native, name)
    cls = type(name, (Kernel,), {"__slots__": (), "__call__": staticmethod(function), "__doc__": function.__doc__})
    made: Kernel = cls(name, native, manifest)
    return made


class Launcher:
    """A kernel built from a recording (``launch: triton``), launched as Triton launches it:
    ``kernel[grid](*args, BLOCK=..., num_warps=..., num_stages=...)``, the grid a tuple of 1 to 3
    ints or a callable of the call's arguments by name (constexprs included), as Triton's is. The
    constexprs and options pick the config; the C runtime computes the call's specialization class
    as the JIT does and launches the variant built for exactly that class, or raises MissingVariant."""

    __slots__ = ("__name__", "_configs", "_consts", "_defaults", "_index", "_launch", "_missing", "_names",
                 "_options", "_runtime", "function", "tuned", "variants")  # fmt: skip

    def __init__(self, name: str, native: Any, manifest: dict[str, Any]) -> None:
        entry = manifest["kernels"][name]
        self.__name__ = name
        self._launch = getattr(native, "_launch_" + name)
        self._missing = native.MissingVariant
        self._names = [n for n, _ in entry["params"]]
        self._index = {n: i for i, n in enumerate(self._names)}
        self._runtime = [i for i, (_, is_arg) in enumerate(entry["params"]) if is_arg]
        self._consts = [i for i, (_, is_arg) in enumerate(entry["params"]) if not is_arg]
        self._defaults = entry["defaults"]
        self._configs = {
            (tuple(c["constexprs"][self._names[i]] for i in self._consts), c["num_warps"], c["num_stages"]): index
            for index, c in enumerate(entry["configs"])
        }
        self._options = entry["options"]
        self.function = entry["function"]
        self.tuned = entry["tuned"]
        self.variants = [v["id"] for v in entry["variants"]]

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.run(*args, grid=grid, warmup=False, **kwargs)

        return launch

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> None:
        """Triton's JITFunction.run signature: what ``activate()`` puts in its place."""
        names = self._names
        if len(args) > len(names):
            raise TypeError(f"{self.__name__}[grid]() takes {len(names)} arguments ({len(args)} given)")
        values = [*args, *(_UNSET,) * (len(names) - len(args))]
        num_warps, num_stages = kwargs.pop("num_warps", 4), kwargs.pop("num_stages", 3)
        for key, value in kwargs.items():
            i = self._index.get(key)
            if i is None:
                if key in self._options and self._options[key] == value:
                    continue  # a launch option the variants were built with
                if key in _LAUNCH_OPTIONS:
                    raise self._missing(f"{self.__name__}[grid](...): no variant was built with {key}={value!r}")
                raise TypeError(f"{self.__name__}[grid]() got an unexpected keyword argument {key!r}")
            if values[i] is not _UNSET:
                raise TypeError(f"{self.__name__}[grid]() got multiple values for argument {key!r}")
            values[i] = value
        for i, value in enumerate(values):
            if value is _UNSET:
                if names[i] not in self._defaults:
                    raise TypeError(f"{self.__name__}[grid]() missing required argument {names[i]!r}")
                values[i] = self._defaults[names[i]]
        consts = tuple(_plain(values[i]) for i in self._consts)
        config = self._configs.get((consts, num_warps, num_stages))
        if config is None:
            shown = ", ".join(f"{names[i]}={v!r}" for i, v in zip(self._consts, consts, strict=True))
            raise self._missing(f"{self.__name__}[grid](...): no variant was built for {shown}, num_warps="
                                f"{num_warps}, num_stages={num_stages}; record a run that makes this call")  # fmt: skip
        if warmup:
            return
        if callable(grid):
            grid = grid(dict(zip(names, values, strict=True)))
        self._launch(config, tuple(grid), *[values[i] for i in self._runtime])

    def __repr__(self) -> str:
        return f"<kernel {self.__name__}[grid]: {len(self.variants)} variants>"


def _plain(value: Any) -> Any:
    """A constexpr as the configs hold it: a tl.constexpr(0) the caller passes is 0."""
    return value.value if type(value).__name__ == "constexpr" else value


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()
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

        def run(*args: Any, grid: Any, warmup: bool = False, _launch: Launcher = launch, _original: Any = original,
                _seen: set[str] = seen, **kwargs: Any) -> Any:  # fmt: skip
            try:
                return _launch.run(*args, grid=grid, warmup=warmup, **kwargs)
            except _launch._missing as exc:
                if fallback != "jit":
                    raise
                if str(exc) not in _seen:
                    _seen.add(str(exc))
                    log.warning("%s; running Triton's JIT for it", exc)
                return _original(*args, grid=grid, warmup=warmup, **kwargs)

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
