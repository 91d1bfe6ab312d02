"""What a recipe says, as frozen data: the kernels, their arguments, config grids, dispatch rules and
tuning hooks. ``load`` (backends/recipes.py) makes it from YAML; every later stage (plan, compile, codegen, tune)
reads it and nothing writes it again."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from . import expr, facts
from .errors import Location
from .states import SpecRule, State

Backend = Literal["triton", "cuda"]
Bucket = Literal["exact", "pow2"]
Policy = Literal["common", "none", "all"]
Launch = Literal["call", "triton"]
Kind = Literal["tensor", "int", "float", "bool"]  # how a caller passes an argument

BUCKETS: tuple[Bucket, ...] = ("exact", "pow2")
POLICIES: tuple[Policy, ...] = ("common", "none", "all")
RESERVED_ARGS = ("stream", "variant")  # keywords every generated kernel takes
# Triton's own launch defaults: a Triton config, a recorded variant or an autotuner's pick that names no
# num_warps or num_stages gets these, as Triton's JIT gives them
TRITON_DEFAULT_WARPS = 4
TRITON_DEFAULT_STAGES = 3
# what every generated package defines itself (codegen/python.py): a kernel may not hide them
PACKAGE_NAMES = (
    "ClassMissWarning",
    "CudaError",
    "MissingVariant",
    "activate",
    "autotune",
    "coverage",
    "deactivate",
    "get_include",
    "select",
    "stats",
    "torch_ops",
    "warn_class_misses",
)
LAZY_NAMES = ("ops",)  # the package's attributes made on first use (not in __all__: * must not import torch)


@dataclass(frozen=True, kw_only=True)
class Source:
    """A kernel function: a file relative to the recipe, or an importable module."""

    path: Path | None
    module: str | None
    function: str

    def __str__(self) -> str:
        return f"{self.path or self.module}:{self.function}"


@dataclass(frozen=True)
class DtypeConst:
    """A dtype passed as a constexpr (recorded kernels): Triton's, by its name (``fp16`` is ``tl.float16``), or
    torch's (``float16`` is ``torch.float16``)."""

    name: str
    torch: bool = False


@dataclass(frozen=True)
class FunctionConst:
    """A @triton.jit function passed as a constexpr (recorded kernels), by where a build finds it, and its
    source identity (how a call's function is matched: runtime/_aotpack_identity.identity)."""

    source: Source
    identity: str


# a constexpr's value: plain, or (recorded kernels) None, a dtype, a @triton.jit function or a tuple of values
ConstValue = int | float | bool | str | None | DtypeConst | FunctionConst | tuple["ConstValue", ...]
# a recipe's ``widen:``: constexprs of its recorded kernels, each with the values every row of it takes too
Widen = tuple[tuple[str, tuple[int | float | bool | str, ...]], ...]


@dataclass(frozen=True, kw_only=True)
class Arg:
    """One runtime argument of a kernel, in the kernel's parameter order."""

    name: str
    pointer: bool
    dtype: str  # a dtype name, or the name of one of the kernel's type variables
    typevar: bool
    # What the hinted variant may assume, as in Triton's signatures: 16 = the address (pointers) or
    # value (integers) is a multiple of 16; 1 = the integer is 1 (Triton compiles it as a constant)
    hint: int | None
    required: bool = False  # the hint must hold (':16!'): calls that break it are refused, every variant assumes it
    default: expr.Expr | None = None  # scalars the caller may leave out
    extent: expr.Expr | None = None  # pointers: how many elements from the pointer the kernel may touch
    contiguous: bool = False
    launch_only: bool = False  # read by the grid, key or checks, not passed to the kernel
    # A tensor descriptor (``tensordesc<T[BM, BK]>``): the caller passes a tensor, the launcher builds
    # the descriptor; its block shape, each an integer or an integer constexpr. Empty: not one.
    block: tuple[int | str, ...] = ()
    # scalars: a float argument's constant default (``default`` then holds integer expressions only)
    float_default: float | None = None
    optional: bool = False  # a call may pass None (built as the JIT's None specialization)
    # What Triton's JIT can key this argument on ("D": 16-divisible or aligned, "1": equal to 1,
    # "": nothing); read from the kernel's Triton release for Triton kernels (see backends/triton/)
    jit_states: tuple[State, ...] = ("",)
    where: Location

    @property
    def descriptor(self) -> bool:
        return bool(self.block)

    @property
    def kind(self) -> Kind:
        """How a caller passes it: a tensor, or a Python int, float or bool (the dtype table's value)."""
        return "tensor" if self.pointer else facts.dtypes()[self.dtype].value

    @property
    def has_default(self) -> bool:
        return self.default is not None or self.float_default is not None


