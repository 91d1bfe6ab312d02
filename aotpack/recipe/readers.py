"""What a backend reads of a recipe, behind one ``KernelReader`` protocol: the keys it takes and the fields
only its kernels have. ``read.load`` is given the readers by name (``backends/recipes.py`` holds them), so
that the recipe reader imports no backend, and a new backend adds its keys in its own folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .. import expr
from ..errors import Location
from ..model import Arg, Backend, Config, ConstValue, CudaLaunch, Kernel, Source, TritonKernel, Widen
from ..states import SpecRule
from .yamlnodes import Node

Grid = list[tuple[str, tuple[ConstValue, ...]]]  # constexpr names and their values, in the recipe's order


@dataclass(frozen=True, kw_only=True)
class KernelEntry:
    """A kernel's entry of the recipe, its keys checked against every backend's, and where it stands."""

    name: str
    keys: dict[str, Node]
    node: Node
    where: Location
    root: Path  # the recipe's folder: paths in the entry are relative to it
    targets: tuple[str, ...]  # the recipe's, where the entry gives none
    targets_at: Node | None
    widen: Widen = ()  # the recipe's ``widen:``: what each row of a kernel built from a recording takes too


@dataclass(frozen=True, kw_only=True)
class Jit:
    """What a backend's own reading makes of a kernel's arguments and constexprs (Triton: its function's
    signature, @triton.autotune and @triton.heuristics)."""

    args: tuple[Arg, ...]
    fixed: tuple[tuple[str, ConstValue], ...] = ()  # constexprs outside the grid, from the signature's defaults
    heuristics: tuple[tuple[str, str], ...] = ()  # constexprs bound to the call: (name, expression)
    tuned: tuple[Config, ...] = ()  # the autotuner's configs, where the recipe gives no grid of its own for them


class KernelFields(Protocol):
    """One kernel's fields that its backend reads, asked for in the order the recipe is checked (so that the
    first error in a recipe is always the same one)."""

    @property
    def grid_key(self) -> str:
        """The key that gives the config grid's values (Triton: 'constexprs', CUDA: 'defines')."""
        ...

    @property
    def dtype_constexprs(self) -> bool:
        """Whether a grid entry naming a type variable is a dtype constexpr that follows it."""
        ...

    @property
    def autotuner_key(self) -> tuple[str, ...]:
        """The key the kernel's source gives, where the recipe gives none."""
        ...

    @property
    def autotune_problem(self) -> str | None:
        """Why runtime tuning (``autotune: true``) cannot time this kernel, or None."""
        ...

    @property
    def specialize_problem(self) -> str | None:
        """Why the kernel takes no 'specialize', or None."""
        ...

    def jit(
        self, args: list[Arg], grid: Grid, bound_nodes: list[tuple[str, Node]], dtype_consts: list[tuple[str, str]]
    ) -> Jit:
        """The arguments checked against the kernel's source, and where its other constexprs get their values
        (adds those that take each truth value to ``grid``)."""
        ...

    def warps_and_stages(self) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        """The num_warps and num_stages of the config grid (None: the backend has none)."""
        ...

    def launch(
        self, check: Callable[[expr.Expr], None], typevars: set[str], defines: tuple[str, ...], args: Sequence[Arg]
    ) -> CudaLaunch | None:
        """How the kernel is built and launched where the recipe says it (CUDA), or None."""
        ...

    def triton(
        self, fixed: tuple[tuple[str, ConstValue], ...], dtype_constexprs: tuple[tuple[str, str], ...]
    ) -> TritonKernel | None:
        """What only a Triton kernel has (its options, the constexprs outside the grid, what its autotuner
        resets), or None; ``specialize`` and ``classes`` are read last, against the kernel."""
        ...


class KernelReader(Protocol):
    """A backend's part of reading a recipe (its module is one: ``backends/triton/recipe.py``)."""

    TITLE: str  # how messages name the backend: "Triton"
    KEYS: tuple[str, ...]  # the kernel keys it takes; the first, its name, gives the kernel's source
    SOURCE: str  # what the first key names: "a @triton.jit function"
    RECIPE_KEYS: tuple[str, ...]  # the recipe's own keys it reads (Triton: 'triton', its release)
    SPECIALIZATION: SpecRule  # how its kernels' code specializes (one it reads whole, ``claim``, says its own)

    def release(self, top: Mapping[str, Node]) -> str | None:
        """The release of its toolchain the recipe asks for (its ``RECIPE_KEYS``), or None."""
        ...

    def claim(self, entry: KernelEntry) -> Kernel | None:
        """An entry it reads whole, whatever its source key (Triton: ``launch: triton``), or None; refuses its
        keys given where they do not apply."""
        ...

    def source(self, entry: KernelEntry) -> Source:
        """The kernel's source, and what it needs to be read."""
        ...

    def targets(self, entry: KernelEntry) -> tuple[str, ...]:
        """The kernel's targets, each one the backend builds."""
        ...

    def fields(self, entry: KernelEntry, source: Source) -> KernelFields:
        """The reader of the kernel's own fields (Triton: imports the kernel and reads it as Triton does)."""
        ...


Readers = Mapping[Backend, KernelReader]  # every backend's reader, by its name
