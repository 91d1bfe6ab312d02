"""A kernel the generated package calls, read in small steps: its backend and source, targets, constexpr grid,
arguments, the backend's own fields (``readers.KernelFields``), expressions, configs and dispatch. A
``launch: triton`` kernel is its backend's alone (``KernelReader.claim``)."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .. import classnames, expr, limits
from ..errors import RecipeError
from ..model import (
    BUCKETS,
    POLICIES,
    Arg,
    Backend,
    Bucket,
    Config,
    ConstValue,
    Kernel,
    Policy,
    Rule,
    Source,
    TuneSpec,
    const_text,
)
from . import args as _args
from . import fields as _fields
from .args import TypeVars
from .readers import Grid, KernelEntry, KernelFields, KernelReader, Readers
from .yamlnodes import Node, suggest

_COMMON_KEYS = (
    "doc", "args", "types", "grid", "key", "bucket", "default", "dispatch", "targets", "tune", "autotune", "mutates",
    "specialize",
)  # fmt: skip
TUNE_KEYS = ("inputs", "reference", "keys", "sample", "refine", "validate", "rtol")
SAMPLE_KEYS = ("count", "range", "seed")
_RULE_KEYS = ("key", "config", "arch", "types")
CONFIG_LAUNCH = ("num_warps", "num_stages")


def keys(readers: Readers) -> tuple[str, ...]:
    """Every key a kernel may have: each backend's source key, the shared keys, then each backend's own."""
    own = (key for r in readers.values() for key in r.KEYS[1:])
    return (*(r.KEYS[0] for r in readers.values()), *_COMMON_KEYS, *own)


def called(entry: KernelEntry, backend: Backend, readers: Readers) -> Kernel:
    """A kernel of ``backend`` that the generated package calls: the shared fields, and its backend's own."""
    name, k, node = entry.name, entry.keys, entry.node
    reader = readers[backend]
    _refuse_foreign(k, node, reader, readers)
    source = reader.source(entry)
    targets = reader.targets(entry)
    types = _args.type_variables(k["types"]) if "types" in k else []
    own = reader.fields(entry, source)
    constexprs, bound_nodes, dtype_consts = _constexpr_grid(k.get(own.grid_key), own.dtype_constexprs, dict(types))
    raw_args = _args.read(k["args"], dict(types), tuple(n for n, _ in constexprs))
    _args.check_type_variables(k, types, raw_args)
    jit = own.jit(raw_args, constexprs, bound_nodes, dtype_consts)
    names = _Names.of(jit.args, constexprs, jit.tuned)
    _check_blocks(name, jit.args, _positive_ints(constexprs, jit.tuned))
    # scalar defaults and pointer extents are checked after all args are known
    args = tuple(_args.with_exprs(k["args"], jit.args, names.check(names.int_scalars)))
    bound = _bound(node, k.get(own.grid_key), bound_nodes, jit.heuristics, names, source)
    grid = _grid(k["grid"], names.check(names.int_scalars | names.int_consts))
    key = _key(k, k[backend], own.autotuner_key, names)
    configs, constexpr_names = _configs(constexprs, jit.tuned, own)
    grid_values = [(n, tuple(dict.fromkeys(c.value(n) for c in configs))) for n in constexpr_names]
    default = config_ref(k["default"], configs, grid_values) if "default" in k else configs[0]
    rules = () if "dispatch" not in k else _rules(
        k["dispatch"], configs, grid_values, key, targets, types, tuple(n for n, _ in bound))  # fmt: skip
    check = names.check(names.int_scalars | names.int_consts)
    launch = own.launch(check, {v for v, _ in types}, constexpr_names, args)
    kernel = Kernel(
        name=name, backend=backend, specialization=reader.SPECIALIZATION, source=source,
        doc=_fields.text(k["doc"], one_line=False) if "doc" in k else "", args=args, types=tuple(types),
        constexpr_names=constexpr_names, configs=configs, default=default, grid=grid,
        key=tuple(key), bucket=_bucket(k), rules=rules, targets=targets,
        triton=own.triton(jit.fixed, tuple(dtype_consts)), cuda=launch,
        tune=_tune(k["tune"], entry.root, tuple(n for n, _ in key)) if "tune" in k else None,
        autotune=_autotune(k, own),
        mutates=_mutates(k["mutates"], names.pointers) if "mutates" in k else None, bound=tuple(bound),
        where=entry.where,
    )  # fmt: skip
    return _policy(k, own, kernel)


