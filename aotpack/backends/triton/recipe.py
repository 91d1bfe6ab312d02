"""Triton's part of a recipe (``recipe.readers.KernelReader``): its keys, its release (``triton:``), and
what only a Triton kernel has: the constexprs its function takes, its @triton.autotune configs and
@triton.heuristics, read by importing it (``introspect``), its num_warps, num_stages and options, and a
``launch: triton`` kernel, what ``aotpack record`` writes: the variants and autotuner picks it recorded."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ... import expr, facts, recorded
from ...errors import RecipeError, ToolNotFound
from ...limits import MAX_RECORDED_VARIANTS, MAX_STAGES, MAX_WARPS
from ...model import (  # fmt: skip
    TRITON_DEFAULT_STAGES,
    TRITON_DEFAULT_WARPS,
    Arg,
    Config,
    ConstValue,
    CudaLaunch,
    DtypeConst,
    FunctionConst,
    Kernel,
    Pick,
    Point,
    Source,
    TritonKernel,
)
from ...recipe import args as _args
from ...recipe import fields as _fields
from ...recipe import sources as _sources
from ...recipe import yamlnodes
from ...recipe.args import TypeVars
from ...recipe.kernel import CONFIG_LAUNCH, kernel_targets
from ...recipe.readers import Grid, Jit, KernelEntry
from ...recipe.yamlnodes import Node, suggest
from ...runtime._aotpack_identity import identity
from ...states import LETTER, NONE, SpecRule, State, letters
from ...values import Widened, constexpr_problem, widened
from . import introspect, releases, toolchain

TITLE = "Triton"
KEYS: tuple[str, ...] = (
    "triton",
    "constexprs",
    "num_warps",
    "num_stages",
    "options",
    "classes",
    "launch",
    "variants",
    "autotuned",
)
SOURCE = "a @triton.jit function"
RECIPE_KEYS: tuple[str, ...] = ("triton",)
SPECIALIZATION = SpecRule(jit=True, recorded=False, by_level=False)  # on what the JIT keys each argument
_RECORDED = SpecRule(jit=True, recorded=True, by_level=False)  # `launch: triton`: the classes that were recorded

# what a `launch: triton` kernel takes: the caller gives the grid and the config, so no dispatch
_OPTION_KEYS = ("enable_fp_fusion", "maxnreg", "num_ctas", "launch_pdl", "launch_cooperative_grid")
_BOOL_OPTIONS = ("enable_fp_fusion", "launch_pdl", "launch_cooperative_grid")


def release(top: Mapping[str, Node]) -> str | None:
    """``triton:``, the release a build uses."""
    return triton_release(top["triton"]) if "triton" in top else None


def wanted_triton(path: Path) -> str | None:
    """The recipe's ``triton:``, read before anything imports Triton (the build may use another release)."""
    root = yamlnodes.read(path, "recipe")
    found = [node for key, node, _ in root.items() if key == "triton"] if root.is_mapping() else []
    return triton_release(found[0]) if found else None


def triton_release(node: Node) -> str:
    """``triton: "3.8"``: the release a build uses (as written: YAML would read 3.10 as 3.1)."""
    text = str(node.raw())
    try:
        toolchain.Request.parse(text)
    except ValueError as exc:
        raise node.fail(str(exc)) from None
    return text


def claim(entry: KernelEntry) -> Kernel | None:
    """A ``launch: triton`` entry, read whole; a recording's keys are refused anywhere else."""
    k = entry.keys
    if "launch" in k:
        return _launched_kernel(entry)
    for listing in ("variants", "autotuned"):
        if listing in k:
            raise k[listing].fail(f"{listing!r} lists what a recording saw; it needs 'launch: triton'")
    return None


def source(entry: KernelEntry) -> Source:
    return _fields.source(entry.keys["triton"], entry.root)


def targets(entry: KernelEntry) -> tuple[str, ...]:
    return kernel_targets(entry, problem=partial(_unbuildable, entry.name))


def _unbuildable(name: str, target: str) -> str | None:
    if facts.archs()[target].triton:
        return None
    return (f"Triton cannot build {target!r} (kernel {name!r}): it builds 9.0 and newer only as the arch-specific "
            f"target; use '{target}a'")  # fmt: skip


