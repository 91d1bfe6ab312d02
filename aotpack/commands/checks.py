"""Checks of what a command line names, made before any work: shared by the commands that write."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError


def writable_folder(path: Path, what: str) -> None:
    """Checked before any work, creating nothing: the folder is one this user can write in, or can
    be made inside the nearest folder that exists."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "it is" if existing == path else f"{existing} is"
        raise UsageError(f"{what} {path}: {where} a file, not a folder; give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: {existing} is not writable; give a folder you can write")
