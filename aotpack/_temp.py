"""Temporary files and folders named for the process that owns them, so that what a killed build
left behind can be told from what a running one is using, and removed by the next build; and the one
way aotpack writes a file that others may be reading (``atomic_file``)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError


def temp_prefix(base: str) -> str:
    """A temporary name's prefix that says which process owns it (see ``sweep``)."""
    return f"{base}{os.getpid()}-"


def sweep(folder: Path, base: str) -> None:
    """Remove what killed processes left in ``folder``: this user's files and folders named
    ``temp_prefix(base)...`` whose process is gone (a running build's are kept). Nothing else is
    aotpack's: another name, another user's entry or a symlink (never followed) stays."""
    owned = re.compile(re.escape(base) + r"(\d+)-")
    try:
        with os.scandir(folder) as it:
            entries = [e for e in it if (m := owned.match(e.name)) is not None and not _alive(int(m[1]))]
    except OSError:
        return
    for entry in entries:
        try:
            found = entry.stat(follow_symlinks=False)
            if found.st_uid != os.getuid():
                continue
            if stat.S_ISDIR(found.st_mode):
                shutil.rmtree(entry.path)  # refuses a symlink put in its place meanwhile
            elif stat.S_ISREG(found.st_mode):
                os.unlink(entry.path)
        except OSError:
            pass  # another build swept it first, or it is not ours to remove


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


TEMP = ".aotpack-tmp-"  # a file being written by atomic_file (only names like this are swept from its folder)


@contextlib.contextmanager
def atomic_file(path: Path, base: str = TEMP, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` (with ``mode``) only when the ``with`` block ends without
    an error: written under a temporary name in the same folder, then renamed over ``path``, so
    that a reader sees the old file or the new one, never a part. What killed writers left in the
    folder is swept first. A write that fails (a full disk, a folder that is not one or cannot be
    written) leaves ``path`` as it was and is an OutputError naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path.parent, base)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(base))
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise _unwritable(path, exc) from None
        raise


def _unwritable(path: Path, exc: OSError) -> OutputError:
    return OutputError(exc.errno, exc.strerror or str(exc), str(path))


def write_file(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    """``atomic_file`` for data in hand (text is written as UTF-8)."""
    with atomic_file(path, mode=mode) as f:
        f.write(data.encode() if isinstance(data, str) else data)
