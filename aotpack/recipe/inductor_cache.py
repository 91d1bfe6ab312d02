"""``inductor_cache:``: the folder (beside the recipe) of torch.compile's caches that ``aotpack record`` saved from
the recorded program, a set per process that compiled (``runtime/_aotpack_inductor.py`` says what they hold and
why a recording needs them to serve sizes it never saw). A build ships them as they are
(``<package>/_inductor_cache/<digest>.{bin,json}``) and ``activate()`` loads them into torch's caches.

The folder is read like any input of a build: inside the recipe's folder, plain files only, each set a
``<sha256>.bin`` whose bytes hash to its name and a ``<sha256>.json`` naming the torch that saved it, and the
shared objects of Inductor's C++ kernels a set's .json lists (``<sha256>.cpp``, zlib-compressed, the sha256 of
the object they hold as their name), with bounded counts and sizes. aotpack never unpickles the bytes nor loads
an object; torch does, in the program that activates them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .. import limits, values
from ..model import InductorSet
from ..runtime import _aotpack_inductor as _inductor
from . import fields
from .yamlnodes import Node

SET = re.compile(r"([0-9a-f]{64})\.(bin|json|cpp)")
HEX64 = re.compile(r"[0-9a-f]{64}")


def sets(node: Node, root: Path) -> tuple[InductorSet, ...]:
    """The sets of the folder ``node`` names (relative to the recipe's folder ``root``), sorted by digest."""
    folder = fields.recorded_folder(node, root, "torch.compile's caches", "inductor_cache")
    files = sorted(folder.iterdir())
    if len(files) > 2 * limits.MAX_INDUCTOR_SETS + limits.MAX_INDUCTOR_CPP_FILES:
        raise node.fail(f"{folder} holds {len(files)} files; at most {limits.MAX_INDUCTOR_SETS} sets and "
                        f"{limits.MAX_INDUCTOR_CPP_FILES} C++ kernels (aotpack's limits.MAX_INDUCTOR_SETS, "
                        "MAX_INDUCTOR_CPP_FILES)")  # fmt: skip
    digests: dict[str, set[str]] = {}
    objects: set[str] = set()
    for file in files:
        match = SET.fullmatch(file.name)
        if match is None or file.is_symlink() or not file.is_file() or file.stat().st_nlink != 1:
            raise node.fail(f"{file}: not a file of torch.compile's recorded caches (<sha256>.bin, <sha256>.json "
                            "and <sha256>.cpp, as aotpack record writes them: plain files, no link or hard "
                            "link); remove it")  # fmt: skip
        if match[2] == "cpp":
            objects.add(match[1])
        else:
            digests.setdefault(match[1], set()).add(match[2])
    out, total, listed = [], 0, set()
    for digest, kinds in sorted(digests.items()):
        if kinds != {"bin", "json"}:
            missing = ({"bin", "json"} - kinds).pop()
            raise node.fail(f"{folder / digest}.{missing} is missing: a set is its .bin and its .json; record again")
        size = (folder / f"{digest}.bin").stat().st_size
        total += size
        if total > limits.MAX_INDUCTOR_BYTES:
            raise node.fail(f"{folder} holds more than {limits.MAX_INDUCTOR_BYTES >> 20} MiB (aotpack's "
                            "limits.MAX_INDUCTOR_BYTES): is it the right folder?")  # fmt: skip
        try:
            found = _sha256(folder / f"{digest}.bin")
        except OSError as exc:
            raise node.fail(f"{folder / digest}.bin: cannot read it ({exc.strerror or exc})") from None
        if found != digest:
            raise node.fail(f"{folder / digest}.bin: its bytes are not the ones recorded (their sha256 is its "
                            "name); record again")  # fmt: skip
        torch, cpp, held = _described(node, folder / f"{digest}.json")
        for name in held:
            if name not in objects:
                raise node.fail(f"{folder / name}.cpp is missing: {digest}.json lists it (a C++ kernel's shared "
                                "object); record again")  # fmt: skip
            if name not in listed:
                listed.add(name)
                total += _object(node, folder / f"{name}.cpp")
        out.append(InductorSet(digest=digest, folder=folder, torch=torch, size=size, cpp_kernels=cpp,
                               cpp_objects=held))  # fmt: skip
    unlisted = sorted(objects - listed)
    if unlisted:
        raise node.fail(f"{folder / unlisted[0]}.cpp: no set's .json lists it; remove it or record again")
    return tuple(out)


def _object(node: Node, path: Path) -> int:
    """Check one C++ kernel's stored shared object as activate() will (``unpack_cpp``); returns its stored size."""
    try:
        size = path.stat().st_size
        if size > limits.MAX_INDUCTOR_CPP_BYTES:
            raise ValueError(f"larger than {limits.MAX_INDUCTOR_CPP_BYTES >> 20} MiB")
        _inductor.unpack_cpp(path.read_bytes(), path.stem)
    except (OSError, ValueError) as exc:
        raise node.fail(f"{path}: not a C++ kernel's shared object as aotpack record stores it ({exc}); record "
                        "again") from None  # fmt: skip
    return size


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _described(node: Node, meta: Path) -> tuple[str, int, tuple[str, ...]]:
    """The torch release a set's ``.json`` names, the Inductor C++ kernels it counts and the shared objects of
    theirs it lists (its other fields checked for their types)."""
    try:
        if meta.stat().st_size > limits.MAX_INDUCTOR_META:
            raise ValueError(f"larger than {limits.MAX_INDUCTOR_META} bytes")
        data = json.loads(meta.read_bytes())
        if values.json_depth(data) > limits.MAX_RECORDED_DEPTH:
            raise ValueError(f"nests deeper than {limits.MAX_RECORDED_DEPTH} levels (limits.MAX_RECORDED_DEPTH)")
        if not isinstance(data, dict) or not isinstance(data.get("torch"), str):
            raise ValueError("no 'torch' release named")
        if not values.RELEASE.fullmatch(data["torch"]):
            raise ValueError(f"'torch' is not a release of torch: {data['torch'][:40]!r}")
        if not isinstance(data.get("job_id"), (str, type(None))):
            raise ValueError("'job_id' is not a string or null")
        settings = data.get("settings", {})
        if not isinstance(settings, dict) or not all(isinstance(v, str) for v in settings.values()):
            raise ValueError("'settings' is not a table of strings")
        cpp = data.get("cpp_kernels", 0)
        if type(cpp) is not int or cpp < 0:
            raise ValueError("'cpp_kernels' is not a count")
        return str(data["torch"]), cpp, listed_objects(data.get("cpp"))
    except (OSError, ValueError, RecursionError) as exc:
        raise node.fail(f"{meta}: not aotpack record's description of torch.compile's caches ({exc}); record "
                        "again") from None  # fmt: skip


def listed_objects(table: object) -> tuple[str, ...]:
    """The shared objects a set's ``cpp`` table lists: the Python ABI and CPU features they were built for, and
    each kernel's key and object by their sha256."""
    if table is None:
        return ()
    if not isinstance(table, dict) or not isinstance(table.get("soabi"), str):
        raise ValueError("'cpp' is not a table naming the Python ABI ('soabi') its C++ kernels were built for")
    cpu = table.get("cpu")
    if cpu is not None and not (isinstance(cpu, list) and all(isinstance(f, str) for f in cpu)):
        raise ValueError("'cpp.cpu' is not a list of the recording CPU's feature flags")
    kernels = table.get("kernels")
    if not isinstance(kernels, dict) or len(kernels) > limits.MAX_INDUCTOR_CPP:
        raise ValueError(f"'cpp.kernels' is not a table of at most {limits.MAX_INDUCTOR_CPP} kernels")
    for key, name in kernels.items():
        if not (HEX64.fullmatch(key) and isinstance(name, str) and HEX64.fullmatch(name)):
            raise ValueError(f"'cpp.kernels' maps {key!r:.80} to {name!r:.80}: expected two sha256 digests")
    return tuple(sorted(set(kernels.values())))
