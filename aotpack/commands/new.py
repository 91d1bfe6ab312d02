"""``aotpack new NAME``: a kernel package to start from (a recipe, a Triton kernel, a CUDA kernel,
tests and a README) that builds and passes its tests as generated."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import string
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePath

from .. import values
from .._temp import atomic_file
from ..errors import ScaffoldError
from ..recipe import read as recipe


def _files(folder: Traversable, prefix: str = "") -> list[tuple[str, str]]:
    """The template's text files; the bytecode an installer compiles beside them is not one."""
    out = []
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        if item.name == "__pycache__" or item.name.endswith((".pyc", ".pyo")):
            continue
        if item.is_dir():
            out += _files(item, f"{prefix}{item.name}/")
        else:
            out.append((f"{prefix}{item.name}", item.read_text()))
    return out


def _check(dest: Path) -> None:
    """``dest`` is missing, or an empty folder that is not a link (nothing is written through one)."""
    try:
        found = os.lstat(dest)
        if stat.S_ISLNK(found.st_mode):
            raise ScaffoldError(f"{dest} is a link; aotpack new writes nothing through one: give a new folder with "
                                "--dir")  # fmt: skip
        if not stat.S_ISDIR(found.st_mode):
            raise ScaffoldError(f"{dest} is {values.kind(found.st_mode)}, not a folder; give a new folder with --dir")
        if any(dest.iterdir()):
            raise ScaffoldError(f"{dest} exists and is not empty; choose another folder with --dir")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ScaffoldError(f"cannot use {dest} ({exc.strerror}); give a new folder with --dir") from None


def scaffold(name: str, dest: Path, replaces: str | None = None) -> list[Path]:
    """Write the package's files into ``dest`` (which must not exist, or be an empty folder): each file whole
    (written by atomic_file), and all of them or none (a failed write removes what this call made). ``replaces``:
    the distribution a deliberate fork replaces, written into its recipe (whose reader checks the name again)."""
    problem = recipe.package_problem(name, replaces)
    if problem is not None:
        raise ScaffoldError(problem)
    _check(dest)
    template = resources.files("aotpack").joinpath("templates").joinpath("new")
    made: list[tuple[Path, bool]] = []  # the folders and files made, each with whether it is a folder
    current = dest
    try:
        for relative, text in _files(template):
            for current in (dest / part for part in reversed(PurePath(relative).parents)):
                with contextlib.suppress(FileExistsError):
                    current.mkdir()
                    made.append((current, True))
            current = dest / relative
            with atomic_file(current) as f:
                f.write(string.Template(text).substitute(name=name, replaces=_replaces_line(replaces)).encode())
            made.append((current, False))
    except BaseException as exc:
        for path, is_folder in reversed(made):
            with contextlib.suppress(OSError):
                (os.rmdir if is_folder else os.unlink)(path)
        if isinstance(exc, OSError):
            raise ScaffoldError(f"cannot write {current} ({exc.strerror}); nothing was written: give a folder you "
                                "can write with --dir") from None  # fmt: skip
        raise
    return [path for path, is_folder in made if not is_folder]


def _replaces_line(replaces: str | None) -> str:
    if replaces is None:
        return ""
    return f"replaces: {json.dumps(replaces)}  # a deliberate fork: installing it replaces that distribution\n"
