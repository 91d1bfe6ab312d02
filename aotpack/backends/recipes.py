"""Every backend's recipe reader, by name, and the recipe loader that gives them to ``recipe.read`` (which
imports no backend): ``load`` is how aotpack, and a user (``aotpack.load``), reads a recipe."""

from __future__ import annotations

from pathlib import Path

from ..model import Recipe
from ..recipe import read
from ..recipe.read import package_problem
from ..recipe.readers import Readers
from ..recipe.yamlnodes import Node
from . import BACKENDS

__all__ = ["READERS", "from_nodes", "load", "package_problem", "parse", "sources"]

# each backend's part (BackendModule.recipe), in the order messages list them: Triton's keys before CUDA's
READERS: Readers = {name: backend.recipe for name, backend in BACKENDS.items()}


def load(path: str | Path) -> Recipe:
    """Read and validate a recipe file."""
    return read.load(path, READERS)


def sources(path: str | Path) -> read.Sources:
    """A recipe's metadata and the files it names, read without importing a kernel (``read.Sources``)."""
    return read.sources(path, READERS)


def parse(text: str, path: Path) -> Recipe:
    """Validate recipe text (``path`` names it in errors; its folder anchors relative paths)."""
    return read.parse(text, path, READERS)


def from_nodes(root: Node, path: Path) -> Recipe:
    """Validate a recipe already read into nodes (``yamlnodes.parse``: a reader that checks more of it first)."""
    return read.from_nodes(root, path, READERS)
