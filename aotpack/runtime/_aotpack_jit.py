"""How a @triton.jit function is known from one process to another, and what Triton's JIT compiles, written
as JSON: the part of the runtime (``_aotpack_runtime``) that ``aotpack record``'s agent and ``activate()``
share. Shipped unchanged beside it in each wheel and beside the agent; standard library only."""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import os
import sys
import threading
from typing import Any

ENV_RECORDING = "AOTPACK_RECORD_DIR"  # aotpack record's events folder, in each process of the recorded program
ENV_RECORDING_RUN = "AOTPACK_RECORD_RUN"  # which run of the recorded program this is (record may run it again)


def events_file(folder: str) -> str:
    """This process's events file in aotpack record's ``folder`` (the agent's events, and the Recorder's): a
    process's own, and its run's, since a process of a later run may have an earlier one's id."""
    return os.path.join(folder, f"{os.environ.get(ENV_RECORDING_RUN, '1')}-{os.getpid()}.jsonl")

# ---------------------------------------------------------------- source identity
# How a @triton.jit function is known from one process to another (aotpack record writes it, activate() looks
# it up), whatever module, file or line holds it: kernels generated anew in every process (Helion, code
# generators, exec) are the same kernel when their code is.

_PLAIN = (bool, int, float, str)


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
    it reads, recursively: the same for the same code under any module name, file or line, in any process."""
    return _identity(jit, {})


def _identity(jit: Any, seen: dict[int, str | None]) -> str:
    if id(jit) in seen:
        return seen[id(jit)] or "recursive"
    seen[id(jit)] = None
    digest = hashlib.sha256(jit.src.encode())
    for name, value in reads(jit):
        inner = jit_of(value)
        if inner is not None:
            digest.update(f"\0{name}=function:{_identity(inner, seen)}".encode())
        elif (text := constant_text(value)) is not None:
            digest.update(f"\0{name}={text}".encode())
    seen[id(jit)] = digest.hexdigest()
    return seen[id(jit)] or ""


def constant_text(value: Any) -> str | None:
    """A plain constant's text (a tl.constexpr's value), or None for anything else."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        value = value.value
    return repr(value) if value is None or isinstance(value, _PLAIN) else None


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


# ---------------------------------------------------------------- compilations, as JSON
# What Triton's JIT compiles, in the form aotpack record writes (its agent runs in the recorded program) and a
# package's coverage() reports (the compilations fallback="jit" let through): aotpack turns both into recipes.

def encode(value: Any) -> Any:
    """A constexpr's value as JSON: plain values as they are, others tagged (``{"dtype": "fp16"}``,
    ``{"tuple": [...]}``, ``{"function": {...}}``, ``{"unknown": type}``)."""
    kind = type(value).__name__
    if kind == "constexpr" and hasattr(value, "value"):
        return encode(value.value)
    if value is None or isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)):
        return {"tuple": [encode(v) for v in value]}
    if kind == "dtype" and type(value).__module__.startswith("triton"):
        return {"dtype": str(value)}
    if kind == "dtype" and type(value).__module__ == "torch":
        return {"torch_dtype": str(value).removeprefix("torch.")}
    jit = jit_of(value)
    if jit is not None:
        return {"function": describe(jit)}
    return {"unknown": f"{type(value).__module__}.{kind}", "repr": repr(value)[:200]}


_described: dict[int, dict[str, Any]] = {}
_sources: dict[str, str] = {}  # source file name -> its text, for functions not importable elsewhere
_described_lock = threading.Lock()


def describe(jit: Any) -> dict[str, Any]:
    """Where a @triton.jit function is (``source``: the name of its source written out, ``source_text()`` has
    it; else its module path) and what it is. The source is written out whenever it can need only Triton
    (``_closure``), so that a build host without the function's library (one that needs a GPU to import) builds
    it; else where no module path names it elsewhere (``_source_of``)."""
    with _described_lock:
        if id(jit) in _described:
            return _described[id(jit)]
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
        out["source"] = hashlib.sha256(text.encode()).hexdigest()[:16] + ".py"
        _sources[out["source"]] = text
    with _described_lock:
        _described[id(jit)] = out
    return out


def source_text(name: str) -> str:
    """The text of a source ``describe`` wrote out."""
    return _sources[name]


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
    if value is None or isinstance(value, _PLAIN):
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


def _folder_name(hash: Any) -> str | None:
    """The cache folder ``triton.compile`` keeps an entry in, from its local ``hash`` (a sha256 hex digest):
    its base32, without padding, as Triton's ``get_cache_manager`` names it."""
    try:
        return base64.b32encode(bytes.fromhex(hash)).decode("ascii").rstrip("=")
    except (TypeError, ValueError):
        return None


KEY_PARTS = "__aotpack_key__.json"  # beside a recorded Triton cache entry: what its key was made of (key_parts)