def _refuse_foreign(k: dict[str, Node], node: Node, reader: KernelReader, readers: Readers) -> None:
    """A grid, and no key of another backend."""
    if "grid" not in k:
        raise node.fail("missing required key 'grid'")
    for other in readers.values():
        for other_key in other.KEYS if other is not reader else ():
            if other_key in k:
                raise k[other_key].fail(f"{other_key!r} is for {other.TITLE} kernels")


def kernel_targets(
    entry: KernelEntry, own: tuple[str, ...] | None = None, problem: Callable[[str], str | None] = lambda t: None
) -> tuple[str, ...]:
    """The kernel's targets: ``own`` (its backend's reading of its own key), else its 'targets', else the
    recipe's; ``problem`` says why its backend cannot build one."""
    k = entry.keys
    chosen = own if own is not None else _fields.targets(k["targets"]) if "targets" in k else entry.targets
    if not chosen:
        raise entry.node.fail("no targets: set 'targets' in the recipe or in this kernel")
    for t in chosen:
        why = problem(t)
        if why is not None:
            at = k["targets"] if "targets" in k else entry.targets_at or entry.node
            raise at.fail(why)
    return chosen


def _policy(k: dict[str, Node], own: KernelFields, kernel: Kernel) -> Kernel:
    """A Triton kernel's ``specialize`` and ``classes``: which classes of its JIT's specialization get built,
    read last (a class is read against the kernel's arguments). Another backend's kernel takes neither."""
    specialize = _specialize(k, own)
    if kernel.triton is None:
        return kernel
    triton = dataclasses.replace(kernel.triton, specialize=specialize)
    kernel = dataclasses.replace(kernel, triton=triton)
    if "classes" not in k:
        return kernel
    return dataclasses.replace(kernel, triton=dataclasses.replace(triton, classes=_classes(k["classes"], kernel)))


def _classes(node: Node, kernel: Kernel) -> tuple[tuple[str, ...], ...]:
    """``classes:``: specialization classes to build besides the typical ones, each spelt as ``aotpack plan``,
    ``select()`` and a class-miss report spell it (one letter per argument the JIT keys)."""
    if kernel.specialize != "common":
        raise node.fail("'classes' adds to the common classes; it needs 'specialize: common' (the default)")
    out: list[tuple[str, ...]] = []
    for item in node.sequence():
        states = classnames.read(kernel, item.string())
        if isinstance(states, str):
            raise item.fail(f"{item.string()!r}: {states}")
        out.append(states)
    return tuple(dict.fromkeys(out))


def _constexpr_grid(
    node: Node | None, dtype_constexprs: bool, typevars: dict[str, tuple[str, ...]]
) -> tuple[Grid, list[tuple[str, Node]], list[tuple[str, str]]]:
    """``constexprs:`` (Triton) or ``defines:`` (CUDA): each name's values, the names bound to the call
    (``{values: [...], equals: expression}``) and dtype constexprs that follow a type variable."""
    constexprs: Grid = []
    bound_nodes: list[tuple[str, Node]] = []
    dtype_consts: list[tuple[str, str]] = []
    for cname, values, c_at in node.items() if node is not None else ():
        if not _fields.IDENT.match(cname):
            raise RecipeError(f"constexpr name {cname!r} is not an identifier", c_at)
        if dtype_constexprs and values.is_scalar() and values.scalar() in typevars:
            dtype_consts.append((cname, values.scalar()))  # a dtype constexpr that follows a type variable
            continue
        if values.is_mapping():  # {values: [...], equals: expression}
            fields = values.mapping(("values", "equals"), required=("values", "equals"))
            values = fields["values"]
            bound_nodes.append((cname, fields["equals"]))
        vals = tuple(_fields.const(v) for v in values.sequence(allow_scalar=True))
        if not vals or len(set(vals)) != len(vals):
            raise values.fail("expected a non-empty list of distinct values")
        constexprs.append((cname, vals))
    return constexprs, bound_nodes, dtype_consts


def _positive_ints(constexprs: Grid, tuned: tuple[Config, ...]) -> set[str]:
    """The constexprs whose every value (in the grid and the tuned configs) is a positive integer (not a boolean):
    what a descriptor's block dimension may name."""
    tuned_values = [(n, tuple(c.value(n) for c in tuned)) for n, _ in (tuned[0].constexprs if tuned else ())]
    return {n for n, vals in [*constexprs, *tuned_values] if all(type(v) is int and v > 0 for v in vals)}


