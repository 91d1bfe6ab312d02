"""A content-addressed cache of compiled variants and finished wheels (``--cache-dir``, default
``$XDG_CACHE_HOME/aotpack`` or ``~/.cache/aotpack``; ``--no-cache`` skips it).

A key is the sha256 of everything that changes the output: aotpack's own code, the toolchain
versions, the variant (signature, hints, constexprs, options, target) and the bytes of the kernel's
source folder (its helper modules or headers too). Entries are written to a temporary file and
renamed, so builds running side by side, or one killed at any moment, never leave a corrupt entry. An entry is
data (``encode``: a JSON header and the image), never code: whoever can write a shared cache folder cannot make
the next build run anything.

The cache is bounded: a hit marks its entry used (its mtime), and after a build that wrote to it the
least recently used entries go until it holds at most ``$AOTPACK_CACHE_SIZE`` (default 10G);
``aotpack cache`` shows it, trims it to a size, or clears it. The Triton releases builds use with ``--triton``
are entries too (``toolchains/``, backends/triton/toolchain.py).

Only a folder aotpack made is ever trimmed or cleared: the first write makes the cache's marker (``MARKER``, a
cache directory tag, so backup tools skip it too), and a folder without it is refused before anything in it is
removed (``--cache-dir`` given a wheelhouse by mistake keeps every file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import stat
import time
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from .. import backends, values
from .._temp import TEMP, atomic_file
from ..backends import Artifact, Kept, Outcome, Pruned
from ..errors import UsageError
from ..model import Kernel
from ..plan.variants import Variant

log = logging.getLogger(__name__)


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aotpack"


# What runs after the compile stage: a change there makes new wheels, but the same compiled variants.
LATE_STAGES = ("codegen/", "runtime/", "selection.py", "pipeline/native.py", "pipeline/wheel.py", "pipeline/repair.py")


def own_files(compile_stage: bool) -> list[Path]:
    """aotpack's own source files (sorted); with compile_stage, those that can change a compiled variant."""
    root = Path(str(resources.files("aotpack")))
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or path.suffix not in {".py", ".c", ".h", ".json"} or "__pycache__" in path.parts:
            continue
        if compile_stage and relative.as_posix().startswith(LATE_STAGES):
            continue
        found.append(path)
    return found


@cache
def aotpack_digest(compile_stage: bool = False) -> str:
    """The sha256 of aotpack's own files: a changed runtime or code generator is a new toolchain for
    the wheels; for the compiled variants, only a change in the stages up to the compile is."""
    h = hashlib.sha256()
    root = Path(str(resources.files("aotpack")))
    for path in own_files(compile_stage):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _folder(kernel: Kernel) -> Path:
    """The folder of the kernel's source file (or of its module)."""
    src = kernel.source
    if src.path is not None:
        return src.path.parent
    assert src.module is not None
    spec = importlib.util.find_spec(src.module)
    return Path(spec.origin).parent if spec and spec.origin else Path(".")


def source_files(kernel: Kernel) -> list[Path]:
    """The kernel's source file and every source file of its language beside it (helper modules,
    headers) and in its include folders: a conservative reading of "what the kernel uses"."""
    backend = backends.of(kernel)
    return files_beside(backend.source_suffixes, _folder(kernel), backend.include_dirs(kernel))


def files_beside(suffixes: frozenset[str], folder: Path, includes: Sequence[Path]) -> list[Path]:
    """The files with one of ``suffixes`` in ``folder`` and anywhere under ``includes``."""
    found = [p for p in folder.glob("*") if p.is_file() and p.suffix in suffixes]
    for include in includes:
        found += [p for p in include.rglob("*") if p.is_file() and p.suffix in suffixes]
    return sorted(set(found))


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_digest(kernel: Kernel, portable: bool) -> str:
    """The kernel's source files, by name and content. With ``portable`` (its backend's code holds no path:
    ``BackendModule.portable``) a file is named relative to the kernel's folder, so another checkout or
    environment holding the same files finds the same cached variants; otherwise by its absolute path, which
    line info or CUDA's __FILE__ can carry into the code."""
    folder = _folder(kernel)
    h = hashlib.sha256()
    for path in source_files(kernel):
        name = os.path.relpath(path, folder) if portable else str(path)
        h.update(name.encode() + b"\0" + file_digest(path).encode())
    return h.hexdigest()


