"""Importing the Python a recipe names: kernel functions and tuning hooks (``file.py:name`` or
``package.module:name``), once per process."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import warnings
from functools import cache
from typing import Any

from ..model import Source


@cache
def load(source: Source) -> Any:
    """The object ``source`` names (None when the module lacks it). A file's folder goes on
    sys.path first, so that it can import its helper modules. Warnings the module raises while it
    is imported (a kernel library noticing there is no GPU here) are shown, never turned into errors.
    No bytecode is written: reading a recipe (``aotpack plan``) leaves the user's folders as they were."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            return _load(source)
    finally:
        sys.dont_write_bytecode = saved


def _load(source: Source) -> Any:
    if source.path is not None:
        folder = str(source.path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = f"_aotpack_src_{source.path.stem}_{hashlib.sha256(str(source.path).encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(name, source.path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        assert source.module is not None
        module = importlib.import_module(source.module)
    return getattr(module, source.function, None)