def _check_blocks(name: str, args: Sequence[Arg], positive: set[str]) -> None:
    """A descriptor's block dimension names a constexpr whose values are positive integers."""
    for arg in args:
        for dim in arg.block:
            if isinstance(dim, str) and dim not in positive:
                raise RecipeError(
                    f"kernels.{name}.args.{arg.name}: block dimension {dim!r} must be a constexpr of positive integers",
                    arg.where,
                )


@dataclass(frozen=True)
class _Names:
    """The names a kernel's expressions may read, by kind."""

    pointers: set[str]
    optional: set[str]
    int_scalars: set[str]
    int_consts: set[str]  # constexprs whose values are all integers (or booleans)

    @staticmethod
    def of(args: Sequence[Arg], constexprs: Grid, tuned: tuple[Config, ...]) -> _Names:
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


def _bound(
    node: Node,
    grid_node: Node | None,
    bound_nodes: list[tuple[str, Node]],
    heuristics: Sequence[tuple[str, str]],
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
        bound.append((cname, _fields.expression(equals, bound_check(cname))))
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
    grid = [_fields.expression(g, check) for g in grid_nodes]
    for g, g_node in zip(grid, grid_nodes, strict=True):
        value = _fields.constant(g, g_node)
        if value is not None and value < 1:
            raise g_node.fail(f"a grid dimension of {value} launches nothing: it must be at least 1")
    grid += [expr.Num(1)] * (3 - len(grid))
    return grid[0], grid[1], grid[2]


def _key(
    k: dict[str, Node], source_at: Node, autotuner_key: tuple[str, ...], names: _Names
) -> list[tuple[str, expr.Expr]]:
    """The problem key: the recipe's (named or listed expressions), else the autotuner's key where
    it names integer arguments."""
    key: list[tuple[str, expr.Expr]] = []
    if "key" in k:
        key_check = names.check(names.int_scalars)
        if k["key"].is_mapping():
            for kname, knode, _ in k["key"].items():
                key.append((kname, _fields.expression(knode, key_check)))
        else:
            for knode in k["key"].sequence(allow_scalar=True):
                e = _fields.expression(knode, key_check)
                key.append((expr.unparse(e), e))
    else:
        key = [(n, expr.Name(n)) for n in autotuner_key if n in names.int_scalars]
    seen: dict[str, str] = {}
    for (kname, e), knode in zip(key, _key_nodes(k), strict=False):
        for earlier, text in seen.items():
            if kname == earlier or expr.unparse(e) == text:
                raise knode.fail(f"the key lists {expr.unparse(e)} twice ({earlier!r}); a value is keyed once")
        seen[kname] = expr.unparse(e)
    if len(key) > limits.MAX_KEY:
        raise (k.get("key") or source_at).fail(f"the key has {len(key)} values; at most {limits.MAX_KEY} (the "
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
    constexprs: Grid, tuned: tuple[Config, ...], kernel_fields: KernelFields
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
    warps, stages = kernel_fields.warps_and_stages()
    names = tuple(n for n, _ in constexprs)
    configs = tuple(
        Config(constexprs=tuple(zip(names, combo, strict=True)), num_warps=w, num_stages=s)
        for combo in itertools.product(*(v for _, v in constexprs))
        for w in warps
        for s in stages
    )
    return configs, names


def _specialize(k: dict[str, Node], own: KernelFields) -> Policy:
    if "specialize" not in k:
        return "common"
    policy = k["specialize"].string()
    if policy not in POLICIES:
        raise k["specialize"].fail(f"unknown policy {policy!r}{suggest(policy, POLICIES)}")
    if own.specialize_problem is not None:
        raise k["specialize"].fail(own.specialize_problem)
    return policy


def _autotune(k: dict[str, Node], own: KernelFields) -> bool:
    autotune = k["autotune"].boolean() if "autotune" in k else False
    if autotune and own.autotune_problem is not None:
        raise k["autotune"].fail(own.autotune_problem)
    return autotune


def config_ref(node: Node, configs: tuple[Config, ...], constexprs: list[tuple[str, tuple[ConstValue, ...]]]) -> Config:
    """A config named by a partial mapping; fields with a single choice may be left out."""
    names = tuple(n for n, _ in constexprs)
    fields = node.mapping((*names, *CONFIG_LAUNCH))
    wanted: dict[str, ConstValue] = {}
    for name, value in fields.items():
        wanted[name] = value.integer() if name in CONFIG_LAUNCH else _fields.const(value)
    matches = [
        c for c in configs
        if all((getattr(c, n) if n in CONFIG_LAUNCH else c.value(n)) == v for n, v in wanted.items())
    ]  # fmt: skip
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise node.fail(f"no config of the grid matches {_show(wanted)}")
    free = [n for n in (*names, *CONFIG_LAUNCH) if n not in wanted and len({_field(c, n) for c in matches}) > 1]
    raise node.fail(f"{_show(wanted)} matches {len(matches)} configs; also give {', '.join(free)}")


def _field(config: Config, name: str) -> ConstValue:
    return cast(ConstValue, getattr(config, name)) if name in CONFIG_LAUNCH else config.value(name)


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
        config = config_ref(fields["config"], configs, constexprs)
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


def _mutates(node: Node, pointers: set[str]) -> tuple[str, ...]:
    names = []
    for item in node.sequence(allow_scalar=True):
        name = item.string()
        if name not in pointers:
            raise item.fail(f"{name!r} is not a pointer argument{suggest(name, sorted(pointers), 'pointers')}")
        names.append(name)
    return tuple(sorted(set(names)))


def _tune(node: Node, root: Path, names: tuple[str, ...]) -> TuneSpec:
    fields = node.mapping(TUNE_KEYS, required=("inputs",))
    if not names:
        raise node.fail("tuning needs a 'key' on the kernel")
    if "keys" not in fields and "sample" not in fields:
        raise node.fail("give the keys to time: 'keys' (a list of key values), 'sample' (keys drawn from ranges), "
                        "or both (docs/tuning.md)")  # fmt: skip
    keys = []
    for item in fields["keys"].sequence() if "keys" in fields else ():
        values = tuple(v.integer(minimum=0) for v in item.sequence(allow_scalar=True))
        if len(values) != len(names):
            raise item.fail(f"expected {len(names)} key values, got {len(values)}")
        keys.append(values)
    sample, ranges, seed = _sample(fields["sample"], names) if "sample" in fields else (0, (), 0)
    refine = fields["refine"].integer(minimum=0) if "refine" in fields else 0
    validate = fields["validate"].integer(minimum=0) if "validate" in fields else 0
    if validate and not sample:
        raise fields["validate"].fail("validate: draws its keys from sample:'s ranges, as calls would be drawn: give "
                                      "'sample' too (docs/tuning.md)")  # fmt: skip
    total = len(set(keys)) + sample + refine + validate
    if total > limits.MAX_MEASURED_KEYS:
        raise (fields["validate"] if validate else fields["refine"] if refine else node).fail(
            f"{total} keys to time ({len(set(keys))} listed, {sample} sampled, {refine} refined, {validate} to "
            f"validate); a table holds at most {limits.MAX_MEASURED_KEYS} of a kernel (limits.MAX_MEASURED_KEYS: the "
            "dispatcher's rule is fitted to them): time fewer")  # fmt: skip
    rtol = fields["rtol"].scalar() if "rtol" in fields else 1e-2
    if not isinstance(rtol, (int, float)) or isinstance(rtol, bool) or rtol < 0:
        raise fields["rtol"].fail(f"expected a number >= 0 (0: exact), got {rtol!r}")
    reference = _fields.source(fields["reference"], root) if "reference" in fields else None
    inputs = _fields.source(fields["inputs"], root)
    return TuneSpec(inputs=inputs, reference=reference, keys=tuple(keys), rtol=float(rtol), sample=sample,
                    ranges=ranges, seed=seed, refine=refine, validate=validate)  # fmt: skip


def _sample(node: Node, names: tuple[str, ...]) -> tuple[int, tuple[tuple[int, int], ...], int]:
    """``sample: {count: N, range: {<key name>: [low, high], ...}, seed: S}``: N keys spread over the log of
    each dimension's range (a dimension without a range: 1 to 8192; tune_keys.sampled)."""
    fields = node.mapping(SAMPLE_KEYS, required=("count",))
    count = fields["count"].integer(minimum=1)
    if count > limits.MAX_TUNE_SAMPLES:
        raise fields["count"].fail(f"at most {limits.MAX_TUNE_SAMPLES} sampled keys, got {count}")
    given: dict[str, tuple[int, int]] = {}
    if "range" in fields:
        for name, item, where in fields["range"].items():
            if name not in names:
                raise RecipeError(f"{name!r} is not in the kernel's key ({', '.join(names)})", where)
            bounds = item.sequence()
            if len(bounds) != 2:
                raise item.fail("expected [low, high]")
            low, high = bounds[0].integer(minimum=1), bounds[1].integer(minimum=1)
            if low > high:
                raise item.fail(f"expected low <= high, got [{low}, {high}]")
            given[name] = (low, high)
    seed = fields["seed"].integer(minimum=0) if "seed" in fields else 0
    return count, tuple(given.get(n, (1, 8192)) for n in names), seed
