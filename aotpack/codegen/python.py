"""The generated Python side: docstrings, ``__init__.py``, ``__init__.pyi`` and the manifest."""

from __future__ import annotations

import ast
import hashlib
import os
import re
from pathlib import Path

from .. import backends, expr, facts
from .. import manifest as manifest_types
from ..backends import Artifact
from ..manifest import Manifest
from ..model import PACKAGE_NAMES, Arg, Kernel
from ..plan import classes
from ..plan.variants import Variant
from ..runtime import _aotpack_env as env
from ..words import plural
from . import BuildInput, KernelBuild


def _arg_type(arg: Arg) -> str:
    if arg.descriptor:
        return f"tensordesc<{arg.dtype}[{', '.join(map(str, arg.block))}]>"
    hint = f":{arg.hint}{'!' if arg.required else ''}" if arg.hint else ""
    return f"{'*' if arg.pointer else ''}{arg.dtype}{hint}"


def docstring(kb: KernelBuild) -> str:
    k = kb.kernel
    lines = [k.doc or f"The {k.name} kernel.", "", "Arguments:"]
    for arg in (k.args[i] for i in k.call_order):
        what = "pointer to " + arg.dtype if arg.pointer else arg.dtype
        if arg.descriptor:
            block = " x ".join(map(str, arg.block))
            what = (f"{len(arg.block)}-d tensor of {arg.dtype}, read through a tensor descriptor (blocks of {block}; "
                    "16-byte aligned, last dimension contiguous)")  # fmt: skip
        extra = []
        if arg.has_default:
            extra.append(f"default {_default_text(arg)}")
        if arg.optional:
            extra.append("may be None")
        if arg.extent is not None:
            extra.append(f"extent {expr.unparse(arg.extent)}")
        wanted = "must be" if arg.required else "faster variants when it is"
        if arg.hint == 16:
            extra.append(f"{wanted} 16-byte aligned" if arg.pointer else f"{wanted} a multiple of 16")
        if arg.hint == 1:
            extra.append(f"{wanted} 1")
        if arg.contiguous:
            extra.append("contiguous")
        lines.append(f"  {arg.name}: {what}{' (' + '; '.join(extra) + ')' if extra else ''}")
    lines.append("  stream: CUstream handle or torch.cuda.Stream (default: torch's current stream for torch "
                 "tensors, else the legacy default stream)")  # fmt: skip
    lines.append("  variant: a variant id to launch instead of the dispatcher's choice (for tuning and tests)")
    for var, choices in k.types:
        lines.append(f"Type {var}: {', '.join(choices)}")
    for name, e in k.bound:
        built = sorted({c.value(name) for c in k.configs}, key=lambda v: (type(v).__name__, v))
        lines.append(f"{name} = {expr.unparse(e)}, built for {', '.join(map(str, built))}")
    key = ", ".join(f"{name} = {expr.unparse(e)}" if name != expr.unparse(e) else name for name, e in k.key)
    lines.append(f"Key: {key or 'none'} ({k.bucket} buckets); dispatch table: {plural(len(k.rules), 'row')}; "
                 f"default config {k.default.label}")  # fmt: skip
    names = ", ".join(s.name for s in classes.specs(k))
    lines.append(f"Specialization classes (Triton's JIT terms, most specialized first): {names}")
    lines.append(f"Targets: {', '.join(k.targets)}; {plural(len(kb.variants), 'variant')}"
                 + (f" ({len(kb.pruned)} pruned at build time)" if kb.pruned else ""))  # fmt: skip
    return "\n".join(lines)


def _default_text(arg: Arg) -> str:
    if arg.float_default is not None:
        return repr(arg.float_default)
    assert arg.default is not None
    if arg.kind == "bool":
        return str(bool(arg.default == expr.Num(1))).lower()
    return expr.unparse(arg.default)


