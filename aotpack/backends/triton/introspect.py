"""What a Triton kernel's source says about itself, read the way Triton reads it.

A recipe may point at a ``@triton.jit`` function as published, wrapped in ``@triton.autotune`` and
``@triton.heuristics``. This module unwraps it and reads:
- the parameters (constexpr or not, defaults from the signature, ``do_not_specialize``);
- what the JIT specializes each runtime parameter on, by running Triton's own binder (the function
  the JIT builds from the signature) on probe values, and checking that aotpack's runtime computes
  the same classes (a Triton release with another rule fails the build, naming the difference);
- the autotuner's configs, key, ``reset_to_zero`` and ``restore_value``;
- each heuristic, translated from its lambda into aotpack's expression language when the lambda is
  a plain expression over the arguments (``args['N'] % 16 == 0``, ``args['b'] is not None``).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from ...states import ANY, DIV16, ONE, State


class IntrospectError(Exception):
    """The kernel object is not something aotpack can read (the message says why)."""


@dataclass(frozen=True, kw_only=True)
class Param:
    name: str
    constexpr: bool
    default: Any = None  # the signature's default, when has_default
    has_default: bool = False
    # runtime params: what the JIT keys it on, per kind of argument the recipe gives it
    pointer_states: tuple[State, ...] = (DIV16, ANY)
    int_states: tuple[State, ...] = (ONE, DIV16, ANY)


@dataclass(frozen=True, kw_only=True)
class TunedConfig:
    """One ``triton.Config`` of an autotuner."""

    kwargs: tuple[tuple[str, Any], ...]
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, Any], ...]  # num_ctas, maxnreg where not the defaults


@dataclass(frozen=True, kw_only=True)
class Heuristic:
    name: str
    expression: str | None  # in aotpack's expression language; None: not translatable (reason)
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class KernelInfo:
    params: tuple[Param, ...]
    configs: tuple[TunedConfig, ...] = ()  # an autotuner's configs (empty: not autotuned)
    key: tuple[str, ...] = ()
    reset_to_zero: tuple[str, ...] = ()
    restore_value: tuple[str, ...] = ()
    heuristics: tuple[Heuristic, ...] = ()
    loops: tuple[tuple[str, str], ...] = ()  # (parameter, constexpr): loops stepping over one by the other

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


def unwrap(obj: Any) -> Any:
    """The ``@triton.jit`` function inside autotune/heuristics wrappers (None if there is none)."""
    from triton.runtime import JITFunction

    seen = 0
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn") and seen < 16:
        obj, seen = obj.fn, seen + 1
    return obj if isinstance(obj, JITFunction) else None


def describe(obj: Any) -> KernelInfo:
    """Read a (possibly wrapped) Triton kernel; raises IntrospectError."""
    from triton.runtime import Autotuner, Heuristics

    fn = unwrap(obj)
    if fn is None:
        raise IntrospectError(f"is a {type(obj).__name__}, not a @triton.jit function (or one wrapped in "
                              "@triton.autotune / @triton.heuristics)")  # fmt: skip
    configs: tuple[TunedConfig, ...] = ()
    key: tuple[str, ...] = ()
    reset: tuple[str, ...] = ()
    restore: tuple[str, ...] = ()
    heuristics: list[Heuristic] = []
    layer = obj
    while layer is not fn:
        if isinstance(layer, Autotuner):
            if configs:
                raise IntrospectError("is autotuned twice; aotpack reads one @triton.autotune")
            configs = tuple(_config(c) for c in layer.configs)
            key, reset, restore = tuple(layer.keys), tuple(layer.reset_to_zero), tuple(layer.restore_value)
        elif isinstance(layer, Heuristics):
            heuristics += [_heuristic(name, f) for name, f in layer.values.items()]
        else:
            raise IntrospectError(f"wraps its @triton.jit function in a {type(layer).__name__}, which aotpack cannot "
                                  "read (it reads @triton.autotune and @triton.heuristics)")  # fmt: skip
        layer = layer.fn
    return KernelInfo(params=_params(fn), configs=configs, key=key, reset_to_zero=reset, restore_value=restore,
                      heuristics=tuple(heuristics), loops=loops(getattr(fn, "src", "")))  # fmt: skip


_RANGES = {"range", "static_range"}  # range(...), tl.range(...), tl.static_range(...)


def loops(src: str) -> tuple[tuple[str, str], ...]:
    """The loops of a kernel's source that step over a parameter by a name, ``for k in range(0, K, BLOCK_K)``
    or ``range(0, tl.cdiv(K, BLOCK_K))``: (parameter, step) pairs, in source order. The dispatcher reads them
    as tiles of the key (aotpack/selection.py); source that does not parse has none."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(src))
    except (SyntaxError, ValueError):
        return ()
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)):
            continue
        fn = node.iter.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        args = node.iter.args
        pair: tuple[ast.expr, ast.expr] | None = None
        if name in _RANGES and len(args) == 3:
            pair = (args[1], args[2])
        elif name in _RANGES and 1 <= len(args) <= 2 and isinstance(args[-1], ast.Call):
            inner = args[-1]
            called = inner.func.attr if isinstance(inner.func, ast.Attribute) else getattr(inner.func, "id", "")
            if called == "cdiv" and len(inner.args) == 2:
                pair = (inner.args[0], inner.args[1])
        if pair is not None and all(isinstance(e, ast.Name) for e in pair):
            item = (pair[0].id, pair[1].id)  # type: ignore[attr-defined]
            if item not in found:
                found.append(item)
    return tuple(found)


