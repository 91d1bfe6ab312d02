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
