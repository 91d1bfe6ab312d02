"""YAML recipe -> validated, frozen ``model.Recipe``.

Read top-down: ``load`` reads the file (``yamlnodes``: every value keeps its position, so each error
names ``file:line:col``, the key path and what was expected; unknown keys get a "did you mean"
suggestion), ``_recipe`` reads the top level, ``_kernel`` a kernel in small steps (its backend and
source, constexpr grid, arguments, the Triton function's own constexprs, expressions, configs,
dispatch), ``_launched_kernel`` a recorded ``launch: triton`` kernel. Tuning tables merge in
``tables.apply``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import itertools
import keyword
import math
import re
import string
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import packaging.licenses
import packaging.version

from .. import expr, facts, limits
from ..backends.triton import introspect, toolchain
from ..errors import Location, RecipeError
from ..model import (  # fmt: skip
    BUCKETS,
    LAZY_NAMES,
    PACKAGE_NAMES,
    POLICIES,
    RESERVED_ARGS,
    Arg,
    Backend,
    Bucket,
    Config,
    ConstValue,
    CudaLaunch,
    DtypeConst,
    FunctionConst,
    Kernel,
    Pick,
    Point,
    Policy,
    Recipe,
    Rule,
    Source,
    TuneSpec,
    const_text,
)
from ..plan import classes
from ..plan.states import ANY, DIV16, NONE, ONE, State
from ..runtime import aot_kernels
from . import sources as _sources
from . import tables, yamlnodes
from .yamlnodes import Node, control_character, suggest

HINTS = (1, 16)
MAX_RECORDED_VARIANTS = 65536  # a `launch: triton` kernel's variants, widened rows multiplied out
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
# a module name that is also a distribution name (PEP 508: it starts and ends with a letter or digit)
_PACKAGE = re.compile(r"^[a-z]([a-z0-9_]*[a-z0-9])?$")
_TYPE = re.compile(r"^(?P<ptr>\*)?(?P<dtype>[A-Za-z_][A-Za-z_0-9]*)(?::(?P<hint>\d+)(?P<required>!)?)?$")
_DESC = re.compile(r"^tensordesc\s*<\s*(?P<dtype>[A-Za-z_][A-Za-z_0-9]*)\s*\[(?P<block>[^\]]*)\]\s*>$")
MAX_DESC_RANK = 5  # what cuTensorMapEncodeTiled takes
MAX_WARPS = 32  # 32 warps of 32 threads: CUDA's 1024 threads per block
_ALIASES = {"bool": "i1"}  # type names a recipe may use for dtypes of the table

_TOP_KEYS = ("package", "version", "summary", "license", "cuda", "triton", "targets", "kernels", "tables")
_TUNE_KEYS = ("inputs", "reference", "keys", "rtol")
_COMMON_KEYS = (
    "doc", "args", "types", "grid", "key", "bucket", "default", "dispatch", "targets", "tune", "autotune", "mutates",
    "specialize",
)  # fmt: skip
_TRITON_KEYS = ("triton", "constexprs", "num_warps", "num_stages", "options", "classes", "launch", "variants",
                "autotuned")  # fmt: skip
_CUDA_KEYS = ("cuda", "entry", "defines", "block", "shared", "include_dirs", "nvcc_flags", "gencode")
_KERNEL_KEYS = (*_TRITON_KEYS[:1], *_CUDA_KEYS[:1], *_COMMON_KEYS, *_TRITON_KEYS[1:], *_CUDA_KEYS[1:])
_ARG_KEYS = ("type", "default", "extent", "contiguous", "launch_only", "optional", "specialize")
_RULE_KEYS = ("key", "config", "arch", "types")
_POINT_KEYS = ("types", "config", "class", "launches")
# what a `launch: triton` kernel takes: the caller gives the grid and the config, so no dispatch
_LAUNCHED_KEYS = ("triton", "launch", "doc", "args", "types", "targets", "options", "variants", "autotuned")
_PICK_KEYS = ("key", "config")
_CLASS_LETTERS: dict[str, State] = {"D": DIV16, "1": ONE, "N": NONE, "_": ""}
_OPTION_KEYS = ("enable_fp_fusion", "maxnreg", "num_ctas", "launch_pdl", "launch_cooperative_grid")
_BOOL_OPTIONS = ("enable_fp_fusion", "launch_pdl", "launch_cooperative_grid")
_CONFIG_LAUNCH = ("num_warps", "num_stages")

Grid = list[tuple[str, tuple[ConstValue, ...]]]  # constexpr names and their values, in the recipe's order
TypeVars = list[tuple[str, tuple[str, ...]]]  # type variables and their dtypes


def load(path: str | Path) -> Recipe:
    """Read and validate a recipe file."""
    path = Path(path)
    return from_nodes(yamlnodes.read(path, "recipe"), path)


def parse(text: str, path: Path) -> Recipe:
    """Validate recipe text (``path`` names it in errors; its folder anchors relative paths)."""
    return from_nodes(yamlnodes.parse(text, path, "recipe"), path)


def from_nodes(root: Node, path: Path) -> Recipe:
    """Validate a recipe already read into nodes (``yamlnodes.parse``: a reader that checks more of it first)."""
    top = root.mapping(_TOP_KEYS, required=("package", "version", "kernels"))
    package = top["package"].string()
    problem = package_problem(package)
    if problem is not None:
        raise top["package"].fail(problem)
    version = _version(top["version"])
    targets = _targets(top["targets"]) if "targets" in top else ()
    kernels: list[Kernel] = []
    for name, node, where in top["kernels"].items():
        if not _IDENT.match(name) or keyword.iskeyword(name) or name.startswith("_"):
            raise RecipeError(f"kernel name {name!r} must be a Python identifier not starting with '_'", where)
        if name in PACKAGE_NAMES or name in LAZY_NAMES:
            raise RecipeError(f"kernel name {name!r} would hide the package's own {name!r}; rename the kernel", where)
        kernels.append(_kernel(name, node, where, path.parent, targets, top.get("targets")))
    if not kernels:
        raise top["kernels"].fail("the recipe lists no kernels")
    summary = f"Ahead-of-time compiled GPU kernels: {package}"
    if "summary" in top:
        summary = _text(top["summary"], one_line=True)
    table_paths: list[Path] = []
    for item in top["tables"].sequence(allow_scalar=True) if "tables" in top else ():
        table_path = _path(item, path.parent)
        try:
            kernels = tables.apply(tables.read(table_path), kernels, package)
        except tables.TableError as exc:
            raise item.fail(str(exc)) from None
        except RecipeError as exc:  # the file itself: where the recipe names it, and in it where there is a place
            raise exc if exc.where is not None else item.fail(str(exc)) from None
        table_paths.append(table_path)
    return Recipe(
        path=path, package=package, version=version, summary=summary, targets=targets, kernels=tuple(kernels),
        tables=tuple(table_paths), license=_license(top["license"]) if "license" in top else None,
        cuda_floor=_cuda_floor(top["cuda"]) if "cuda" in top else None,
        triton=triton_release(top["triton"]) if "triton" in top else None,
    )  # fmt: skip


_GENCODE = re.compile(r"^arch=compute_(?P<arch>\d+a?),code=(?P<code>(?:sm|compute)_\d+a?)$")


def package_problem(name: str) -> str | None:
    """Why ``name`` cannot name a kernel package (its module and its distribution), or None."""
    if len(name) > limits.MAX_NAME:
        return f"the package name has {len(name)} characters; at most {limits.MAX_NAME} (aotpack's limits.MAX_NAME)"
    if not _PACKAGE.fullmatch(name):  # not match: its $ would take a name ending in a newline
        return (f"{name!r} is not a valid package name (lower case letters, digits and _, starting with a letter, "
                "ending with a letter or digit)")  # fmt: skip
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword"
    if name in sys.stdlib_module_names:
        return f"{name!r} is a module of Python's standard library; choose another name"
    return None


def _targets(node: Node, gencode: bool = False) -> tuple[str, ...]:
    """Targets: 'sm_90a' (machine code); with ``gencode`` (CUDA kernels) also 'compute_90' (PTX the
    driver compiles at load) and nvcc's 'arch=compute_90a,code=sm_90a' form."""
    known = list(facts.archs())
    choices = [*known, *(f"compute_{a[3:]}" for a in known)] if gencode else known
    out: list[str] = []
    for item in node.sequence(allow_scalar=True):
        text = item.string()
        m = _GENCODE.match(text) if gencode else None
        if gencode and text.startswith("arch=") and "," not in text:
            raise item.fail(f"{text!r} is half of an nvcc gencode: YAML splits an unquoted 'arch=...,code=...' "
                            "inside [ ] at its comma; write it in quotes")  # fmt: skip
        if m:
            code_arch = m["code"].split("_")[1]
            if code_arch != m["arch"]:
                raise item.fail(f"{text!r}: aotpack builds each code for its own arch; use "
                                f"'arch=compute_{code_arch},code={m['code']}'")  # fmt: skip
            text = m["code"]
        if text not in choices:
            raise item.fail(f"unknown target {text!r}{suggest(text, choices, 'known')}")
        if text in out:
            raise item.fail(f"target {text!r} is listed twice")
        out.append(text)
    if not out:
        raise node.fail("expected at least one target")
    return tuple(out)