def manifest(build: BuildInput, aotpack_version: str) -> Manifest:
    """The package's ``__aotpack__`` (manifest.json): the one writer of ``manifest.Manifest``."""
    recipe = build.recipe
    kernels: dict[str, manifest_types.Kernel] = {}
    for kb in build.kernels:
        kernels[kb.kernel.name] = _kernel_entry(kb, recipe.path)
        if kb.caller_launches:
            _add_launch(kernels[kb.kernel.name], kb.kernel)
    out: Manifest = {
        "schema": manifest_types.SCHEMA,
        "package": recipe.package,
        "version": recipe.version,
        "aotpack": aotpack_version,
        "toolchain": dict(build.versions),
        "targets": sorted({t for kb in build.kernels for t in kb.kernel.targets}),
        "min_driver_cuda": {
            t: facts.cuda_text(max(kb.min_driver[t].cuda for kb in build.kernels if t in kb.min_driver))
            for t in sorted({t for kb in build.kernels for t in kb.kernel.targets})
        },
        "sources": dict(build.sources),
        "kernels": kernels,
    }
    if recipe.triton_cache:
        out["triton_cache"] = [{"name": e.name, "key": e.key, "files": list(e.files), "triton": e.triton,
                                "target": e.target} for e in recipe.triton_cache]  # fmt: skip
    if recipe.inductor_cache:
        out["inductor_cache"] = [{"digest": s.digest, "torch": s.torch, "size": s.size, "cpp_kernels": s.cpp_kernels,
                                  "cpp_objects": len(s.cpp_objects)} for s in recipe.inductor_cache]  # fmt: skip
    return out


def _kernel_entry(kb: KernelBuild, recipe_path: Path) -> manifest_types.Kernel:
    """A kernel's entry in the manifest: its arguments, dispatch, classes, targets and variants."""
    k = kb.kernel
    entry: manifest_types.Kernel = {
        "source": _source_text(k, recipe_path),
        "backend": k.backend,
        "args": [_arg_entry(a) for a in k.args],
        "types": {var: list(choices) for var, choices in k.types},
        "bindings": [dict(b) for b in k.bindings],
        "grid": [expr.unparse(g) for g in k.grid],
        "key": [[name, expr.unparse(e)] for name, e in k.key],  # a list: the order matters
        "bucket": k.bucket,
        "autotune": k.autotune,
        "mutates": _mutates(kb),
        "default_config": k.default.label,
        "dispatch": [
            {
                "key": list(r.key),
                "config": r.config.label,
                "arch": r.arch,
                "types": dict(r.types or ()),
                "specialization": r.specialization,
            }
            for r in k.rules
        ],
        "call_order": [k.args[i].name for i in k.call_order],
        "specializations": [{"name": s.name, "assumes": s.jit_terms(k)} for s in classes.specs(k)],
        "targets": list(k.targets),
        "min_driver_cuda": {t: facts.cuda_text(f.cuda) for t, f in kb.min_driver.items()},
        "driver_floor_set_by": {t: f.set_by for t, f in kb.min_driver.items()},
        "variants": [_variant_entry(k, v, art) for v, art in kb.variants],
        "pruned": [{"id": v.id, "reason": p.reason} for v, p in kb.pruned],
    }
    chosen = manifest_types.selection_of(k)
    if chosen is not None:
        entry["selection"] = chosen
    return entry


def _arg_entry(a: Arg) -> manifest_types.Arg:
    return {
        "name": a.name,
        "type": _arg_type(a),
        "kind": a.kind,
        **({"default": _default_text(a)} if a.has_default else {}),
        **({"optional": True} if a.optional else {}),
        **({"extent": expr.unparse(a.extent)} if a.extent is not None else {}),
        **({"launch_only": True} if a.launch_only else {}),
    }


def _variant_entry(k: Kernel, v: Variant, art: Artifact) -> manifest_types.Variant:
    return {
        "id": v.id,
        "target": v.target,
        "types": dict(v.binding),
        "config": v.config.label,
        "specialization": v.specialization,
        "assumes": v.spec.jit_terms(k),
        "entry": art.entry,
        "shared_bytes": art.shared,
        "static_shared_bytes": art.static_shared,
        "num_warps": art.num_warps,
        "blocks_per_sm": art.blocks_per_sm(v.target),
        "num_stages": v.config.num_stages,
        "constexprs": {n: manifest_types.const_json(c) for n, c in v.config.constexprs},
        "image_bytes": len(art.image),
        "image_sha256": hashlib.sha256(art.image).hexdigest(),
        "compiler": _compiler_facts(art),
    }


