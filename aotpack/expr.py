"""The small expression language of launch grids, problem keys and argument defaults.

Expressions are integer arithmetic over names: ``cdiv(n_elements, BLOCK)``, ``max(1, M // 64)``,
``size(a, 0)``, and tests that give 0 or 1 (``K % 64 == 0``, ``none(bias)``). They are parsed into a
frozen AST (never ``eval``'ed), evaluated in Python for tests and introspection, and emitted as C for
the generated dispatcher. Division and modulo follow Python's floor semantics in both.

Why a parser of its own rather than ``ast.parse`` with a whitelist of node types: the language is not Python's
(``cdiv``, ``size``, ``none`` and tests that are integers; every node becomes C), every error must name its
offset in the recipe's text, and the input is bounded in tokens and depth before any tree is built
(``limits``): ``ast.parse`` would first build the tree of a much larger language from whatever a recipe holds
(CPython's parser can exhaust memory or the C stack on deep nesting before a whitelist sees a node), and what
it accepts would then have to be cut back to this language node by node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from .limits import MAX_DEPTH, MAX_TOKENS


class ExprError(ValueError):
    """A parse or name error at ``offset`` (0-based) inside the expression text."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class Num:
    value: int
    offset: int = 0


@dataclass(frozen=True)
class Name:
    id: str
    offset: int = 0


@dataclass(frozen=True)
class Neg:
    operand: Expr
    offset: int = 0


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Expr
    right: Expr
    offset: int = 0


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    offset: int = 0


Expr = Num | Name | Neg | BinOp | Call

# name -> (minimum, maximum) argument count; tensor functions take a tensor argument first
SCALAR_FUNCTIONS: Mapping[str, tuple[int, int]] = {
    "cdiv": (2, 2),
    "min": (2, 8),
    "max": (2, 8),
    "next_pow2": (1, 1),
}
TENSOR_FUNCTIONS: Mapping[str, tuple[int, int]] = {"numel": (1, 1), "size": (2, 2), "stride": (2, 2), "none": (1, 1)}
COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(//|==|!=|<=|>=|[-+*%(),<>]))")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            offset = pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise ExprError(f"unexpected character {text[offset]!r}", offset)
        start = m.start(m.lastindex or 0)
        if len(out) == MAX_TOKENS:  # bounds the parse tree, which every later pass walks recursively
            raise ExprError(f"the expression is longer than {MAX_TOKENS} numbers, names and operators", start)
        kind = "num" if m.group(1) else "name" if m.group(2) else "op"
        out.append((kind, m.group(m.lastindex or 0), start))
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def nested(self, offset: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"the expression nests deeper than {MAX_DEPTH} levels", offset)

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def take(self, value: str) -> bool:
        if self.peek()[1] == value and self.peek()[0] == "op":
            self.i += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.take(value):
            _, tok, off = self.peek()
            raise ExprError(f"expected {value!r} but found {tok or 'the end'!r}", off)

    def expr(self) -> Expr:
        node = self.sum()
        if self.peek()[0] == "op" and self.peek()[1] in COMPARISONS:  # not chained: a < b < c is refused
            _, op, off = self.toks[self.i]
            self.i += 1
            node = BinOp(op, node, self.sum(), off)
        return node

    def sum(self) -> Expr:
        node = self.term()
        while self.peek()[0] == "op" and self.peek()[1] in "+-":
            _, op, off = self.toks[self.i]
            self.i += 1
            node = BinOp(op, node, self.term(), off)
        return node

    def term(self) -> Expr:
        node = self.unary()
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "//", "%"):
            _, op, off = self.toks[self.i]
            self.i += 1
            node = BinOp(op, node, self.unary(), off)
        return node

    def unary(self) -> Expr:
        kind, tok, off = self.peek()
        if kind == "op" and tok == "-":
            self.i += 1
            self.nested(off)
            node = Neg(self.unary(), off)
            self.depth -= 1
            return node
        return self.atom()

    def atom(self) -> Expr:
        kind, tok, off = self.peek()
        self.i += 1
        if kind == "num":
            if len(tok.lstrip("0")) > 19 or int(tok) >= 1 << 63:
                raise ExprError(f"the integer {tok[:24]}{'...' if len(tok) > 24 else ''} does not fit in 64 bits", off)
            return Num(int(tok), off)
        if kind == "name":
            if self.take("("):
                self.nested(off)
                args = [self.expr()]
                while self.take(","):
                    args.append(self.expr())
                self.expect(")")
                self.depth -= 1
                return _check_call(Call(tok, tuple(args), off))
            return Name(tok, off)
        if kind == "op" and tok == "(":
            self.nested(off)
            node = self.expr()
            self.expect(")")
            self.depth -= 1
            return node
        raise ExprError(f"expected a number, a name or '(' but found {tok or 'the end'!r}", off)