def _kernel_targets(
    name: str,
    k: dict[str, Node],
    node: Node,
    backend: Backend,
    recipe_targets: tuple[str, ...],
    targets_at: Node | None,
) -> tuple[str, ...]:
    """The kernel's targets (its own 'targets' or 'gencode', else the recipe's), each one its
    backend can build."""
    if "gencode" in k:
        if "targets" in k:
            raise k["gencode"].fail("give 'gencode' or 'targets', not both")
        targets = _targets(k["gencode"], gencode=True)
    else:
        targets = _targets(k["targets"]) if "targets" in k else recipe_targets
    if not targets:
        raise node.fail("no targets: set 'targets' in the recipe or in this kernel")
    for t in targets:
        if backend == "triton" and not facts.archs()[t].triton:
            at = k["targets"] if "targets" in k else targets_at or node
            raise at.fail(
                f"Triton cannot build {t!r} (kernel {name!r}): it builds 9.0 and newer only as the "
                f"arch-specific target; use '{t}a'"
            )
    return targets


# ---------------------------------------------------------------- a kernel, step by step


def _kernel(
    name: str, node: Node, where: Location, root: Path, recipe_targets: tuple[str, ...], targets_at: Node | None
) -> Kernel:
    k = node.mapping(_KERNEL_KEYS, required=("args",))
    if ("triton" in k) == ("cuda" in k):
        raise node.fail("give exactly one of 'triton' (a @triton.jit function) or 'cuda' (a .cu file)")
    if "launch" in k:
        return _launched_kernel(name, k, node, where, root, recipe_targets, targets_at)
    backend = _backend(k, node)
    source = _source(k["triton"], root) if backend == "triton" else _cuda_source(k["cuda"], root)
    targets = _kernel_targets(name, k, node, backend, recipe_targets, targets_at)
    types = _type_variables(k["types"]) if "types" in k else []
    info = _describe(k["triton"], source) if backend == "triton" else None
    grid_key = "constexprs" if backend == "triton" else "defines"
    constexprs, bound_nodes, dtype_consts = _constexpr_grid(k.get(grid_key), backend, dict(types))
    raw_args = _args(k["args"], dict(types), tuple(n for n, _ in constexprs))
    _check_type_variables(k, types, raw_args)
    heuristics: list[tuple[str, str]] = []
    tuned: tuple[Config, ...] = ()
    fixed: tuple[tuple[str, ConstValue], ...] = ()
    if info is not None:
        raw_args = _jit_args(k["args"], raw_args, info)
        fixed, heuristics, tuned = _jit_constexprs(k, name, info, constexprs, bound_nodes, dtype_consts)
    names = _Names.of(raw_args, constexprs, tuned)
    _check_argument_kinds(name, backend, raw_args, names.int_consts)
    # scalar defaults and pointer extents are checked after all args are known
    args = tuple(_arg_exprs(k["args"], raw_args, names.check(names.int_scalars)))
    bound = _bound(node, k.get(grid_key), bound_nodes, heuristics, names, source)
    grid = _grid(k["grid"], names.check(names.int_scalars | names.int_consts))
    key = _key(k, info, names)
    configs, constexpr_names = _configs(k, backend, constexprs, tuned)
    grid_values = [(n, tuple(dict.fromkeys(c.value(n) for c in configs))) for n in constexpr_names]
    default = _config_ref(k["default"], configs, grid_values) if "default" in k else configs[0]
    rules = () if "dispatch" not in k else _rules(
        k["dispatch"], configs, grid_values, key, targets, types, tuple(n for n, _ in bound))  # fmt: skip
    cuda = None
    if backend == "cuda":
        check = names.check(names.int_scalars | names.int_consts)
        cuda = _cuda_launch(k, root, check, {v for v, _ in types}, constexpr_names)
        _check_cuda_arity(k["args"], cuda.entry, source, args)
    kernel = Kernel(
        name=name, backend=backend, source=source, doc=_text(k["doc"], one_line=False) if "doc" in k else "",
        args=args, types=tuple(types), constexpr_names=constexpr_names, configs=configs, default=default, grid=grid,
        key=tuple(key), bucket=_bucket(k), rules=rules, targets=targets,
        options=_options(k["options"]) if "options" in k else (), cuda=cuda,
        tune=_tune(k["tune"], root, len(key)) if "tune" in k else None, autotune=_autotune(k, info),
        mutates=_mutates(k["mutates"], names.pointers) if "mutates" in k else None, bound=tuple(bound),
        specialize=_specialize(k, backend), fixed_constexprs=fixed, dtype_constexprs=tuple(dtype_consts),
        reset_to_zero=info.reset_to_zero if info else (), restore_value=info.restore_value if info else (),
        where=where,
    )  # fmt: skip
    return dataclasses.replace(kernel, classes=_classes(k["classes"], kernel)) if "classes" in k else kernel


def _classes(node: Node, kernel: Kernel) -> tuple[tuple[str, ...], ...]:
    """``classes:``: specialization classes to build besides the typical ones, each spelt as ``aotpack plan``,
    ``select()`` and a class-miss report spell it (one letter per argument the JIT keys)."""
    if kernel.specialize != "common":
        raise node.fail("'classes' adds to the common classes; it needs 'specialize: common' (the default)")
    out: list[tuple[str, ...]] = []
    for item in node.sequence():
        states = classes.read(kernel, item.string())
        if isinstance(states, str):
            raise item.fail(f"{item.string()!r}: {states}")
        out.append(states)
    return tuple(dict.fromkeys(out))


def _backend(k: dict[str, Node], node: Node) -> Backend:
    """Triton or CUDA, with the keys the other backend takes refused."""
    for recorded in ("variants", "autotuned"):
        if recorded in k:
            raise k[recorded].fail(f"{recorded!r} lists what a recording saw; it needs 'launch: triton'")
    if "grid" not in k:
        raise node.fail("missing required key 'grid'")
    backend: Backend = "triton" if "triton" in k else "cuda"
    other = _CUDA_KEYS if backend == "triton" else _TRITON_KEYS
    for other_key in other:
        if other_key in k:
            raise k[other_key].fail(f"{other_key!r} is for {'CUDA' if backend == 'triton' else 'Triton'} kernels")
    if backend == "cuda" and "entry" not in k:
        raise node.fail("a CUDA kernel needs 'entry': its __global__ function (or template instantiation)")
    return backend


