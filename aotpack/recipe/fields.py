"""The typed readers of a recipe's values that every part of it shares: names, numbers, lists, free text,
paths, sources, targets and expressions. Each refuses a wrong value with its place in the recipe."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import expr, facts, limits, values
from ..errors import Location, RecipeError
from ..model import Source, Widen
from .yamlnodes import Node, control_character, suggest

IDENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


def int_list(node: Node, power_of_two: bool = False, maximum: int | None = None) -> tuple[int, ...]:
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


def const(node: Node) -> int | float | bool | str:
    """A constexpr's value in a recipe (values.constexpr_problem: what the build can take)."""
    value = node.scalar()
    problem = values.constexpr_problem(value)
    if problem is not None:
        raise node.fail(problem)
    assert isinstance(value, (int, float, bool, str))  # (what constexpr_problem lets through)
    return value


def widen(node: Node) -> Widen:
    """``widen:``: each constexpr named (an identifier) with the values it is widened to, the values ``aotpack
    record --widen`` takes (whole numbers within i64, finite numbers, true/false, printable text), each once,
    from 1 to ``limits.MAX_WIDEN`` of them."""
    out: list[tuple[str, tuple[values.Widened, ...]]] = []
    for name, given, where in node.items():
        if not IDENT.match(name):
            raise RecipeError(f"{node.path}: {name!r} is not a constexpr's name (a Python identifier)", where)
        if not given.is_sequence():
            raise given.fail("expected a list of the values the constexpr takes, such as [1, 2, 4, 8]")
        items = given.sequence()
        if not 1 <= len(items) <= limits.MAX_WIDEN:
            raise given.fail(f"give between 1 and {limits.MAX_WIDEN} values (aotpack's limits.MAX_WIDEN); "
                             f"{len(items)} are given")  # fmt: skip
        found: dict[tuple[type, values.Widened], Node] = {}
        for item in items:
            value = item.scalar()
            problem = values.constexpr_problem(value)
            if problem is not None:
                raise item.fail(problem + item.as_written())
            if (type(value), value) in found:
                raise item.fail(f"{value!r} is listed twice (first at line {found[type(value), value].where.line})")
            found[type(value), value] = item
        out.append((name, tuple(v for _, v in found)))
    return tuple(out)


def text(node: Node, one_line: bool) -> str:
    """Free text (a summary, a doc): any printable characters; a doc may span lines. It only ever
    reaches generated files as escaped data (a Python repr, a C string literal, a METADATA field)."""
    text = node.string()  # printable but for lines and tabs (Node.scalar)
    bad = control_character(text, allowed="") if one_line else None
    if bad is not None:
        raise node.fail(f"expected a single line of printable text; it holds the control character {text[bad]!r}")
    return text


def path(node: Node, root: Path, text: str | None = None) -> Path:
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


def recorded_folder(node: Node, root: Path, what: str, key: str) -> Path:
    """The folder ``key:`` names, of what ``aotpack record`` wrote beside the recipe (``what``): resolved, inside
    the recipe's folder ``root``, and there."""
    folder = path(node, root)
    if not folder.is_relative_to(root.resolve()):
        raise node.fail(f"{node.string()!r} is outside the recipe's folder ({root}); keep {what} beside the recipe, "
                        "as aotpack record writes them")  # fmt: skip
    if not folder.is_dir():
        raise node.fail(f"no folder {node.string()!r} beside the recipe (looked for {folder}); record again, or "
                        f"remove {key}:")  # fmt: skip
    return folder


def source(node: Node, root: Path) -> Source:
    text = node.string()
    where, sep, function = text.rpartition(":")
    if not sep or not IDENT.match(function) or not where:
        raise node.fail(f"expected 'path/to/file.py:function' or 'package.module:function', got {text!r}")
    if where.endswith(".py") or "/" in where:
        file = path(node, root, where)
        if not file.is_file():
            raise node.fail(f"kernel source {where!r} not found (looked for {file})")
        if file.stat().st_size > limits.MAX_SOURCE_BYTES:  # importing reads it whole
            raise node.fail(f"kernel source {where!r} is larger than {limits.MAX_SOURCE_BYTES >> 20} MiB (aotpack's "
                            "limits.MAX_SOURCE_BYTES): is it the right file?")  # fmt: skip
        return Source(path=file, module=None, function=function)
    if not all(IDENT.match(part) for part in where.split(".")):
        raise node.fail(f"{where!r} is neither a .py file nor a module path")
    return Source(path=None, module=where, function=function)


def targets(node: Node, extra: Sequence[str] = (), spelt: Callable[[Node, str], str] | None = None) -> tuple[str, ...]:
    """Targets: 'sm_90a' (machine code), or one of ``extra`` (a backend's other targets); ``spelt`` reads a
    backend's other spelling of a target (CUDA's nvcc gencode) as the target."""
    known = list(facts.archs())
    choices = [*known, *extra]
    out: list[str] = []
    for item in node.sequence(allow_scalar=True):
        text = item.string()
        if spelt is not None:
            text = spelt(item, text)
        if text not in choices:
            raise item.fail(f"unknown target {text!r}{suggest(text, choices, 'known')}")
        if text in out:
            raise item.fail(f"target {text!r} is listed twice")
        out.append(text)
    if not out:
        raise node.fail("expected at least one target")
    return tuple(out)


def expression(node: Node, check: Callable[[expr.Expr], None]) -> expr.Expr:
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


def constant(e: expr.Expr, node: Node) -> int | None:
    """The value of an expression that reads no argument (``-5``, ``2 * 64``), else None."""
    if expr.names(e) or expr.tensor_calls(e):
        return None
    try:
        return expr.evaluate(e, {})
    except (expr.ExprError, ValueError) as exc:  # a constant zero divisor was refused when parsed; int64 overflow
        raise node.fail(str(exc)) from None
