"""The Triton backend: ``triton.compile(ASTSource(...), target=GPUTarget(...))`` per variant.

This needs no GPU and no driver (Triton's ``tools/compile.py`` does; it is not used). Each worker
compiles in a hermetic Triton: its own empty cache (Triton's ``~/.triton/cache`` is shared by every
build and JIT of the host, and a cached cubin carries the source paths of whoever compiled it first),
none of the host's ``TRITON_*`` settings but the tool paths, and line info off, so that no path of
the build host reaches the wheel (``line_info=True``, for profiling builds, keeps it and with it
the absolute paths of the kernel sources). The compiled
kernel's parameters are the recipe's runtime arguments in order (a tensor descriptor expands to the
``CUtensorMap`` and the tensor's shape and strides, or, without TMA, to its pointer, shape, strides
and flags), followed by two pointers Triton adds: global and profile scratch, which the runtime
allocates around each launch when the metadata asks for them and otherwise passes as null.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .. import _sources, _temp, _tools, facts, introspect
from ..errors import ToolNotFound
from ..introspect import DIV16, NONE, ONE
from ..mutation import written_arguments
from ..plan import Variant
from ..recipe import Kernel, Source
from . import Artifact, LaunchNeeds, Outcome, Pruned, TmaLayout

SUPPORTED = ((3, 6), (3, 9))  # the Triton minor releases this backend is tested with (CI: 3.9)


def _triton() -> Any:
    _installed_version()
    import triton

    return triton


def _installed_version() -> str:
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        raise ToolNotFound("Triton is not installed; run: pip install 'triton~=3.9.0'") from None
    if tuple(int(p) for p in version.split(".")[:2]) not in SUPPORTED:
        tested = " and ".join(f"{major}.{minor}.x" for major, minor in SUPPORTED)
        raise ToolNotFound(
            f"Triton {version} is installed; aotpack supports Triton {tested}. Run: pip install 'triton~=3.9.0'"
        )
    return version


def _ptxas_path(binary: str) -> str:
    """The ptxas Triton runs: $TRITON_<NAME>_PATH, else the one in its wheel (as triton.knobs does)."""
    override = os.environ.get(f"TRITON_{binary.upper().replace('-', '_')}_PATH")
    if override:
        return override
    spec = importlib.util.find_spec("triton")
    assert spec is not None and spec.submodule_search_locations
    return os.path.join(next(iter(spec.submodule_search_locations)), "backends", "nvidia", "bin", binary)


@cache
def _ptxas_version(path: str) -> str:
    out = _tools.run([path, "--version"], hint="Triton's ptxas did not run; reinstall triton")
    m = re.search(r"release (\d+\.\d+)", out)
    if m is None:
        raise ToolNotFound(f"cannot read the version of {path} from: {out.strip()}")
    return m[1]


def _load_function(source: Source) -> Any:
    _triton()  # a clear error when Triton is missing, before the kernel's own import fails
    return _sources.load(source)


TOOL_SETTINGS = re.compile(r"TRITON_[A-Z0-9_]+_PATH")  # the toolchain the user chose (ptxas, ...): kept
CACHE_TEMP = "aotpack-triton-"  # a worker's private Triton cache in the temporary folder


@cache
def _hermetic(line_info: bool) -> None:
    """Once per worker process: Triton's settings from nothing but ours (the tool paths excepted) and
    a private, empty Triton cache that goes when the worker does (or, if it is killed, with the next
    build's sweep of the temporary folder)."""
    from multiprocessing import util

    for name in [n for n in os.environ if n.startswith("TRITON_") and not TOOL_SETTINGS.fullmatch(n)]:
        del os.environ[name]
    _temp.sweep(Path(tempfile.gettempdir()), CACHE_TEMP)
    folder = tempfile.mkdtemp(prefix=_temp.temp_prefix(CACHE_TEMP))
    util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=0)
    os.environ.update(TRITON_CACHE_DIR=folder, TRITON_HOME=folder)
    if not line_info:
        os.environ["TRITON_DISABLE_LINE_INFO"] = "1"


