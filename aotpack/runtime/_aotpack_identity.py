"""How a @triton.jit function is known from one process to another: its source identity, which ``aotpack record``
writes and ``activate()`` looks up, whatever module, file or line holds the function. Kernels generated anew in every
process (Helion, code generators, exec) are the same kernel when their code is.

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import hashlib
from typing import Any

PLAIN = (bool, int, float, str)  # the constants a function's identity and a compilation's JSON hold as they are


def jit_of(value: Any) -> Any:
    """The @triton.jit function inside autotune/heuristics wrappers, or None."""
    for _ in range(16):
        if type(value).__name__ == "JITFunction" and hasattr(value, "src"):
            return value
        value = getattr(value, "fn", None)
        if value is None:
            return None
    return None


def identity_of(jit: Any) -> str:
    """``identity``, computed once per function object (kept on it)."""
    known = jit.__dict__.get("_aotpack_identity")
    if known is None:
        known = jit.__dict__["_aotpack_identity"] = identity(jit)
    return str(known)


def identity(jit: Any) -> str:
    """A @triton.jit function's source identity: its source, and by name every @triton.jit function and constant
    it reads, recursively: the same for the same code under any module name, file or line, in any process. Triton's
    own @triton.jit functions (``tl.sum``, ``tl.cdiv``) count by their name alone: their source is Triton's, which
    changes from one release to the next, and a program that runs another Triton than the one a package was built
    with still makes the same call (its kernel is the package's)."""
    return _identity(jit, {})


def _identity(jit: Any, seen: dict[int, str | None]) -> str:
    if id(jit) in seen:
        return seen[id(jit)] or "recursive"
    seen[id(jit)] = None
    digest = hashlib.sha256(jit.src.encode())
    for name, value in reads(jit):
        inner = jit_of(value)
        module = str(getattr(getattr(inner, "fn", None), "__module__", ""))
        if inner is not None and (module == "triton" or module.startswith("triton.")):
            digest.update(f"\0{name}=triton:{module}.{inner.fn.__qualname__}".encode())
        elif inner is not None:
            digest.update(f"\0{name}=function:{_identity(inner, seen)}".encode())
        elif (text := constant_text(value)) is not None:
            digest.update(f"\0{name}={text}".encode())
    seen[id(jit)] = digest.hexdigest()
    return seen[id(jit)] or ""


def constant_text(value: Any) -> str | None:
    """A plain constant's text (a tl.constexpr's value), or None for anything else."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        value = value.value
    return repr(value) if value is None or isinstance(value, PLAIN) else None


def reads(jit: Any) -> list[tuple[str, Any]]:
    """The names (and dotted names) the function's source reads, with their values in its scope."""
    import ast
    import inspect

    scope = dict(jit.fn.__globals__)
    try:
        scope.update(inspect.getclosurevars(jit.fn).nonlocals)
    except (TypeError, ValueError):
        pass
    out: dict[str, Any] = {}
    for node in ast.walk(ast.parse(jit.src)):
        dotted, value = _dotted(node, scope)
        if dotted is not None:
            out[dotted] = value
    return sorted(out.items())


def _dotted(node: Any, scope: dict[str, Any]) -> tuple[str | None, Any]:
    import ast

    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in scope:
        return None, None
    value = scope[node.id]
    for attr in reversed(parts):
        value = getattr(value, attr, None)
    return ".".join([node.id, *reversed(parts)]), value