def _config(config: Any) -> TunedConfig:
    options = []
    if getattr(config, "num_ctas", 1) not in (None, 1):
        options.append(("num_ctas", config.num_ctas))
    if getattr(config, "maxnreg", None) is not None:
        options.append(("maxnreg", config.maxnreg))
    if getattr(config, "pre_hook", None) is not None:
        raise IntrospectError("has an autotune config with a pre_hook, which aotpack cannot run at launch")
    return TunedConfig(kwargs=tuple(sorted(config.kwargs.items())), num_warps=config.num_warps,
                       num_stages=config.num_stages, options=tuple(options))  # fmt: skip


# ---------------------------------------------------------------- the JIT's specialization rule


class _Dtype:
    """Stands for a torch dtype in the probes (Triton reads only its name)."""

    def __str__(self) -> str:
        return "torch.float16"


class _Tensor:
    """Stands for a tensor at an address in the probes."""

    dtype = _Dtype()

    def __init__(self, address: int) -> None:
        self.address = address

    def data_ptr(self) -> int:
        return self.address


# probe values and the class aotpack's runtime computes for them (aot_runtime.c: call_state)
_INT_PROBES = (1, 0, 16, 17, -16, -1, 48, 2**31 - 16, 2**31 + 16, 2**40 + 1, 2**63 - 16)
_PTR_PROBES = (0x7F0000000000, 0x7F0000000008, 0x7F0000000004, 0x7F0000000010, 0x7F0000000002)


def _ours(value: int) -> str:
    return ONE if value == 1 else DIV16 if value % 16 == 0 else ANY


def _params(fn: Any) -> tuple[Param, ...]:
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import create_function_from_signature

    binder = create_function_from_signature(fn.signature, fn.params, BaseBackend)
    out = []
    for index, p in enumerate(fn.params):
        default = p.default if p.has_default else None
        if p.is_constexpr:
            out.append(Param(name=p.name, constexpr=True, default=default, has_default=p.has_default))
            continue

        def probe(value: Any, at: int = index) -> Any:
            args = [1] * len(fn.params)
            args[at] = value
            return binder(*args)[1][at]

        int_states = _states(p.name, [(v, probe(v)) for v in _INT_PROBES], _ours)
        ptr_states = _states(p.name, [(a, probe(_Tensor(a))) for a in _PTR_PROBES],
                             lambda a: DIV16 if a % 16 == 0 else ANY)  # fmt: skip
        out.append(Param(name=p.name, constexpr=False, default=default, has_default=p.has_default,
                         pointer_states=ptr_states, int_states=int_states))  # fmt: skip
    return tuple(out)