def variant_key(variant: Variant, toolchain: Mapping[str, str], source: str) -> str:
    k = variant.kernel
    triton = k.triton
    unbound = (*triton.fixed_constexprs, *triton.dtype_constexprs) if triton else ()  # constexprs outside the grid
    described = {
        "aotpack": aotpack_digest(compile_stage=True),
        "toolchain": dict(sorted(toolchain.items())),
        "source": source,
        "function": k.source.function,
        "backend": k.backend,
        "args": [
            [a.name, a.pointer, variant.dtype_of(a.name), a.hint, a.launch_only, a.block, a.optional] for a in k.args
        ],
        "constexprs": [[n, repr(v)] for n, v in (*variant.config.constexprs, *unbound)],
        "launch": [variant.config.num_warps, variant.config.num_stages],
        "options": [[n, repr(v)] for n, v in (triton.options if triton else ())],
        "cuda": [k.cuda.entry, list(k.cuda.nvcc_flags), [str(d) for d in k.cuda.include_dirs]] if k.cuda else None,
        "target": variant.target,
        "specialization": [variant.specialization, list(variant.spec.states)],
        "id": variant.id,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


CACHE_TEMP = ".tmp-"  # an entry being written into the cache
SIZE_SETTING, DEFAULT_SIZE = "AOTPACK_CACHE_SIZE", "10G"  # the cache's bound, and its default
SIZE_STAMP, RECOUNT_SECONDS = "size.json", 86400  # the last count of its bytes; counted again after a day
# the file that says a folder is aotpack's cache: a cache directory tag (https://bford.info/cachedir/) naming aotpack
MARKER = "CACHEDIR.TAG"
MARKER_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by aotpack: `aotpack cache --trim/--clear` and the trim after a\n"
    "# build remove entries only from a folder holding it. See https://bford.info/cachedir/\n"
)
# the layout of a cache aotpack made before the marker (a folder's path ends in /), for ``foreign``
_KEY, _TEMPS = "[0-9a-f]{64}", f"([^/]+/)*({re.escape(CACHE_TEMP)}|{re.escape(TEMP)})[0-9]+-[^/]*"
VARIANT_SUFFIX = ".variant"  # a compiled variant's file (``encode``); ``.pickle``: aotpack's earlier format
_LAYOUT = (re.escape(SIZE_STAMP), "variants/", "variants/[0-9a-f]{2}/",
           rf"variants/[0-9a-f]{{2}}/{_KEY}(\.pickle|{re.escape(VARIANT_SUFFIX)})",
           "wheels/", f"wheels/{_KEY}/", rf"wheels/{_KEY}/(build\.json|[^/]+\.whl)", _TEMPS)  # fmt: skip


# A compiled variant on disk is data, never code: a cache folder is often shared (CI caches, a team's disk), and
# whoever can write it must not be able to run code in the next build (pickle would let them). The format: MAGIC,
# the header's length (8 bytes, little-endian), the header (JSON: the outcome's fields but the image), the image.
MAGIC = b"aotpack-variant/1\n"


def encode(outcome: Outcome) -> bytes:
    """A compiled variant (an Artifact or a Pruned) as the cache stores it."""
    fields = dataclasses.asdict(outcome)
    image: bytes = fields.pop("image", b"")
    header = json.dumps({type(outcome).__name__: fields}, sort_keys=True).encode()
    return MAGIC + len(header).to_bytes(8, "little") + header + image