def fields(entry: KernelEntry, source: Source) -> TritonFields:
    return TritonFields(entry=entry, info=_describe(entry.keys["triton"], source))


@dataclass(frozen=True, kw_only=True)
class TritonFields:
    """A Triton kernel's own fields (``recipe.readers.KernelFields``), read with what its function says."""

    entry: KernelEntry
    info: introspect.KernelInfo

    @property
    def grid_key(self) -> str:
        return "constexprs"

    @property
    def dtype_constexprs(self) -> bool:
        return True

    @property
    def autotuner_key(self) -> tuple[str, ...]:
        return self.info.key

    @property
    def autotune_problem(self) -> str | None:
        reset = (*self.info.reset_to_zero, *self.info.restore_value)
        if not reset:
            return None
        return (f"the kernel's @triton.autotune resets or restores arguments between runs ({', '.join(reset)}), "
                "which runtime tuning cannot do; tune it with aotpack tune, which does")  # fmt: skip

    @property
    def specialize_problem(self) -> str | None:
        return None

    def jit(
        self, args: list[Arg], grid: Grid, bound_nodes: list[tuple[str, Node]], dtype_consts: list[tuple[str, str]]
    ) -> Jit:
        k = self.entry.keys
        args = _jit_args(k["args"], args, self.info)
        fixed, heuristics, tuned = _jit_constexprs(k, self.info, grid, bound_nodes, dtype_consts)
        return Jit(args=tuple(args), fixed=fixed, heuristics=tuple(heuristics), tuned=tuned)

    def warps_and_stages(self) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        k = self.entry.keys
        warps = (_fields.int_list(k["num_warps"], power_of_two=True, maximum=MAX_WARPS)
                 if "num_warps" in k else (TRITON_DEFAULT_WARPS,))  # fmt: skip
        stages = (_fields.int_list(k["num_stages"], maximum=MAX_STAGES)
                  if "num_stages" in k else (TRITON_DEFAULT_STAGES,))  # fmt: skip
        return warps, stages

    def launch(
        self, check: Callable[[expr.Expr], None], typevars: set[str], defines: tuple[str, ...], args: Sequence[Arg]
    ) -> CudaLaunch | None:
        return None

    def triton(
        self, fixed: tuple[tuple[str, ConstValue], ...], dtype_constexprs: tuple[tuple[str, str], ...]
    ) -> TritonKernel:
        options = _options(self.entry.keys["options"]) if "options" in self.entry.keys else ()
        return TritonKernel(options=options, fixed_constexprs=fixed, dtype_constexprs=dtype_constexprs,
                            reset_to_zero=self.info.reset_to_zero, restore_value=self.info.restore_value,
                            loops=self.info.loops)  # fmt: skip


def _describe(node: Node, source: Source) -> introspect.KernelInfo:
    """Import the kernel and read it as Triton does; every failure is located at ``triton:``."""
    try:
        obj = _sources.load(source)
    except BaseException as exc:  # the user's module: ImportError, SyntaxError, SystemExit, anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        failed = node.fail(f"importing {node.string()} failed: {type(exc).__name__}: {exc}")
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").partition(".")[0] == "triton":
            raise ToolNotFound(f"{failed}; {releases.not_installed()}", extra="triton") from None
        raise failed from None
    if obj is None:
        raise node.fail(f"{node.string().rpartition(':')[0]} has no {source.function!r}")
    try:
        return introspect.describe(obj)
    except introspect.IntrospectError as exc:
        raise node.fail(f"{node.string()} {exc}") from None


def _jit_args(node: Node, args: list[Arg], info: introspect.KernelInfo) -> list[Arg]:
    """The recipe's arguments checked against the kernel's runtime parameters, each given the
    specialization states the JIT can key it on."""
    runtime = [p.name for p in info.params if not p.constexpr]
    declared = [a.name for a in args if not a.launch_only]
    if runtime != declared:
        raise node.fail(
            f"list the kernel's runtime parameters in its order: {', '.join(runtime)} (the recipe has "
            f"{', '.join(declared)}; mark arguments the kernel does not take 'launch_only: true')"
        )
    out = []
    for arg in args:
        if arg.launch_only or arg.jit_states == ("",):  # not passed, or `specialize: false`
            out.append(arg)
            continue
        p = info.param(arg.name)
        states = p.pointer_states if arg.pointer else p.int_states if len(arg.jit_states) > 1 else ("",)
        out.append(dataclasses.replace(arg, jit_states=states))
    return out


