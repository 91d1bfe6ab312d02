"""``aotpack new NAME``: a kernel package to start from (a recipe, a Triton kernel, a CUDA kernel,
tests and a README) that builds and passes its tests as generated."""

from __future__ import annotations

import string
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from . import recipe
from .errors import AotpackError


class ScaffoldError(AotpackError):
    exit_code = 2


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


def scaffold(name: str, dest: Path) -> list[Path]:
    """Write the package's files into ``dest`` (which must not exist, or be empty)."""
    problem = recipe.package_problem(name)
    if problem is not None:
        raise ScaffoldError(problem)
    if dest.exists() and any(dest.iterdir()):
        raise ScaffoldError(f"{dest} exists and is not empty; choose another folder with --dir")
    written = []
    template = resources.files("aotpack").joinpath("templates").joinpath("new")
    for relative, text in _files(template):
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(string.Template(text).substitute(name=name))
        written.append(target)
    return written