@dataclass(frozen=True, kw_only=True)
class Config:
    """One point of the tuning grid: constexpr values and launch options."""

    constexprs: tuple[tuple[str, ConstValue], ...]  # Triton constexprs, or CUDA -D defines
    num_warps: int | None  # Triton only
    num_stages: int | None  # Triton only

    @property
    def label(self) -> str:
        parts = [f"{k}={const_text(v)}" for k, v in self.constexprs]
        if self.num_warps is not None:
            parts += [f"w{self.num_warps}", f"s{self.num_stages}"]
        return ",".join(parts) or "base"

    def value(self, name: str) -> ConstValue:
        return dict(self.constexprs)[name]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """A dispatch-table row: for this key bucket (and arch, types, specialization), launch this config."""

    key: tuple[int, ...]
    config: Config
    arch: str | None
    types: tuple[tuple[str, str], ...] | None
    specialization: str | None = None  # a class name, or a hint level ('hinted', 'safe'); None: any
    median_us: tuple[tuple[str, float], ...] = ()  # a tuning table's row: every config's time at this key
    where: Location


@dataclass(frozen=True, kw_only=True)
class Tile:
    """A key dimension cut by an integer constexpr: across the grid (``cdiv(M, BLOCK_M)``) or along a loop
    of the kernel (``range(0, K, BLOCK_K)``)."""

    dim: int  # index into the kernel's key
    constexpr: str
    loop: bool


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """A selection rule's error on the keys a table measured, each predicted from the others: the
    measured time of the config it picks over the fastest one's."""

    points: int
    median: float
    worst: float
    worst_key: tuple[int, ...]
    over: int  # points past limits.SELECTION_SLACK


@dataclass(frozen=True, kw_only=True)
class Selection:
    """How the dispatcher picks a config for a key (aotpack/selection.py): the nearest table row's config
    (``neighbours`` 0), or each config's time predicted from the ``neighbours`` nearest measured rows,
    scaled by the call's work in the config's tiles over the row's to the power ``scale`` (0: not scaled),
    the programs of config c counted in waves of ``occupancy[c]`` per multiprocessor (0 or none: not), or of
    the blocks its variant for the call holds per multiprocessor (``own_occupancy``), each
    program's work the elements its loops' tiles cover plus ``fixed`` (0: its loops' trips)."""

    neighbours: int = 0
    scale: float = 0.0
    tiles: tuple[Tile, ...] = ()
    occupancy: tuple[int, ...] = ()  # per config (empty: none in waves)
    own_occupancy: bool = False  # programs in waves of each variant's own blocks per multiprocessor (not occupancy)
    fixed: int = 0  # a program's cost besides its loops, in elements of their tiles (0: work is their trips)
    sms: int = 0  # the tuning GPU's multiprocessors (the held-out error's; a call uses its own GPU's)
    held_out: HeldOut | None = None  # the rule's (None: no table measured enough keys)
    drawn: bool = False  # held_out is on the validation keys (Kernel.validation), not over the table's folds
    nearest: HeldOut | None = None  # the nearest-row rule's, on the same keys


NEAREST = Selection()


@dataclass(frozen=True, kw_only=True)
class Point:
    """One variant a recording saw compiled (``launch: triton`` kernels): its types, config and the
    JIT's specialization class, one state per argument (``D``, ``1``, ``N`` or nothing)."""

    binding: tuple[tuple[str, str], ...]
    config: Config
    states: tuple[State, ...]
    launches: int  # how often the recording launched it


@dataclass(frozen=True, kw_only=True)
class Pick:
    """What a kernel's @triton.autotune picked in a recording: for this key (its values, then the
    dtypes of its tensor arguments, as the autotuner keys its cache), this config."""

    key: tuple[ConstValue, ...]
    kwargs: tuple[tuple[str, ConstValue], ...]
    num_warps: int
    num_stages: int


@dataclass(frozen=True, kw_only=True)
class CudaLaunch:
    """What a CUDA kernel needs beyond the shared fields: how to build it and how to launch it."""

    entry: str  # a name, or a template such as "rmsnorm<{T}, {BLOCK}>" filled per variant
    include_dirs: tuple[Path, ...]
    nvcc_flags: tuple[str, ...]
    block: tuple[expr.Expr, expr.Expr, expr.Expr]
    shared: expr.Expr  # dynamic shared memory in bytes


