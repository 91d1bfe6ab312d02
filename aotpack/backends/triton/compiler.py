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

import contextlib
import importlib.metadata
import importlib.util
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ... import _temp, _tools, facts
from ...errors import ToolNotFound
from ...model import ConstValue, DtypeConst, FunctionConst, Kernel, Source
from ...plan.variants import Variant
from ...recipe import sources as _sources
from ...states import DIV16, NONE, ONE
from ..base import Artifact, DriverFloor, LaunchNeeds, Outcome, Pruned, TmaLayout
from . import cubin, introspect, releases, toolchain
from .mutation import written_arguments

log = logging.getLogger("aotpack")


def _triton() -> Any:
    releases.installed_version()
    import triton

    return triton


@dataclass(frozen=True)
class Ptxas:
    """A ptxas Triton can run, with its CUDA release and where it came from."""

    path: str
    cuda: int  # 1000*major + 10*minor
    origin: str  # for the manifest: a package and version, or the setting that named it; no host path

    @property
    def release(self) -> str:
        """Its CUDA release and origin, as the manifest's toolchain lists it."""
        return f"{facts.cuda_text(self.cuda)} ({self.origin})"

    @property
    def label(self) -> str:
        return f"ptxas {self.release}"


@cache
def _ptxas_release(path: str) -> int:
    out = _tools.run([path, "--version"], hint=f"{path} did not run; reinstall it or name another ptxas")
    m = re.search(r"release (\d+\.\d+)", out)
    if m is None:
        raise ToolNotFound(f"cannot read the version of {path} from: {out.strip()}")
    return facts.cuda_version(m[1])


USER_PTXAS = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")  # a toolkit's ptxas the user names
PYPI_PTXAS = ("nvidia-cuda-nvcc-cu12", "nvidia.cuda_nvcc")  # CUDA 12's ptxas from PyPI: package, module


def ptxas_candidates() -> tuple[Ptxas, ...]:
    """The ptxas binaries a build may use: the ones the user names (then only those), else the CUDA 12
    ptxas of the nvidia-cuda-nvcc-cu12 package when installed, and Triton's own two."""
    named = [(os.environ[v], f"${v}") for v in USER_PTXAS if os.environ.get(v)]
    if named:
        return tuple(Ptxas(path, _ptxas_release(path), origin) for path, origin in named)
    found = []
    distribution, module = PYPI_PTXAS
    spec = importlib.util.find_spec(module) if importlib.util.find_spec("nvidia") else None
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(next(iter(spec.submodule_search_locations)), "bin", "ptxas")
        if os.access(path, os.X_OK):
            origin = f"{distribution} {importlib.metadata.version(distribution)}"
            found.append(Ptxas(path, _ptxas_release(path), origin))
    triton = importlib.util.find_spec("triton")
    assert triton is not None and triton.submodule_search_locations
    for binary in ("ptxas", "ptxas-blackwell"):
        path = os.path.join(next(iter(triton.submodule_search_locations)), "backends", "nvidia", "bin", binary)
        found.append(Ptxas(path, _ptxas_release(path), f"triton {releases.installed_version()}, {binary}"))
    return tuple(found)


def ptxas_for(target: str, candidates: Iterable[Ptxas], floor: int | None) -> tuple[Ptxas, ...]:
    """The ptxas binaries that build for the target, in the order a variant tries them (it is assembled by the
    first that reads its PTX; its target's driver floor is the newest one used). Without a floor, oldest first:
    the wheel loads on the oldest drivers its code allows, and a newer ptxas reads the PTX an older one cannot
    (Triton writes newer PTX for some code, such as TMA copies). With a floor (the oldest driver the wheel must
    load on), the newest no newer than it, alone (it reads what an older one reads): the best code those drivers
    run, and the JIT's ptxas where the floor is the CUDA of the ptxas Triton runs for the target. An older ptxas's
    code can be slower: CUDA 12.2's matmul cubins ran up to 8% slower on an H200 than the 12.8 ones Triton 3.6's
    JIT runs (docs/triton-releases.md)."""
    arch = facts.archs()[target]
    candidates = list(candidates)
    fits = sorted((p for p in candidates if p.cuda >= arch.min_driver_cuda and (floor is None or p.cuda <= floor)),
                  key=lambda p: (p.cuda, p.origin))  # fmt: skip
    if fits:
        return tuple(fits) if floor is None else (fits[-1],)
    have = ", ".join(p.label for p in candidates)
    need = facts.cuda_text(arch.min_driver_cuda)
    if floor is None:
        raise ToolNotFound(f"no ptxas builds {target}, which needs CUDA {need} or newer (found {have}); upgrade "
                           "triton, or set TRITON_PTXAS_PATH to a newer CUDA toolkit's ptxas")  # fmt: skip
    if floor < arch.min_driver_cuda:
        raise ToolNotFound(f"{target} needs a CUDA {need} driver or newer, above the CUDA floor "
                           f"{facts.cuda_text(floor)}; raise the floor (cuda: or --cuda) to {need}")  # fmt: skip
    raise ToolNotFound(
        f"no ptxas builds {target} for drivers from CUDA {facts.cuda_text(floor)} (found {have}); run: pip install "
        f"'nvidia-cuda-nvcc-cu12=={facts.cuda_text(floor)}.*', or set TRITON_PTXAS_PATH to the ptxas of a CUDA "
        f"{need if need == facts.cuda_text(floor) else need + ' to ' + facts.cuda_text(floor)} toolkit"
    )