def decode(data: bytes) -> Outcome:
    """What ``encode`` wrote, each field checked against its declared type; ValueError for anything else."""
    start = len(MAGIC) + 8
    if not data.startswith(MAGIC) or len(data) < start:
        raise ValueError("not a compiled variant of this aotpack")
    end = start + int.from_bytes(data[len(MAGIC) : start], "little")
    try:
        ((kind, fields),) = json.loads(data[start:end]).items()
    except (ValueError, AttributeError) as exc:
        raise ValueError(f"a damaged header: {exc}") from None
    if kind == "Pruned" and end == len(data):
        return typing.cast(Pruned, _typed(Pruned, fields))
    if kind == "Artifact" and isinstance(fields, dict):
        return typing.cast(Artifact, _typed(Artifact, {**fields, "image": data[end:]}))
    raise ValueError(f"not a compiled variant: {kind!r}")


@cache
def _hints(kind: type) -> dict[str, typing.Any]:
    """A dataclass's fields with their types, evaluated once (a rebuild reads thousands of variants)."""
    hints = typing.get_type_hints(kind)
    return {f.name: hints[f.name] for f in dataclasses.fields(kind)}


def _typed(kind: typing.Any, value: typing.Any) -> typing.Any:
    """``value`` (as JSON gave it) as type ``kind``: a dataclass from a dict of all its fields and no other, a
    tuple from a list, an optional, or a plain value of that very type; ValueError where it is not."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = _hints(kind)
        if not isinstance(value, dict) or set(value) != set(hints):
            raise ValueError(f"{kind.__name__}: {value!r:.80}")
        return kind(**{name: _typed(hints[name], item) for name, item in value.items()})
    if origin is not None and type(None) in args:  # X | None
        return None if value is None else _typed(next(a for a in args if a is not type(None)), value)
    if origin is tuple:
        items = [args[0]] * len(value) if args[-1] is Ellipsis and isinstance(value, list) else list(args)
        if not isinstance(value, list) or len(items) != len(value):
            raise ValueError(f"{kind}: {value!r:.80}")
        return tuple(_typed(item, v) for item, v in zip(items, value, strict=True))
    if type(value) is not kind:  # (bool is not int here: exact types)
        raise ValueError(f"{getattr(kind, '__name__', kind)}: {value!r:.80}")
    return value


def parse_size(text: str) -> int:
    """The cache's bound in bytes, from ``aotpack cache --trim`` or $AOTPACK_CACHE_SIZE; ValueError otherwise."""
    return values.size(text, "a cache size")


def size_setting() -> str:
    """The bound as the user wrote it: $AOTPACK_CACHE_SIZE, else (unset or empty) 10G."""
    return os.environ.get(SIZE_SETTING) or DEFAULT_SIZE


def size_limit() -> int:
    """The most the cache may hold after a build, in bytes: every command that reads the bound reads it here."""
    try:
        return parse_size(size_setting())
    except ValueError as exc:
        raise UsageError(f"${SIZE_SETTING}: {exc}; set it so, or unset it for {DEFAULT_SIZE}") from None


@dataclass(frozen=True)
class Entry:
    """One unit the cache keeps or drops whole: a compiled variant's file, a wheel's folder, or a Triton release's
    (toolchains/triton-X.Y.Z, for --triton)."""

    path: Path
    bytes: int
    used: float  # when last written or hit (the mtime of its file, or of the wheel's build.json)
    link: bool = False  # a link found in the cache: never followed, of no bytes; its removal removes the link


@dataclass(frozen=True)
class Trimmed:
    """What a trim removed, and what it could not (each "path: why": a read-only folder, say), which stays."""

    dropped: tuple[Entry, ...]
    failed: tuple[str, ...]

    @property
    def freed(self) -> int:
        return sum(e.bytes for e in self.dropped)


def _add_kept(kept: Kept, top: dict[str, str], found: list[Entry]) -> None:
    """A backend's entries to ``found`` (a Triton release kept for --triton: its stamp says its size); a link
    in a stamp's place is one too."""
    for path, size in kept.entries:
        with contextlib.suppress(OSError):
            found.append(Entry(path, size, os.lstat(path / kept.stamp).st_mtime))
    for folder in _inside(top.get(kept.folder), found):
        with contextlib.suppress(OSError):
            st = os.lstat(Path(folder.path) / kept.stamp)
            if stat.S_ISLNK(st.st_mode):
                found.append(Entry(Path(folder.path) / kept.stamp, 0, st.st_mtime, link=True))