@dataclass(frozen=True, kw_only=True)
class TritonKernel:
    """What a Triton kernel has beyond the shared fields: its compile and launch options, which classes of
    its JIT's specialization get built, the constexprs outside its config grid, what its @triton.autotune
    resets, and for a ``launch: triton`` kernel what its recording saw."""

    options: tuple[tuple[str, ConstValue], ...] = ()
    specialize: Policy = "common"  # which classes of the JIT's specialization get built (classes.specs)
    # classes the recipe asks for besides the typical ones (``classes:``), one state per argument
    classes: tuple[tuple[str, ...], ...] = ()
    # constexprs outside the config grid: defaults from the kernel's signature, and dtype constexprs that
    # follow a type variable (name, type variable)
    fixed_constexprs: tuple[tuple[str, ConstValue], ...] = ()
    dtype_constexprs: tuple[tuple[str, str], ...] = ()
    # from the kernel's @triton.autotune: arguments aotpack tune zeroes / restores between runs
    reset_to_zero: tuple[str, ...] = ()
    restore_value: tuple[str, ...] = ()
    # loops of its source stepping over a parameter by a constexpr (parameter, constexpr): tiles of the key
    loops: tuple[tuple[str, str], ...] = ()
    # `launch: triton`: launched as Triton launches it, kernel[grid](*args, **constexprs, num_warps=...):
    # the caller gives the grid and the constexprs; the recorded variants are built, with their floors
    launch: Launch = "call"
    points: tuple[Point, ...] = ()
    signature: tuple[str, ...] = ()  # launch: triton: the function's parameters in order (constexprs too)
    defaults: tuple[tuple[str, ConstValue], ...] = ()  # launch: triton: the signature's plain defaults
    picks: tuple[Pick, ...] = ()  # launch: triton: what its @triton.autotune picked in the recording
    identity: str = ""  # launch: triton: the function's source identity (activate() finds its call sites by it)


_TRITON_DEFAULTS = TritonKernel()  # what the plan reads of a kernel of another backend


@dataclass(frozen=True, kw_only=True)
class TuneSpec:
    """How ``aotpack tune`` exercises a kernel: an inputs hook ``(key, types) -> (args, outputs)``
    (outputs: indexes of the arguments the kernel writes), an optional reference hook
    ``(args) -> [expected output tensors]``, the keys to tune and the accepted relative error."""

    inputs: Source
    reference: Source | None
    keys: tuple[tuple[int, ...], ...]
    rtol: float
    sample: int = 0  # keys spread over the log of the ranges (one (low, high) per key dimension; tune_keys.sampled)
    ranges: tuple[tuple[int, int], ...] = ()
    seed: int = 0
    refine: int = 0  # keys timed after those, where the fastest config changes between those (tune_keys.refinements)
    validate: int = 0  # keys drawn at random as calls are, timed to measure the rule at (tune_keys.validation)


@dataclass(frozen=True, kw_only=True)
class Kernel:
    name: str
    backend: Backend
    specialization: SpecRule  # how its code specializes (plan/classes.py), as its backend states it
    source: Source
    doc: str
    args: tuple[Arg, ...]
    types: tuple[tuple[str, tuple[str, ...]], ...]
    constexpr_names: tuple[str, ...]
    configs: tuple[Config, ...]
    default: Config
    grid: tuple[expr.Expr, expr.Expr, expr.Expr]
    key: tuple[tuple[str, expr.Expr], ...]
    bucket: Bucket
    rules: tuple[Rule, ...]
    targets: tuple[str, ...]
    cuda: CudaLaunch | None = None
    triton: TritonKernel | None = None
    tune: TuneSpec | None = None
    autotune: bool = False  # the kernel may run more than once per call (out of place): runtime tuning may time it
    mutates: tuple[str, ...] | None = None  # the pointer arguments it writes, as the recipe declares them
    # constexprs a call fixes: (name, expression); a config runs a call only when its value equals it
    bound: tuple[tuple[str, expr.Expr], ...] = ()
    selection: Selection = NEAREST  # set from the tuning tables' measurements (aotpack/selection.py)
    # a table's rows at keys drawn as calls are (tune: validate:): the held-out error of the rule chosen without
    # them is measured there; then they join ``rules`` (tables.fit)
    validation: tuple[Rule, ...] = ()
    where: Location

    def arg(self, name: str) -> Arg:
        return next(a for a in self.args if a.name == name)

    # what the plan reads of every kernel (plan/classes.py): a kernel of another backend has Triton's defaults
    @property
    def specialize(self) -> Policy:
        return (self.triton or _TRITON_DEFAULTS).specialize

    @property
    def classes(self) -> tuple[tuple[str, ...], ...]:
        return (self.triton or _TRITON_DEFAULTS).classes

    @property
    def points(self) -> tuple[Point, ...]:
        return (self.triton or _TRITON_DEFAULTS).points

    @property
    def call_exprs(self) -> list[expr.Expr]:
        """The expressions the dispatcher evaluates for a call: grid, key, bound constexprs, and the
        arguments' defaults and extents (a CUDA launch's block and shared memory are its own)."""
        exprs = [*self.grid, *(e for _, e in self.key), *(e for _, e in self.bound)]
        return exprs + [e for a in self.args for e in (a.default, a.extent) if e is not None]

    @property
    def call_order(self) -> tuple[int, ...]:
        """Argument indices in Python's calling order: those without a default (in the recipe's order),
        then those with one. The binding, stubs, docs, torch schema and C API all follow it."""
        return tuple(sorted(range(len(self.args)), key=lambda i: self.args[i].has_default))

    @property
    def bindings(self) -> tuple[tuple[tuple[str, str], ...], ...]:
        """Every assignment of dtypes to the type variables (one empty binding if none)."""
        names = [n for n, _ in self.types]
        return tuple(tuple(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in self.types)))