def _jit_constexprs(
    k: dict[str, Node],
    info: introspect.KernelInfo,
    constexprs: list[tuple[str, tuple[ConstValue, ...]]],
    bound_nodes: list[tuple[str, Node]],
    dtype_consts: list[tuple[str, str]],
) -> tuple[tuple[tuple[str, ConstValue], ...], list[tuple[str, str]], tuple[Config, ...]]:
    """Where each constexpr of the kernel gets its value: the recipe's grid, the autotuner's configs
    (when the recipe gives no grid of its own for them), a heuristic (bound to the call), or the
    default in the kernel's signature. Adds heuristics to ``constexprs`` (their values) and returns
    (fixed signature defaults, heuristic bound expressions, the autotuner's configs)."""
    at = k.get("constexprs") or k["triton"]
    kernel_consts = [p.name for p in info.params if p.constexpr]
    given = {n for n, _ in constexprs} | {n for n, _ in dtype_consts}
    extra = sorted(given - set(kernel_consts))
    if extra:
        what = "is not a tl.constexpr parameter" if len(extra) == 1 else "are not tl.constexpr parameters"
        raise at.fail(f"{', '.join(extra)} {what} of {k['triton'].string()}")
    tuned = _autotuned(k, info, given)
    given |= {n for c in tuned for n, _ in c.constexprs}
    heuristics = _heuristics(k["triton"], info, constexprs, bound_nodes, given)
    fixed = []
    for p in info.params:
        if p.constexpr and p.name not in given:
            if not p.has_default or not isinstance(p.default, (int, float, bool, str)):
                raise at.fail(f"give values for {p.name} (a tl.constexpr of {k['triton'].string()} without a default)")
            fixed.append((p.name, p.default))
    return tuple(fixed), heuristics, tuned


def _autotuned(k: dict[str, Node], info: introspect.KernelInfo, given: set[str]) -> tuple[Config, ...]:
    """The configs of the kernel's @triton.autotune, where the recipe gives no grid of its own for them."""
    tuned_names = {n for c in info.configs for n, _ in c.kwargs}
    if not info.configs or tuned_names & given or "num_warps" in k or "num_stages" in k:
        return ()
    if any(c.options for c in info.configs) or len({tuple(n for n, _ in c.kwargs) for c in info.configs}) > 1:
        raise k["triton"].fail("the autotuner's configs differ in their keys or set num_ctas/maxnreg; give the "
                               "config grid in the recipe (constexprs, num_warps, num_stages)")  # fmt: skip
    return tuple(Config(constexprs=tuple((n, _plain(v)) for n, v in c.kwargs), num_warps=c.num_warps,
                        num_stages=c.num_stages) for c in info.configs)  # fmt: skip


def _heuristics(
    node: Node, info: introspect.KernelInfo, constexprs: Grid, bound_nodes: list[tuple[str, Node]], given: set[str]
) -> list[tuple[str, str]]:
    """The kernel's @triton.heuristics as (name, expression) bound to the call; a true/false test the
    recipe gives no values for gets (False, True) in ``constexprs``."""
    heuristics: list[tuple[str, str]] = []
    recipe_bound = {n for n, _ in bound_nodes}
    for h in info.heuristics:
        if h.name in recipe_bound:
            continue  # the recipe's own `equals:` wins
        if h.expression is None:
            raise node.fail(f"heuristic {h.name!r} cannot be read ({h.reason}); give it in 'constexprs' as "
                            f"{h.name}: {{values: [...], equals: <expression over the arguments>}}")  # fmt: skip
        if h.name not in given:
            if not expr.is_boolean(expr.parse(h.expression)):
                raise node.fail(f"heuristic {h.name!r} ({h.expression}) is not a true/false test: list the "
                                f"values it can take in 'constexprs' ({h.name}: [...])")  # fmt: skip
            constexprs.append((h.name, (False, True)))
            given.add(h.name)
        heuristics.append((h.name, h.expression))
    return heuristics