def _constexpr_grid(
    node: Node | None, backend: Backend, typevars: dict[str, tuple[str, ...]]
) -> tuple[Grid, list[tuple[str, Node]], list[tuple[str, str]]]:
    """``constexprs:`` (Triton) or ``defines:`` (CUDA): each name's values, the names bound to the call
    (``{values: [...], equals: expression}``) and dtype constexprs that follow a type variable."""
    constexprs: Grid = []
    bound_nodes: list[tuple[str, Node]] = []
    dtype_consts: list[tuple[str, str]] = []
    for cname, values, c_at in node.items() if node is not None else ():
        if not _IDENT.match(cname):
            raise RecipeError(f"constexpr name {cname!r} is not an identifier", c_at)
        if backend == "triton" and values.is_scalar() and values.scalar() in typevars:
            dtype_consts.append((cname, values.scalar()))  # a dtype constexpr that follows a type variable
            continue
        if values.is_mapping():  # {values: [...], equals: expression}
            fields = values.mapping(("values", "equals"), required=("values", "equals"))
            values = fields["values"]
            bound_nodes.append((cname, fields["equals"]))
        vals = tuple(_const(v) for v in values.sequence(allow_scalar=True))
        if not vals or len(set(vals)) != len(vals):
            raise values.fail("expected a non-empty list of distinct values")
        constexprs.append((cname, vals))
    return constexprs, bound_nodes, dtype_consts


def _check_type_variables(k: dict[str, Node], types: TypeVars, args: list[Arg]) -> None:
    for var, _ in types:
        if not any(a.typevar and a.dtype == var for a in args):
            raise k["types"].fail(f"type variable {var!r} is used by no pointer argument")


def _check_argument_kinds(name: str, backend: Backend, args: list[Arg], int_consts: set[str]) -> None:
    """Descriptors and optional arguments are Triton's; a block dimension names an integer constexpr."""
    for arg in args:
        if arg.descriptor and backend == "cuda":
            raise RecipeError(f"kernels.{name}.args.{arg.name}: tensor descriptors are for Triton kernels", arg.where)
        for dim in arg.block:
            if isinstance(dim, str) and dim not in int_consts:
                raise RecipeError(
                    f"kernels.{name}.args.{arg.name}: block dimension {dim!r} must be an integer constexpr",
                    arg.where,
                )
        if arg.optional and backend == "cuda":
            raise RecipeError(f"kernels.{name}.args.{arg.name}: optional arguments are for Triton kernels", arg.where)


@dataclass(frozen=True)
class _Names:
    """The names a kernel's expressions may read, by kind."""

    pointers: set[str]
    optional: set[str]
    int_scalars: set[str]
    int_consts: set[str]  # constexprs whose values are all integers (or booleans)

    @staticmethod
    def of(args: list[Arg], constexprs: Grid, tuned: tuple[Config, ...]) -> _Names:
        tuned_values = [(n, tuple(c.value(n) for c in tuned)) for n, _ in (tuned[0].constexprs if tuned else ())]
        return _Names(
            pointers={a.name for a in args if a.pointer}, optional={a.name for a in args if a.optional},
            int_scalars={a.name for a in args if a.kind == "int"},
            int_consts={n for n, vals in [*constexprs, *tuned_values] if all(isinstance(v, int) for v in vals)},
        )  # fmt: skip

    def check(self, allowed: set[str]) -> Callable[[expr.Expr], None]:
        """A check that an expression reads only ``allowed`` names, and tensor calls only pointers."""

        def check(e: expr.Expr) -> None:
            for n in expr.names(e):
                if n.id not in allowed:
                    raise expr.ExprError(self._unknown(n.id, allowed), n.offset)
            for call in expr.tensor_calls(e):
                self._check_call(call)

        return check

    def _unknown(self, name: str, allowed: set[str]) -> str:
        if name in self.pointers:
            return f"{name!r} is a pointer argument; use numel({name}) or size({name}, 0)"
        near = difflib.get_close_matches(name, sorted(allowed), n=1)
        hint = f" — did you mean {near[0]!r}?" if near else ""
        return f"unknown name {name!r}{hint} (known: {', '.join(sorted(allowed)) or 'none'})"

    def _check_call(self, call: expr.Call) -> None:
        target = cast(expr.Name, call.args[0])
        if call.func in ("size", "stride") and isinstance(call.args[1], expr.Num):
            dim = call.args[1].value
            if not 0 <= dim < limits.MAX_DIMS:
                raise expr.ExprError(f"dimension {dim} of {target.id}: tensors have 0 to "
                                     f"{limits.MAX_DIMS - 1}", call.args[1].offset)  # fmt: skip
        if call.func == "none" and target.id not in self.optional:
            raise expr.ExprError(f"none() needs an optional argument, not {target.id!r}", target.offset)
        if target.id not in self.pointers and call.func != "none":
            raise expr.ExprError(f"{call.func}() needs a pointer argument, not {target.id!r}", target.offset)


def _expression(node: Node, check: Callable[[expr.Expr], None]) -> expr.Expr:
    """An integer expression (``expr``), checked by ``check``; errors point into the expression."""
    value = node.scalar()
    try:
        parsed = expr.parse(value) if isinstance(value, (int, str)) else None
        if parsed is None:
            raise expr.ExprError(f"expected an integer expression, got {value!r}", 0)
        check(parsed)
    except expr.ExprError as exc:
        where = node.where
        at = Location(where.file, where.line, where.column + int(node.quoted) + exc.offset)
        hint = ""
        if isinstance(value, str) and value.count("(") > value.count(")"):
            hint = " (inside a YAML [...] list, quote an expression that contains a comma)"
        raise RecipeError(f"{node.path}: {exc}{hint}", at) from None
    return parsed


def _bound(
    node: Node,
    grid_node: Node | None,
    bound_nodes: list[tuple[str, Node]],
    heuristics: list[tuple[str, str]],
    names: _Names,
    source: Source,
) -> list[tuple[str, expr.Expr]]:
    """Constexprs a call fixes: the recipe's ``equals:`` and the kernel's readable heuristics."""

    def bound_check(cname: str) -> Callable[[expr.Expr], None]:  # other constexprs: evaluated per config
        return names.check(names.int_scalars | (names.int_consts - {cname}))

    bound = []
    for cname, equals in bound_nodes:
        if cname not in names.int_consts:
            raise equals.fail(f"'equals' binds integer or boolean constexprs; {cname!r} has other values")
        bound.append((cname, _expression(equals, bound_check(cname))))
    for cname, text in heuristics:
        try:
            e = expr.parse(text)
            bound_check(cname)(e)
        except expr.ExprError as exc:
            raise node.fail(f"heuristic {cname!r} of {source} reads as {text!r}: {exc}; give it in 'constexprs' as "
                            f"{{values: [...], equals: ...}}") from None  # fmt: skip
        bound.append((cname, e))
    if len(bound) > limits.MAX_KEY:
        raise (grid_node or node).fail(
            f"at most {limits.MAX_KEY} constexprs can be bound with 'equals' (the runtime's limit)"
        )
    return bound


def _grid(node: Node, check: Callable[[expr.Expr], None]) -> tuple[expr.Expr, expr.Expr, expr.Expr]:
    """The launch grid: 1 to 3 expressions, the rest 1."""
    grid_nodes = node.sequence(allow_scalar=True)
    if not 1 <= len(grid_nodes) <= 3:
        raise node.fail(f"expected 1 to 3 grid expressions, got {len(grid_nodes)}")
    grid = [_expression(g, check) for g in grid_nodes]
    for g, g_node in zip(grid, grid_nodes, strict=True):
        value = _constant(g, g_node)
        if value is not None and value < 1:
            raise g_node.fail(f"a grid dimension of {value} launches nothing: it must be at least 1")
    grid += [expr.Num(1)] * (3 - len(grid))
    return grid[0], grid[1], grid[2]


def _constant(e: expr.Expr, node: Node) -> int | None:
    """The value of an expression that reads no argument (``-5``, ``2 * 64``), else None."""
    if expr.names(e) or expr.tensor_calls(e):
        return None
    try:
        return expr.evaluate(e, {})
    except (expr.ExprError, ValueError) as exc:  # a constant zero divisor was refused when parsed; int64 overflow
        raise node.fail(str(exc)) from None