def key_parts(key: str) -> dict[str, str]:
    """What Triton's cache key ``key`` was made of, part by part, read from the ``triton.compile`` call asking
    for it (a cache manager is made there): Triton's own files, the function with what it calls, its
    attributes, signature and constants, the backend (ptxas and target), the options, the environment; each a
    short digest, and the target as it is. Empty where no such call is on this thread's stack. Recorded beside
    an entry, they tell a later miss of the same kernel which part changed."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "compile" and
                                     frame.f_globals.get("__name__") == "triton.compiler.compiler"):  # fmt: skip
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or _folder_name(frame.f_locals.get("hash")) != key:
        return {}
    local = frame.f_locals

    def digest(text: Any) -> str:
        return hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:16]

    try:
        src, fn = local["src"], getattr(local["src"], "fn", None)
        if fn is not None:  # an ASTSource: Triton's ASTSource.hash() of these parts
            constants = sorted((str(k), getattr(v, "cache_key", str(v))) for k, v in src.constants.items())
            source = {"function": digest(fn.cache_key), "attrs": digest(src.attrs),
                      "signature": digest(sorted(src.signature.items())), "constants": digest(constants)}  # fmt: skip
        else:
            source = {"source": digest(src.hash())}
        backend, target, env = local["backend"], local["backend"].target, sorted(local["env_vars"].items())
        return {"triton": digest(importlib.import_module("triton.runtime.cache").triton_key()), **source,
                "backend": digest(backend.hash()), "target": f"{target.backend}:{target.arch}",
                "options": digest(local["options"].hash()), "environment": digest(env)}  # fmt: skip
    except Exception:  # (another Triton's compile: no parts, nothing worse)
        return {}


def copy_entry(into: str, group: dict[str, str], written: dict[str, bytes] | None = None) -> None:
    """Each file of a Triton cache entry (file name -> its path), and each of ``written`` (file name -> its bytes),
    into the folder ``into``, each atomically: a process copying the same entry beside this one (a compile worker)
    never leaves half a file."""
    os.makedirs(into, exist_ok=True)
    files: dict[str, bytes | None] = {file: None for file in group}
    files.update(written or {})
    for file, data in sorted(files.items()):
        if os.path.basename(file) != file:
            raise ValueError(f"{file!r} is not a file name")
        if data is None:
            with open(group[file], "rb") as f:
                data = f.read()
        temporary = os.path.join(into, f".{file}.{os.getpid()}.{threading.get_ident()}")
        with open(temporary, "wb") as out:
            out.write(data)
        os.replace(temporary, os.path.join(into, file))


def payload(key: Any, fn: Any, compile: dict[str, Any]) -> dict[str, Any]:
    """A compilation, from the arguments Triton's JIT passes its ``jit_cache_hook``, as JSON: the function
    (``describe``), its signature, constants (``encode``), attributes, options and target architecture."""
    import json

    jit = fn.jit_function
    spec = json.loads(compile.get("specialization_data") or "{}")
    arch = spec.get("target", {}).get("arch")  # Triton 3.9 serializes the target; 3.6: the device's binder has it
    if arch is None and "device" in compile:
        arch = getattr(jit.device_caches[compile["device"]][2], "arch", 0)
    attrs = compile["configs"][0] if compile.get("configs") else {}
    return {
        "event": "compile", "function": describe(jit), "key": str(key), "signature": dict(compile["signature"]),
        "constants": [[list(path), encode(value)] for path, value in compile["constants"].items()],
        "attrs": [[list(path), [list(a) for a in values]] for path, values in attrs.items()],
        "num_warps": int(compile["num_warps"]), "num_stages": int(compile["num_stages"]),
        "options": {k: v for k, v in spec.get("options", {}).items() if v is None or isinstance(v, _PLAIN)},
        "arch": int(arch or 0),
    }  # fmt: skip


def picks(jit: Any) -> list[dict[str, Any]]:
    """What any @triton.autotune around ``jit`` in its module picked: key -> config. An autotuner whose cache
    cannot be read (``tuned``) raises ValueError saying why."""
    module = sys.modules.get(jit.fn.__module__)
    out = []
    for obj in list(vars(module).values()) if module else ():
        tuner = tuner_of(obj) if obj is not jit and jit_of(obj) is jit else None
        for key, config in tuned(tuner) if tuner is not None else ():
            pick = pick_of(key, config)
            if pick not in out:
                out.append(pick)
    return out


def pick_of(key: tuple[Any, ...], config: Any) -> dict[str, Any]:
    """An autotuner's pick for a key, as JSON."""
    return {"key": [encode(v) for v in key],
            "config": {**{k: encode(v) for k, v in config.kwargs.items()}, "num_warps": config.num_warps,
                       "num_stages": config.num_stages}}  # fmt: skip