def _states(name: str, probes: list[tuple[Any, Any]], ours: Any) -> tuple[State, ...]:
    """The classes the JIT gives an argument over the probes, checked against aotpack's rule: the
    JIT may specialize less (do_not_specialize, annotations), never differently."""
    seen = []
    for value, (kind, key) in probes:
        if kind == "constexpr":  # folded into the code: only an integer equal to 1 may be
            state = ONE if key == 1 and value == 1 else "?"
        elif key is None or not isinstance(key, str):
            state = ANY  # not specialized (do_not_specialize), or a key that changes no code
        else:
            state = {"D": DIV16, "": ANY}.get(key, "?")
        expected = ours(value)
        if state != ANY and state != expected:
            raise IntrospectError(
                f"Triton's JIT specializes argument {name!r} = {value!r} as {kind}/{key!r}, which aotpack's runtime "
                f"would class as {expected or 'nothing'!r}; this Triton release is not supported"
            )
        if state not in seen:
            seen.append(state)
    order: tuple[State, ...] = (ONE, DIV16, ANY)
    return tuple(s for s in order if s in seen or s == ANY)


# ---------------------------------------------------------------- heuristics


def _heuristic(name: str, fn: Any) -> Heuristic:
    try:
        node = _lambda_node(fn)
        arg = node.args.args[0].arg if node.args.args else None
        if arg is None:
            raise _Untranslatable("it takes no argument")
        return Heuristic(name=name, expression=_translate(node.body, arg))
    except _Untranslatable as exc:
        return Heuristic(name=name, expression=None, reason=str(exc))


class _Untranslatable(Exception):
    pass


def _lambda_node(fn: Any) -> ast.Lambda:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise _Untranslatable("its source is not available") from None
    code = fn.__code__
    # the source of a lambda is its whole line(s); parse until a statement fits, then find the lambda
    for candidate in (source, "(" + source.strip().rstrip(",") + ")", "{" + source.strip().rstrip(",") + "}"):
        try:
            tree = ast.parse(candidate)
        except SyntaxError:
            continue
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        if len(lambdas) == 1:
            return lambdas[0]
        if len(lambdas) > 1:
            params = list(code.co_varnames[: code.co_argcount])
            matching = [n for n in lambdas if [a.arg for a in n.args.args] == params]
            if len(matching) == 1:
                return matching[0]
            raise _Untranslatable("its line holds several lambdas")
    raise _Untranslatable("its source is not a lambda aotpack can find")


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_CALLS = {"next_power_of_2": "next_pow2", "cdiv": "cdiv", "min": "min", "max": "max"}


def _translate(node: ast.expr, args: str) -> str:
    def tr(n: ast.expr) -> str:
        return _translate(n, args)

    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == args:
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        raise _Untranslatable(f"it indexes {args} with something other than a name")
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return str(int(node.value))
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return str(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return f"({tr(node.left)} {_BINOPS[type(node.op)]} {tr(node.right)})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return f"(-{tr(node.operand)})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return f"({tr(node.operand)} == 0)"
    if isinstance(node, ast.BoolOp):
        fn = "min" if isinstance(node.op, ast.And) else "max"
        return f"{fn}({', '.join(f'({tr(v)} != 0)' for v in node.values)})"
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _compare(node, args)
    if isinstance(node, ast.Call) and not node.keywords:
        return _call(node, args)
    raise _Untranslatable(f"'{ast.unparse(node)}' is not a plain expression over the arguments")


def _compare(node: ast.Compare, args: str) -> str:
    op, right = node.ops[0], node.comparators[0]
    if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
        test = f"none({_translate(node.left, args)})"
        return test if isinstance(op, ast.Is) else f"({test} == 0)"
    if type(op) in _CMPOPS:
        return f"({_translate(node.left, args)} {_CMPOPS[type(op)]} {_translate(right, args)})"
    raise _Untranslatable(f"'{ast.unparse(node)}' is not a plain expression over the arguments")


def _call(node: ast.Call, args: str) -> str:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in _CALLS:
        return f"{_CALLS[name]}({', '.join(_translate(a, args) for a in node.args)})"
    if name in ("int", "bool") and len(node.args) == 1:
        inner = _translate(node.args[0], args)
        return inner if name == "int" else f"({inner} != 0)"
    raise _Untranslatable(f"'{ast.unparse(node)}' is not a plain expression over the arguments")