def _key(k: dict[str, Node], info: introspect.KernelInfo | None, names: _Names) -> list[tuple[str, expr.Expr]]:
    """The problem key: the recipe's (named or listed expressions), else the autotuner's key where
    it names integer arguments."""
    key: list[tuple[str, expr.Expr]] = []
    if "key" in k:
        key_check = names.check(names.int_scalars)
        if k["key"].is_mapping():
            for kname, knode, _ in k["key"].items():
                key.append((kname, _expression(knode, key_check)))
        else:
            for knode in k["key"].sequence(allow_scalar=True):
                e = _expression(knode, key_check)
                key.append((expr.unparse(e), e))
    elif info is not None:
        key = [(n, expr.Name(n)) for n in info.key if n in names.int_scalars]
    seen: dict[str, str] = {}
    for (kname, e), knode in zip(key, _key_nodes(k), strict=False):
        for earlier, text in seen.items():
            if kname == earlier or expr.unparse(e) == text:
                raise knode.fail(f"the key lists {expr.unparse(e)} twice ({earlier!r}); a value is keyed once")
        seen[kname] = expr.unparse(e)
    if len(key) > limits.MAX_KEY:
        raise (k.get("key") or k["triton"]).fail(f"the key has {len(key)} values; at most {limits.MAX_KEY} (the "
                                                 "runtime's limit)")  # fmt: skip
    return key


def _key_nodes(k: dict[str, Node]) -> list[Node]:
    """The nodes of the recipe's key entries, in order (none where the autotuner's key is used)."""
    if "key" not in k:
        return []
    return [n for _, n, _ in k["key"].items()] if k["key"].is_mapping() else k["key"].sequence(allow_scalar=True)


def _bucket(k: dict[str, Node]) -> Bucket:
    if "bucket" not in k:
        return "exact"
    b = k["bucket"].string()
    if b not in BUCKETS:
        raise k["bucket"].fail(f"unknown bucket rule {b!r} (expected one of: {', '.join(BUCKETS)})")
    return "pow2" if b == "pow2" else "exact"


def _configs(
    k: dict[str, Node], backend: Backend, constexprs: Grid, tuned: tuple[Config, ...]
) -> tuple[tuple[Config, ...], tuple[str, ...]]:
    """The config grid (and its constexpr names): the autotuner's configs times the recipe's own
    constexpr values, or the recipe's constexprs times its num_warps and num_stages."""
    if tuned:
        own = [(n, v) for n, v in constexprs if n not in dict(tuned[0].constexprs)]
        configs = tuple(
            Config(constexprs=(*t.constexprs, *zip((n for n, _ in own), combo, strict=True)),
                   num_warps=t.num_warps, num_stages=t.num_stages)
            for t in tuned
            for combo in itertools.product(*(v for _, v in own))
        )  # fmt: skip
        return configs, tuple(n for n, _ in configs[0].constexprs)
    warps: tuple[int | None, ...] = (None,)
    stages: tuple[int | None, ...] = (None,)
    if backend == "triton":
        warps = _int_list(k["num_warps"], power_of_two=True, maximum=MAX_WARPS) if "num_warps" in k else (4,)
        stages = _int_list(k["num_stages"]) if "num_stages" in k else (3,)
    names = tuple(n for n, _ in constexprs)
    configs = tuple(
        Config(constexprs=tuple(zip(names, combo, strict=True)), num_warps=w, num_stages=s)
        for combo in itertools.product(*(v for _, v in constexprs))
        for w in warps
        for s in stages
    )
    return configs, names


def _specialize(k: dict[str, Node], backend: Backend) -> Policy:
    if "specialize" not in k:
        return "common"
    policy = k["specialize"].string()
    if policy not in POLICIES:
        raise k["specialize"].fail(f"unknown policy {policy!r}{suggest(policy, POLICIES)}")
    if backend == "cuda":
        raise k["specialize"].fail("'specialize' is for Triton kernels (CUDA kernels use hints)")
    return policy


def _autotune(k: dict[str, Node], info: introspect.KernelInfo | None) -> bool:
    autotune = k["autotune"].boolean() if "autotune" in k else False
    if autotune and info is not None and (info.reset_to_zero or info.restore_value):
        raise k["autotune"].fail(
            "the kernel's @triton.autotune resets or restores arguments between runs "
            f"({', '.join((*info.reset_to_zero, *info.restore_value))}), which runtime tuning cannot do; "
            "tune it with aotpack tune, which does"
        )
    return autotune


def _type_variables(node: Node) -> list[tuple[str, tuple[str, ...]]]:
    """``types:``: each type variable and the dtypes it takes."""
    types = []
    for var, values, var_at in node.items():
        if not _IDENT.match(var) or var in facts.dtypes():
            raise RecipeError(f"type variable {var!r} must be an identifier that is not a dtype name", var_at)
        choices = tuple(_dtype(v, v.string(), pointer=True) for v in values.sequence())
        if len(set(choices)) != len(choices) or not choices:
            raise values.fail("expected a non-empty list of distinct dtypes")
        types.append((var, choices))
    return types


def _launched_kernel(
    name: str,
    k: dict[str, Node],
    node: Node,
    where: Location,
    root: Path,
    recipe_targets: tuple[str, ...],
    targets_at: Node | None,
) -> Kernel:
    """A ``launch: triton`` kernel (what ``aotpack record`` writes): launched with Triton's syntax, the
    caller giving the grid, the constexprs and the launch options; built as exactly the variants
    listed (types, config, the JIT's specialization class)."""
    if k["launch"].string() != "triton":
        raise k["launch"].fail(f"unknown launch {k['launch'].string()!r} (expected: triton)")
    for key in k:
        if key not in _LAUNCHED_KEYS:
            raise k[key].fail(f"a 'launch: triton' kernel takes no {key!r}: the caller gives the grid and the "
                              f"config (it takes {', '.join(_LAUNCHED_KEYS)})")  # fmt: skip
    if "triton" not in k or "variants" not in k:
        raise node.fail("a 'launch: triton' kernel needs 'triton' (its @triton.jit function) and 'variants'")
    source = _source(k["triton"], root)
    targets = _kernel_targets(name, k, node, "triton", recipe_targets, targets_at)
    types = _type_variables(k["types"]) if "types" in k else []
    typevars = dict(types)
    info = _describe(k["triton"], source)
    constexpr_names = tuple(p.name for p in info.params if p.constexpr)
    args = _args(k["args"], typevars, constexpr_names)
    for arg in args:
        if arg.has_default or arg.extent is not None or arg.launch_only or arg.hint is not None or arg.descriptor:
            raise RecipeError(f"kernels.{name}.args.{arg.name}: a 'launch: triton' argument takes a plain type "
                              "(the JIT's own specialization is recorded per variant)", arg.where)  # fmt: skip
    args = _jit_args(k["args"], args, info)
    points = _points(k["variants"], args, types, constexpr_names, root)
    optional = {a.name for p in points for a, st in zip(args, p.states, strict=True) if st == NONE}
    args = [dataclasses.replace(a, optional=a.name in optional) for a in args]
    configs = tuple(dict.fromkeys(p.config for p in points))
    return Kernel(
        name=name, backend="triton", source=source, doc=_text(k["doc"], one_line=False) if "doc" in k else "",
        args=tuple(args), types=tuple(types), constexpr_names=constexpr_names, configs=configs, default=configs[0],
        grid=(expr.Num(1), expr.Num(1), expr.Num(1)), key=(), bucket="exact", rules=(), targets=targets,
        options=_options(k["options"]) if "options" in k else (), launch="triton", points=tuple(points),
        signature=tuple(p.name for p in info.params),
        defaults=tuple((p.name, p.default) for p in info.params
                       if p.has_default and (p.default is None or isinstance(p.default, (int, float, bool, str)))),
        picks=_picks(k["autotuned"], root, tuple(p.name for p in info.params)) if "autotuned" in k else (),
        where=where,
        identity=aot_kernels.identity(introspect.unwrap(_sources.load(source))),
    )  # fmt: skip


