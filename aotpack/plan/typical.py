"""Typical calls of a kernel, read off its recipe: the values its integer arguments take when a call passes
contiguous, 16-byte aligned tensors of the shapes the recipe implies. ``aotpack/plan/classes.py`` turns them into
the specialization classes a kernel is built for.

A tensor's shape comes from its extent (``_layout``: a span ``(R - 1) * S + C``, a product ``R * C``, a bare
size, ``numel`` of another tensor) and the ``size``/``stride`` reads; the integers from their defaults,
evaluated on those tensors (``expr.evaluate``, the runtime's own arithmetic). What nothing determines is a
symbol: a size (a multiple of 16, odd, or 8 modulo 16: a call is one choice per symbol), an integer the recipe
relates to no tensor ("free": 1 or 16-divisible), or one it computes by more than ``+ - *`` ("opaque": 1,
16-divisible or neither). Symbols are made in an order that depends only on the recipe, so one choice per
symbol means the same for every call of a kernel (``_choices`` lists the calls evaluated).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from .. import expr
from ..limits import MAX_CALLS, MAX_EVERY_COMBINATION
from ..model import Arg, Kernel


@dataclass(frozen=True)
class _Layout:
    """A tensor's typical shape, read off its extent: ``dims`` (size, stride expression or None for
    the contiguous one), outermost first; or the shape of another tensor (``numel(other)``)."""

    dims: tuple[tuple[expr.Expr, expr.Expr | None], ...] = ()
    same_as: str | None = None


def _sum_terms(e: expr.Expr) -> list[expr.Expr] | None:
    if isinstance(e, expr.BinOp) and e.op == "+":
        left, right = _sum_terms(e.left), _sum_terms(e.right)
        return None if left is None or right is None else left + right
    if isinstance(e, expr.BinOp) and e.op == "-":
        return None
    return [e]


def _factors(e: expr.Expr) -> list[expr.Expr]:
    if isinstance(e, expr.BinOp) and e.op == "*":
        return _factors(e.left) + _factors(e.right)
    return [e]


def _minus_one(e: expr.Expr) -> expr.Expr | None:
    """S for ``S - 1``, else None."""
    if isinstance(e, expr.BinOp) and e.op == "-" and isinstance(e.right, expr.Num) and e.right.value == 1:
        return e.left
    return None


def _stride_dim(kernel: Kernel, tensor: str, stride: expr.Expr | None) -> int | None:
    """The dimension of ``tensor`` a stride expression reads (``stride(t, d)``, or an argument whose
    default it is), if it says."""
    if isinstance(stride, expr.Name) and stride.id in {a.name for a in kernel.args}:
        stride = kernel.arg(stride.id).default
    if isinstance(stride, expr.Call) and stride.func == "stride" and isinstance(stride.args[1], expr.Num):
        if expr.unparse(stride.args[0]) == tensor:
            return stride.args[1].value
    return None


def _layout(kernel: Kernel, arg: Arg) -> _Layout | None:
    """The shape a typical call's tensor has, from the argument's extent. An extent is the span a
    tensor's elements cover: ``(S0 - 1) * R0 + (S1 - 1) * R1 + ... + 1``, optionally with the innermost
    dimension written bare (``... + C``), or a product of sizes (``n_rows * n_cols``), or ``numel(t)``
    of another tensor (the same shape). Dimensions whose strides default to ``stride(t, d)`` take
    dimension d's place; the others keep the order written. None: the extent says nothing of a shape."""
    e = arg.extent
    if e is None:
        return None
    if isinstance(e, expr.Call) and e.func == "numel":
        other = expr.unparse(e.args[0])
        return _Layout(same_as=other) if other != arg.name else None
    terms = _sum_terms(e)
    if terms is None:
        return None
    spans: list[tuple[expr.Expr, expr.Expr]] = []
    bare: list[expr.Expr] = []
    for term in terms:
        factors = _factors(term)
        size = next((s for f in factors if (s := _minus_one(f)) is not None), None)
        if isinstance(term, expr.Num) and term.value == 1 and len(terms) > 1:
            continue
        if size is not None and len(factors) == 2:
            spans.append((size, factors[1] if _minus_one(factors[0]) is not None else factors[0]))
        elif size is None:
            bare.append(term)
        else:
            return None
    if not spans:
        if len(bare) != 1:
            return None
        return _Layout(dims=tuple((f, None) for f in _factors(bare[0])))
    if len(bare) > 1:
        return None
    order = [d for _, stride in spans if (d := _stride_dim(kernel, arg.name, stride)) is not None]
    if len(order) == len(spans) and len(set(order)) == len(order):
        spans = [s for _, s in sorted(zip(order, spans, strict=True), key=lambda p: p[0])]
    return _Layout(dims=(*spans, *((b, None) for b in bare)))