def _plain(value: Any) -> ConstValue:
    if isinstance(value, (int, float, bool, str)):
        return value
    raise RecipeError(f"an autotune config value {value!r} is not a number, boolean or string")


def _options(node: Node) -> tuple[tuple[str, ConstValue], ...]:
    fields = node.mapping(_OPTION_KEYS)
    out: list[tuple[str, ConstValue]] = []
    for name, value in fields.items():
        out.append((name, value.boolean() if name in _BOOL_OPTIONS else value.integer(minimum=1)))
    return tuple(sorted(out))


def _launched_kernel(entry: KernelEntry) -> Kernel:
    """A ``launch: triton`` kernel (what ``aotpack record`` writes): launched with Triton's syntax, the
    caller giving the grid, the constexprs and the launch options; built as exactly the variants
    listed (types, config, the JIT's specialization class)."""
    name, k, node, root = entry.name, entry.keys, entry.node, entry.root
    if k["launch"].string() != "triton":
        raise k["launch"].fail(f"unknown launch {k['launch'].string()!r} (expected: triton)")
    for key in k:
        if key not in recorded.KERNEL_KEYS:
            raise k[key].fail(f"a 'launch: triton' kernel takes no {key!r}: the caller gives the grid and the "
                              f"config (it takes {', '.join(recorded.KERNEL_KEYS)})")  # fmt: skip
    if "triton" not in k or "variants" not in k:
        raise node.fail("a 'launch: triton' kernel needs 'triton' (its @triton.jit function) and 'variants'")
    source = _fields.source(k["triton"], root)
    chosen = targets(entry)
    types = _args.type_variables(k["types"]) if "types" in k else []
    typevars = dict(types)
    info = _describe(k["triton"], source)
    constexpr_names = tuple(p.name for p in info.params if p.constexpr)
    args = _args.read(k["args"], typevars, constexpr_names)
    for arg in args:
        if arg.has_default or arg.extent is not None or arg.launch_only or arg.hint is not None:
            raise RecipeError(f"kernels.{name}.args.{arg.name}: a 'launch: triton' argument takes a plain type "
                              "(the JIT's own specialization is recorded per variant)", arg.where)  # fmt: skip
    args = _jit_args(k["args"], args, info)
    points = _points(k["variants"], args, types, constexpr_names, root, dict(entry.widen))
    optional = {a.name for p in points for a, st in zip(args, p.states, strict=True) if st == NONE}
    args = [dataclasses.replace(a, optional=a.name in optional) for a in args]
    configs = tuple(dict.fromkeys(p.config for p in points))
    return Kernel(
        name=name, backend="triton", specialization=_RECORDED, source=source,
        doc=_fields.text(k["doc"], one_line=False) if "doc" in k else "",
        args=tuple(args), types=tuple(types), constexpr_names=constexpr_names, configs=configs, default=configs[0],
        grid=(expr.Num(1), expr.Num(1), expr.Num(1)), key=(), bucket="exact", rules=(), targets=chosen,
        triton=TritonKernel(
            options=_options(k["options"]) if "options" in k else (), launch="triton", points=tuple(points),
            signature=tuple(p.name for p in info.params),
            defaults=tuple((p.name, p.default) for p in info.params
                           if p.has_default and (p.default is None or isinstance(p.default, (int, float, bool, str)))),
            picks=_picks(k["autotuned"], root, tuple(p.name for p in info.params)) if "autotuned" in k else (),
            identity=identity(introspect.unwrap(_sources.load(source))),
        ),
        where=entry.where,
    )  # fmt: skip