def _load_function(source: Source) -> Any:
    _triton()  # a clear error when Triton is missing, before the kernel's own import fails
    return _sources.load(source)


TOOL_SETTINGS = re.compile(r"TRITON_[A-Z0-9_]+_PATH")  # the toolchain the user chose (ptxas, ...): kept
CACHE_TEMP = "aotpack-triton-"  # a worker's private Triton cache in the temporary folder
# a line of ptxas's stderr as Triton quotes it: "ptxas /tmp/x.ptx, line 239; error   : State space ..."
PTXAS_ERROR = re.compile(r"ptxas \S+, (line \d+); error\s*:\s*(.*)")


@cache
def _hermetic(line_info: bool) -> str:
    """Once per worker process: Triton's settings from nothing but ours (the tool paths excepted) and
    a private, empty Triton cache that goes when the worker does (or, if it is killed, with the next
    build's sweep of the temporary folder). Returns that private folder."""
    from multiprocessing import util

    for name in [n for n in os.environ if n.startswith("TRITON_") and not TOOL_SETTINGS.fullmatch(n)]:
        del os.environ[name]
    _temp.sweep(Path(tempfile.gettempdir()), CACHE_TEMP)
    folder = tempfile.mkdtemp(prefix=_temp.temp_prefix(CACHE_TEMP))
    util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=0)
    os.environ.update(TRITON_CACHE_DIR=folder, TRITON_HOME=folder)
    if not line_info:
        os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    return folder


# Triton's compile reads process-wide state that a compile sets (the ptxas in os.environ, tempfile's
# folder, sys.stdout): one compile at a time per process, also in a Dask worker with several threads.
_COMPILING = threading.Lock()


@contextlib.contextmanager
def _contained(folder: str) -> Iterator[None]:
    """A Triton compile kept to itself: its temporary files go into a scratch folder inside the
    worker's private one, removed after the call (a ptxas that fails leaves its PTX behind, for the
    repro command Triton prints), and what it prints (that PTX, whole, on every failed try: hundreds of
    KB per variant where the oldest ptxas cannot read a target's PTX and the next one builds it) is
    dropped; the exception carries ptxas's messages (_reason)."""
    scratch = tempfile.mkdtemp(dir=folder)
    saved = tempfile.tempdir
    tempfile.tempdir = scratch
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class TritonCompiler:
    line_info: bool = False  # keep line info (and the sources' absolute paths) in the cubins
    ptxas: tuple[tuple[str, tuple[Ptxas, ...]], ...] = ()  # per target: the ptxas to try, in order (ptxas_for)

    @classmethod
    def find(cls, targets: Iterable[str], floor: int | None = None, line_info: bool = False) -> TritonCompiler:
        version = releases.installed_version()
        newest = releases.newest_supported(sys.version_info[:2])
        # said where the release was not asked for (--triton starts the build with it, toolchain.ACTIVE);
        # never "install another": the installed one is the user's torch's
        if releases.minor(version) != newest and os.environ.get(toolchain.ACTIVE) is None:
            log.warning(
                "building with Triton %s, the installed one: the wheel gets that release's code (the newest aotpack "
                "is tested with on Python %d.%d is %d.%d: aotpack build --triton %d.%d builds with it)",
                version,
                *sys.version_info[:2],
                *newest,
                *newest,
            )
        candidates = ptxas_candidates()
        return cls(line_info, tuple((t, ptxas_for(t, candidates, floor)) for t in sorted(targets)))

    def _ptxas(self, target: str) -> tuple[Ptxas, ...]:
        chosen = dict(self.ptxas).get(target)
        return chosen if chosen is not None else ptxas_for(target, ptxas_candidates(), None)

    def versions(self) -> Mapping[str, str]:
        """Read without importing Triton (a no-op rebuild must not pay for that import)."""
        out = {"triton": releases.installed_version(), "triton line info": "on" if self.line_info else "off"}
        for target, chain in self.ptxas:
            out[f"ptxas ({target})"] = ", then ".join(p.release for p in chain)
        return out

    def check(self, kernels: Iterable[Kernel]) -> None:
        """Nothing left to check: the recipe loader read each kernel as Triton does (introspect.py)."""
        _triton()

    def compile(self, variant: Variant) -> Outcome:
        with _COMPILING:
            return self._compile(variant, _hermetic(self.line_info))

    def _compile(self, variant: Variant, private: str) -> Outcome:
        triton = _triton()
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        kernel, own = variant.kernel, variant.kernel.triton
        assert own is not None
        fn = introspect.unwrap(_load_function(kernel.source))
        signature: dict[str, str] = {}
        attrs: dict[tuple[int, ...], list[list[Any]]] = {}
        constexprs: dict[str, Any] = {n: _triton_value(v) for n, v in (*own.fixed_constexprs,
                                                                        *variant.config.constexprs)}  # fmt: skip
        for name, typevar in own.dtype_constexprs:  # a dtype constexpr: the tl.dtype its type variable binds
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
        options: dict[str, Any] = {"enable_fp_fusion": True, **dict(own.options)}
        options.update(num_warps=variant.config.num_warps, num_stages=variant.config.num_stages)
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        chain = self._ptxas(variant.target)
        for ptxas in chain:
            try:
                with warnings.catch_warnings(), _contained(private), _using_ptxas(ptxas.path):
                    warnings.simplefilter("ignore")
                    compiled = triton.compile(src, target=target, options=options)
                break
            except Exception as exc:  # Triton reports compile failures as assorted exception types
                if type(exc).__name__ == "PTXASError" and ptxas is not chain[-1]:
                    continue  # PTX this ptxas cannot read: the next, newer one may
                return Pruned(variant_id=variant.id, reason=_reason(exc, kernel))
        meta = compiled.metadata
        if meta.shared > arch.max_shared:  # Triton checks this only at launch, against the GPU it runs on
            limit = f"{variant.target} allows {arch.max_shared} per block"
            return Pruned(variant_id=variant.id, reason=f"needs {meta.shared} bytes of shared memory; {limit}")
        registers = cubin.registers(compiled.asm["cubin"], meta.name) or 0
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
            "triton": triton.__version__,  # the release that compiled it, in the manifest per variant
            "triton_hash": meta.hash,
            "ptxas": ptxas.release,
            "registers": str(registers or "?"),  # per thread, as ptxas -v says a CUDA kernel's
        }
        return Artifact(
            variant_id=variant.id,
            image=compiled.asm["cubin"],
            entry=meta.name,
            shared=meta.shared,
            static_shared=0,
            num_warps=meta.num_warps,
            registers=registers,
            extra_pointer_params=2,
            needs=needs,
            metadata=tuple((k, str(v)) for k, v in facts_.items()),
            writes=tuple(sorted(written_arguments(compiled.asm["ttir"]))),
            driver_floor=DriverFloor(ptxas.cuda, ptxas.label),
        )