def _write_atomically(path: Path, data: bytes) -> None:
    with atomic_file(path, CACHE_TEMP) as f:
        f.write(data)


@dataclass
class Cache:
    root: Path  # resolved once: the folder may be a link the user made; nothing inside it is followed
    written: int = 0  # bytes this process stored (the size check after a build adds them)

    claimed: bool = False  # this process found (or wrote) the marker

    def __post_init__(self) -> None:
        self.root = _root(self.root)

    def _check(self) -> None:
        """Refuse a folder that is not aotpack's cache (see ``foreign``) before reading, writing or removing in it."""
        if self.claimed:
            return
        found = foreign(self.root)
        if found is not None:
            raise UsageError(
                f"the cache folder {self.root} is not one aotpack made: it has no {MARKER} and holds {found}, which "
                "aotpack did not write; nothing in it was changed. Give --cache-dir a folder of aotpack's own (the "
                f"default is {default_dir()}), or an empty or new one; or, if it is a cache, remove what it holds "
                "yourself"
            )

    def _claim(self, make: bool) -> None:
        """Before a write (``make``: the folder is made if missing) or a removal: refuse a foreign folder, and mark
        one aotpack makes or adopts as its cache (a missing folder is not made to clear it)."""
        self._check()
        if not self.claimed and (make or self.root.is_dir()):
            if not _marked(self.root):
                with contextlib.suppress(OSError):  # a read-only cache: adopted, and checked again next time
                    _write_atomically(self.root / MARKER, MARKER_TEXT.encode())
            self.claimed = True

    def _variant_path(self, key: str) -> Path:
        return self.root / "variants" / key[:2] / f"{key}{VARIANT_SUFFIX}"

    def load(self, key: str) -> Outcome | None:
        self._check()  # a build given a wheelhouse as its cache is refused before it compiles
        path = self._variant_path(key)
        try:
            outcome = decode(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # written by another aotpack, or damaged on disk: compile again
            path.unlink(missing_ok=True)
            return None
        mark_used(path)
        return outcome

    def store(self, key: str, outcome: Outcome) -> None:
        data = encode(outcome)
        self._claim(make=True)
        _write_atomically(self._variant_path(key), data)
        self.written += len(data)

    def wheel_key(self, sources: Iterable[tuple[str, str]], variant_keys: Iterable[str]) -> str:
        """Everything a wheel is made of: every input file (path, sha256), and its variants."""
        h = hashlib.sha256(aotpack_digest().encode())
        for part in (*(f"{path}\0{digest}" for path, digest in sources), *variant_keys):
            h.update(hashlib.sha256(part.encode()).digest())
        return h.hexdigest()

    def wheel(self, key: str) -> tuple[Path, dict[str, object]] | None:
        self._check()
        folder = self.root / "wheels" / key
        try:
            info: dict[str, object] = json.loads((folder / "build.json").read_text())
            wheel = folder / str(info["wheel"])
        except (OSError, ValueError, KeyError):
            return None
        if not wheel.is_file():
            return None
        mark_used(folder / "build.json")
        return wheel, info

    def store_wheel(self, key: str, wheel: Path, info: dict[str, object]) -> None:
        folder = self.root / "wheels" / key
        data, build = wheel.read_bytes(), json.dumps({**info, "wheel": wheel.name}).encode()
        self._claim(make=True)
        _write_atomically(folder / wheel.name, data)
        _write_atomically(folder / "build.json", build)
        self.written += len(data) + len(build)

    def entries(self) -> list[Entry]:
        """Every variant file, wheel folder and Triton toolchain, least recently used first (one stat per file:
        this runs after every build that wrote to the cache). No link is followed: one in the place of a folder
        or file of the cache (variants/, a shard, a wheel's folder, a toolchain's stamp...) is an entry of no
        bytes whose removal removes the link, so nothing outside the cache is counted or removed."""
        found: list[Entry] = []
        top = {e.name: e.path for e in _inside(self.root, found)}
        for shard in _inside(top.get("variants"), found):
            for f in _inside(shard.path, found):
                with contextlib.suppress(OSError):  # removed by a build running beside this one
                    if f.name.endswith((VARIANT_SUFFIX, ".pickle")) and f.is_file(follow_symlinks=False):
                        st = f.stat(follow_symlinks=False)
                        found.append(Entry(Path(f.path), st.st_size, st.st_mtime))
        for kept in filter(None, (backend.kept(self.root) for backend in backends.BACKENDS.values())):
            _add_kept(kept, top, found)
        for folder in _inside(top.get("wheels"), found):
            with contextlib.suppress(OSError):
                files = {f.name: f.stat(follow_symlinks=False) for f in _listing(folder.path)}
                # without its build.json a wheel is being written (or was, by a killed build): its newest file
                latest = max((st.st_mtime for st in files.values()), default=folder.stat().st_mtime)
                used = files["build.json"].st_mtime if "build.json" in files else latest
                size = sum(st.st_size for st in files.values() if stat.S_ISREG(st.st_mode))
                found.append(Entry(Path(folder.path), size, used))
        return sorted(found, key=lambda e: e.used)

    def trim(self, limit: int, entries: list[Entry] | None = None) -> Trimmed:
        """Drop the least recently used entries until the cache holds at most ``limit`` bytes (of
        ``entries``, this cache's listing when the caller has one), every entry at 0 (links too, of no bytes):
        the listing's first, but for those that cannot be removed, which stay. Records the size left (size.json).
        A folder aotpack did not make is refused first (UsageError), nothing in it removed."""
        self._claim(make=False)
        entries = self.entries() if entries is None else entries
        total = sum(e.bytes for e in entries)
        dropped: list[Entry] = []
        failed: list[str] = []
        freed = 0
        for entry in entries:
            if limit and total - freed <= limit:
                break
            try:
                self._remove(entry.path)
            except OSError as exc:
                failed.append(f"{entry.path}: {exc.strerror or exc}")
                continue
            dropped.append(entry)
            freed += entry.bytes
        self._count(total - freed, time.time())
        return Trimmed(tuple(dropped), tuple(failed))

    def _remove(self, path: Path) -> None:
        """Remove an entry, following no link: each folder from the cache's root down to it must still be a
        folder (a link put there since the listing is refused); a file or link is unlinked, a folder
        removed by shutil.rmtree, which refuses a link in its place and follows none inside it. One
        already gone (a build running beside this one removed it) is no error."""
        parent = self.root
        with contextlib.suppress(FileNotFoundError):
            for part in path.relative_to(self.root).parts[:-1]:
                parent = parent / part
                if not stat.S_ISDIR(os.lstat(parent).st_mode):
                    raise OSError(f"{parent} is no longer a folder: not followed")
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)

    def keep_within(self, limit: int) -> tuple[int, int]:
        """After a build: trim to ``limit`` when the cache may be over it, as the last count plus
        what builds stored since says (the walk costs a stat per entry: ~0.5 s for 50k); a count older
        than a day is redone, for what others removed or copied in."""
        try:
            last = values.read_record(self.root / SIZE_STAMP)
            counted, total = float(last["counted"]), int(last["bytes"]) + self.written
        except (OSError, ValueError, KeyError, TypeError):
            counted, total = 0.0, limit + 1
        if total > limit or time.time() - counted > RECOUNT_SECONDS:
            trimmed = self.trim(limit)
            for failure in trimmed.failed:
                log.warning("the cache could not drop %s", failure)
            return len(trimmed.dropped), trimmed.freed
        self._count(total, counted)
        return 0, 0

    def _count(self, total: int, counted: float) -> None:
        with contextlib.suppress(OSError):  # a read-only cache: counted again next time
            if self.root.is_dir():  # a cache not made yet stays unmade (aotpack cache --clear of none)
                _write_atomically(self.root / SIZE_STAMP, json.dumps({"bytes": total, "counted": counted}).encode())
        self.written = 0