def wrap_tuner_runs(autotuner: Any, wrap: Any) -> Any:
    """Give Triton's Autotuner and each subclass with a run of its own (libraries' autotuners, whose run may not
    call Autotuner's), those defined now and those defined later (a hook on Autotuner, chained after one already
    there), the run ``wrap(original)``. Returns the undo."""
    wrapped: list[tuple[type, Any]] = []

    def give(cls: type) -> None:
        original = cls.__dict__["run"]
        wrapped.append((cls, original))
        type.__setattr__(cls, "run", wrap(original))

    previous = autotuner.__dict__.get("__init_subclass__")

    def subclassed(cls: Any, /, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(autotuner, cls).__init_subclass__(**kwargs)
        if "run" in cls.__dict__:
            give(cls)

    todo: list[type] = [autotuner]
    while todo:
        cls = todo.pop()
        if "run" in cls.__dict__:
            give(cls)
        todo += cls.__subclasses__()
    hook = classmethod(subclassed)
    type.__setattr__(autotuner, "__init_subclass__", hook)

    def undo() -> None:
        for cls, original in reversed(wrapped):
            type.__setattr__(cls, "run", original)
        if autotuner.__dict__.get("__init_subclass__") is hook:
            if previous is None:
                type.__delattr__(autotuner, "__init_subclass__")
            else:
                type.__setattr__(autotuner, "__init_subclass__", previous)

    return undo


class KeyTap:
    """An autotuner's cache while its run runs, as ``aotpack record`` sees it: every key the run looks up or
    stores, in order (the last is the run's own key, whatever the autotuner makes its keys of), the cache
    itself unchanged behind it. With the autotuner's ``best_config`` after the run: its pick, also from a cache
    no one can read back (a database)."""

    __slots__ = ("_cache", "keys")

    def __init__(self, cache: Any) -> None:
        self._cache = cache
        self.keys: list[Any] = []

    def __contains__(self, key: Any) -> bool:
        self.keys.append(key)
        return key in self._cache

    def __getitem__(self, key: Any) -> Any:
        self.keys.append(key)
        return self._cache[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.keys.append(key)
        self._cache[key] = value

    def get(self, key: Any, *default: Any) -> Any:
        self.keys.append(key)
        return self._cache.get(key, *default)

    def __iter__(self) -> Any:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


def _is_config(value: Any) -> bool:
    return all(hasattr(value, a) for a in ("kwargs", "num_warps", "num_stages"))


def tuned(tuner: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """An autotuner's picks, (key, Config), whatever its cache is: Triton's dict, another mapping, an object a
    key indexes that iterates over its keys, or one that keeps its picks in a dict of its own (libraries'
    Autotuner subclasses: a cache backed by a database that holds in memory what this process picked)."""
    cache = tuner.cache
    items = getattr(cache, "items", None)
    if callable(items):
        found = list(items())
    elif hasattr(cache, "__iter__") and hasattr(cache, "__getitem__"):
        found = [(key, cache[key]) for key in list(cache)]
    else:
        inner = [v for v in vars(cache).values() if isinstance(v, dict) and v and all(map(_is_config, v.values()))]
        if len(inner) != 1:
            raise ValueError(f"its autotuner's cache ({type(tuner).__name__}.cache, a {type(cache).__name__}) "
                             "is no mapping, cannot be iterated and holds no one dict of configs")  # fmt: skip
        found = list(inner[0].items())
    for key, config in found:
        if not isinstance(key, tuple) or not _is_config(config):
            raise ValueError(f"its autotuner's cache ({type(tuner).__name__}.cache) holds {type(key).__name__} -> "
                             f"{type(config).__name__}, not a key tuple -> a triton.Config")  # fmt: skip
    return found


def tuner_of(value: Any) -> Any:
    """The @triton.autotune wrapper in ``value``'s chain of wrappers (@triton.heuristics may sit outside it),
    or None."""
    for _ in range(16):
        if value is None or all(hasattr(value, a) for a in ("cache", "configs", "keys")):
            return value
        value = getattr(value, "fn", None)
    return None


def name_function_constexprs(jit_module: Any) -> Any:
    """Triton 3.6 cannot put a @triton.jit constexpr into the data it hands a jit_cache_hook (serializing it raises
    in the program; 3.7 and later name the function): while one of aotpack's hooks is installed, name it as they
    do. Returns the undo, or None where the release needs nothing (compilers/triton/releases.py)."""
    import inspect

    original = getattr(jit_module, "serialize_specialization_data", None)
    if original is None or "target" in inspect.signature(original).parameters:  # 3.7 added the target with the fix
        return None

    def named(value: Any) -> Any:
        if type(value).__name__ == "JITFunction":
            return {"jit_function": f"{value.module}:{value.fn.__qualname__}"}
        return tuple(named(v) for v in value) if type(value) is tuple else value

    def serialize(name: Any, signature: Any, constants: dict[Any, Any], *rest: Any) -> Any:
        return original(name, signature, {k: named(v) for k, v in constants.items()}, *rest)

    jit_module.serialize_specialization_data = serialize

    def undo() -> None:
        if jit_module.serialize_specialization_data is serialize:
            jit_module.serialize_specialization_data = original

    return undo
