"""What every backend shares: the ``BackendModule`` protocol (what it states to the generic stages), the
``Compiler`` protocol and what a compile produces (an ``Artifact`` with the facts the launcher needs, or a
``Pruned`` variant with the reason)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .. import facts
from ..model import Kernel
from ..plan.variants import Variant
from ..recipe.readers import KernelReader


@dataclass(frozen=True, kw_only=True)
class TmaLayout:
    """How the launcher encodes one host tensor descriptor (``cuTensorMapEncodeTiled``), as the
    compiler chose it: the box (outermost dimension first; it may be smaller than the recipe's
    block, which the kernel then loads in several boxes), swizzle and element type."""

    box: tuple[int, ...]
    swizzle: int  # CUtensorMapSwizzle
    elem_type: int  # CUtensorMapDataType (the host enum)
    elem_size: int


@dataclass(frozen=True, kw_only=True)
class LaunchNeeds:
    """What a launch must provide beyond grid, block and parameters."""

    scratch: tuple[int, int] = (0, 1)  # global scratch bytes per program and alignment
    profile_scratch: tuple[int, int] = (0, 1)  # the same for the profiler's buffer
    num_ctas: int = 1  # thread-block cluster size along x
    cooperative: bool = False
    pdl: bool = False  # programmatic dependent launch
    tma: tuple[TmaLayout, ...] | None = None  # per tensor-descriptor argument; None: passed decomposed


@dataclass(frozen=True)
class DriverFloor:
    """The oldest CUDA driver that loads a target's code (1000*major + 10*minor), and what set it."""

    cuda: int
    set_by: str  # the toolchain, such as "ptxas 12.2 (nvidia-cuda-nvcc-cu12 12.2.140)"


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A compiled variant: the cubin and what the launcher needs to know about it."""

    variant_id: str
    image: bytes
    entry: str
    shared: int  # dynamic shared memory a launch passes, when fixed at build time (Triton)
    static_shared: int  # shared memory the code declares itself (CUDA __shared__ arrays)
    num_warps: int  # 0 when the recipe gives the block shape (CUDA)
    registers: int = 0  # per thread, as ptxas allocated them (0: not known, or PTX)
    extra_pointer_params: int  # trailing pointer params the compiler adds (Triton: scratch buffers)
    needs: LaunchNeeds = LaunchNeeds()
    metadata: tuple[tuple[str, str], ...]  # compiler facts for the manifest, as text
    # the pointer arguments the code writes, read off Triton's TTIR (mutation.py); None: not known (CUDA)
    writes: tuple[str, ...] | None = None
    # the driver its code needs, set by the toolchain that built it: a CUDA X.Y toolchain's code is taken as
    # needing an X.Y driver (minor-version compatibility is not relied on); None: the target's own floor
    driver_floor: DriverFloor | None = None

    def blocks_per_sm(self, target: str) -> int:
        """How many blocks of this variant one multiprocessor of its target holds at once (0: not known: no
        registers from ptxas, PTX, or a block shape the recipe gives at the call)."""
        if self.registers <= 0 or self.num_warps <= 0:
            return 0
        arch = facts.target(target).arch
        return arch.blocks_per_sm(self.registers, self.num_warps, self.shared + self.static_shared)


@dataclass(frozen=True, kw_only=True)
class Pruned:
    """A variant that did not compile, with the reason. ``fatal``: it compiled, but needs what the
    runtime cannot give it; the build fails rather than ship the rest without it. The reason names no
    place in a recipe: it is cached, and serves every recipe that builds the same variant; a build
    reports it with its own recipe's place (the kernel's ``where``)."""

    variant_id: str
    reason: str
    fatal: bool = False


Outcome = Artifact | Pruned


class Compiler(Protocol):
    def versions(self) -> Mapping[str, str]:
        """Toolchain versions recorded in the manifest."""
        ...

    def check(self, kernels: Iterable[Kernel]) -> None:
        """Check the recipe against the kernel sources before compiling; raise RecipeError."""
        ...

    def compile(self, variant: Variant) -> Outcome:
        """Compile one variant (runs in a worker process)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Kept:
    """What a backend keeps in the build cache besides compiled variants (Triton: the releases ``--triton``
    installs), as the cache lists it: its folder under the cache's root, the file each entry there writes last
    (its mtime says when the entry was last used; a link in its place is counted as one), and the finished
    entries with their sizes."""

    folder: str
    stamp: str
    entries: tuple[tuple[Path, int], ...]


class BackendModule(Protocol):
    """What a backend states to the generic stages (cache, pipeline, codegen), so that none of them asks
    which backend a kernel has: its facts, its toolchain, and the decisions that depend on how its code is
    built and launched. ``backends.of(kernel)`` is the kernel's."""

    @property
    def recipe(self) -> KernelReader:
        """Its part of reading a recipe: its keys and its kernels' own fields (``backends/recipes.py``)."""
        ...

    @property
    def source_suffixes(self) -> frozenset[str]:
        """The suffixes of its source files: those beside a kernel (and in its include folders) are what
        the kernel may use (the cache's source digest, the manifest's provenance)."""
        ...

    def include_dirs(self, kernel: Kernel) -> tuple[Path, ...]:
        """Folders besides the kernel's own whose sources (searched recursively) the kernel may use."""
        ...

    @property
    def temp_prefixes(self) -> tuple[str, ...]:
        """What its compiles keep in the system's temporary folder, each named for its process
        (``_temp.temp_prefix``): a build removes those of killed processes."""
        ...

    def compiler(self, targets: tuple[str, ...], nvcc: str | None, line_info: bool, cuda_floor: int | None) -> Compiler:
        """Its compiler for these targets, found and checked now (targets, nvcc given by the user, keep line
        info, the CUDA driver floor)."""
        ...

    def portable(self, line_info: bool) -> bool:
        """Whether its code holds no path of the kernel's sources: its cache entries then serve any checkout
        holding the same files."""
        ...

    def folded(self, variant: Variant) -> tuple[int, ...]:
        """The arguments (indices) that are not parameters of the variant's code (folded into a constant)."""
        ...

    def writes(self, built: Iterable[Artifact]) -> tuple[str, ...] | None:
        """The pointer arguments the kernel's compiled code writes, or None where the backend cannot tell
        (the recipe's ``mutates:`` then says)."""
        ...

    def kept(self, cache_dir: Path) -> Kept | None:
        """What it keeps in the build cache at ``cache_dir``; None: nothing."""
        ...

    def caller_launches(self, kernel: Kernel) -> bool:
        """The kernel is launched with its backend's own syntax (the caller gives grid and config): it has a
        Python launcher and no dispatch call or C API."""
        ...