@dataclass(frozen=True)
class _Tensor:
    """A contiguous tensor of a typical call (expr.TensorInfo)."""

    shape: tuple[int, ...]

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim: int) -> int:
        if not 0 <= dim < len(self.shape):
            raise ValueError(f"dimension {dim} of a {len(self.shape)}-d tensor")
        return self.shape[dim]

    def stride(self, dim: int) -> int:
        self.size(dim)
        return math.prod(self.shape[dim + 1 :])


# Values of a typical call's unknowns, per kind of symbol and choice:
# - a size: a multiple of 16 (16 x an odd prime: products stay multiples of 16), an odd number (an odd
#   prime: products of them stay odd) or 8 modulo 16 (8 x an odd prime: twice it is a multiple of 16);
# - an integer the recipe relates to no tensor ("free": a unit stride, a flag, a row stride the extents do
#   not name): 1 or a multiple of 16 (other values run the class that gives it up alone);
# - an integer it computes by more than + - * ("opaque", such as cdiv(rows, programs)): 1, a multiple of 16,
#   or neither.
_PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)
SymbolKind = Literal["size", "free", "opaque"]
_CHOICES: dict[SymbolKind, tuple[str, ...]] = {"size": ("D", "odd", "8"), "free": ("1", "D"),
                                               "opaque": ("1", "D", "odd")}  # fmt: skip


def _value(index: int, choice: str) -> int:
    p = _PRIMES[index % len(_PRIMES)]
    return {"D": 16 * p, "odd": 1 + 2 * 16 * p, "8": 8 * p, "1": 1}[choice]


def _polynomial(e: expr.Expr) -> bool:
    """Whether an expression is sums and products of names, numbers and a tensor's sizes and strides (whose
    divisibility by 16 follows from its operands')."""
    if isinstance(e, (expr.Num, expr.Name)):
        return True
    if isinstance(e, expr.Neg):
        return _polynomial(e.operand)
    if isinstance(e, expr.BinOp):
        return e.op in "+-*" and _polynomial(e.left) and _polynomial(e.right)
    return e.func in ("size", "stride", "numel")


def _reads(kernel: Kernel) -> dict[str, int]:
    """Per tensor, how many dimensions the recipe's expressions read of it (at least)."""
    out: dict[str, int] = {}
    for e in kernel.call_exprs:
        for call in expr.tensor_calls(e):
            name = expr.unparse(call.args[0])
            dim = call.args[1] if call.func in ("size", "stride") else None
            out[name] = max(out.get(name, 1), dim.value + 1 if isinstance(dim, expr.Num) else 1)
    return out