def _check_call(call: Call) -> Call:
    arity = SCALAR_FUNCTIONS.get(call.func) or TENSOR_FUNCTIONS.get(call.func)
    if arity is None:
        known = ", ".join(sorted([*SCALAR_FUNCTIONS, *TENSOR_FUNCTIONS]))
        raise ExprError(f"unknown function {call.func!r} (known: {known})", call.offset)
    lo, hi = arity
    if not lo <= len(call.args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ExprError(f"{call.func}() takes {want} arguments, got {len(call.args)}", call.offset)
    if call.func in TENSOR_FUNCTIONS:
        if not isinstance(call.args[0], Name):
            raise ExprError(f"{call.func}() takes a pointer argument's name first", call.offset)
        if len(call.args) == 2 and not isinstance(call.args[1], Num):
            raise ExprError(f"{call.func}() takes a constant dimension", call.args[1].offset)
    return call


def parse(text: str | int) -> Expr:
    """Parse an expression (an int is a constant)."""
    if isinstance(text, bool):
        raise ExprError("expected an integer expression, not a boolean", 0)
    if isinstance(text, int):
        if not -(1 << 63) <= text < 1 << 63:
            raise ExprError(f"the integer {str(text)[:24]} does not fit in 64 bits", 0)
        return Num(text)
    parser = _Parser(text)
    node = parser.expr()
    kind, tok, off = parser.peek()
    if kind != "end":
        raise ExprError(f"unexpected {tok!r} after the expression", off)
    _no_constant_zero_divisor(node)
    return node


def _no_constant_zero_divisor(node: Expr) -> None:
    """A division, modulo or cdiv by the literal 0 fails every call: say so now."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, BinOp):
            if n.op in ("//", "%") and n.right == Num(0, n.right.offset):
                raise ExprError(f"{'division' if n.op == '//' else 'modulo'} by zero", n.offset)
            stack += [n.left, n.right]
        elif isinstance(n, Neg):
            stack.append(n.operand)
        elif isinstance(n, Call):
            if n.func == "cdiv" and n.args[1] == Num(0, n.args[1].offset):
                raise ExprError("cdiv by zero", n.offset)
            stack += list(n.args)


def is_boolean(node: Expr) -> bool:
    """Whether the expression is a test that gives 0 or 1 (a comparison, none(), or min/max of tests)."""
    if isinstance(node, BinOp):
        return node.op in COMPARISONS
    if isinstance(node, Call):
        return node.func == "none" or (node.func in ("min", "max") and all(is_boolean(a) for a in node.args))
    return False


def names(node: Expr) -> list[Name]:
    """Every plain name the expression reads (not tensor arguments of numel/size/stride)."""
    if isinstance(node, Name):
        return [node]
    if isinstance(node, Neg):
        return names(node.operand)
    if isinstance(node, BinOp):
        return names(node.left) + names(node.right)
    if isinstance(node, Call):
        args = node.args[1:] if node.func in TENSOR_FUNCTIONS else node.args
        return [n for a in args for n in names(a)]
    return []


def nodes(node: Expr) -> list[Expr]:
    """The expression's nodes, each before its operands (pre-order)."""
    if isinstance(node, Neg):
        return [node, *nodes(node.operand)]
    if isinstance(node, BinOp):
        return [node, *nodes(node.left), *nodes(node.right)]
    if isinstance(node, Call):
        return [node, *(n for a in node.args for n in nodes(a))]
    return [node]


def tensor_calls(node: Expr) -> list[Call]:
    """Every numel/size/stride call in the expression."""
    return [n for n in nodes(node) if isinstance(n, Call) and n.func in TENSOR_FUNCTIONS]


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero in an expression")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("modulo by zero in an expression")
    return a % b


def next_pow2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1): the pow2 bucket of a key value."""
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


_BINOPS: Mapping[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": _floordiv,
    "%": _mod,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
}


class TensorInfo(Protocol):
    def numel(self) -> int: ...
    def size(self, dim: int) -> int: ...
    def stride(self, dim: int) -> int: ...


def _int64(value: int) -> int:
    """The generated C computes in int64 and refuses what leaves it; so does the evaluator."""
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError("a launch expression overflows 64-bit integers")
    return value


def evaluate(node: Expr, env: Mapping[str, int], tensors: Mapping[str, TensorInfo | None] | None = None) -> int:
    """Evaluate with Python integers, exactly as the generated C does (floor division; a result past
    int64 raises ValueError, as the C reports an error)."""

    def ev(n: Expr) -> int:
        return evaluate(n, env, tensors)

    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return env[node.id]
    if isinstance(node, Neg):
        return _int64(-ev(node.operand))
    if isinstance(node, BinOp):
        return _int64(_BINOPS[node.op](ev(node.left), ev(node.right)))
    if node.func in TENSOR_FUNCTIONS:
        assert isinstance(node.args[0], Name)
        tensor = (tensors or {})[node.args[0].id]
        if node.func == "none":
            return int(tensor is None)
        if tensor is None:
            raise ValueError(f"{node.func}() of {node.args[0].id}, which is None")
        if node.func == "numel":
            return tensor.numel()
        dim = ev(node.args[1])
        return tensor.size(dim) if node.func == "size" else tensor.stride(dim)
    values = [ev(a) for a in node.args]
    if node.func == "cdiv":
        return _int64(-_floordiv(-values[0], values[1]))
    if node.func == "min":
        return min(values)
    if node.func == "max":
        return max(values)
    return next_pow2(values[0])


_CHECKED = {"+": "add", "-": "sub", "*": "mul"}  # the runtime's overflow-checked helpers


def to_c(node: Expr, resolve: Callable[[str], str], tensor_index: Callable[[str], int]) -> str:
    """Emit C over int64_t. ``resolve`` maps a name to a C expression; runtime helpers
    (``aot_cdiv`` ...) take the evaluation context ``x`` so that a division by zero or a missing
    shape becomes an error, never a crash."""

    def emit(n: Expr) -> str:
        return to_c(n, resolve, tensor_index)

    if isinstance(node, Num):
        return f"INT64_C({node.value})"
    if isinstance(node, Name):
        return resolve(node.id)
    if isinstance(node, Neg):
        return f"aot_neg(x, {emit(node.operand)})"
    if isinstance(node, BinOp):
        if node.op in _CHECKED:
            return f"aot_{_CHECKED[node.op]}(x, {emit(node.left)}, {emit(node.right)})"
        if node.op == "//":
            return f"aot_floordiv(x, {emit(node.left)}, {emit(node.right)})"
        if node.op == "%":
            return f"aot_mod(x, {emit(node.left)}, {emit(node.right)})"
        if node.op in COMPARISONS:
            return f"((int64_t)({emit(node.left)} {node.op} {emit(node.right)}))"
        return f"({emit(node.left)} {node.op} {emit(node.right)})"
    if node.func in TENSOR_FUNCTIONS:
        assert isinstance(node.args[0], Name)
        index = tensor_index(node.args[0].id)
        if node.func == "numel":
            return f"aot_numel(x, {index})"
        if node.func == "none":
            return f"((int64_t)(x->none >> {index} & 1))"
        return f"aot_{node.func}(x, {index}, {emit(node.args[1])})"
    if node.func in ("min", "max"):
        out = emit(node.args[0])
        for arg in node.args[1:]:
            out = f"aot_{node.func}({out}, {emit(arg)})"
        return out
    return f"aot_{node.func}(x, {', '.join(emit(a) for a in node.args)})"


def unparse(node: Expr) -> str:
    """Canonical text of an expression (for ids, docs and the manifest)."""
    if isinstance(node, Num):
        return str(node.value)
    if isinstance(node, Name):
        return node.id
    if isinstance(node, Neg):
        return f"-{unparse(node.operand)}"
    if isinstance(node, BinOp):
        return f"({unparse(node.left)} {node.op} {unparse(node.right)})"
    return f"{node.func}({', '.join(unparse(a) for a in node.args)})"