def _add_launch(entry: manifest_types.Kernel, kernel: Kernel) -> None:
    """What the drop-in launcher needs (``launch: triton``): the kernel's parameters in its own order
    (constexprs among them), its configs in the runtime's order, and the function to stand in for
    (``activate()``: by its source identity)."""
    args, own = {a.name for a in kernel.args}, kernel.triton
    assert own is not None
    entry["launch"] = "triton"
    entry["function"] = {"module": kernel.source.module, "name": kernel.source.function, "identity": own.identity}
    entry["params"] = [[n, n in args] for n in own.signature]
    entry["configs"] = [{"constexprs": {n: manifest_types.const_json(v) for n, v in c.constexprs},
                         "num_warps": c.num_warps, "num_stages": c.num_stages} for c in kernel.configs]  # fmt: skip
    entry["options"] = {n: v for n, v in own.options if isinstance(v, (int, bool))}
    entry["defaults"] = {n: manifest_types.const_json(v) for n, v in own.defaults}
    entry["tuned"] = [{"key": [manifest_types.const_json(v) for v in p.key],
                       "kwargs": {n: manifest_types.const_json(v) for n, v in p.kwargs}, "num_warps": p.num_warps,
                       "num_stages": p.num_stages} for p in own.picks]  # fmt: skip


def _compiler_facts(art: Artifact) -> dict[str, str]:
    """What the compiler said of a variant, as text (the writes it found as a comma-joined list)."""
    writes = {} if art.writes is None else {"writes": ",".join(art.writes)}
    return {**dict(art.metadata), **writes}


def _source_text(kernel: Kernel, recipe_path: Path) -> str:
    """The kernel's source as the recipe names it (a path relative to the recipe, or a module)."""
    src = kernel.source
    where = os.path.relpath(src.path, recipe_path.parent) if src.path else src.module
    return f"{where}:{kernel.cuda.entry if kernel.cuda else src.function}"


def _mutates(kb: KernelBuild) -> list[str] | None:
    """The pointer arguments the kernel writes: as its compiled code does where the backend can tell
    (Triton's TTIR), else as declared, or None when the recipe does not say."""
    found = backends.of(kb.kernel).writes(art for _, art in kb.variants)
    declared = found if found is not None else kb.kernel.mutates
    return list(declared) if declared is not None else None


def init_py(build: BuildInput) -> str:
    """The package's ``__init__.py``: its kernels, then what a package offers (tuning, statistics, torch operators,
    the drop-in, the C API), each part a function of its own. Recipe text reaches it only through repr(): data,
    never code."""
    return _init_kernels(build) + _init_options(build) + _init_dropin(build.recipe.package) + _init_lookup(build)


def _init_kernels(build: BuildInput) -> str:
    names = [kb.kernel.name for kb in build.kernels]
    recipe = build.recipe
    kernels = "\n".join(
        f"{kb.kernel.name} = {'_runtime.Launcher' if kb.caller_launches else '_kernel'}({kb.kernel.name!r}, "
        "_native, _manifest)"
        for kb in build.kernels
    )
    doc = (
        f"{recipe.summary}\n\nBuilt by aotpack from {recipe.path.name}. Kernels: {', '.join(names)}.\n"
        "Every kernel takes CUDA tensors (torch, or objects with __cuda_array_interface__) or integer device\n"
        "pointers, and an optional stream=. Only the NVIDIA driver is needed at run time.\n"
    )
    return f"""{doc!r}

import os as _os

from . import _aotpack_runtime as _runtime
from . import _native
from ._aotpack_runtime import kernel as _kernel
from ._aotpack_runtime import ClassMissWarning
from ._native import CudaError, MissingVariant

__version__ = {recipe.version!r}
__all__ = [{", ".join(repr(n) for n in (*PACKAGE_NAMES, *names))}]
_manifest = _runtime.Manifest(__name__)  # read on first use: launches never need it

{kernels}
"""