@dataclass(frozen=True, kw_only=True)
class CacheEntry:
    """A kernel of Triton's cache that a caller other than the JIT (Inductor) compiled when the program was
    recorded: shipped as it is, served as a cache hit (recipe/triton_cache.py)."""

    name: str  # the kernel's
    key: str  # Triton's cache key, as its folder is named
    folder: Path
    files: tuple[str, ...]  # sorted
    triton: str  # the release that compiled it (its metadata's); "" for a module (.so), which has none
    target: str  # backend:arch, e.g. cuda:90; HOST: a module Triton built with a C compiler

    HOST: ClassVar[str] = "host"

    @property
    def module(self) -> bool:
        """A C module (a kernel launcher, the driver's utilities) built on the recording machine."""
        return self.target == self.HOST


@dataclass(frozen=True, kw_only=True)
class InductorSet:
    """torch.compile's caches one process of the recorded program saved (``recipe/inductor_cache.py``): shipped as
    they are, loaded by ``activate()`` (runtime/_aotpack_inductor.py)."""

    digest: str  # the sha256 of its bytes, as its files are named (<digest>.bin, <digest>.json)
    folder: Path
    torch: str  # the torch release that saved it
    size: int  # its bytes
    cpp_kernels: int = 0  # Inductor's C++ kernels for the CPU its graphs call for: built with a C++ compiler at load
    cpp_objects: tuple[str, ...] = ()  # the sha256 of each of their shared objects it holds (<sha256>.cpp), sorted

    @property
    def files(self) -> tuple[str, ...]:
        return f"{self.digest}.bin", f"{self.digest}.json", *(f"{o}.cpp" for o in self.cpp_objects)


@dataclass(frozen=True, kw_only=True)
class Project:
    """What ``[project]`` of the pyproject.toml beside a recipe adds to its metadata (``recipe/project.py``), as
    METADATA writes it."""

    path: Path  # the pyproject.toml
    summary: str | None  # description
    license: str | None  # an SPDX expression, normalized
    requires_python: str | None
    headers: tuple[tuple[str, str], ...]  # further METADATA fields (name, value), in the order written
    readme: tuple[str, str] | None  # (content type, text): the METADATA body
    license_files: tuple[tuple[str, bytes], ...]  # path inside the project -> bytes, for .dist-info/licenses/
    files: tuple[Path, ...]  # every file read: pyproject.toml, the readme, the license files


@dataclass(frozen=True, kw_only=True)
class Recipe:
    path: Path
    package: str
    version: str
    summary: str
    targets: tuple[str, ...]
    kernels: tuple[Kernel, ...]
    tables: tuple[Path, ...] = ()
    license: str | None = None  # an SPDX license expression, normalized
    cuda_floor: int | None = None  # the oldest CUDA driver the wheel must load on (1000*major + 10*minor)
    triton: str | None = None  # the Triton release to build with (X.Y or X.Y.Z; backends/triton/toolchain.py)
    widen: Widen = ()  # the constexprs every row of a `launch: triton` kernel takes these values of too
    triton_cache: tuple[CacheEntry, ...] = ()  # Triton cache entries shipped as they are (triton_cache:)
    inductor_cache: tuple[InductorSet, ...] = ()  # torch.compile's caches shipped as they are (inductor_cache:)
    project: Project | None = None  # [project] of the kernel project the recipe belongs to


def const_text(value: ConstValue) -> str:
    """A constexpr's value as variant ids and messages write it (``true``, ``tl.fp16``, ``(1,2)``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, DtypeConst):
        return f"{'torch' if value.torch else 'tl'}.{value.name}"
    if isinstance(value, FunctionConst):
        return value.source.function
    if isinstance(value, tuple):
        return "(" + ",".join(const_text(v) for v in value) + ")"
    return str(value)
