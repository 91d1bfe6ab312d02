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
        if info["mutates"] is None or qualname in _registered:
            continue
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