def _init_options(build: BuildInput) -> str:
    """Runtime autotuning, statistics and reports, and the environment variables that switch them on at import
    (their names from runtime/_aotpack_env.py)."""
    return f'''

def autotune(enabled=True, cache=None, per="bucket"):
    """Runtime autotuning for keys the baked tables lack (kernels built with ``autotune: true``):
    timed on first sight, remembered per process, and with ``cache`` (a file path) shared between
    processes. ``per="bucket"``: one timing per bucket of the key (the recipe's ``bucket``);
    ``per="key"``: one per distinct key value, as @triton.autotune does. {env.AUTOTUNE}=1 (or
    ``key``), and {env.AUTOTUNE_CACHE}, switch it on at import."""
    _runtime.autotune(_native, _manifest(), enabled, cache, per)


if _os.environ.get("{env.AUTOTUNE}", "") not in ("", "0"):
    autotune(True, _os.environ.get("{env.AUTOTUNE_CACHE}") or None,
             "key" if _os.environ["{env.AUTOTUNE}"] == "key" else "bucket")


def stats():
    """Class misses of this process's calls: per kernel, the class a call ran and the class Triton's JIT
    would compile for it, with the number of calls (``class_misses``). Add a JIT class to the recipe's
    ``classes:`` (or let ``aotpack record -o RECIPE -- PROGRAM`` add them) and rebuild."""
    return _runtime.stats(_native, __name__, __version__, {[kb.kernel.name for kb in build.kernels]!r})


def warn_class_misses(enabled=True):
    """Warn (ClassMissWarning) the first call of each class miss; {env.WARN_CLASS_MISSES}=1 does it at import."""
    _native._warn_misses(ClassMissWarning if enabled else None)


if _os.environ.get("{env.WARN_CLASS_MISSES}", "") not in ("", "0"):
    warn_class_misses(True)
if _os.environ.get("{env.REPORT}"):  # a folder: stats() is written there at exit, a file per process
    _runtime.report_at_exit(_os.environ["{env.REPORT}"], stats)
'''


def _init_dropin(package: str) -> str:
    """Torch operators, and the drop-in: activate(), coverage(), deactivate()."""
    return f'''

def torch_ops():
    """Register the kernels as torch.ops.{package}.<kernel> (torch.compile traces them and CUDA
    graphs see their writes). Not done at import, so that eager users never pay for it: call this, or
    use ``{package}.ops.<kernel>`` (which calls it). Returns the names registered."""
    return _runtime.register_torch_ops(_native, _manifest())


def __getattr__(name):
    if name == "__aotpack__":  # the manifest, parsed on first use
        return _manifest()
    if name == "ops":  # torch.ops.{package}, registered on first use
        torch_ops()
        import torch

        return getattr(torch.ops, {package!r})
    raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}")


def activate(fallback=None):
    """Make the original @triton.jit functions of the recorded kernels (``launch: triton``) launch
    this package's variants: call sites such as ``fn[grid](...)`` in your code or a library's run,
    found by their source (also functions made later, under any module name), with no compilation.
    While active, any compilation by Triton's JIT (a call no variant matches, or another kernel) raises
    MissingVariant before compiling (``fallback="error"``, the default where Triton is not installed) or
    compiles, logged once per kernel and listed by ``coverage()`` (``fallback="jit"``). What else compiled
    Triton kernels when the package was recorded (torch.compile's Inductor, in the program and its compile
    workers) is served from the copies of Triton's cache the package holds: the same kernels, with the same
    torch, Triton and GPU, load with no compilation; any other is refused (or listed) the same way. And
    torch.compile's own caches, recorded with them, are loaded into torch's (this imports torch): the recorded
    graphs, with the dimensions that changed dynamic from the first call, serve sizes the recording never
    saw (a set recorded with another torch, or other Inductor settings, is not loaded, with a warning).
    Returns the kernels."""
    here = _os.path.dirname(__file__)
    caches, graphs = _os.path.join(here, "_triton_cache"), _os.path.join(here, "_inductor_cache")
    return _runtime.activate([k for k in globals().values() if isinstance(k, _runtime.Launcher)], fallback,
                             MissingVariant, [caches] if _os.path.isdir(caches) else [],
                             [graphs] if _os.path.isdir(graphs) else [], package=__name__)


def coverage():
    """What Triton's JIT compiled while activated with ``fallback="jit"``, in the form ``aotpack record
    --report`` merges ({env.REPORT} writes it at exit, with stats())."""
    return _runtime.coverage()


def deactivate():
    """Undo ``activate()`` (of this package: another one activated stays so)."""
    _runtime.deactivate(__name__)
'''


def _init_lookup(build: BuildInput) -> str:
    """The C API's header folder, and ``select()`` by a kernel's name."""
    names = [kb.kernel.name for kb in build.kernels]
    return f'''

def get_include():
    """The folder holding {build.recipe.package}.h, the C API of these kernels (link with lib{build.recipe.package}.so
    beside this file)."""
    from importlib import resources

    return str(resources.files(__name__).joinpath("include"))


def select(kernel, *args, **kwargs):
    """The id of the variant ``kernel`` (a name) would launch; see ``<kernel>.select``."""
    if kernel not in __all__[{len(PACKAGE_NAMES)}:]:
        raise ValueError(f"unknown kernel {{kernel!r}}; this package has {", ".join(names)}")
    return globals()[kernel].select(*args, **kwargs)
'''