def _points(node: Node, args: list[Arg], types: TypeVars, names: tuple[str, ...], root: Path) -> list[Point]:
    """``variants:``: what a recording saw compiled, each listed once."""
    points: list[Point] = []
    seen: dict[tuple[Any, ...], Node] = {}
    for row in node.sequence():
        for point in _point(row, args, types, names, root):
            ident = (point.binding, point.config, point.states)
            if ident in seen:
                raise row.fail(f"the same variant is listed twice (first at line {seen[ident].where.line})")
            seen[ident] = row
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
    fields = row.mapping(_PICK_KEYS, required=_PICK_KEYS)
    key = tuple(_recorded_const(v, root) for v in fields["key"].sequence())
    config = fields["config"].mapping(())
    for name, _, where in fields["config"].items():
        if name not in _CONFIG_LAUNCH and name not in params:
            raise RecipeError(f"{fields['config'].path}: {name!r} is neither an argument of the kernel nor a "
                              f"launch option{suggest(name, [*params, *_CONFIG_LAUNCH])}", where)  # fmt: skip
    kwargs = tuple((n, _recorded_const(v, root)) for n, v in config.items() if n not in _CONFIG_LAUNCH)
    warps = config["num_warps"].integer(minimum=1) if "num_warps" in config else 4
    stages = config["num_stages"].integer(minimum=1) if "num_stages" in config else 3
    return Pick(key=key, kwargs=kwargs, num_warps=warps, num_stages=stages)


def _point(
    row: Node, args: list[Arg], types: list[tuple[str, tuple[str, ...]]], names: tuple[str, ...], root: Path
) -> list[Point]:
    """A ``variants:`` row: its variant, or the product of the values a constexpr given as a list takes (a
    deployment's set of batch sizes, say: ``aotpack record --widen``)."""
    fields = row.mapping(_POINT_KEYS, required=("config", "class"))
    binding: list[tuple[str, str]] = []
    given = fields["types"].mapping(tuple(v for v, _ in types)) if "types" in fields else {}
    for var, choices in types:
        if var not in given:
            raise row.fail(f"give the dtype of type variable {var!r} in 'types'")
        dtype = given[var].string()
        if dtype not in choices:
            raise given[var].fail(f"{dtype!r} is not one of {var}'s dtypes ({', '.join(choices)})")
        binding.append((var, dtype))
    cfg = fields["config"].mapping((*names, *_CONFIG_LAUNCH), required=names)
    warps = cfg["num_warps"].integer(minimum=1) if "num_warps" in cfg else 4
    if warps & (warps - 1) or warps > MAX_WARPS:
        raise cfg["num_warps"].fail(f"expected a power of two up to {MAX_WARPS}, got {warps}")
    stages = cfg["num_stages"].integer(minimum=1) if "num_stages" in cfg else 3
    values = [[_recorded_const(v, root) for v in cfg[n].sequence()] if cfg[n].is_sequence()
              else [_recorded_const(cfg[n], root)] for n in names]  # fmt: skip
    if math.prod(len(v) for v in values) > MAX_RECORDED_VARIANTS:
        raise cfg[names[0]].fail(f"the widened values make more than {MAX_RECORDED_VARIANTS} variants")
    configs = [Config(constexprs=tuple(zip(names, combo, strict=True)), num_warps=warps, num_stages=stages)
               for combo in itertools.product(*values)]  # fmt: skip
    spelled = fields["class"].string()
    runtime = [a for a in args if not a.launch_only]
    if len(spelled) != len(runtime) or any(c not in _CLASS_LETTERS for c in spelled):
        raise fields["class"].fail(f"expected one letter per argument ({len(runtime)}: "
                                   f"{', '.join(a.name for a in runtime)}), each D, 1, N or _")  # fmt: skip
    states: list[State] = []
    for arg, letter in zip(runtime, spelled, strict=True):
        state = _CLASS_LETTERS[letter]
        allowed = {"", NONE} if arg.pointer else set(arg.jit_states)
        if arg.pointer:
            allowed |= set(arg.jit_states)
        if state not in allowed:
            raise fields["class"].fail(f"argument {arg.name} cannot be {letter!r} (the JIT keys it on "
                                       f"{', '.join(s or '_' for s in arg.jit_states)})")  # fmt: skip
        states.append(state)
    launches = fields["launches"].integer(minimum=0) if "launches" in fields else 0
    return [Point(binding=tuple(binding), config=c, states=tuple(states), launches=launches) for c in configs]


def _version(node: Node) -> str:
    """The version as written (YAML would read 0.10 as the float 0.1), checked and normalized."""
    raw = node.raw()
    try:
        return str(packaging.version.Version(str(raw)))
    except (packaging.version.InvalidVersion, ValueError):  # ValueError: a number past Python's digit limit
        raise node.fail(f"{str(raw)[:40]!r} is not a valid version (such as 1.0.2)") from None


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


def _cuda_floor(node: Node) -> int:
    """A CUDA release as written (YAML would read 12.10 as the float 12.1), at least 12.0."""
    try:
        return cuda_floor(str(node.raw()))
    except ValueError as exc:
        raise node.fail(str(exc)) from None


def cuda_floor(text: str) -> int:
    """The oldest CUDA driver a wheel must load on (``cuda:`` of a recipe, ``cuda`` of pyproject.toml),
    in the driver API's encoding; ValueError, with the message to report, when not a release from 12.0."""
    try:
        version = facts.cuda_version(text)
    except ValueError as exc:
        raise ValueError(f"{exc}: the oldest CUDA driver the wheel must load on") from None
    if version < 12000:
        raise ValueError(f"CUDA {text} is older than aotpack builds for; give 12.0 or newer")
    return version


def _license(node: Node) -> str:
    """An SPDX license expression (such as Apache-2.0 or MIT OR BSD-3-Clause), normalized."""
    raw = node.string()
    try:
        return str(packaging.licenses.canonicalize_license_expression(raw))
    except packaging.licenses.InvalidLicenseExpression as exc:
        raise node.fail(f"{raw!r} is not an SPDX license expression (such as Apache-2.0 or MIT): {exc}") from None


def _text(node: Node, one_line: bool) -> str:
    """Free text (a summary, a doc): any printable characters; a doc may span lines. It only ever
    reaches generated files as escaped data (a Python repr, a C string literal, a METADATA field)."""
    text = node.string()  # printable but for lines and tabs (Node.scalar)
    bad = control_character(text, allowed="") if one_line else None
    if bad is not None:
        raise node.fail(f"expected a single line of printable text; it holds the control character {text[bad]!r}")
    return text


def _describe(node: Node, source: Source) -> introspect.KernelInfo:
    """Import the kernel and read it as Triton does; every failure is located at ``triton:``."""
    try:
        obj = _sources.load(source)
    except BaseException as exc:  # the user's module: ImportError, SyntaxError, SystemExit, anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise node.fail(f"importing {node.string()} failed: {type(exc).__name__}: {exc}") from None
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
    name: str,
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


def _path(node: Node, root: Path, text: str | None = None) -> Path:
    """The file or folder a recipe names (relative to the recipe's folder), resolved; a name no file system can
    hold (a NUL, too long, a symbolic link loop) is the recipe's error."""
    try:
        path = (root / (node.string() if text is None else text)).resolve()
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # missing: said by the caller
            path.stat()  # a name too long for the file system, a folder this user cannot search: said here
        return path
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: Path.resolve's symlink loop
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise node.fail(f"cannot use the path {node.string()[:80]!r}: {why}") from None