@contextlib.contextmanager
def _using_ptxas(path: str) -> Iterator[None]:
    """Both of Triton's ptxas settings (it runs "ptxas-blackwell" from sm_90 on) pointed at this one for one
    compile, then put back: the process that builds (pip's backend, a test, a Dask worker) keeps the user's
    settings, and a later compile in it (Triton's JIT, say) is not handed aotpack's pick. Triton memoizes the
    ptxas version per process: cleared whenever the ptxas it would run changes (``ptxas --version``, ~4 ms)."""
    saved = {v: os.environ.get(v) for v in USER_PTXAS}
    changed = any(value != path for value in saved.values())
    if changed:
        os.environ.update(dict.fromkeys(USER_PTXAS, path))
        _forget_ptxas_version()
    try:
        yield
    finally:
        if changed:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            _forget_ptxas_version()


def _forget_ptxas_version() -> None:
    from triton.backends.nvidia import compiler

    for memo in ("get_ptxas_version", "get_features"):
        getattr(getattr(compiler, memo, None), "cache_clear", lambda: None)()


def _triton_value(value: ConstValue) -> Any:
    """A constexpr's value as Triton's compiler takes it: a dtype as Triton's (or torch's) object, a function as
    the @triton.jit function itself, a tuple of such."""
    if isinstance(value, DtypeConst):
        if value.torch:
            import torch

            return getattr(torch, value.name)
        import triton.language as tl

        return tl.dtype(value.name)
    if isinstance(value, FunctionConst):
        return introspect.unwrap(_load_function(value.source))
    if isinstance(value, tuple):
        return tuple(_triton_value(v) for v in value)
    return value


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
    lines = src.splitlines() if isinstance(src, str) else []
    if node is not None and isinstance(getattr(node, "lineno", None), int) and 0 < node.lineno <= len(lines):
        line = lines[node.lineno - 1].strip()  # (an error in a helper it calls may name a line of the helper's)
        return f"{name} in {kernel.source.function} (line {node.lineno} of the function): {line}" + (
            f": {message}" if message else ""
        )
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    errors = [f"ptxas, {m.group(1)}: {m.group(2)}" for ln in lines if (m := PTXAS_ERROR.match(ln))]
    if errors:  # ptxas's first error, not the repro command (its PTX file is gone with the compile's scratch)
        return f"{name}: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
    return f"{name}: {lines[-1] if lines else 'no message'}"