def init_pyi(build: BuildInput) -> str:
    """The package's stub: every name with its type, and each function, class and kernel with the docstring an IDE
    shows (the functions' from the generated ``__init__.py``, read back from it: one text for both)."""
    lines = [
        "from typing import Any, Callable, Optional",
        "",
        "# A pointer argument: a CUDA torch.Tensor, an object with __cuda_array_interface__, or an int.",
        "Pointer = Any",
        "",
        "__version__: str",
        "__aotpack__: dict[str, Any]",
        "",
        "class CudaError(RuntimeError): ...",
        "",
        "def select(kernel: str, *args: Any, **kwargs: Any) -> str: ...",
        'def autotune(enabled: bool = True, cache: Optional[str] = None, per: str = "bucket") -> None: ...',
        "def torch_ops() -> list[str]: ...",
        "ops: Any  # torch.ops.<package>, registered on first use",
        "def get_include() -> str: ...",
        "def activate(fallback: Optional[str] = None) -> list[str]: ...",
        "def deactivate() -> None: ...",
        "def coverage() -> list[dict[str, Any]]: ...",
        "class MissingVariant(LookupError): ...",
        "class ClassMissWarning(UserWarning): ...",
        "def stats() -> dict[str, Any]: ...",
        "def warn_class_misses(enabled: bool = True) -> None: ...",
    ]
    for kb in build.kernels:
        params = []
        k = kb.kernel
        if kb.caller_launches:
            lines += [
                "",
                f"class _{k.name}:",
                "    def __getitem__(self, grid: Any) -> Callable[..., None]: ...",
                "    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> None: ...",
                "    variants: list[str]",
                "",
                f"{k.name}: _{k.name}",
            ]
            continue
        for arg in (k.args[i] for i in k.call_order):
            py = "Pointer" if arg.pointer else arg.kind
            if arg.has_default:
                params.append(f"{arg.name}: Optional[{py}] = None")
            else:
                params.append(f"{arg.name}: Optional[{py}]" if arg.optional else f"{arg.name}: {py}")
        tail = "*, stream: Any = None, variant: Optional[str] = None) -> None: ..."
        lines += [
            "",
            f"class _{kb.kernel.name}:",
            f"    def __call__(self, {', '.join(params)}, {tail}",
            "    def select(self, *args: Any, **kwargs: Any) -> str: ...",
            "    variants: list[str]",
            "",
            f"{kb.kernel.name}: _{kb.kernel.name}",
        ]
    return _with_docstrings(lines, init_py(build), {f"_{kb.kernel.name}": docstring(kb) for kb in build.kernels})


def _with_docstrings(lines: list[str], init: str, kernels: dict[str, str]) -> str:
    """The stub's lines, each function the generated ``__init__.py`` documents given its docstring, and each
    kernel's call its own (``kernels``: by the stub's class name)."""
    documented = {node.name: ast.get_docstring(node) for node in ast.parse(init).body
                  if isinstance(node, ast.FunctionDef) and ast.get_docstring(node)}  # fmt: skip
    out, kernel = [], None
    for line in lines:
        found = re.match(r"(\s*)def (\w+)\(.*\) -> .*: \.\.\.$", line)
        kernel = line[6:-1] if line.startswith("class _") else kernel
        doc = documented.get(found[2]) if found and not found[1] else None
        if found and found[1] and found[2] == "__call__" and kernel in kernels:
            doc = kernels[kernel]
        if found is None or doc is None:
            out.append(line)
            continue
        indent = found[1] + "    "
        out += [
            line.removesuffix(" ..."),
            indent + _literal(doc).replace("\n", "\n" + indent).replace(indent + "\n", "\n"),
        ]
    return "\n".join(out) + "\n"


def _literal(doc: str) -> str:
    """A docstring as a stub writes it: in triple quotes where that reads back as the same text, else as Python's
    own string literal of it."""
    if '"""' in doc or "\\" in doc or doc.endswith('"'):
        return repr(doc)
    return f'"""{doc}"""'


def manifest_json(build: BuildInput, aotpack_version: str) -> str:
    return manifest_types.dumps(manifest(build, aotpack_version))