def _source(node: Node, root: Path) -> Source:
    text = node.string()
    where, sep, function = text.rpartition(":")
    if not sep or not _IDENT.match(function) or not where:
        raise node.fail(f"expected 'path/to/file.py:function' or 'package.module:function', got {text!r}")
    if where.endswith(".py") or "/" in where:
        file = _path(node, root, where)
        if not file.is_file():
            raise node.fail(f"kernel source {where!r} not found (looked for {file})")
        if file.stat().st_size > limits.MAX_SOURCE_BYTES:  # importing reads it whole
            raise node.fail(f"kernel source {where!r} is larger than {limits.MAX_SOURCE_BYTES >> 20} MiB (aotpack's "
                            "limits.MAX_SOURCE_BYTES): is it the right file?")  # fmt: skip
        return Source(path=file, module=None, function=function)
    if not all(_IDENT.match(part) for part in where.split(".")):
        raise node.fail(f"{where!r} is neither a .py file nor a module path")
    return Source(path=None, module=where, function=function)


def _dtype(node: Node, name: str, pointer: bool, typevars: Iterable[str] = ()) -> str:
    """``name`` if it is a dtype a pointer (or scalar) can have, or one of ``typevars``."""
    known = facts.dtypes()
    if name in typevars or (name in known and (pointer or known[name].scalar)):
        return name
    choices = [*typevars, *(n for n, d in known.items() if pointer or d.scalar)]
    raise node.fail(f"unknown {'element' if pointer else 'scalar'} type {name!r}{suggest(name, choices)}")


def _args(node: Node, typevars: dict[str, tuple[str, ...]], constexprs: tuple[str, ...]) -> list[Arg]:
    if len(node.keys()) > limits.MAX_ARGS:
        raise node.fail(f"{len(node.keys())} arguments; a kernel takes at most {limits.MAX_ARGS} (the runtime's "
                        "limit)")  # fmt: skip
    out: list[Arg] = []
    for name, value, where in node.items():
        if not _IDENT.match(name) or name in RESERVED_ARGS or keyword.iskeyword(name):
            raise RecipeError(
                f"{node.path}: {name!r} cannot name an argument: use an identifier other than a Python keyword, "
                f"{' and '.join(RESERVED_ARGS)} (every kernel takes those keywords)",
                where,
            )
        if name in constexprs:
            raise RecipeError(f"{name!r} is both an argument and a constexpr", where)
        fields = value.mapping(_ARG_KEYS, required=("type",)) if value.is_mapping() else {}
        type_node = fields.get("type", value)
        desc = _DESC.match(type_node.string())
        if desc is not None:
            out.append(_descriptor_arg(name, where, type_node, fields, desc, typevars, constexprs))
        else:
            out.append(_plain_arg(name, where, type_node, fields, typevars))
    if not out:
        raise node.fail("a kernel needs at least one argument")
    return out


def _descriptor_arg(
    name: str,
    where: Location,
    type_node: Node,
    fields: dict[str, Node],
    desc: re.Match[str],
    typevars: dict[str, tuple[str, ...]],
    constexprs: tuple[str, ...],
) -> Arg:
    """``tensordesc<T[BM, BK]>``: the caller passes a tensor, the launcher builds the descriptor."""
    dtype = desc["dtype"]
    _dtype(type_node, dtype, True, typevars)
    block = _block(type_node, desc["block"], constexprs)
    for key in ("extent", "contiguous", "default", "launch_only", "optional", "specialize"):
        if key in fields:
            raise fields[key].fail(
                f"a tensor descriptor takes no {key!r}: the hardware clips its loads and stores to the "
                "tensor's shape, and the launcher checks the tensor's layout"
            )
    return Arg(name=name, pointer=True, dtype=dtype, typevar=dtype in typevars, hint=None, block=block, where=where)


def _plain_arg(
    name: str, where: Location, type_node: Node, fields: dict[str, Node], typevars: dict[str, tuple[str, ...]]
) -> Arg:
    """A pointer (``*fp16``, ``*fp32:16``) or scalar (``i32``, ``i64:16``) argument and its flags."""
    m = _TYPE.match(type_node.string())
    if m is None:
        got = type_node.scalar()
        raise type_node.fail(
            f"expected a type such as '*fp16', '*fp32:16', 'i32', 'i64:16' or 'tensordesc<fp16[BM, BK]>', got {got!r}"
        )
    pointer, dtype = m["ptr"] is not None, _ALIASES.get(m["dtype"], m["dtype"])
    typevar = dtype in typevars
    if typevar and not pointer:
        raise type_node.fail(f"type variable {dtype!r} can only type a pointer")
    _dtype(type_node, dtype, pointer, typevars if pointer else ())
    hint = _hint(type_node, m, pointer, dtype)
    if not pointer and ("extent" in fields or "contiguous" in fields):
        at = fields.get("extent") or fields["contiguous"]
        raise at.fail("only pointer arguments take 'extent' and 'contiguous'")
    if pointer and "default" in fields:
        raise fields["default"].fail("pointer arguments take no default")
    contiguous, launch_only, optional = (fields[f].boolean() if f in fields else False
                                         for f in ("contiguous", "launch_only", "optional"))  # fmt: skip
    if launch_only and pointer:
        raise fields["launch_only"].fail("only scalar arguments can be launch_only")
    if optional and (launch_only or "default" in fields):
        raise fields["optional"].fail("an optional argument (None: folded into the code) is passed to the kernel "
                                      "and has no default")  # fmt: skip
    if optional and m["required"]:
        raise fields["optional"].fail("an optional pointer cannot carry a required hint")
    specialize = fields["specialize"].boolean() if "specialize" in fields else True
    if not specialize and hint is not None:
        raise fields["specialize"].fail("'specialize: false' and a hint contradict each other")
    what = "pointer" if pointer else facts.dtypes()[dtype].value
    by_kind: dict[str, tuple[State, ...]] = {"pointer": (DIV16, ANY), "int": (ONE, DIV16, ANY)}
    states = by_kind.get(what, (ANY,)) if specialize else (ANY,)
    return Arg(name=name, pointer=pointer, dtype=dtype, typevar=typevar, hint=hint, required=bool(m["required"]),
               contiguous=contiguous, launch_only=launch_only, optional=optional, jit_states=states,
               where=where)  # fmt: skip


def _hint(type_node: Node, m: re.Match[str], pointer: bool, dtype: str) -> int | None:
    """``:16`` (a multiple of 16, or 16-byte aligned) or ``:1`` (an integer equal to 1)."""
    hint = int(m["hint"]) if m["hint"] else None
    if hint is not None:
        if hint not in HINTS:
            raise type_node.fail(f"hint :{hint} is not supported (:16 = multiple of 16, :1 = equals 1)")
        if not pointer and facts.dtypes()[dtype].value != "int":
            raise type_node.fail(f"a {facts.dtypes()[dtype].value} argument cannot carry a hint")
        if pointer and hint == 1:
            raise type_node.fail("a pointer cannot be hinted :1 (use :16 for 16-byte alignment)")
    return hint


def _block(node: Node, text: str, constexprs: tuple[str, ...]) -> tuple[int | str, ...]:
    """A descriptor's block shape: integers or constexpr names (checked to be integers later)."""
    items = [item.strip() for item in text.split(",")]
    if not 1 <= len(items) <= MAX_DESC_RANK:
        raise node.fail(f"a tensor descriptor's block has 1 to {MAX_DESC_RANK} dimensions, got {len(items)}")
    block: list[int | str] = []
    for item in items:
        if item.isdigit() and int(item) > 0:
            block.append(int(item))
        elif item in constexprs:
            block.append(item)
        else:
            raise node.fail(
                f"block dimension {item!r} is neither a positive integer nor a constexpr"
                f"{suggest(item, constexprs, 'constexprs')}"
            )
    return tuple(block)


def _has_default(node: Node) -> bool:
    return "default" in node.keys()


_INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1)}


