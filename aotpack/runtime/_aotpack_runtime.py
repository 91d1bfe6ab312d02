"""The Python side of every aotpack-generated package (shipped unchanged in each wheel, as ``_aotpack_runtime``).

A kernel is a callable object: calling it launches (the call goes straight to the C binding),
``kernel.select(...)`` tells which variant a call would launch, ``kernel.variants`` lists them. A recorded kernel
(``launch: triton``) is a ``Launcher``, launched as Triton launches it.

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Any

from . import _aotpack_desc as _desc

# what a generated package's __init__ calls through this module, each from the module that holds it
from ._aotpack_activate import activate, coverage, deactivate  # noqa: F401
from ._aotpack_identity import identity_of, jit_of
from ._aotpack_report import ClassMissWarning, report_at_exit, stats  # noqa: F401
from ._aotpack_torch import register_torch_ops  # noqa: F401
from ._aotpack_tune import autotune  # noqa: F401


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

        Either form with ``target`` (and ``sms``) plans for a GPU that need not be here, with no driver:
        ``k.select(x, y, out, target="sm_90a", sms=132)`` for arguments on any device (CPU or meta tensors,
        NumPy arrays: their shapes, strides, dtypes and addresses decide), an architecture as aotpack names
        targets and its multiprocessor count (default: the tuning GPU's).
        """
        if args or not kwargs:  # the call's own arguments: the binding selects (no manifest needed)
            return str(self._select(*args, **kwargs))
        entry = self._manifest()["kernels"][self.__name__]
        key_names = [name for name, _ in entry["key"]]
        typevars = list(entry["types"])
        if not set(kwargs) <= set(key_names) | set(typevars) | {"device", "target", "sms"}:
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
        return str(self._choose(key, matches[0], int(kwargs.get("device", 0)), kwargs.get("target"), kwargs.get("sms")))

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

    def select(self, *args: Any, **kwargs: Any) -> str:
        """Not for a recorded kernel: the call's constexprs and options pick its config, and its class is the
        one Triton's JIT keys, so there is no choice to ask about; a TypeError that says so."""
        raise TypeError(f"{self.__name__} is a recorded kernel (launch: triton): the call's constexprs and options "
                        "pick its config and its class is the JIT's, so select() has nothing to choose; `aotpack "
                        "inspect -v` lists its variants")  # fmt: skip

    def __init__(self, name: str, native: Any, manifest: Manifest) -> None:
        self.__name__ = name
        self._manifest = manifest
        self._runner = getattr(native, "_runner_" + name)
        self._missing: type[Exception] = native.MissingVariant
        self._spec: dict[str, Any] | None = None
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
        if self._spec is None:  # the runner's spec, as aot_python.h describes it (less compiled and the fallback)
            entry = self._entry
            names = tuple(n for n, _ in entry["params"])
            consts = [n for n, is_arg in entry["params"] if not is_arg]
            configs = {
                (tuple(_keyed(c["constexprs"][n]) for n in consts), c["num_warps"], c["num_stages"]): index
                for index, c in enumerate(entry["configs"])
            }
            self._spec = {"names": names, "runtime": tuple(bool(is_arg) for _, is_arg in entry["params"]),
                          "defaults": dict(entry["defaults"]), "configs": configs,
                          "options": {**LAUNCH_DEFAULTS, **entry["options"]}, "selecting": tuple(LAUNCH_DEFAULTS),
                          "plain": _plain}  # fmt: skip
        spec = self._spec
        compiled = tuple(Compiled(spec["names"], spec["runtime"], c) for c in self._entry["configs"])
        described = _desc.descriptors(self._entry["args"], spec["names"])
        run = self._runner({**spec, "compiled": compiled, "fallback": None if described else fallback})
        if described:  # (host tensor descriptors: the wrapper hands the runner their tensors, and falls back)
            run = _desc.wrap(run, fallback, self._missing, self.__name__, spec["names"], described, spec["defaults"],
                             _plain)  # fmt: skip
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
LAUNCH_DEFAULTS = MappingProxyType({"num_ctas": 1, "maxnreg": None, "enable_fp_fusion": True,
                                    "launch_cooperative_grid": False, "launch_pdl": False})  # fmt: skip
