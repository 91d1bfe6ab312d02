"""``triton_cache:``: the folder (beside the recipe) of Triton cache entries ``aotpack record`` copied out of the
recorded program's Triton cache — kernels another caller of ``triton.compile`` than the JIT compiled (Inductor
under torch.compile, in the program and its compile workers), by Triton's cache key, and the modules Triton
built with a C compiler (kernel launchers, its driver's utilities), which a program served without one needs.
A build ships them as they are (``<package>/_triton_cache/<key>/<files>``) and ``activate()`` serves them as
Triton cache hits.

The folder is read like any input of a build: inside the recipe's folder, each entry a folder named by a
cache key holding plain files (its kernel's ``<name>.json`` among them), with bounded counts and sizes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import limits, values
from ..model import CacheEntry
from ..runtime._aotpack_jit import KEY_PARTS
from . import fields
from .yamlnodes import Node

KEY = re.compile(r"[A-Z2-7]{1,128}")  # Triton's cache key as its folder is named (base32 of a sha256)
FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,254}")  # a file of an entry (the kernel's name, a suffix)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")  # a backend (cuda, hip), an architecture by name (gfx942)


def entries(node: Node, root: Path) -> tuple[CacheEntry, ...]:
    """The entries of the folder ``node`` names (relative to the recipe's folder ``root``), sorted by key."""
    folder = fields.recorded_folder(node, root, "the cache entries", "triton_cache")
    keys = sorted(p for p in folder.iterdir())
    if len(keys) > limits.MAX_CACHE_ENTRIES:
        raise node.fail(f"{folder} holds {len(keys)} entries; at most {limits.MAX_CACHE_ENTRIES} (aotpack's "
                        "limits.MAX_CACHE_ENTRIES)")  # fmt: skip
    out, total = [], 0
    for entry in keys:
        if not KEY.fullmatch(entry.name) or entry.is_symlink() or not entry.is_dir():
            raise node.fail(f"{entry}: not a Triton cache entry (a folder named by its cache key, e.g. "
                            "'AB2C...'); remove it")  # fmt: skip
        files = sorted(f.name for f in entry.iterdir())
        names = [f.removesuffix(".json") for f in files if f.endswith(".json") and not f.startswith("__")]
        module = not names and len(files) == 1 and files[0].endswith(".so")  # a launcher, the driver's utilities
        if len(files) > limits.MAX_CACHE_FILES or not (len(names) == 1 or module):
            raise node.fail(f"{entry}: a Triton cache entry holds one kernel's files (its <name>.json, at most "
                            f"{limits.MAX_CACHE_FILES} files) or one module (.so); it holds "
                            f"{', '.join(files[:8]) or 'none'}")  # fmt: skip
        for name in files:
            file = entry / name
            if not FILE.fullmatch(name) or file.is_symlink() or not file.is_file() or file.stat().st_nlink != 1:
                raise node.fail(f"{file}: not a plain file of a Triton cache entry (a link, a hard link, or "
                                "something else); remove it")  # fmt: skip
            total += file.stat().st_size
        stray = [f for f in files if not module and f != KEY_PARTS and not f.startswith(f"{names[0]}.")]
        if stray:
            raise node.fail(f"{entry / stray[0]}: not a file of kernel {names[0]}'s entry ({names[0]}.<suffix>, or "
                            f"{KEY_PARTS}, as aotpack record copies them); remove it")  # fmt: skip
        if total > limits.MAX_CACHE_BYTES:
            raise node.fail(f"{folder} holds more than {limits.MAX_CACHE_BYTES >> 20} MiB (aotpack's "
                            "limits.MAX_CACHE_BYTES): is it the right folder?")  # fmt: skip
        triton, target = ("", CacheEntry.HOST) if module else _compiled_by(node, entry / f"{names[0]}.json")
        out.append(CacheEntry(name=files[0] if module else names[0], key=entry.name, folder=entry,
                              files=tuple(files), triton=triton, target=target))  # fmt: skip
    return tuple(out)


def _compiled_by(node: Node, metadata: Path) -> tuple[str, str]:
    """The Triton release and the target (backend:arch) an entry's metadata (Triton's ``<name>.json``) names."""
    try:
        if metadata.stat().st_size > limits.MAX_RECORD_BYTES << 4:
            raise ValueError("larger than a kernel's metadata")
        data = json.loads(metadata.read_bytes())
        if values.json_depth(data) > limits.MAX_RECORDED_DEPTH:
            raise ValueError(f"nests deeper than {limits.MAX_RECORDED_DEPTH} levels (limits.MAX_RECORDED_DEPTH)")
        target = data["target"]
        release, backend, arch = data["triton_version"], target["backend"], target["arch"]
        if not isinstance(release, str) or not values.RELEASE.fullmatch(release):
            raise ValueError(f"'triton_version' is not a release of Triton: {str(release)[:40]!r}")
        if not isinstance(backend, str) or not _WORD.fullmatch(backend):
            raise ValueError(f"'target.backend' is not a backend's name: {str(backend)[:40]!r}")
        if not (type(arch) is int and 0 < arch < 10_000) and not (isinstance(arch, str) and _WORD.fullmatch(arch)):
            raise ValueError(f"'target.arch' is not an architecture (such as 90 or gfx942): {str(arch)[:40]!r}")
        return release, f"{backend}:{arch}"
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise node.fail(f"{metadata}: not Triton's metadata of a kernel ({type(exc).__name__}: {exc}); record "
                        "again") from None  # fmt: skip
