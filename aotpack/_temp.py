"""Temporary files and folders named for the process that owns them, so that what a killed build
left behind can be told from what a running one is using, and removed by the next build."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def temp_prefix(base: str) -> str:
    """A temporary name's prefix that says which process owns it (see ``sweep``)."""
    return f"{base}{os.getpid()}-"


def sweep(folder: Path, base: str) -> None:
    """Remove what killed builds left in ``folder``: entries named ``temp_prefix(base)...`` whose
    process is gone (a running build's are kept)."""
    try:
        entries = list(folder.glob(base + "*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(base):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
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
