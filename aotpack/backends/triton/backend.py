"""What the Triton backend states to the generic stages (``base.BackendModule``): a kernel's sources are
Python modules, a compile worker keeps a private Triton cache, and Triton's JIT folds an argument equal to 1
or None into the code."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...model import Kernel
from ...plan.variants import Variant
from ...states import NONE, ONE
from ..base import Artifact, Kept
from . import mutation, recipe, toolchain
from .compiler import CACHE_TEMP, TritonCompiler


class Triton:
    recipe = recipe
    source_suffixes = frozenset({".py"})
    temp_prefixes = (CACHE_TEMP,)

    def include_dirs(self, kernel: Kernel) -> tuple[Path, ...]:
        """A kernel's helper modules lie beside it."""
        return ()

    def compiler(
        self, targets: tuple[str, ...], nvcc: str | None, line_info: bool, cuda_floor: int | None
    ) -> TritonCompiler:
        """Triton takes no nvcc."""
        return TritonCompiler.find(targets, cuda_floor, line_info)

    def portable(self, line_info: bool) -> bool:
        """Without line info no path reaches a Triton kernel's code."""
        return not line_info

    def folded(self, variant: Variant) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(variant.spec.states) if s in (ONE, NONE))

    def writes(self, built: Iterable[Artifact]) -> tuple[str, ...]:
        """What each compiled variant's TTIR writes (``Artifact.writes``), together."""
        return mutation.recorded(art.writes for art in built)

    def kept(self, cache_dir: Path) -> Kept:
        """The Triton releases kept for ``--triton`` (toolchain.py): each stamp says its size."""
        found = tuple((tool.path, size) for tool, size in toolchain.kept(cache_dir))
        return Kept(folder=toolchain.FOLDER, stamp=toolchain.STAMP, entries=found)

    def caller_launches(self, kernel: Kernel) -> bool:
        """``launch: triton``: launched as Triton launches it, ``kernel[grid](*args, **constexprs)``."""
        return kernel.triton is not None and kernel.triton.launch == "triton"


TRITON = Triton()