def _root(folder: Path) -> Path:
    """The cache's folder, its links resolved: a missing one is an empty cache; a file, device, FIFO or dangling
    link in its place is refused."""
    try:
        resolved = folder.resolve()
        found = os.stat(resolved)
    except FileNotFoundError:
        if not os.path.lexists(folder):
            return resolved
        reason = f"is a link to {resolved}, which does not exist; make that folder, remove the link, or"
    except (OSError, RuntimeError) as exc:  # a loop of links, a file in the path, a folder not readable
        reason = f"cannot be used ({exc.strerror if isinstance(exc, OSError) else exc});"
    else:
        if stat.S_ISDIR(found.st_mode):
            return resolved
        reason = f"is {values.kind(found.st_mode)}, not a folder; remove it, or"
    raise UsageError(f"the cache folder {folder} {reason} give another with --cache-dir")


def _marked(root: Path) -> bool:
    """Whether ``root`` holds aotpack's marker: a file (not a link) of exactly its text (another tool's cache
    directory tag is not aotpack's)."""
    try:
        if not stat.S_ISREG(os.lstat(root / MARKER).st_mode):
            return False
        with open(root / MARKER, "rb") as f:
            return f.read(len(MARKER_TEXT) + 1) == MARKER_TEXT.encode()
    except OSError:
        return False