class _Call:
    """One typical call, solved: the values of the integer arguments given the tensors' shapes, making a
    new symbol (a size, a free or an opaque integer) where nothing determines a value. Symbols are made in
    an order that depends only on the recipe, so ``choices`` (per symbol, an entry of _CHOICES of its
    kind; missing: the first) means the same for every call of one kernel."""

    def __init__(self, kernel: Kernel, none: frozenset[str], choices: tuple[str, ...] = ()) -> None:
        self.kernel, self.choices = kernel, choices
        self.kinds: list[SymbolKind] = []
        self.env: dict[str, int] = {}
        self.failed: set[str] = set()
        self.tensors: dict[str, _Tensor | None] = {n: None for n in none}
        self.layouts = {a.name: _layout(kernel, a) for a in kernel.args if a.pointer}
        self.unknown: set[str] = set()  # integers whose values no tensor determines (free or opaque symbols)
        reads = _reads(kernel)
        self.ranks = {
            n: max(len(lay.dims) if lay and not lay.same_as else 0, reads.get(n, 1)) for n, lay in self.layouts.items()
        }
        self._solve()

    def _symbol(self, kind: SymbolKind) -> int:
        index = len(self.kinds)
        self.kinds.append(kind)
        return _value(index, self.choices[index] if index < len(self.choices) else _CHOICES[kind][0])

    def _ints(self) -> list[Arg]:
        return [a for a in self.kernel.args if a.kind == "int" and a.name not in self.env and a.name not in self.failed]

    def _pending(self) -> list[str]:
        return [n for n in self.layouts if n not in self.tensors]

    def _shape(self, name: str, shape: tuple[int, ...]) -> None:
        """Give the tensor its shape, and the free integers that are its strides in the extent their values."""
        self.tensors[name] = tensor = _Tensor(shape)
        layout = self.layouts[name]
        for d, (_, stride) in enumerate(layout.dims if layout and len(layout.dims) == len(shape) else ()):
            if isinstance(stride, expr.Name) and stride.id not in self.env and self._free(stride.id):
                self.env[stride.id] = tensor.stride(d)

    def _free(self, name: str) -> bool:
        arg = next((a for a in self.kernel.args if a.name == name), None)
        return arg is not None and arg.kind == "int" and arg.default is None

    def _step(self) -> bool:
        """Evaluate what can be; whether anything was."""
        progress = False
        for arg in self._ints():
            if arg.default is None:
                continue
            if not _polynomial(arg.default):  # its divisibility does not follow from the sizes': any
                self.env[arg.name] = self._symbol("opaque")
                self.unknown.add(arg.name)
                progress = True
                continue
            try:
                self.env[arg.name] = expr.evaluate(arg.default, self.env, self.tensors)
            except KeyError:
                continue  # waits for another value
            except (ValueError, ZeroDivisionError):
                self.failed.add(arg.name)
            progress = True
        for name in self._pending():
            layout = self.layouts[name]
            if layout is None:
                continue
            if layout.same_as is not None:
                other = self.tensors.get(layout.same_as)
                if layout.same_as in self.tensors:
                    self._shape(name, other.shape if other is not None else (self._symbol("size"),))
                    progress = True
                continue
            try:
                shape = tuple(expr.evaluate(size, self.env, self.tensors) for size, _ in layout.dims)
            except KeyError:
                continue
            except (ValueError, ZeroDivisionError):
                shape = tuple(self._symbol("size") for _ in layout.dims)
            self._shape(name, shape)
            progress = True
        return progress

    def _reads_of(self, name: str) -> set[str]:
        """The names a missing value reads: an integer's default, a tensor's sizes in its extent."""
        arg = next((a for a in self.kernel.args if a.name == name), None)
        if arg is None or name in self.env or name in self.tensors:
            return set()
        layout = self.layouts.get(name)
        if arg.kind == "int":
            exprs = [arg.default] if arg.default is not None else []
        elif layout is None:
            exprs = []
        elif layout.same_as is not None:
            exprs = [expr.Name(layout.same_as)]
        else:
            exprs = [size for size, _ in layout.dims]
        out: set[str] = set()
        for e in exprs:
            out |= {n.id for n in expr.names(e)} | {expr.unparse(c.args[0]) for c in expr.tensor_calls(e)}
        return out

    def _closure(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(self._reads_of(name))
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += self._reads_of(n)
        return seen

    def _anchor(self) -> str | None:
        """The tensor to give new sizes when nothing else can be evaluated: one that something missing reads
        and whose shape depends on itself (its sizes default to ``size(t, d)`` of it) or says nothing of
        itself; first one whose shape depends on no other tensor still without one."""
        needed: set[str] = set()
        for n in [a.name for a in self._ints()] + self._pending():
            needed |= self._reads_of(n)
        pending = self._pending()
        anchors = [n for n in pending if n in needed and (self.layouts[n] is None or n in self._closure(n))]
        alone = [n for n in anchors if not self._closure(n) & (set(pending) - {n})]
        return next(iter(alone + anchors + [n for n in pending if n in needed]), None)

    def _solve(self) -> None:
        while True:
            while self._step():
                pass
            sizes = {n.id for t in self._pending() if (lay := self.layouts[t]) for size, _ in lay.dims
                     for n in expr.names(size)}  # fmt: skip
            free = [a.name for a in self._ints() if a.default is None]
            size = next((n for n in free if n in sizes), None)
            tensor = self._anchor() if size is None else None
            # a size nothing determines; then a tensor whose shape nothing else does; then any other integer
            if size is not None:
                self.env[size] = self._symbol("size")
            elif tensor is not None:
                self._shape(tensor, self._fresh_shape(tensor))
            elif free:
                self.env[free[0]] = self._symbol("free")
                self.unknown.add(free[0])
            else:
                return

    def _fresh_shape(self, name: str) -> tuple[int, ...]:
        """New sizes for a tensor's dimensions, but those its extent already determines."""
        layout = self.layouts[name]
        if layout is None or layout.same_as is not None:
            return tuple(self._symbol("size") for _ in range(self.ranks[name]))
        shape = []
        for size, _ in layout.dims:
            try:
                shape.append(expr.evaluate(size, self.env, self.tensors))
            except (KeyError, ValueError, ZeroDivisionError):
                shape.append(self._symbol("size"))
        return tuple(shape)


def nones(kernel: Kernel) -> Iterator[frozenset[str]]:
    """Every choice of which optional arguments a call passes as None (none first)."""
    optional = [a.name for a in kernel.args if a.optional]
    for picks in itertools.product((False, True), repeat=len(optional)):
        yield frozenset(n for n, none in zip(optional, picks, strict=True) if none)


def _choices(kinds: list[SymbolKind]) -> list[tuple[str, ...]]:
    """The typical calls to evaluate, as a choice per symbol: per kind, every combination of up to
    MAX_EVERY_COMBINATION symbols (two free integers); past that, the combinations in which all symbols but
    at most one choose alike."""
    index = {kind: [i for i, k in enumerate(kinds) if k == kind] for kind in _CHOICES}

    def options(kind: SymbolKind, every: int) -> list[dict[int, str]]:
        symbols, choices = index[kind], _CHOICES[kind]
        if len(symbols) <= every:
            return [dict(zip(symbols, c, strict=True)) for c in itertools.product(choices, repeat=len(symbols))]
        alike = [dict.fromkeys(symbols, c) for c in choices]
        return alike + [{**alike[b], i: c} for b in range(len(choices)) for i in symbols for c in choices
                        if c != choices[b]]  # fmt: skip

    sizes, opaque = options("size", MAX_EVERY_COMBINATION), options("opaque", MAX_EVERY_COMBINATION)
    free = options("free", 2)
    if len(sizes) * len(free) * len(opaque) > MAX_CALLS:
        sizes = options("size", 0)
    out = []
    for parts in itertools.product(sizes, free, opaque):
        merged = {k: v for part in parts for k, v in part.items()}
        out.append(tuple(merged.get(i, _CHOICES[kind][0]) for i, kind in enumerate(kinds)))
    return out


@dataclass(frozen=True)
class Call:
    """One typical call: the optional arguments it passes as None, each integer argument's value (absent:
    an expression failed), and the integers whose value no tensor determines (free or opaque)."""

    none: frozenset[str]
    values: dict[str, int]
    unknown: frozenset[str]


def calls(kernel: Kernel) -> list[list[Call]]:
    """The kernel's typical calls, per choice of None arguments (none first), each list led by the call whose
    sizes are all multiples of 16 and free integers 1."""
    out = []
    for none in nones(kernel):
        kinds = _Call(kernel, none).kinds
        made = [_Call(kernel, none, choices) for choices in _choices(kinds)]
        out.append([Call(none=none, values=dict(c.env), unknown=frozenset(c.unknown)) for c in made])
    return out