def _scalar_default(node: Node, arg: Arg, check: Callable[[expr.Expr], None]) -> tuple[expr.Expr | None, float | None]:
    """A scalar's default, checked against its type: (integer expression, float constant)."""
    value = node.scalar()
    kind = facts.dtypes()[arg.dtype].value
    if kind == "bool":
        if not isinstance(value, bool):
            raise node.fail(f"argument {arg.name!r} is a bool: its default must be true or false, got {value!r}")
        return expr.Num(int(value)), None
    if isinstance(value, bool):
        raise node.fail(f"argument {arg.name!r} is {arg.dtype}: its default cannot be {str(value).lower()}")
    if isinstance(value, float) or (kind == "float" and isinstance(value, str) and _FLOAT.match(value.strip())):
        if kind != "float":
            raise node.fail(f"argument {arg.name!r} is {arg.dtype}: cannot convert the default {value!r} to it")
        number = float(value)
        if arg.dtype == "fp16" and math.isfinite(number) and abs(number) > 65504:  # fp16 has inf and NaN
            raise node.fail(f"argument {arg.name!r} is fp16: the default {value!r} does not fit in it")
        return None, number
    default = _expression(node, check)
    if isinstance(default, expr.Num) and arg.dtype in _INT_RANGE:
        low, high = _INT_RANGE[arg.dtype]
        if not low <= default.value <= high:
            raise node.fail(f"argument {arg.name!r} is {arg.dtype}: the default {default.value} does not fit in it")
    return default, None


_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$")


def _arg_exprs(node: Node, args: list[Arg], check: Callable[[expr.Expr], None]) -> Iterator[Arg]:
    nodes = {name: value for name, value, _ in node.items()}
    for arg in args:
        value = nodes[arg.name]
        if not value.is_mapping():
            yield arg
            continue
        fields = value.mapping(_ARG_KEYS)
        default, float_default = _scalar_default(fields["default"], arg, check) if "default" in fields else (None, None)
        extent = _expression(fields["extent"], check) if "extent" in fields else None
        if extent is not None and (_constant(extent, fields["extent"]) or 0) < 0:
            raise fields["extent"].fail(f"an extent counts elements: {expr.unparse(extent)} is negative")
        if default is not None:
            defaulted = {a.name for a in args if a.name != arg.name and a.name in nodes and _has_default(nodes[a.name])}
            for n in expr.names(default):
                if n.id == arg.name or n.id in defaulted:
                    raise RecipeError(
                        f"{fields['default'].path}: a default may read only arguments without a default, not {n.id!r}",
                        fields["default"].where,
                    )
        yield Arg(**{**arg.__dict__, "default": default, "float_default": float_default, "extent": extent})


def _int_list(node: Node, power_of_two: bool = False, maximum: int | None = None) -> tuple[int, ...]:
    out: list[int] = []
    for item in node.sequence(allow_scalar=True):
        value = item.integer(minimum=1)
        if power_of_two and value & (value - 1):
            raise item.fail(f"expected a power of two, got {value}")
        if maximum is not None and value > maximum:
            raise item.fail(f"expected at most {maximum}, got {value}")
        if value in out:
            raise item.fail(f"{value} is listed twice")
        out.append(value)
    return tuple(out)


def _const(node: Node) -> int | float | bool | str:
    value = node.scalar()
    if not isinstance(value, (int, float, bool, str)):
        raise node.fail(f"expected a number, boolean or string, got {value!r}")
    return value


_RECORDED_TAGS = ("dtype", "torch_dtype", "tuple", "function")


def _triton_dtype(name: str) -> bool:
    """Whether Triton knows a dtype by this name (as ``str(tl.float16)`` writes it: ``fp16``)."""
    import triton.language as tl

    try:
        tl.dtype(name)
    except (AssertionError, ValueError, TypeError, KeyError):
        return False
    return True


def _recorded_const(node: Node, root: Path) -> ConstValue:
    """A constexpr's value as a recording writes it: a number, boolean, string or null, or one of
    ``{dtype: fp16}`` (Triton's dtype), ``{torch_dtype: float16}``, ``{tuple: [...]}`` and
    ``{function: module:name}`` (a @triton.jit function, or ``kernels/file.py:name``)."""
    if not node.is_mapping():
        value = node.scalar()
        if value is not None and not isinstance(value, (int, float, bool, str)):
            raise node.fail(f"expected a number, boolean, string or null, got {value!r}")
        return value
    fields = node.mapping(_RECORDED_TAGS)
    if len(fields) != 1:
        raise node.fail(f"expected one of {', '.join(_RECORDED_TAGS)}")
    ((tag, value),) = fields.items()
    if tag == "tuple":
        return tuple(_recorded_const(item, root) for item in value.sequence())
    if tag == "function":
        source = _source(value, root)
        fn = introspect.unwrap(_sources.load(source))
        if fn is None:
            raise value.fail(f"{value.string()} is not a @triton.jit function")
        return FunctionConst(source=source, identity=aot_kernels.identity(fn))
    name = value.string()
    if tag == "dtype" and not _triton_dtype(name):
        raise value.fail(f"unknown Triton dtype {name!r} (Triton's names: fp16, bf16, fp32, int32, ...)")
    if tag == "torch_dtype" and not _IDENT.match(name):
        raise value.fail(f"{name!r} is not a torch dtype's name")
    return DtypeConst(name=name, torch=tag == "torch_dtype")


def _config_ref(
    node: Node, configs: tuple[Config, ...], constexprs: list[tuple[str, tuple[ConstValue, ...]]]
) -> Config:
    """A config named by a partial mapping; fields with a single choice may be left out."""
    names = tuple(n for n, _ in constexprs)
    fields = node.mapping((*names, *_CONFIG_LAUNCH))
    wanted: dict[str, ConstValue] = {}
    for name, value in fields.items():
        wanted[name] = value.integer() if name in _CONFIG_LAUNCH else _const(value)
    matches = [
        c for c in configs
        if all((getattr(c, n) if n in _CONFIG_LAUNCH else c.value(n)) == v for n, v in wanted.items())
    ]  # fmt: skip
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise node.fail(f"no config of the grid matches {_show(wanted)}")
    free = [n for n in (*names, *_CONFIG_LAUNCH) if n not in wanted and len({_field(c, n) for c in matches}) > 1]
    raise node.fail(f"{_show(wanted)} matches {len(matches)} configs; also give {', '.join(free)}")


def _field(config: Config, name: str) -> ConstValue:
    return cast(ConstValue, getattr(config, name)) if name in _CONFIG_LAUNCH else config.value(name)


def _show(values: dict[str, ConstValue]) -> str:
    return "{" + ", ".join(f"{k}: {const_text(v)}" for k, v in values.items()) + "}"


def _rules(
    node: Node,
    configs: tuple[Config, ...],
    constexprs: list[tuple[str, tuple[ConstValue, ...]]],
    key: list[tuple[str, expr.Expr]],
    targets: tuple[str, ...],
    types: list[tuple[str, tuple[str, ...]]],
    bound_names: tuple[str, ...],
) -> tuple[Rule, ...]:
    if not key:
        raise node.fail("a dispatch table needs a 'key'")
    out: list[Rule] = []
    seen: set[tuple[Any, ...]] = set()
    for item in node.sequence():
        fields = item.mapping(_RULE_KEYS, required=("key", "config"))
        # key values are sizes and counts (0 can be a flag): a negative row is nearer no call than a row of 0
        values = tuple(v.integer(minimum=0) for v in fields["key"].sequence(allow_scalar=True))
        if len(values) != len(key):
            names = ", ".join(n for n, _ in key)
            raise fields["key"].fail(f"expected {len(key)} key values ({names}), got {len(values)}")
        arch = fields["arch"].string() if "arch" in fields else None
        if arch is not None and arch not in targets:
            raise fields["arch"].fail(f"{arch!r} is not one of this kernel's targets ({', '.join(targets)})")
        bound = _rule_types(fields["types"], types) if "types" in fields else None
        config = _config_ref(fields["config"], configs, constexprs)
        # rows for other values of bound constexprs serve other calls: the same key may recur
        ident = (values, arch, bound, tuple(config.value(n) for n in bound_names))
        if ident in seen:
            raise item.fail("this key is already in the dispatch table")
        seen.add(ident)
        out.append(Rule(key=values, config=config, arch=arch, types=bound, where=item.where))
    return tuple(out)