def foreign(root: Path) -> str | None:
    """None where ``root`` is aotpack's cache, else what in it aotpack did not write (the first found). Its cache
    is a folder holding the marker, a missing or empty folder (made now), or a cache an aotpack before the marker
    made, adopted only where every entry has that cache's own layout and nothing else is there: a variant's
    ``variants/<2 hex>/<key>.pickle``, a wheel's ``wheels/<key>/`` holding only build.json and wheels, a backend's
    finished entries (a Triton toolchain with its stamp), the size count and temporary files of its writes. A link
    anywhere, or any other name, is foreign: nothing the user put there is ever removed."""
    if _marked(root) or not os.path.lexists(root):
        return None
    kept = list(filter(None, (b.kept(root) for b in backends.BACKENDS.values())))
    whole = {path for k in kept for path, _ in k.entries}  # a backend's finished entry: what it holds is its own
    layout = re.compile("|".join((*_LAYOUT, *(re.escape(k.folder) + "/" for k in kept))))
    for folder, dirs, files in os.walk(root):  # links are not followed: each is in dirs or files, and refused
        for name in (*dirs, *files):
            path = Path(folder) / name
            shown = path.relative_to(root).as_posix()
            if path.is_symlink():
                return f"a link ({shown})"
            if path in whole:
                dirs.remove(name)
            elif not layout.fullmatch(shown + "/" * path.is_dir()):
                return shown
    return None


def _listing(folder: str | Path | None) -> list[os.DirEntry[str]]:
    """A folder's entries, or none when it is missing (None, or gone while being read)."""
    if folder is None:
        return []
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def _inside(folder: str | Path | None, found: list[Entry]) -> list[os.DirEntry[str]]:
    """The folders and files in a folder of the cache (None: one it lacks), not followed; the links among them
    go to ``found``, as entries of no bytes."""
    rest = []
    for entry in _listing(folder):
        with contextlib.suppress(OSError):
            if entry.is_symlink():
                found.append(Entry(Path(entry.path), 0, entry.stat(follow_symlinks=False).st_mtime, link=True))
            else:
                rest.append(entry)
    return rest


def mark_used(path: Path) -> None:
    """Mark an entry used now, by its mtime (a read-only cache stays as it is)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def copy_into(source: Path, out_dir: Path) -> Path:
    """Copy a file into out_dir atomically (a temporary name, then a rename); first removes what
    killed builds left there."""
    with atomic_file(out_dir / source.name) as f, source.open("rb") as src:
        shutil.copyfileobj(src, f)
    return out_dir / source.name
