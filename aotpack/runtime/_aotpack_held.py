"""What the activated packages hold of Triton's cache: the folders ``AOTPACK_CACHE_ENTRIES`` names (each a
package's ``_triton_cache``, ``<key>/<files>`` as ``aotpack record`` copied them), indexed by kernel name once per
process; where a file of an entry is held, the entry of the same kernel compiled by another ptxas of the recorded
program (``same_kernel``), and why a key was not found (``others``). The guard (_aotpack_guard) asks.

A runtime module (runtime/__init__.py says what that means). It keeps its index across deactivate(): a package's
entries do not change while it runs."""

from __future__ import annotations

import json
import os
import threading
from types import MappingProxyType
from typing import Any

from . import _aotpack_jit as _jit
from ._aotpack_env import CACHE_ENTRIES, read_named


class _Index:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # per AOTPACK_CACHE_ENTRIES: by kernel name, (key, entry folder, key parts) of each entry the packages hold
        self.indexes: dict[str, dict[str, list[tuple[str, str, dict[str, Any]]]]] = {}


_state = _Index()


def file(key: str, filename: str) -> str | None:
    """Where an activated package holds this file of the entry ``key``, or None."""
    for folder in filter(None, os.environ.get(CACHE_ENTRIES, "").split(os.pathsep)):
        path = os.path.join(folder, key, filename)
        if os.path.isfile(path):
            return path
    return None


def kernels(name: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Every entry the activated packages hold of kernel ``name``, in folder and key order: its key, its folder and
    what its key was made of (``key_parts``; {} where it was not recorded). The folders are listed once per process:
    a package's entries do not change while it runs, and a miss should not list them again."""
    folders = os.environ.get(CACHE_ENTRIES, "")
    with _state.lock:
        if folders not in _state.indexes:
            _state.indexes[folders] = _index(folders)
        return _state.indexes[folders].get(name, [])


def _index(folders: str) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    index: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for folder in filter(None, folders.split(os.pathsep)):
        for key in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            entry = os.path.join(folder, key)
            try:
                names = [n[:-5] for n in sorted(os.listdir(entry)) if n.endswith(".json") and not n.startswith("__")
                         and os.path.isfile(os.path.join(entry, n))]  # fmt: skip
            except OSError:
                continue
            parts: Any = {}
            if len(names) == 1:  # (parts only of an entry that is one kernel's, as Triton writes them)
                try:
                    parts = json.loads(read_named(os.path.join(entry, _jit.KEY_PARTS), _jit.MAX_ENTRY_FILE))
                except (OSError, ValueError, RecursionError):  # (not one aotpack record wrote: no parts)
                    pass
            for held in names:
                index.setdefault(held, []).append((key, entry, parts if isinstance(parts, dict) else {}))
    return index


def _but_ptxas(parts: dict[str, Any]) -> dict[str, Any]:
    return {part: value for part, value in parts.items() if part != "backend"}


def same_kernel(name: str, key: str) -> str | None:
    """The entry an activated package holds of kernel ``name`` compiled from all this compilation's key is made
    of (``key_parts``: Triton, source, attributes, constants, options, environment, target) but the ptxas: its
    folder, or None. Inductor's compile workers compile with torch's ptxas and the process that starts them with
    Triton's (torch 2.11), and which of them compiles a kernel is decided while the program runs, so the
    recording holds each kernel under the key of whichever compiled it there; that cubin is what the recorded
    run launched. Only entries recorded with their key parts count."""
    mine = _jit.key_parts(key)
    if "target" not in mine:
        return None
    want = _but_ptxas(mine)
    return next((entry for _, entry, parts in kernels(name) if "target" in parts and _but_ptxas(parts) == want),
                None)  # fmt: skip


_PARTS = MappingProxyType({  # what a change in each part of Triton's cache key (_aotpack_jit.key_parts) means
    "triton": "another Triton release or build", "function": "the kernel's source or a function it calls: "
    "another torch (Inductor's code) or library", "attrs": "which arguments are 16-divisible or aligned",
    "signature": "argument types", "constants": "constexpr values: a config or size hint", "source": "its IR",
    "backend": "another ptxas or GPU", "target": "another GPU", "options": "compile options",
    "environment": "Triton's environment variables",
})  # fmt: skip


def others(name: str, key: str) -> str:
    """What the packages hold of kernel ``name`` under other keys, and which parts of the key (``key_parts``)
    differ from the nearest of them: why a recorded kernel was not found ("" where they hold none)."""
    mine, nearest = _jit.key_parts(key), None
    others = [parts for held, _, parts in kernels(name) if held != key]
    count = len(others)
    for theirs in others:
        if mine and theirs:
            differ = sorted(p for p in set(mine) | set(theirs) if mine.get(p) != theirs.get(p))
            if nearest is None or len(differ) < len(nearest):
                nearest = differ
    if not count:
        return ""
    parts = ", ".join(f"{p} ({_PARTS.get(p, p)})" for p in nearest or ())
    why = f"; the nearest differs in its key's {parts}" if parts else ""
    return f" (the packages hold {name} under {count} other key{'s' * (count > 1)}{why})"
