"""Where a @triton.jit function's source is, for a process elsewhere: its module path where a fresh process imports
it, else its source written out with all it reads (``describe``). ``aotpack record``'s agent describes each function
it records, and ``coverage()`` each one a package let the JIT compile; aotpack turns both into recipes.

A runtime module (runtime/__init__.py says what that means): standard library only."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import threading
from typing import Any

from ._aotpack_identity import PLAIN, constant_text, identity, jit_of, reads


class _Sources:
    """What this process described: per function (by id, with the function: an id is reused once its object is
    gone, and a kernel generated later must not read an earlier one's description) its description, and the
    text of each source written out, by the name ``describe`` gave it. Kept for the process's life: an event a
    report writes at exit names them (``coverage()`` after ``deactivate()`` too)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.described: dict[int, tuple[Any, dict[str, Any]]] = {}
        self.texts: dict[str, str] = {}  # source file name -> its text, for functions not importable elsewhere


_state = _Sources()


def source_name(text: str) -> str:
    """The file name a written-out source has in a recording's ``kernels/`` folder: what its text hashes to. The
    only name ``aotpack record`` takes from a recorded event or a report (any other could name a file elsewhere)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16] + ".py"


def is_source_name(name: str) -> bool:
    """Whether ``name`` has the form ``source_name`` gives: 16 lowercase hex digits and ``.py``."""
    return len(name) == 19 and name.endswith(".py") and all(c in "0123456789abcdef" for c in name[:16])


def describe(jit: Any) -> dict[str, Any]:
    """Where a @triton.jit function is (``source``: the name of its source written out, ``source_text()`` has
    it; else its module path) and what it is. The source is written out whenever it can need only Triton
    (``_closure``), so that a build host without the function's library (one that needs a GPU to import) builds
    it; else where no module path names it elsewhere (``_source_of``)."""
    with _state.lock:
        kept = _state.described.get(id(jit))
        if kept is not None and kept[0] is jit:
            return kept[1]
    fn = jit.fn
    out: dict[str, Any] = {
        "module": fn.__module__,
        "qualname": fn.__qualname__,
        "name": fn.__name__,
        "params": [[p.name, bool(p.is_constexpr)] for p in jit.params],
        "identity": identity(jit),
    }
    text = _closure(jit)
    if text is None and not _importable(fn):
        text = _source_of(jit)
    if text is not None:
        out["source"] = source_name(text)
    with _state.lock:
        if text is not None:
            _state.texts[out["source"]] = text
        _state.described[id(jit)] = (jit, out)
    return out


def source_text(name: str) -> str:
    """The text of a source ``describe`` wrote out."""
    return _state.texts[name]


def source_names(value: Any) -> list[str]:
    """The written-out sources an event names (its function's, and those of functions passed as constexprs)."""
    if isinstance(value, dict):
        found = [value["source"]] if isinstance(value.get("source"), str) and "identity" in value else []
        return found + [n for v in value.values() for n in source_names(v)]
    if isinstance(value, list):
        return [n for v in value for n in source_names(v)]
    return []


def _importable(fn: Any) -> bool:
    """Whether a fresh process elsewhere imports the function by its module path: a module of an installed
    package (or the standard library) that is the file the function was defined in, at its top level (not in a
    class or another function)."""
    module = fn.__module__
    if module in ("__main__", "__mp_main__") or fn.__qualname__ != fn.__name__:
        return False
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin:
        return False
    here = str(os.path.realpath(fn.__code__.co_filename))
    return os.path.realpath(spec.origin) == here and here.startswith(_installed_roots())


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[str, ...]:
    """Where installed packages and the standard library live for this interpreter."""
    import site
    import sysconfig

    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    roots.update(getattr(site, "getsitepackages", list)())
    roots.add(site.getusersitepackages())
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


def _source_of(jit: Any) -> str:
    """A module holding the function and what it reads: modules imported by name, @triton.jit functions
    (imported where installed, else their source, recursively), constants."""
    lines = [f"# {_origin(jit)}: written out by aotpack with what it reads, as the recorded program had it",
             "import triton", "import triton.language as tl", ""]  # fmt: skip
    body: list[str] = []
    _emit(jit, lines, body, set())
    return "\n".join(lines + body) + "\n"


def _emit(jit: Any, head: list[str], body: list[str], done: set[int]) -> None:
    if id(jit) in done:
        return
    done.add(id(jit))
    import types

    for name, value in reads(jit):
        top = name.split(".")[0]
        root = jit.fn.__globals__.get(top)
        inner = jit_of(value)
        if "." in name:
            if isinstance(root, types.ModuleType) and root.__name__ not in ("triton", "triton.language"):
                line = f"import {root.__name__} as {top}" if root.__name__ != top else f"import {top}"
                if line not in head:
                    head.append(line)
            continue
        if inner is not None and inner is not jit:
            if _importable(inner.fn):
                line = f"from {inner.fn.__module__} import {inner.fn.__name__} as {name}"
                if line not in head:
                    head.append(line)
            else:
                _emit(inner, head, body, done)
                if inner.fn.__name__ != name:
                    body.append(f"{name} = {inner.fn.__name__}")
        elif isinstance(value, types.ModuleType) and value.__name__ not in ("triton", "triton.language"):
            line = f"import {value.__name__} as {name}"
            if line not in head:
                head.append(line)
        elif (text := constant_text(value)) is not None:
            wrapped = type(value).__name__ == "constexpr"
            body.append(f"{name} = tl.constexpr({text})" if wrapped else f"{name} = {text}")
        elif (imported := _import_line(name, value)) is not None and imported not in head:
            head.append(imported)  # a function or object of a module (libdevice's rsqrt, say)
    body += ["", "", _decorator(jit), jit.src.rstrip(), ""]


def _origin(jit: Any) -> str:
    return f"{jit.fn.__module__}:{jit.fn.__qualname__}"


def _decorator(jit: Any) -> str:
    """``@triton.jit`` with the options the function was given."""
    options = {k: getattr(jit, k, None) for k in ("do_not_specialize", "do_not_specialize_on_alignment")}
    given = ", ".join(f"{k}={sorted(_param_names(jit, v))!r}" for k, v in options.items() if v)
    if getattr(jit, "noinline", None):
        given = ", ".join(filter(None, [given, "noinline=True"]))
    return f"@triton.jit({given})" if given else "@triton.jit"


def _import_line(name: str, value: Any) -> str | None:
    """``from module import thing as name`` where the module defines the very object under that name."""
    module, own = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not isinstance(module, str) or not isinstance(own, str):
        return None
    if getattr(sys.modules.get(module), own, None) is not value:
        return None
    return f"from {module} import {own}" + (f" as {name}" if own != name else "")


def _param_names(jit: Any, which: Any) -> list[str]:
    names = [p.name for p in jit.params]
    return [names[w] if isinstance(w, int) else w for w in which]


# ---------------------------------------------------------------- the closure, written out
# What Triton compiles of a function: its source and every @triton.jit function and constant it reads, through
# modules too (``tle.program_id``). Written out alone, needing only Triton, it builds where the function's library
# cannot be imported (one whose __init__ wants a GPU) and keeps the function's source identity.


class _Open(Exception):
    """The function reads what only its program has (said in the message): its closure needs the program."""


def _closure(jit: Any) -> str | None:
    """The function and all it reads as a module that needs only Triton: @triton.jit functions (their source,
    recursively), constants, Triton's own objects, and each other module read through as a namespace (a module
    of only what is read of it); None where it reads anything else, or where one name would mean two things."""
    closure = _Closure()
    try:
        closure.function(jit)
        return closure.text(_origin(jit))
    except _Open:
        return None


class _Closure:
    """One written-out module's globals, as they are gathered: a name keeps one meaning throughout."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"triton": ("=", "triton"), "tl": ("=", "triton.language")}
        self.imports = ["import triton", "import triton.language as tl"]
        self.head: list[str] = []  # namespaces and constants
        self.body: list[str] = []  # the functions
        self.tail: list[str] = []  # names for functions, namespaces' functions: after the functions
        self.spaces: dict[int, str] = {}  # id(module) -> where its namespace is in the file
        self.attributes: set[str] = set()  # the namespaces' attributes given (``tle.program_id``)
        self.unread: set[str] = set()  # names a function's source uses that its scope lacks (a local, say)
        self.done: set[int] = set()

    def function(self, jit: Any) -> str:
        """Write out a @triton.jit function and all it reads; the name it is defined under."""
        import ast

        name = jit.fn.__name__
        if id(jit) in self.done:
            return str(name)
        self.done.add(id(jit))
        self.bind(name, jit)
        tree = ast.parse(jit.src)
        found = dict(reads(jit))
        local = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        local |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.unread |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - found.keys()
        for read, value in sorted(found.items()):  # a module's name sorts before what is read through it
            holder, _, attr = read.rpartition(".")
            if not holder:
                self.place(read, value, read in local)
            elif id(found.get(holder)) in self.spaces:
                self.place(f"{self.spaces[id(found[holder])]}.{attr}", value, False)
        self.body += ["", "", _decorator(jit), jit.src.rstrip()]
        return str(name)

    def place(self, where: str, value: Any, local: bool) -> None:
        """Give ``where`` (a global name, or a namespace's attribute) ``value``."""
        import types

        named = "." not in where
        if not named:  # one module, one value: given once
            if where in self.attributes:
                return
            self.attributes.add(where)
        text = _value_text(value)
        inner = jit_of(value) if text is None else None
        if inner is not None:
            defined = self.function(inner)
            if where != defined and (not named or self.bind(where, inner)):
                self.tail.append(f"{where} = {defined}")
        elif isinstance(value, types.ModuleType) and text is None:
            if not named or self.bind(where, value):
                known = self.spaces.setdefault(id(value), where)
                self.head.append(f"{where} = {known}" if known != where else
                                 f"{where} = type(triton)({value.__name__!r})  # the module's namespace")  # fmt: skip
        elif text is not None:
            if not named or self.bind(where, ("=", text[0])):
                if text[1] not in ("triton", "triton.language", None) and f"import {text[1]}" not in self.imports:
                    self.imports.append(f"import {text[1]}")
                self.head.append(f"{where} = {text[0]}")
        elif named and local:  # a global that a parameter or local variable of the same name hides
            self.unread.add(where)
        else:
            raise _Open(f"{where} is a {type(value).__module__}.{type(value).__qualname__}")

    def bind(self, name: str, value: Any) -> bool:
        """Name ``value`` (a constant as ``("=", its text)``) in the module; False where it has that name already.
        A name given another value would change what a function reads."""
        if name not in self.names:
            self.names[name] = value
            return True
        known = self.names[name]
        if known is value or (type(known) is tuple and known == value):
            return False
        raise _Open(f"{name} names two things")

    def text(self, origin: str) -> str:
        clash = sorted(self.unread & self.names.keys())
        if clash:  # a name the module binds that a function reads as its own (or nothing): it would read another
            raise _Open(f"{', '.join(clash)} would change meaning")
        first = f"# {origin}: written out by aotpack with every @triton.jit function and constant it reads"
        return "\n".join([first, *self.imports, "", *self.head, *self.body, "", *self.tail]) + "\n"


def _value_text(value: Any) -> tuple[str, str | None] | None:
    """A constant's or a Triton object's text in a written-out module, and the module to import for it."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        inner = _value_text(value.value)
        return (f"tl.constexpr({inner[0]})", inner[1]) if inner is not None else None
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return f"float({repr(value)!r})", None  # repr gives nan, inf: no Python names
    if value is None or isinstance(value, PLAIN):
        return repr(value), None
    path = _triton_path(value)
    return (path, path if type(value).__name__ == "module" else path.rpartition(".")[0]) if path else None


def _of_triton(module: str) -> bool:
    return module == "triton" or module.startswith("triton.")


def _triton_path(value: Any) -> str | None:
    """Where Triton itself has ``value`` (``triton.language.extra.cuda.libdevice.div_rn``): a module of Triton's,
    an object its module has under its own name, or a name of triton.language (a dtype)."""
    module, own = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if type(value).__name__ == "module":
        return str(own) if _of_triton(str(own)) else None
    if isinstance(module, str) and _of_triton(module) and isinstance(own, str):
        return f"{module}.{own}" if getattr(sys.modules.get(module), own, None) is value else None
    language = sys.modules.get("triton.language")
    names = sorted(n for n, v in vars(language).items() if v is value and n[0] != "_") if language else []
    return f"triton.language.{names[0]}" if names else None
