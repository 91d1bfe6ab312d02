"""A package's kernels as torch operators (``torch.ops.<package>.<kernel>``), registered on first use: torch.compile
traces them without a graph break and CUDA graphs see their writes.

A runtime module (runtime/__init__.py says what that means): standard library only; torch imported when registering."""

from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Any


class _Registered:
    """The operators this process registered (torch.library takes a name once per process), by qualified name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: dict[str, Any] = {}


_state = _Registered()


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
    with _state.lock:  # (two threads registering at once would register an operator twice)
        for name, info in manifest["kernels"].items():
            qualname = f"{package}::{name}"
            if info["mutates"] is None or info.get("launch") == "triton" or qualname in _state.ops:
                continue  # writes unknown, Triton's launch syntax (no op schema for a grid), or done
            try:
                _state.ops[qualname] = _register(torch, qualname, getattr(native, name), info)
            except Exception as exc:  # torch.library raises assorted types; the package must still import
                warnings.warn(f"{package}: kernel {name} is not registered as torch.ops.{package}.{name}: "
                              f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)  # fmt: skip
                continue
            done.append(name)
    return done


_SCHEMA_TYPES = MappingProxyType({"int": int, "float": float, "bool": bool})


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

