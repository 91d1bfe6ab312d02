"""What Triton's JIT compiles, written as JSON: the form ``aotpack record``'s agent writes (it runs in the recorded
program) and a package's ``coverage()`` reports (the compilations ``fallback="jit"`` let through); aotpack turns both
into recipes. And what a recorded Triton cache entry keeps beside its files: what its key was made of.

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import sys
import threading
from typing import Any

from ._aotpack_env import RECORD_RUN, read_named
from ._aotpack_identity import PLAIN, jit_of
from ._aotpack_source import describe


def events_file(folder: str) -> str:
    """This process's events file in aotpack record's ``folder`` (the agent's events, and the Recorder's): a
    process's own, and its run's, since a process of a later run may have an earlier one's id."""
    return os.path.join(folder, f"{os.environ.get(RECORD_RUN, '1')}-{os.getpid()}.jsonl")


def encode(value: Any) -> Any:
    """A constexpr's value as JSON: plain values as they are, others tagged (``{"dtype": "fp16"}``,
    ``{"tuple": [...]}``, ``{"function": {...}}``, ``{"unknown": type}``)."""
    kind = type(value).__name__
    if kind == "constexpr" and hasattr(value, "value"):
        return encode(value.value)
    if value is None or isinstance(value, PLAIN):
        return value
    if isinstance(value, (tuple, list)):
        return {"tuple": [encode(v) for v in value]}
    if kind == "dtype" and type(value).__module__.startswith("triton"):
        return {"dtype": str(value)}
    if kind == "dtype" and type(value).__module__ == "torch":
        return {"torch_dtype": str(value).removeprefix("torch.")}
    jit = jit_of(value)
    if jit is not None:
        return {"function": describe(jit)}
    return {"unknown": f"{type(value).__module__}.{kind}", "repr": repr(value)[:200]}


def _folder_name(hash: Any) -> str | None:
    """The cache folder ``triton.compile`` keeps an entry in, from its local ``hash`` (a sha256 hex digest):
    its base32, without padding, as Triton's ``get_cache_manager`` names it."""
    try:
        return base64.b32encode(bytes.fromhex(hash)).decode("ascii").rstrip("=")
    except (TypeError, ValueError):
        return None


KEY_PARTS = "__aotpack_key__.json"  # beside a recorded Triton cache entry: what its key was made of (key_parts)
MAX_ENTRY_FILE = 1 << 30  # one file of a cache entry (a cubin or an IR: kilobytes to megabytes)


