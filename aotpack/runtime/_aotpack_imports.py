"""Doing something to a module the program imports when it wants to, right after it is imported: aotpack record's
agent starts with Triton's ``knobs`` and adapts once ``triton.runtime.jit`` is there; it notes and ``activate()``
answers Inductor's C++ kernels once ``torch._inductor.async_compile`` is there (``_aotpack_inductor``).

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from typing import Any


def chain_sitecustomize(here: str) -> None:
    """Run the ``sitecustomize`` that one of aotpack's (in the folder ``here``, first on ``PYTHONPATH``: aotpack
    record's agent, aotpack rehearse's activation) stands before, where the environment has one."""
    import os

    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_aotpack_chained_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def when_imported(callbacks: dict[str, Callable[[Any], None]]) -> None:
    """Call ``callbacks[name](module)`` right after ``name`` is first imported (one finder for them all)."""
    sys.meta_path.insert(0, WhenImported(dict(callbacks)))


class WhenImported(importlib.abc.MetaPathFinder):
    """Runs a callback on a module right after it is imported, once: the first import of each name given."""

    def __init__(self, callbacks: dict[str, Callable[[Any], None]]) -> None:
        self.callbacks = callbacks

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        callback = self.callbacks.pop(name, None)
        if callback is None:
            return None
        sys.meta_path.remove(self)  # the module's own finder finds it; this one waits for the next name, if any
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.callbacks:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, then = spec.loader, callback

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                then(module)

        spec.loader = _Loader()
        return spec