def _points(node: Node, args: list[Arg], types: TypeVars, names: tuple[str, ...], root: Path,
            widen: dict[str, tuple[Widened, ...]]) -> list[Point]:  # fmt: skip
    """``variants:``: what a recording saw compiled, each listed once, and each row widened as the recipe's
    ``widen:`` says. A variant two rows of single values give is refused (a row copied by hand); one that a
    product gives again is built once: the products of rows widened overlap (rows ``bs: 1`` and ``bs: 2``
    widened to ``[1, 2, 4]`` are one product)."""
    points: list[Point] = []
    seen: dict[tuple[Any, ...], tuple[Node, bool]] = {}
    for row in node.sequence():
        for point, alone in _point(row, args, types, names, root, widen):
            ident = (point.binding, point.config, point.states)
            if ident in seen and alone and seen[ident][1]:
                raise row.fail(f"the same variant is listed twice (first at line {seen[ident][0].where.line})")
            if ident in seen:
                continue
            seen[ident] = (row, alone)
            points.append(point)
        if len(points) > MAX_RECORDED_VARIANTS:
            raise row.fail(f"more than {MAX_RECORDED_VARIANTS} variants: widen fewer constexprs, or by fewer values")
    if not points:
        raise node.fail("expected at least one variant")
    return points


def _picks(node: Node, root: Path, params: tuple[str, ...]) -> tuple[Pick, ...]:
    """``autotuned:``: the autotuner's pick per key, each key once."""
    picks: dict[tuple[Any, ...], Pick] = {}
    for row in node.sequence():
        pick = _pick(row, root, params)
        if pick.key in picks:
            raise row.fail("this key is already picked above (one config per autotuner key)")
        picks[pick.key] = pick
    return tuple(picks.values())


def _pick(row: Node, root: Path, params: tuple[str, ...]) -> Pick:
    fields = row.mapping(recorded.PICK_KEYS, required=recorded.PICK_KEYS)
    key = tuple(_recorded_const(v, root) for v in fields["key"].sequence())
    config = fields["config"].mapping(())
    for name, _, where in fields["config"].items():
        if name not in CONFIG_LAUNCH and name not in params:
            raise RecipeError(f"{fields['config'].path}: {name!r} is neither an argument of the kernel nor a "
                              f"launch option{suggest(name, [*params, *CONFIG_LAUNCH])}", where)  # fmt: skip
    kwargs = tuple((n, _recorded_const(v, root)) for n, v in config.items() if n not in CONFIG_LAUNCH)
    warps = config["num_warps"].integer(minimum=1) if "num_warps" in config else TRITON_DEFAULT_WARPS
    stages = _stages(config["num_stages"]) if "num_stages" in config else TRITON_DEFAULT_STAGES
    return Pick(key=key, kwargs=kwargs, num_warps=warps, num_stages=stages)


