"""``inductor_cache:``: the folder (beside the recipe) of torch.compile's caches that ``aotpack record`` saved from
the recorded program, a set per process that compiled (``runtime/_aotpack_inductor.py`` says what they hold and
why a recording needs them to serve sizes it never saw). A build ships them as they are
(``<package>/_inductor_cache/<digest>.{bin,json}``) and ``activate()`` loads them into torch's caches.

The folder is read like any input of a build: inside the recipe's folder, plain files only, each set a
``<sha256>.bin`` whose bytes hash to its name and a ``<sha256>.json`` naming the torch that saved it, with
bounded counts and sizes. aotpack never unpickles the bytes; torch does, in the program that activates them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .. import limits
from ..model import InductorSet
from . import fields
from .yamlnodes import Node

SET = re.compile(r"([0-9a-f]{64})\.(bin|json)")


def sets(node: Node, root: Path) -> tuple[InductorSet, ...]:
    """The sets of the folder ``node`` names (relative to the recipe's folder ``root``), sorted by digest."""
    folder = fields.recorded_folder(node, root, "torch.compile's caches", "inductor_cache")
    files = sorted(folder.iterdir())
    if len(files) > 2 * limits.MAX_INDUCTOR_SETS:
        raise node.fail(f"{folder} holds {len(files)} files; at most {limits.MAX_INDUCTOR_SETS} sets (aotpack's "
                        "limits.MAX_INDUCTOR_SETS)")  # fmt: skip
    digests: dict[str, set[str]] = {}
    for file in files:
        match = SET.fullmatch(file.name)
        if match is None or file.is_symlink() or not file.is_file():
            raise node.fail(f"{file}: not a file of torch.compile's recorded caches (<sha256>.bin and "
                            "<sha256>.json, as aotpack record writes them); remove it")  # fmt: skip
        digests.setdefault(match[1], set()).add(match[2])
    out, total = [], 0
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
        torch, cpp = _described(node, folder / f"{digest}.json")
        out.append(InductorSet(digest=digest, folder=folder, torch=torch, size=size, cpp_kernels=cpp))
    return tuple(out)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _described(node: Node, meta: Path) -> tuple[str, int]:
    """The torch release a set's ``.json`` names and the Inductor C++ kernels it counts (its other fields checked
    for their types)."""
    try:
        if meta.stat().st_size > limits.MAX_INDUCTOR_META:
            raise ValueError(f"larger than {limits.MAX_INDUCTOR_META} bytes")
        data = json.loads(meta.read_bytes())
        if not isinstance(data, dict) or not isinstance(data.get("torch"), str):
            raise ValueError("no 'torch' release named")
        if not isinstance(data.get("job_id"), (str, type(None))):
            raise ValueError("'job_id' is not a string or null")
        settings = data.get("settings", {})
        if not isinstance(settings, dict) or not all(isinstance(v, str) for v in settings.values()):
            raise ValueError("'settings' is not a table of strings")
        cpp = data.get("cpp_kernels", 0)
        if type(cpp) is not int or cpp < 0:
            raise ValueError("'cpp_kernels' is not a count")
        return str(data["torch"]), cpp
    except (OSError, ValueError, RecursionError) as exc:
        raise node.fail(f"{meta}: not aotpack record's description of torch.compile's caches ({exc}); record "
                        "again") from None  # fmt: skip
