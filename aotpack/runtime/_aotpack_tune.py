"""Runtime autotuning of a generated package: switching it on per bucket or per key, and the cache file that shares
tuned keys between processes.

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Any

from ._aotpack_env import AUTOTUNE_CACHE, read_named

CACHE_FORMAT = "aotpack-autotune/2"
MAX_CACHE_BYTES = 256 << 20  # an autotune cache: a few hundred bytes per tuned key
# the C runtime's aot_tune_mode, by name (the build writes them into aot_vocabulary.h: codegen/c.py)
TUNE_MODES = MappingProxyType({"off": 0, "bucket": 1, "key": 2})


class _Saving:
    """The cache files this process merges its tuned keys into at exit (and when tuning is switched off)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at_exit: set[str] = set()


_state = _Saving()


def autotune(
    native: Any, manifest: dict[str, Any], enabled: bool = True, cache: str | None = None, per: str = "bucket"
) -> None:
    """Switch runtime autotuning on or off for the kernels the recipe allows it for (a key the
    baked table lacks is timed over every config on first sight, never during graph capture), per
    bucket of the key or per distinct key value. With ``cache``, keys tuned by earlier processes are
    loaded now, and this process's are merged into the file at exit (and when tuning is switched off)."""
    if per not in ("bucket", "key"):
        raise ValueError(f"autotune(per={per!r}): expected 'bucket' or 'key'")
    if cache is not None:
        _load(native, manifest, cache)
        with _state.lock:
            first = cache not in _state.at_exit
            _state.at_exit.add(cache)
        if first:
            import atexit

            atexit.register(save_autotune, native, manifest, cache)
    native._autotune(TUNE_MODES[per] if enabled else TUNE_MODES["off"])
    if not enabled:
        for path in sorted(_state.at_exit):
            save_autotune(native, manifest, path)


def _entries(native: Any, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, info in manifest["kernels"].items():
        for target, binding, spec, key, config in native._memo(name):
            out.append({"kernel": name, "target": target, "types": info["bindings"][binding],
                        "specialization": spec, "key": list(key), "config": config})  # fmt: skip
    return out


def _read(manifest: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The tuned keys a cache file holds for this build ([] where it has none, or is not one: said)."""
    import json

    try:
        data = json.loads(read_named(path, MAX_CACHE_BYTES))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError) as exc:  # (UnicodeDecodeError is a ValueError)
        _said(path, f"not read ({exc})")
        return []
    if not isinstance(data, dict):
        _said(path, "not an autotune cache aotpack wrote")
        return []
    same_build = data.get("format") == CACHE_FORMAT and data.get("package") == manifest["package"]
    same_build = same_build and data.get("version") == manifest["version"]
    entries = data.get("entries", [])
    return entries if same_build and isinstance(entries, list) else []


def _said(path: str, what: str) -> None:
    import warnings

    warnings.warn(f"aotpack: the autotune cache {path} ({AUTOTUNE_CACHE}, or autotune(cache=)) was {what}; tuned "
                  "keys are not shared through it", RuntimeWarning, stacklevel=4)  # fmt: skip


def _entry(e: Any) -> bool:
    """Whether a cache file's entry has the shape this runtime writes (others are skipped, not raised)."""
    return (isinstance(e, dict) and isinstance(e.get("kernel"), str) and isinstance(e.get("target"), str)
            and isinstance(e.get("specialization"), str) and isinstance(e.get("key"), list))  # fmt: skip


def _load(native: Any, manifest: dict[str, Any], path: str) -> None:
    for e in filter(_entry, _read(manifest, path)):
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
    save at once), written to a temporary file and renamed (a reader never sees half a file). A cache that cannot be
    written is said, never raised (this runs at exit)."""
    mine = _entries(native, manifest)
    if not mine:
        return
    try:
        _merge(manifest, path, mine)
    except (OSError, ValueError, TypeError, KeyError) as exc:  # (at exit: said, never a traceback)
        _said(path, f"not written ({exc})")


def _merge(manifest: dict[str, Any], path: str, mine: list[dict[str, Any]]) -> None:
    import fcntl
    import json
    import os
    import stat
    import tempfile

    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise OSError(f"{path} is not a regular file")  # (a FIFO, a device, a link: not replaced)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC  # (a FIFO: refused, no wait)
    with os.fdopen(os.open(path + ".lock", flags, 0o644), "a") as lock:
        if not stat.S_ISREG(os.fstat(lock.fileno()).st_mode):
            raise OSError(f"{path}.lock is not a regular file")
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = {}
        for e in [*filter(_entry, _read(manifest, path)), *mine]:
            ident = (e["kernel"], e["target"], json.dumps(e["types"], sort_keys=True), e["specialization"],
                     tuple(e["key"]))
            merged[ident] = e
        body = {"format": CACHE_FORMAT, "package": manifest["package"], "version": manifest["version"],
                "entries": [merged[k] for k in sorted(merged)]}  # fmt: skip
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".autotune-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(body, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
