"""Host tensor descriptors at a recorded kernel's call site. A runtime module (runtime/__init__.py says what that
means): standard library only, Triton imported where present.

A library on the Hopper TMA path passes ``triton.tools.tensor_descriptor.TensorDescriptor(base, shape, strides,
block_shape, padding)``. Triton's launcher encodes its tiled tensor map from the base's address and the given
shape and strides (``cuTensorMapEncodeTiled``, zero fill unless ``padding="nan"``) and passes the map, the shape
(i32) and the strides (i64) as the kernel's parameters. aotpack's native launcher does the same from a tensor
(aot_launch.c, ``push_descriptor``), so a descriptor becomes the tensor it describes: the base itself where
the shape and strides are the base's (``TensorDescriptor.from_tensor``), else ``base.as_strided(shape,
strides)``, which keeps the base's storage offset and so its address. What the native launcher cannot encode
as Triton would (NaN padding, tf32 rounding), a block other than the variant's, or anything but a
TensorDescriptor is a miss: the fallback (the JIT), or MissingVariant."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

Descriptor = tuple[int, str, tuple[Union[int, str], ...]]  # (position, name, block); Union: wheels run on 3.9


def descriptors(args: list[dict[str, Any]], names: tuple[str, ...]) -> tuple[Descriptor, ...]:
    """The descriptor arguments of a manifest's ``args`` (``tensordesc<T[BLOCK_M, 64]>``), with their blocks."""
    out = []
    for arg in args:
        kind = str(arg["type"])
        if kind.startswith("tensordesc<"):
            dims = kind[kind.index("[") + 1 : kind.rindex("]")].split(",")
            block = tuple(int(d) if d.strip().isdigit() else d.strip() for d in dims)
            out.append((names.index(arg["name"]), str(arg["name"]), block))
    return tuple(out)


def wrap(run: Any, fallback: Any, missing: type[Exception], name: str, names: tuple[str, ...],
         described: tuple[Descriptor, ...], defaults: dict[str, Any], plain: Callable[[Any], Any]) -> Any:  # fmt: skip
    """``run`` (the C runner, raising ``missing``) taking each descriptor as its tensor; a call that is a miss
    goes to ``fallback(message, args, kwargs)`` with the call as made (the JIT then sees the descriptors), or
    raises ``missing``. ``plain`` unwraps a constexpr the call passes (a tl.constexpr is its value)."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor as kind
    except ImportError:  # no Triton: no call site can make one
        kind = None

    at = {d: names.index(d) for _, _, block in described for d in block if isinstance(d, str)}

    def constexpr(dim: int | str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if isinstance(dim, int):
            return dim
        return plain(args[at[dim]] if at[dim] < len(args) else kwargs.get(dim, defaults.get(dim)))

    def launch(*args: Any, **kwargs: Any) -> Any:
        given, named = list(args), dict(kwargs)
        why = None
        for position, arg, block in described:
            want = [constexpr(d, args, kwargs) for d in block]
            if position < len(given):
                given[position], why = _tensor(given[position], arg, want, kind)
            elif arg in named:
                named[arg], why = _tensor(named[arg], arg, want, kind)
            if why is not None:
                why = f"{name}[grid](...): {why}; record a run that makes this call"
                break
        if why is None and fallback is None:
            return run(*given, **named)
        if why is None:
            try:
                return run(*given, **named)
            except missing as exc:
                why = str(exc)  # the fallback runs outside this handler: its errors are its own
        if fallback is None:
            raise missing(why)
        return fallback(why, args, kwargs)

    return launch


def _tensor(desc: Any, arg: str, block: list[Any], kind: Any) -> tuple[Any, str | None]:
    """The tensor a descriptor stands for, or (the descriptor, why it is a miss)."""
    if kind is None:
        return desc, None
    if not isinstance(desc, kind):
        return desc, f"argument {arg} is a {type(desc).__name__}; the variants were built for a TensorDescriptor"
    if list(desc.block_shape) != block:
        return desc, (f"argument {arg} is a TensorDescriptor of block {list(desc.block_shape)}; the variant "
                      f"for these constexprs was built for {block}")  # fmt: skip
    if desc.padding != "zero" or getattr(desc, "round_f32_to_tf32", False):
        what = f"padding={desc.padding!r}" if desc.padding != "zero" else "round_f32_to_tf32=True"
        return desc, f"argument {arg} is a TensorDescriptor with {what}, which aotpack does not encode"
    base, shape, strides = desc.base, tuple(desc.shape), tuple(desc.strides)
    if shape == tuple(base.shape) and strides == tuple(base.stride()):
        return base, None
    try:
        return base.as_strided(shape, strides), None
    except Exception as exc:  # torch says why a view cannot be (beyond the base's storage, say)
        return desc, f"argument {arg}: a TensorDescriptor whose shape and strides no view of its base has ({exc})"
