"""What the CUDA backend states to the generic stages (``base.BackendModule``): a kernel's sources are .cu
files and their headers, whose paths ``__FILE__`` can carry into the code; nvcc folds no argument, and what
a kernel writes is what its recipe declares."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...model import Kernel
from ...plan.variants import Variant
from ..base import Artifact
from . import recipe
from .compiler import SCRATCH_TEMP, NvccCompiler


class Cuda:
    recipe = recipe
    source_suffixes = frozenset({".cu", ".cuh", ".h", ".hpp", ".hh", ".inc", ".inl"})
    temp_prefixes = (SCRATCH_TEMP,)

    def include_dirs(self, kernel: Kernel) -> tuple[Path, ...]:
        """The recipe's include folders (their headers)."""
        return kernel.cuda.include_dirs if kernel.cuda else ()

    def compiler(
        self, targets: tuple[str, ...], nvcc: str | None, line_info: bool, cuda_floor: int | None
    ) -> NvccCompiler:
        """nvcc finds its targets' support per variant; CUDA cubins keep no line info unless the recipe's
        nvcc_flags ask."""
        return NvccCompiler.find(nvcc, cuda_floor)

    def portable(self, line_info: bool) -> bool:
        return False

    def folded(self, variant: Variant) -> tuple[int, ...]:
        return ()

    def writes(self, built: Iterable[Artifact]) -> None:
        return None

    def kept(self, cache_dir: Path) -> None:
        return None

    def caller_launches(self, kernel: Kernel) -> bool:
        return False


CUDA = Cuda()