def _rule_types(node: Node, types: TypeVars) -> tuple[tuple[str, str], ...]:
    """A dispatch row's ``types``: the dtype of some type variables, sorted by variable."""
    tv = dict(types)
    pairs = []
    for var, dnode, _ in node.items():
        if var not in tv:
            raise dnode.fail(f"unknown type variable {var!r}")
        dtype = dnode.string()
        if dtype not in tv[var]:
            raise dnode.fail(f"{dtype!r} is not one of {var}'s types ({', '.join(tv[var])})")
        pairs.append((var, dtype))
    return tuple(sorted(pairs))


def _options(node: Node) -> tuple[tuple[str, ConstValue], ...]:
    fields = node.mapping(_OPTION_KEYS)
    out: list[tuple[str, ConstValue]] = []
    for name, value in fields.items():
        out.append((name, value.boolean() if name in _BOOL_OPTIONS else value.integer(minimum=1)))
    return tuple(sorted(out))


def _mutates(node: Node, pointers: set[str]) -> tuple[str, ...]:
    names = []
    for item in node.sequence(allow_scalar=True):
        name = item.string()
        if name not in pointers:
            raise item.fail(f"{name!r} is not a pointer argument{suggest(name, sorted(pointers), 'pointers')}")
        names.append(name)
    return tuple(sorted(set(names)))


def _tune(node: Node, root: Path, key_length: int) -> TuneSpec:
    fields = node.mapping(_TUNE_KEYS, required=("inputs", "keys"))
    if key_length == 0:
        raise node.fail("tuning needs a 'key' on the kernel")
    keys = []
    for item in fields["keys"].sequence():
        values = tuple(v.integer(minimum=0) for v in item.sequence(allow_scalar=True))
        if len(values) != key_length:
            raise item.fail(f"expected {key_length} key values, got {len(values)}")
        keys.append(values)
    rtol = fields["rtol"].scalar() if "rtol" in fields else 1e-2
    if not isinstance(rtol, (int, float)) or isinstance(rtol, bool) or rtol < 0:
        raise fields["rtol"].fail(f"expected a number >= 0 (0: exact), got {rtol!r}")
    reference = _source(fields["reference"], root) if "reference" in fields else None
    return TuneSpec(inputs=_source(fields["inputs"], root), reference=reference, keys=tuple(keys), rtol=float(rtol))


def _cuda_source(node: Node, root: Path) -> Source:
    file = _path(node, root)
    if not file.exists():
        raise node.fail(f"CUDA source {node.string()!r} not found (looked for {file})")
    try:  # the build reads it as text (its entry points); read it now, with the source's own location
        yamlnodes.read_text(file, "CUDA source", "MAX_SOURCE_BYTES")
    except RecipeError as exc:
        raise node.fail(str(exc)) from None
    return Source(path=file, module=None, function="")


def _cuda_launch(
    k: dict[str, Node],
    root: Path,
    check: Callable[[expr.Expr], None],
    typevars: set[str],
    defines: tuple[str, ...],
) -> CudaLaunch:
    entry = k["entry"].string()
    try:
        fields = list(string.Formatter().parse(entry))
    except ValueError as exc:  # a lone { or }
        raise k["entry"].fail(f"{entry!r} is not a template: {exc} (write {{{{ and }}}} for braces)") from None
    for _, field_name, spec, conversion in fields:
        if field_name is not None and (spec or conversion):
            written = f"{field_name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}"
            raise k["entry"].fail(f"{{{written}}}: a placeholder is a plain name, as {{{field_name}}}")
        if field_name is not None and field_name not in typevars and field_name not in defines:
            known = ", ".join(sorted(typevars | set(defines))) or "none"
            raise k["entry"].fail(f"unknown placeholder {{{field_name}}} (type variables and defines: {known})")
    if "block" not in k:
        raise k["entry"].fail("a CUDA kernel needs 'block': 1 to 3 expressions for the thread block")
    block_nodes = k["block"].sequence(allow_scalar=True)
    if not 1 <= len(block_nodes) <= 3:
        raise k["block"].fail(f"expected 1 to 3 block expressions, got {len(block_nodes)}")
    block = [_expression(b, check) for b in block_nodes]
    values = [_constant(b, n) for b, n in zip(block, block_nodes, strict=True)] + [1] * (3 - len(block_nodes))
    block += [expr.Num(1)] * (3 - len(block_nodes))
    fixed = [v for v in values if v is not None]
    if fixed and (min(fixed) < 1 or (len(fixed) == 3 and not fixed[0] * fixed[1] * fixed[2] <= 1024)):
        shown = ", ".join("(per call)" if v is None else str(v) for v in values)
        raise k["block"].fail(f"a block has 1 to 1024 threads, each dimension at least 1; got [{shown}]")
    shared = _expression(k["shared"], check) if "shared" in k else expr.Num(0)
    shared_bytes = _constant(shared, k["shared"]) if "shared" in k else 0
    if shared_bytes is not None and shared_bytes < 0:
        raise k["shared"].fail(f"dynamic shared memory is a number of bytes >= 0, got {shared_bytes}")
    includes, flags = _nvcc_inputs(k, root)
    return CudaLaunch(
        entry=entry, include_dirs=tuple(includes), nvcc_flags=tuple(flags), block=(block[0], block[1], block[2]),
        shared=shared,
    )  # fmt: skip


def _check_cuda_arity(node: Node, entry: str, source: Source, args: tuple[Arg, ...]) -> None:
    """The recipe's arguments (those not launch_only) against the parameters of the entry's ``__global__``
    declarations in the .cu file, where all of them take one number: a mismatch is the recipe's error, said here
    rather than by nvcc at build time. An entry declared elsewhere (an include, a macro) or overloaded is left to
    the build's check (the wrapper's static_assert)."""
    assert source.path is not None
    name = entry.partition("<")[0].strip().rpartition("::")[2]
    text = yamlnodes.read_text(source.path, "CUDA source", "MAX_SOURCE_BYTES")  # read (and bounded) by _cuda_source
    declared = re.finditer(rf"__global__[^;{{}}]*?\b{re.escape(name)}\s*\(", text)  # to the name; not past a body
    counts = {_parameter_count(text, m.end()) for m in declared}
    counts.discard(None)
    given = sum(1 for a in args if not a.launch_only)
    if len(counts) == 1 and given not in counts:
        (takes,) = counts
        raise node.fail(f"the recipe gives {given} arguments (those not launch_only), and {name} in "
                        f"{source.path.name} takes {takes}: list its parameters in order, and mark arguments it does "
                        "not take 'launch_only: true'")  # fmt: skip


def _parameter_count(text: str, start: int) -> int | None:
    """The number of parameters of the list that opens just before ``start`` (commas outside brackets), or None
    where the list does not end within the file's next 64 KiB."""
    depth, commas, seen = 0, 0, False
    for ch in text[start : start + (64 << 10)]:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            if depth == 0 and ch == ")":
                return 0 if not seen else commas + 1
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
        if not ch.isspace():
            seen = True
    return None


def _nvcc_inputs(k: dict[str, Node], root: Path) -> tuple[list[Path], list[str]]:
    """``include_dirs`` (folders relative to the recipe) and ``nvcc_flags`` (none that aotpack sets)."""
    includes = []
    for item in k["include_dirs"].sequence(allow_scalar=True) if "include_dirs" in k else ():
        folder = _path(item, root)
        if not folder.is_dir():
            raise item.fail(f"include directory {item.string()!r} not found (looked for {folder})")
        includes.append(folder)
    flags: list[str] = []
    for item in k["nvcc_flags"].sequence(allow_scalar=True) if "nvcc_flags" in k else ():
        flag = item.string()
        if flag.split("=")[0] in ("-gencode", "-arch", "--gpu-architecture", "-code", "-o", "-cubin", "-ptx"):
            raise item.fail(f"{flag!r} is set by aotpack; list targets under 'gencode'")
        flags.append(flag)
    return includes, flags
