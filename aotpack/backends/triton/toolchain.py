"""A tested Triton release kept in aotpack's cache, to build with it whatever Triton is installed (or none):
``aotpack build --triton 3.8``, ``triton: "3.8"`` in a recipe, ``triton = "3.8"`` in ``[tool.aotpack]``.

A toolchain is a folder of the cache, ``toolchains/triton-<version>/``: that release's wheel installed by pip
(``--target``, no dependencies: Triton has none on Python 3.10+) from the index pip is configured with, or only
from a wheelhouse (``--wheelhouse DIR`` or ``$AOTPACK_WHEELHOUSE``: a build host without network). A request
names a minor release (``3.8``: the newest 3.8.x already kept, else the index's newest) or an exact one
(``3.8.0``). The build then runs as a child process of this Python with the folder first on its path, as build
isolation does, and ``$AOTPACK_TRITON`` naming the exact version it must find there; the manifest records it.

Toolchains are cache entries like compiled variants and wheels: a use marks one used (its stamp's mtime),
``aotpack cache`` lists, trims and clears them, and a build keeps the cache within its size.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from ... import _tools, values
from ..._temp import atomic_file
from ...errors import ToolNotFound, UsageError
from . import releases

log = logging.getLogger("aotpack")

FOLDER = "toolchains"
STAMP = ".aotpack-toolchain.json"  # written last: a folder without it is an unfinished install
ACTIVE = "AOTPACK_TRITON"  # set in the build's child process: the exact release on its path
WHEELHOUSE = "AOTPACK_WHEELHOUSE"
_REQUEST = re.compile(r"\d+\.\d+(\.\d+)?")


@dataclass(frozen=True)
class Request:
    """A Triton release asked for: a minor release, or an exact version of it."""

    minor: tuple[int, int]
    exact: str | None

    @classmethod
    def parse(cls, text: str) -> Request:
        """``3.8`` or ``3.8.0``; ValueError saying what is wrong (the caller says where)."""
        if not _REQUEST.fullmatch(text):
            raise ValueError(f"{text!r} is not a Triton release: give X.Y (the newest X.Y.z) or X.Y.Z")
        minor = releases.minor(text)
        if minor not in releases.SUPPORTED:
            raise ValueError(f"Triton {text} is not a release aotpack is tested with ({releases.tested()})")
        return cls(minor, text if text.count(".") == 2 else None)

    def matches(self, version: str) -> bool:
        return version == self.exact if self.exact else releases.minor(version) == self.minor

    @property
    def requirement(self) -> str:
        return f"triton=={self.exact}" if self.exact else f"triton~={self.minor[0]}.{self.minor[1]}.0"


@dataclass(frozen=True)
class Toolchain:
    version: str
    path: Path  # the folder that goes first on the build's path


def root(cache_dir: Path) -> Path:
    return cache_dir / FOLDER


def kept(cache_dir: Path) -> list[tuple[Toolchain, int]]:
    """The finished toolchains in the cache, with their sizes (as their stamps say). A link in the place of the
    toolchains' folder, of a toolchain or of its stamp is none: a build would run what lies outside the cache
    (``aotpack cache --clear`` removes such a link)."""
    found = []
    with contextlib.suppress(OSError):
        if not stat.S_ISDIR(os.lstat(root(cache_dir)).st_mode):
            return []
        with os.scandir(root(cache_dir)) as it:
            folders = sorted(Path(e.path) for e in it if e.is_dir(follow_symlinks=False))
        for folder in folders:
            try:
                stamp = values.read_record(folder / STAMP)
                found.append((Toolchain(str(stamp["version"]), folder), int(stamp["bytes"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being installed, or left by a killed install
    return found


def ensure(request: Request, cache_dir: Path, wheelhouse: Path | None = None) -> Toolchain:
    """The toolchain for ``request``: the newest one kept that matches, else installed now."""
    matching = [t for t, _ in kept(cache_dir) if request.matches(t.version)]
    if matching:
        chosen = max(matching, key=lambda t: Version(t.version))
        with contextlib.suppress(OSError):
            os.utime(chosen.path / STAMP)
        return chosen
    return _install(request, cache_dir, wheelhouse)


def _install(request: Request, cache_dir: Path, wheelhouse: Path | None) -> Toolchain:
    where = root(cache_dir)
    where.mkdir(parents=True, exist_ok=True)
    if not stat.S_ISDIR(os.lstat(where).st_mode):
        raise UsageError(f"{where} is a link, not a folder of the cache: remove it (aotpack cache --clear removes "
                         "the link, not what it points to)")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix=".installing-", dir=where))
    try:
        command = [sys.executable, "-m", "pip", "install", "--target", str(work), "--no-deps", "--only-binary",
                   ":all:", "--no-input", "--disable-pip-version-check", "-q", request.requirement]  # fmt: skip
        if wheelhouse is not None:
            command[4:4] = ["--no-index", "--find-links", str(wheelhouse)]
        source = f"the wheelhouse {wheelhouse}" if wheelhouse else "the package index pip is configured with"
        log.info("installing %s from %s into aotpack's cache (%s): about 190 MB to download, 650 MB on disk "
                 "(Triton 3.6), once; later builds with it reuse it", request.requirement, source, where)  # fmt: skip
        _tools.run(command, hint=f"pip could not install {request.requirement} from {source}: name a wheelhouse "
                   f"that holds it (--wheelhouse DIR or ${WHEELHOUSE}), or check pip's index settings")  # fmt: skip
        found = [d.version for d in importlib.metadata.distributions(path=[str(work)]) if d.name == "triton"]
        if len(found) != 1 or not request.matches(found[0]):
            raise UsageError(f"pip installed {found or 'no Triton'} for {request.requirement}")
        version = found[0]
        size = sum(os.lstat(os.path.join(folder, name)).st_size for folder, _, names in os.walk(work) for name in names)
        with atomic_file(work / STAMP) as stamp:
            stamp.write(json.dumps({"version": version, "bytes": size}).encode())
        final = where / f"triton-{version}"
        try:
            work.rename(final)
        except OSError as exc:  # another build installed the same release meanwhile: keep theirs
            if not any(t.path == final for t, _ in kept(cache_dir)):
                raise UsageError(f"cannot keep Triton {version} at {final} ({exc.strerror}): remove what is there "
                                 "(aotpack cache --clear)") from None  # fmt: skip
        return Toolchain(version, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def needed(request: Request, cache_dir: Path, wheelhouse: Path | None, fetch: bool = True) -> Toolchain | None:
    """The toolchain a build asking for ``request`` runs with: None where the installed Triton is that release
    (the build runs here), else the one kept in the cache (installed now if need be; with ``fetch`` False, None
    where none is kept)."""
    try:
        installed: str | None = releases.installed_version()
    except ToolNotFound:
        installed = None
    if installed is not None and request.matches(installed):
        return None
    if not fetch:
        matching = [t for t, _ in kept(cache_dir) if request.matches(t.version)]
        return max(matching, key=lambda t: Version(t.version)) if matching else None
    house = wheelhouse or (Path(os.environ[WHEELHOUSE]) if os.environ.get(WHEELHOUSE) else None)
    if house is not None and not house.is_dir():
        raise UsageError(f"the wheelhouse {house} is not a folder")
    return ensure(request, cache_dir, house)


def run_build(toolchain: Toolchain, argv: Sequence[str]) -> int:
    """``aotpack`` with ``argv`` in a child of this Python whose path starts at the toolchain; its exit status."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(toolchain.path), *filter(None, [env.get("PYTHONPATH")])])
    env[ACTIVE] = toolchain.version
    return subprocess.run([sys.executable, "-m", "aotpack", *argv], env=env, check=False).returncode


def check_active() -> str | None:
    """In a build's child process: the exact release it was started for, which must be the one found."""
    wanted = os.environ.get(ACTIVE)
    if wanted is None:
        return None
    if not _REQUEST.fullmatch(wanted):  # not aotpack's: set by hand, or inherited from elsewhere
        raise UsageError(f"{ACTIVE}={wanted[:80]!r} in the environment is not a Triton release; aotpack sets it only "
                         f"in its own build's child process: unset {ACTIVE} (the recipe's triton: or --triton picks "
                         "the release)")  # fmt: skip
    found = releases.installed_version()
    if found != wanted:
        raise UsageError(f"the toolchain for Triton {wanted} found Triton {found} first on the path: clear it "
                         f"(aotpack cache --clear) and build again (or, if you set {ACTIVE} yourself, unset "
                         "it)")  # fmt: skip
    return wanted