@dataclass(frozen=True)
class TritonCompiler:
    line_info: bool = False  # keep line info (and the sources' absolute paths) in the cubins

    def versions(self) -> Mapping[str, str]:
        """Read without importing Triton (a no-op rebuild must not pay for that import)."""
        out = {"triton": _installed_version(), "triton line info": "on" if self.line_info else "off"}
        for label, binary in (("ptxas (sm_8x)", "ptxas"), ("ptxas (sm_90 and newer)", "ptxas-blackwell")):
            path = _ptxas_path(binary)
            out[label] = f"{_ptxas_version(path)} ({os.path.basename(path)})"
        return out

    def min_driver_cuda(self, target: str) -> int:
        """The oldest CUDA driver (1000*major + 10*minor) that loads this target's cubins: the one
        of the target itself and at least the major release of the ptxas that built them (Triton
        uses ptxas-blackwell from sm_90 on)."""
        arch = facts.archs()[target]
        binary = "ptxas" if arch.capability < 90 else "ptxas-blackwell"
        major = int(_ptxas_version(_ptxas_path(binary)).split(".")[0])
        return max(arch.min_driver_cuda, major * 1000)

    def check(self, kernels: Iterable[Kernel]) -> None:
        """Nothing left to check: the recipe loader read each kernel as Triton does (introspect.py)."""
        _triton()

    def compile(self, variant: Variant) -> Outcome:
        _hermetic(self.line_info)
        triton = _triton()
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        kernel = variant.kernel
        fn = introspect.unwrap(_load_function(kernel.source))
        signature: dict[str, str] = {}
        attrs: dict[tuple[int, ...], list[list[Any]]] = {}
        constexprs: dict[str, Any] = {**dict(kernel.fixed_constexprs), **dict(variant.config.constexprs)}
        for name, typevar in kernel.dtype_constexprs:  # a dtype constexpr: the tl.dtype its type variable binds
            constexprs[name] = _tl_dtype(dict(variant.binding)[typevar])
        for index, name in enumerate(fn.arg_names):
            if name in constexprs:
                signature[name] = "constexpr"
                continue
            arg = kernel.arg(name)
            dtype = facts.dtypes()[variant.dtype_of(name)].triton_name
            signature[name] = ("*" if arg.pointer else "") + dtype
            if arg.descriptor:
                block = ",".join(str(variant.config.value(d) if isinstance(d, str) else d) for d in arg.block)
                signature[name] = f"tensordesc<{dtype}[{block}]>"
            state = variant.state(arg)
            if state == DIV16:
                attrs[(index,)] = [["tt.divisibility", 16]]
            elif state in (ONE, NONE):  # folded into the code, as the JIT does; the launcher leaves it out
                signature[name] = "constexpr"
                constexprs[name] = 1 if state == ONE else None
        arch = facts.archs()[variant.target]
        target = GPUTarget("cuda", arch.capability, 32)
        options: dict[str, Any] = {"enable_fp_fusion": True, **dict(kernel.options)}
        options.update(num_warps=variant.config.num_warps, num_stages=variant.config.num_stages)
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = triton.compile(src, target=target, options=options)
        except Exception as exc:  # Triton reports compile failures as assorted exception types
            return Pruned(variant_id=variant.id, reason=_reason(exc, kernel))
        meta = compiled.metadata
        if meta.shared > arch.max_shared:  # Triton checks this only at launch, against the GPU it runs on
            limit = f"{variant.target} allows {arch.max_shared} per block"
            return Pruned(variant_id=variant.id, reason=f"needs {meta.shared} bytes of shared memory; {limit}")
        needs = _needs(meta, sum(a.descriptor for a in kernel.args))
        if isinstance(needs, str):
            return Pruned(variant_id=variant.id, reason=needs, fatal=True)
        facts_ = {
            "shared": meta.shared,
            "num_warps": meta.num_warps,
            "num_stages": meta.num_stages,
            "num_ctas": meta.num_ctas,
            "global_scratch": meta.global_scratch_size,
            "arch": meta.arch,
            "writes": ",".join(sorted(written_arguments(compiled.asm["ttir"]))),
            "triton_hash": meta.hash,
        }
        return Artifact(
            variant_id=variant.id,
            image=compiled.asm["cubin"],
            entry=meta.name,
            shared=meta.shared,
            static_shared=0,
            num_warps=meta.num_warps,
            extra_pointer_params=2,
            needs=needs,
            metadata=tuple((k, str(v)) for k, v in facts_.items()),
        )


def _tl_dtype(name: str) -> Any:
    import triton.language as tl

    return tl.int1 if name == "i1" else getattr(tl, facts.dtypes()[name].torch)


# Triton's device-side element type codes differ from the driver's CUtensorMapDataType in three places
# (its NVIDIA driver maps them the same way before encoding).
_TMA_HOST_TYPE = {8: 10, 9: 8, 10: 9}


def _needs(meta: Any, descriptors: int) -> LaunchNeeds | str:
    """What launching this variant takes, read off Triton's metadata; or why the runtime cannot."""
    tma = None
    if meta.tensordesc_meta:
        layouts = list(meta.tensordesc_meta)
        if len(layouts) != descriptors:
            return f"Triton describes {len(layouts)} tensor descriptors for {descriptors} descriptor arguments"
        for i, m in enumerate(layouts):
            if m.get("is_im2col") or m.get("fp4_padded"):
                kind = "an im2col" if m.get("is_im2col") else "a padded fp4"
                return f"descriptor argument {i + 1} needs {kind} tensor map, which aotpack cannot encode"
        tma = tuple(
            TmaLayout(box=tuple(m["block_size"]), swizzle=m["swizzle"],
                      elem_type=_TMA_HOST_TYPE.get(m["elem_type"], m["elem_type"]), elem_size=m["elem_size"])
            for m in layouts
        )  # fmt: skip
    return LaunchNeeds(
        scratch=(meta.global_scratch_size, meta.global_scratch_align),
        profile_scratch=(meta.profile_scratch_size, meta.profile_scratch_align),
        num_ctas=meta.num_ctas,
        cooperative=bool(meta.launch_cooperative_grid),
        pdl=bool(meta.launch_pdl),
        tma=tma,
    )


def _reason(exc: Exception, kernel: Kernel) -> str:
    """One line saying why a variant failed: Triton's message and, for errors in the kernel's
    code, the offending source line."""
    name = type(exc).__name__
    node, src = getattr(exc, "node", None), getattr(exc, "src", None)
    message = getattr(exc, "error_message", None)
    if node is not None and src and hasattr(node, "lineno"):
        line = src.splitlines()[node.lineno - 1].strip()
        return f"{name} in {kernel.source.function} (line {node.lineno} of the function): {line}" + (
            f": {message}" if message else ""
        )
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{name}: {lines[-1] if lines else 'no message'}"