def key_parts(key: str) -> dict[str, str]:
    """What Triton's cache key ``key`` was made of, part by part, read from the ``triton.compile`` call asking
    for it (a cache manager is made there): Triton's own files, the function with what it calls, its
    attributes, signature and constants, the backend (ptxas and target), the options, the environment; each a
    short digest, and the target as it is. Empty where no such call is on this thread's stack. Recorded beside
    an entry, they tell a later miss of the same kernel which part changed."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "compile" and
                                     frame.f_globals.get("__name__") == "triton.compiler.compiler"):  # fmt: skip
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or _folder_name(frame.f_locals.get("hash")) != key:
        return {}
    local = frame.f_locals

    def digest(text: Any) -> str:
        return hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:16]

    try:
        src, fn = local["src"], getattr(local["src"], "fn", None)
        if fn is not None:  # an ASTSource: Triton's ASTSource.hash() of these parts
            constants = sorted((str(k), getattr(v, "cache_key", str(v))) for k, v in src.constants.items())
            source = {"function": digest(fn.cache_key), "attrs": digest(src.attrs),
                      "signature": digest(sorted(src.signature.items())), "constants": digest(constants)}  # fmt: skip
        else:
            source = {"source": digest(src.hash())}
        backend, target, env = local["backend"], local["backend"].target, sorted(local["env_vars"].items())
        return {"triton": digest(importlib.import_module("triton.runtime.cache").triton_key()), **source,
                "backend": digest(backend.hash()), "target": f"{target.backend}:{target.arch}",
                "options": digest(local["options"].hash()), "environment": digest(env)}  # fmt: skip
    except Exception:  # (another Triton's compile: no parts, nothing worse)
        return {}


def copy_entry(
    into: str, group: dict[str, str], written: dict[str, bytes] | None = None, home: str | None = None
) -> None:
    """Each file of a Triton cache entry (file name -> its path), and each of ``written`` (file name -> its bytes),
    into the folder ``into``, each atomically: a process copying the same entry beside this one (a compile worker)
    never leaves half a file. A group lists absolute paths, and one planted in a cache could name any file of the
    machine: each file is read only from the entry's own folder (``home`` where the cache manager says which; else
    the one folder its files share, named as Triton names an entry, by its key), as a regular file with no other
    name (no link, no hard link), through the descriptor checked, within MAX_ENTRY_FILE. ValueError or OSError
    otherwise, before anything is copied."""
    files: dict[str, bytes | None] = {file: None for file in group}
    files.update(written or {})
    for file in files:
        if os.path.basename(file) != file or file.startswith(".") or file in ("", ".."):
            raise ValueError(f"{file!r} is not a file name")
    folders = {os.path.dirname(group[file]) for file in group}
    if len(folders) > 1 or (home is not None and folders - {home}):
        raise ValueError(f"its files are not in the entry's folder {home or ''}: {sorted(folders)[:4]}")
    folder = folders.pop() if folders else ""
    name = os.path.basename(folder)
    if group and not (0 < len(name) <= 128 and all(c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for c in name)):
        raise ValueError(f"{folder} is not a Triton cache entry's folder (named by its key)")
    for file in group:
        if os.path.basename(group[file]) != file:
            raise ValueError(f"{file!r} is not the name of the file it lists ({group[file]})")
        files[file] = read_named(group[file], MAX_ENTRY_FILE, one_name=True)
    os.makedirs(into, exist_ok=True)
    for file, data in sorted(files.items()):
        temporary = os.path.join(into, f".{file}.{os.getpid()}.{threading.get_ident()}")
        with open(temporary, "wb") as out:
            out.write(data or b"")
        os.replace(temporary, os.path.join(into, file))


def payload(key: Any, fn: Any, compile: dict[str, Any]) -> dict[str, Any]:
    """A compilation, from the arguments Triton's JIT passes its ``jit_cache_hook``, as JSON: the function
    (``describe``), its signature, constants (``encode``), attributes, options and target architecture."""

    jit = fn.jit_function
    spec = json.loads(compile.get("specialization_data") or "{}")
    arch = spec.get("target", {}).get("arch")  # Triton 3.9 serializes the target; 3.6: the device's binder has it
    if arch is None and "device" in compile:
        arch = getattr(jit.device_caches[compile["device"]][2], "arch", 0)
    attrs = compile["configs"][0] if compile.get("configs") else {}
    return {
        "event": "compile", "function": describe(jit), "key": str(key), "signature": dict(compile["signature"]),
        "constants": [[list(path), encode(value)] for path, value in compile["constants"].items()],
        "attrs": [[list(path), [list(a) for a in values]] for path, values in attrs.items()],
        "num_warps": int(compile["num_warps"]), "num_stages": int(compile["num_stages"]),
        "options": {k: v for k, v in spec.get("options", {}).items() if v is None or isinstance(v, PLAIN)},
        "arch": int(arch or 0),
    }  # fmt: skip


def name_function_constexprs(jit_module: Any) -> Any:
    """Triton 3.6 cannot put a @triton.jit constexpr into the data it hands a jit_cache_hook (serializing it raises
    in the program; 3.7 and later name the function): while one of aotpack's hooks is installed, name it as they
    do. Returns the undo, or None where the release needs nothing (backends/triton/releases.py)."""
    import inspect

    original = getattr(jit_module, "serialize_specialization_data", None)
    if original is None or "target" in inspect.signature(original).parameters:  # 3.7 added the target with the fix
        return None

    def named(value: Any) -> Any:
        if type(value).__name__ == "JITFunction":
            return {"jit_function": f"{value.module}:{value.fn.__qualname__}"}
        return tuple(named(v) for v in value) if type(value) is tuple else value

    def serialize(name: Any, signature: Any, constants: dict[Any, Any], *rest: Any) -> Any:
        return original(name, signature, {k: named(v) for k, v in constants.items()}, *rest)

    jit_module.serialize_specialization_data = serialize

    def undo() -> None:
        if jit_module.serialize_specialization_data is serialize:
            jit_module.serialize_specialization_data = original

    return undo
