"""The Triton backend: ``triton.compile(ASTSource(...), target=GPUTarget(...))`` per variant.

This needs no GPU and no driver (Triton's ``tools/compile.py`` does; it is not used). The compiled
kernel's parameters are the recipe's runtime arguments in order, followed by two pointers Triton
adds (global and profile scratch), which the runtime passes as null when the variant needs none.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from .. import _sources, _tools, facts
from ..errors import RecipeError, ToolNotFound
from ..mutation import written_arguments
from ..plan import Variant
from ..recipe import Kernel, Source
from . import Artifact, Outcome, Pruned

SUPPORTED = ((3, 9), (3, 10))  # Triton releases this backend is tested with: [first, last)


def _triton() -> Any:
    _installed_version()
    import triton

    return triton


def _installed_version() -> str:
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        raise ToolNotFound("Triton is not installed; run: pip install 'triton>=3.9'") from None
    if not SUPPORTED[0] <= tuple(int(p) for p in version.split(".")[:2]) < SUPPORTED[1]:
        raise ToolNotFound(
            f"Triton {version} is installed; aotpack supports Triton 3.9.x. Run: pip install 'triton~=3.9.0'"
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


class TritonCompiler:
    def versions(self) -> Mapping[str, str]:
        """Read without importing Triton (a no-op rebuild must not pay for that import)."""
        out = {"triton": _installed_version()}
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
        triton = _triton()
        for kernel in kernels:
            try:
                fn = _load_function(kernel.source)
            except Exception as exc:  # the user's module failed to import: say where
                raise RecipeError(
                    f"kernels.{kernel.name}.triton: importing {kernel.source} failed: {type(exc).__name__}: {exc}",
                    kernel.where,
                ) from None
            if not isinstance(fn, triton.runtime.JITFunction):
                raise RecipeError(
                    f"kernels.{kernel.name}.triton: {kernel.source} is not a @triton.jit function", kernel.where
                )
            params = [p for p in fn.params]
            runtime = [p.name for p in params if not p.is_constexpr]
            constexprs = {p.name for p in params if p.is_constexpr}
            declared = [a.name for a in kernel.args if not a.launch_only]
            if runtime != declared:
                raise RecipeError(
                    f"kernels.{kernel.name}.args: list the kernel's runtime parameters in its order: "
                    f"{', '.join(runtime)} (the recipe has {', '.join(declared)}; mark arguments the kernel "
                    "does not take 'launch_only: true')",
                    kernel.args[0].where,
                )
            missing = constexprs - set(kernel.constexpr_names)
            extra = set(kernel.constexpr_names) - constexprs
            if missing or extra:
                parts = []
                if missing:
                    parts.append(f"give values for {', '.join(sorted(missing))}")
                if extra:
                    parts.append(f"{', '.join(sorted(extra))} {'is' if len(extra) == 1 else 'are'} not "
                                 f"tl.constexpr parameters of {kernel.source.function}")  # fmt: skip
                raise RecipeError(f"kernels.{kernel.name}.constexprs: {'; '.join(parts)}", kernel.where)

    def compile(self, variant: Variant) -> Outcome:
        triton = _triton()
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        kernel = variant.kernel
        fn = _load_function(kernel.source)
        signature: dict[str, str] = {}
        attrs: dict[tuple[int, ...], list[list[Any]]] = {}
        constexprs: dict[str, Any] = dict(variant.config.constexprs)
        for index, name in enumerate(fn.arg_names):
            if name in kernel.constexpr_names:
                signature[name] = "constexpr"
                continue
            arg = kernel.arg(name)
            signature[name] = ("*" if arg.pointer else "") + variant.dtype_of(name)
            if variant.hinted and arg.hint == 16:
                attrs[(index,)] = [["tt.divisibility", 16]]
            elif variant.hinted and arg.hint == 1:  # folded into the code; the launcher leaves it out
                signature[name] = "constexpr"
                constexprs[name] = 1
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
        # launch needs the runtime cannot meet yet: prune rather than launch it wrongly
        unmet = [
            need
            for need, present in (
                ("global scratch memory", meta.global_scratch_size > 0 or meta.profile_scratch_size > 0),
                (f"a cluster of {meta.num_ctas} CTAs", meta.num_ctas != 1),
                ("a cooperative launch", bool(meta.launch_cooperative_grid)),
                ("programmatic dependent launch", bool(meta.launch_pdl)),
                ("tensor descriptors", bool(meta.tensordesc_meta)),
            )
            if present
        ]
        if unmet:
            return Pruned(variant_id=variant.id, reason=f"needs {', '.join(unmet)}, which aotpack cannot launch yet")
        facts_ = {
            "shared": meta.shared,
            "num_warps": meta.num_warps,
            "num_stages": meta.num_stages,
            "num_ctas": meta.num_ctas,
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
            num_ctas=meta.num_ctas,
            extra_pointer_params=2,
            metadata=tuple((k, str(v)) for k, v in facts_.items()),
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