def _point(row: Node, args: list[Arg], types: list[tuple[str, tuple[str, ...]]], names: tuple[str, ...], root: Path,
           widen: dict[str, tuple[Widened, ...]]) -> list[tuple[Point, bool]]:  # fmt: skip
    """A ``variants:`` row: its variant, or the product of the values a constexpr given as a list takes (a
    deployment's set of batch sizes, say: ``aotpack record --widen``), a constexpr the recipe's ``widen:`` names
    taking its values too; each with whether it is the variant the row writes alone (each constexpr one value)."""
    fields = row.mapping(recorded.ROW_KEYS, required=recorded.ROW_REQUIRED)
    binding: list[tuple[str, str]] = []
    given = fields["types"].mapping(tuple(v for v, _ in types)) if "types" in fields else {}
    for var, choices in types:
        if var not in given:
            raise row.fail(f"give the dtype of type variable {var!r} in 'types'")
        dtype = given[var].string()
        if dtype not in choices:
            raise given[var].fail(f"{dtype!r} is not one of {var}'s dtypes ({', '.join(choices)})")
        binding.append((var, dtype))
    cfg = fields["config"].mapping((*names, *CONFIG_LAUNCH), required=names)
    warps = cfg["num_warps"].integer(minimum=1) if "num_warps" in cfg else TRITON_DEFAULT_WARPS
    if warps & (warps - 1) or warps > MAX_WARPS:
        raise cfg["num_warps"].fail(f"expected a power of two up to {MAX_WARPS}, got {warps}")
    stages = _stages(cfg["num_stages"]) if "num_stages" in cfg else TRITON_DEFAULT_STAGES
    written = [[_recorded_const(v, root) for v in cfg[n].sequence()] if cfg[n].is_sequence()
               else [_recorded_const(cfg[n], root)] for n in names]  # fmt: skip
    values = [widened(have, list(widen[n])) if n in widen else have for n, have in zip(names, written, strict=True)]
    if math.prod(len(v) for v in values) > MAX_RECORDED_VARIANTS:
        raise cfg[names[0]].fail(f"the widened values make more than {MAX_RECORDED_VARIANTS} variants")
    alone = tuple(v[0] for v in written) if all(len(v) == 1 for v in written) else None  # its variant, if one
    configs = [(Config(constexprs=tuple(zip(names, combo, strict=True)), num_warps=warps, num_stages=stages),
                combo == alone) for combo in itertools.product(*values)]  # fmt: skip
    runtime = [a for a in args if not a.launch_only]
    spelled = letters(fields["class"].string(), [a.name for a in runtime])
    if isinstance(spelled, str):
        raise fields["class"].fail(spelled)
    states: list[State] = []
    for arg, state in zip(runtime, spelled, strict=True):
        # what the JIT keys it on, and None (a call may leave an integer out as it may a pointer: Triton folds it)
        allowed = {""} if arg.descriptor else {"", NONE, *arg.jit_states} if arg.pointer else {NONE, *arg.jit_states}
        if state not in allowed:
            raise fields["class"].fail(f"argument {arg.name} cannot be {LETTER[state]!r} (the JIT keys it on "
                                       f"{', '.join(s or '_' for s in arg.jit_states)})")  # fmt: skip
        states.append(state)
    launches = fields["launches"].integer(minimum=0) if "launches" in fields else 0
    return [(Point(binding=tuple(binding), config=c, states=tuple(states), launches=launches), mine)
            for c, mine in configs]  # fmt: skip


_RECORDED_TAGS = ("dtype", "torch_dtype", "tuple", "function")


def _triton_dtype(name: str) -> bool:
    """Whether Triton knows a dtype by this name (as ``str(tl.float16)`` writes it: ``fp16``)."""
    import triton.language as tl

    try:
        tl.dtype(name)
    except (AssertionError, ValueError, TypeError, KeyError):
        return False
    return True


def _stages(node: Node) -> int:
    """A row's or pick's num_stages: 1 to ``limits.MAX_STAGES``."""
    stages = node.integer(minimum=1)
    if stages > MAX_STAGES:
        raise node.fail(f"expected num_stages from 1 to {MAX_STAGES} (aotpack's limits.MAX_STAGES), got {stages}")
    return stages


def _recorded_const(node: Node, root: Path) -> ConstValue:
    """A constexpr's value as a recording writes it: a number, boolean, string or null, or one of
    ``{dtype: fp16}`` (Triton's dtype), ``{torch_dtype: float16}``, ``{tuple: [...]}`` and
    ``{function: module:name}`` (a @triton.jit function, or ``kernels/file.py:name``)."""
    if not node.is_mapping():
        value = node.scalar()
        problem = constexpr_problem(value) if value is not None else None
        if problem is not None:
            raise node.fail(problem)
        assert value is None or isinstance(value, (int, float, bool, str))  # (what constexpr_problem lets through)
        return value
    fields = node.mapping(_RECORDED_TAGS)
    if len(fields) != 1:
        raise node.fail(f"expected one of {', '.join(_RECORDED_TAGS)}")
    ((tag, value),) = fields.items()
    if tag == "tuple":
        return tuple(_recorded_const(item, root) for item in value.sequence())
    if tag == "function":
        source = _fields.source(value, root)
        fn = introspect.unwrap(_sources.load(source))
        if fn is None:
            raise value.fail(f"{value.string()} is not a @triton.jit function")
        return FunctionConst(source=source, identity=identity(fn))
    name = value.string()
    if tag == "dtype" and not _triton_dtype(name):
        raise value.fail(f"unknown Triton dtype {name!r} (Triton's names: fp16, bf16, fp32, int32, ...)")
    if tag == "torch_dtype" and not _fields.IDENT.match(name):
        raise value.fail(f"{name!r} is not a torch dtype's name")
    return DtypeConst(name=name, torch=tag == "torch_dtype")
