"""A kernel's arguments (``args:``) and type variables (``types:``): pointers, scalars and tensor descriptors,
their hints and flags, then the defaults and extents, checked once every argument is known."""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from .. import expr, facts, limits
from ..errors import Location, RecipeError
from ..model import RESERVED_ARGS, Arg
from ..states import ANY, DIV16, ONE, State
from .fields import IDENT, constant, expression
from .yamlnodes import Node, suggest

HINTS = (1, 16)
_TYPE = re.compile(r"^(?P<ptr>\*)?(?P<dtype>[A-Za-z_][A-Za-z_0-9]*)(?::(?P<hint>\d+)(?P<required>!)?)?$")
_DESC = re.compile(r"^tensordesc\s*<\s*(?P<dtype>[A-Za-z_][A-Za-z_0-9]*)\s*\[(?P<block>[^\]]*)\]\s*>$")
_ALIASES = {"bool": "i1"}  # type names a recipe may use for dtypes of the table
_ARG_KEYS = ("type", "default", "extent", "contiguous", "launch_only", "optional", "specialize")

TypeVars = list[tuple[str, tuple[str, ...]]]  # type variables and their dtypes


def type_variables(node: Node) -> list[tuple[str, tuple[str, ...]]]:
    """``types:``: each type variable and the dtypes it takes."""
    types = []
    for var, values, var_at in node.items():
        if not IDENT.match(var) or var in facts.dtypes():
            raise RecipeError(f"type variable {var!r} must be an identifier that is not a dtype name", var_at)
        choices = tuple(_dtype(v, v.string(), pointer=True) for v in values.sequence())
        if len(set(choices)) != len(choices) or not choices:
            raise values.fail("expected a non-empty list of distinct dtypes")
        types.append((var, choices))
    return types


def check_type_variables(k: dict[str, Node], types: TypeVars, args: list[Arg]) -> None:
    for var, _ in types:
        if not any(a.typevar and a.dtype == var for a in args):
            raise k["types"].fail(f"type variable {var!r} is used by no pointer argument")


def read(node: Node, typevars: dict[str, tuple[str, ...]], constexprs: tuple[str, ...]) -> list[Arg]:
    if len(node.keys()) > limits.MAX_ARGS:
        raise node.fail(f"{len(node.keys())} arguments; a kernel takes at most {limits.MAX_ARGS} (the runtime's "
                        "limit)")  # fmt: skip
    out: list[Arg] = []
    for name, value, where in node.items():
        if not IDENT.match(name) or name in RESERVED_ARGS or keyword.iskeyword(name):
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
    if not 1 <= len(items) <= limits.MAX_DESC_RANK:
        raise node.fail(f"a tensor descriptor's block has 1 to {limits.MAX_DESC_RANK} dimensions, got {len(items)}")
    block: list[int | str] = []
    for item in items:
        if item.isascii() and item.isdigit() and len(item) > limits.MAX_DIGITS:
            raise node.fail(f"block dimension {item[:12]}... has more than {limits.MAX_DIGITS} digits")
        if item.isascii() and item.isdigit() and int(item) > 0:  # (str.isdigit takes '²', which int() refuses)
            block.append(int(item))
        elif item in constexprs:
            block.append(item)
        else:
            raise node.fail(
                f"block dimension {item!r} is neither a positive integer nor a constexpr"
                f"{suggest(item, constexprs, 'constexprs')}"
            )
    return tuple(block)


def _dtype(node: Node, name: str, pointer: bool, typevars: Iterable[str] = ()) -> str:
    """``name`` if it is a dtype a pointer (or scalar) can have, or one of ``typevars``."""
    known = facts.dtypes()
    if name in typevars or (name in known and (pointer or known[name].scalar)):
        return name
    choices = [*typevars, *(n for n, d in known.items() if pointer or d.scalar)]
    raise node.fail(f"unknown {'element' if pointer else 'scalar'} type {name!r}{suggest(name, choices)}")


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
    default = expression(node, check)
    if isinstance(default, expr.Num) and arg.dtype in _INT_RANGE:
        low, high = _INT_RANGE[arg.dtype]
        if not low <= default.value <= high:
            raise node.fail(f"argument {arg.name!r} is {arg.dtype}: the default {default.value} does not fit in it")
    return default, None


_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$")


def with_exprs(node: Node, args: Sequence[Arg], check: Callable[[expr.Expr], None]) -> Iterator[Arg]:
    nodes = {name: value for name, value, _ in node.items()}
    for arg in args:
        value = nodes[arg.name]
        if not value.is_mapping():
            yield arg
            continue
        fields = value.mapping(_ARG_KEYS)
        default, float_default = _scalar_default(fields["default"], arg, check) if "default" in fields else (None, None)
        extent = expression(fields["extent"], check) if "extent" in fields else None
        if extent is not None and (constant(extent, fields["extent"]) or 0) < 0:
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
