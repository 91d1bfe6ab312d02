"""How to call each corpus kernel both ways: through the aotpack wheel built from thirdparty.yaml, and
through Triton's JIT (the same @triton.jit function, unwrapped from its autotune/heuristics wrappers,
launched with the config aotpack's dispatcher chose for the call). Shared by tests/gpu/test_thirdparty.py
and benchmarks/thirdparty.py.

A case builds fresh random inputs for a shape and layout ("contiguous"; "view": rows strided inside a
wider tensor; "misaligned": tensors starting one element past a 16-byte boundary) on a device (CPU
tensors serve Triton's binder, tests/integration/test_variations.py) and returns a Call; ``pair`` makes
it a Pair of launches through a wheel and through the JIT.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aotpack import expr

LAYOUTS = ("contiguous", "view", "misaligned")


@dataclass
class Call:
    """A kernel's call as its library makes it: the wheel's arguments, the JIT's arguments by name (given the
    config aotpack chose), the JIT's grid, the tensors it writes, and in-place ones to restore."""

    source: str  # module:function of the @triton.jit kernel
    aot_args: tuple[Any, ...]
    jit_kwargs: Callable[[dict[str, Any]], dict[str, Any]]
    grid: Callable[[dict[str, Any]], tuple[int, ...]]
    outputs: list[Any]
    restore: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass
class Pair:
    aot: Callable[[], None]  # launch through the wheel
    jit: Callable[[], None]  # launch through Triton's JIT with the same config
    outputs: list[Any]  # tensors both write (poisoned before each check)
    variant: str  # the variant aotpack chose
    fn: Any  # the @triton.jit function
    jit_args: dict[str, Any]  # what the JIT launch passes: every argument and constexpr by name
    # in-place kernels: (tensor, its original) to put back before each launch instead of poisoning it
    restore: list[tuple[Any, Any]] = field(default_factory=list)


def jit_function(source: str) -> Any:
    from aotpack.backends.triton import introspect

    module, name = source.split(":")
    with warnings.catch_warnings():  # kernel libraries warn about optional dependencies at import
        warnings.simplefilter("ignore")
        return introspect.unwrap(getattr(importlib.import_module(module), name))


def _config(pkg: Any, kernel: str, variant: str) -> dict[str, Any]:
    entry = next(v for v in pkg.__aotpack__["kernels"][kernel]["variants"] if v["id"] == variant)
    return {**entry["constexprs"], "num_warps": entry["num_warps"], "num_stages": entry["num_stages"]}


DEVICE = "cuda"  # where the cases' tensors live; tests without a GPU set "cpu"


def _tensor(torch: Any, shape: tuple[int, ...], dtype: Any, layout: str, fill: str = "randn") -> Any:
    """A tensor of ``shape`` on DEVICE in the given layout (2-D layouts stride or offset the rows)."""
    make = torch.randn if fill == "randn" and dtype.is_floating_point else torch.zeros
    if layout == "view" and len(shape) == 2:
        return make((shape[0], shape[1] + 24), dtype=dtype, device=DEVICE)[:, 8 : 8 + shape[1]]
    if layout == "misaligned":
        numel = 1
        for s in shape:
            numel *= s
        return make(numel + 1, dtype=dtype, device=DEVICE)[1:].view(shape)
    return make(shape, dtype=dtype, device=DEVICE)


def pair(pkg: Any, kernel: str, call: Call, by_name: bool = False) -> Pair:
    """The call through the wheel's ``kernel`` and through the JIT with the config the wheel chose.
    ``by_name``: the wheel's kernel is called with the JIT's arguments by name (its recipe's names are the
    kernel's, and may require what the published recipe defaults)."""
    fn = jit_function(call.source)
    kernel_obj = getattr(pkg, kernel)
    if by_name:
        names = {a["name"] for a in pkg.__aotpack__["kernels"][kernel]["args"]}
        aot_args: tuple[Any, ...] = ()
        aot_kwargs = {n: v for n, v in call.jit_kwargs({}).items() if n in names}
    else:
        aot_args, aot_kwargs = call.aot_args, {}
    variant = kernel_obj.select(*aot_args, **aot_kwargs)
    config = _config(pkg, kernel, variant)
    params = {p.name for p in fn.params}
    constexprs = {k: v for k, v in config.items() if k in params}
    launch = {k: config[k] for k in ("num_warps", "num_stages")}

    def aot() -> None:
        kernel_obj(*aot_args, **aot_kwargs)

    args = {**call.jit_kwargs(config), **constexprs}

    def jit() -> None:
        fn[call.grid(config)](**args, **launch)

    return Pair(aot=aot, jit=jit, outputs=call.outputs, variant=variant, fn=fn, jit_args=args, restore=call.restore)


def compare(torch: Any, both: Pair, same_code: bool) -> None:
    """Launch through the wheel and through the JIT, each onto poisoned outputs (in-place inputs restored), and
    check the results: every output written, identical bit for bit when both ran the same code, else equal to
    the dtype's rounding."""
    results = []
    for launch in (both.aot, both.jit):
        for out in both.outputs:
            out.fill_(float("nan")) if out.dtype.is_floating_point else out.fill_(-1)
        for tensor, original in both.restore:
            tensor.copy_(original)
        launch()
        torch.cuda.synchronize()
        results.append([out.clone() for out in both.outputs])
    for got, want in zip(*results, strict=True):
        assert not torch.isnan(got.float()).any() or torch.isnan(want.float()).any(), "aotpack left outputs unwritten"
        if same_code:
            assert torch.equal(got, want), f"{both.variant}: same code as the JIT, different bits"
        else:
            tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(got.dtype, 1e-5)
            torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


def jit_class(fn: Any, args: dict[str, Any]) -> dict[str, str]:
    """The JIT's specialization of a call, per runtime argument ('D', '1' or 'N'; nothing omitted), computed
    by Triton's own binder (constexprs the arguments leave out take their default, or 1: they do not change
    how runtime arguments are keyed)."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import create_function_from_signature

    binder = create_function_from_signature(fn.signature, fn.params, BaseBackend)
    filled = {p.name: p.default if p.has_default else 1 for p in fn.params if p.is_constexpr and p.name not in args}
    _, spec, _ = binder(**args, **filled)
    out = {}
    for p, (kind, key) in zip(fn.params, spec, strict=True):
        if p.is_constexpr:
            continue
        if kind == "constexpr":
            out[p.name] = "N" if key is None else "1"
        else:
            out[p.name] = key if isinstance(key, str) else ""
    return {k: v for k, v in out.items() if v}


# ---------------------------------------------------------------- the cases


def liger_rms_norm_fwd(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    rows, cols = shape
    x, y = _tensor(torch, shape, dtype, layout), _tensor(torch, shape, dtype, layout, "zeros")
    w = _tensor(torch, (cols,), dtype, "contiguous")
    rstd = torch.empty(rows, dtype=torch.float32, device=DEVICE)
    return Call(
        "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel", (y, x, w, rstd),
        lambda c: dict(Y_ptr=y, Y_row_stride=y.stride(0), X_ptr=x, X_row_stride=x.stride(0), W_ptr=w,
                       W_row_stride=w.stride(0), RSTD_ptr=rstd, RSTD_row_stride=rstd.stride(0), n_cols=cols, eps=1e-6,
                       offset=0.0),
        lambda c: (rows,), [y, rstd],
    )  # fmt: skip


def liger_rms_norm_bwd(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    import triton.language as tl

    rows, cols = shape
    programs = torch.cuda.get_device_properties(0).multi_processor_count if DEVICE == "cuda" else 132
    dy, x = _tensor(torch, shape, dtype, layout), _tensor(torch, shape, dtype, layout)
    dx = _tensor(torch, shape, dtype, layout, "zeros")
    w = _tensor(torch, (cols,), dtype, "contiguous")
    rstd = torch.rand(rows, dtype=torch.float32, device=DEVICE) + 0.5
    dw = torch.zeros((programs, cols), dtype=torch.float32, device=DEVICE)
    per_program = -(-rows // programs)
    tl_dtype = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}[dtype]
    return Call(
        "liger_kernel.ops.rms_norm:_rms_norm_backward_kernel", (dy, dx, x, w, rstd, dw),
        lambda c: dict(dY_ptr=dy, dY_row_stride=dy.stride(0), dX_ptr=dx, dX_row_stride=dx.stride(0), X_ptr=x,
                       X_row_stride=x.stride(0), X_dtype=tl_dtype, W_ptr=w, W_row_stride=w.stride(0), RSTD_ptr=rstd,
                       RSTD_row_stride=rstd.stride(0), dW_ptr=dw, dW_row_stride=dw.stride(0), n_rows=rows, n_cols=cols,
                       offset=0.0, rows_per_program=per_program),
        lambda c: (programs,), [dx, dw],
    )  # fmt: skip


def liger_layer_norm_fwd(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    rows, cols = shape
    x, y = _tensor(torch, shape, dtype, layout), _tensor(torch, shape, dtype, layout, "zeros")
    w, b = _tensor(torch, (cols,), dtype, "contiguous"), _tensor(torch, (cols,), dtype, "contiguous")
    mean = torch.empty(rows, dtype=torch.float32, device=DEVICE)
    rstd = torch.empty(rows, dtype=torch.float32, device=DEVICE)
    return Call(
        "liger_kernel.ops.layer_norm:_layer_norm_forward_kernel", (y, x, w, b, mean, rstd),
        lambda c: dict(Y_ptr=y, Y_row_stride=y.stride(0), X_ptr=x, X_row_stride=x.stride(0), W_ptr=w,
                       W_row_stride=w.stride(0), B_ptr=b, B_row_stride=b.stride(0), Mean_ptr=mean,
                       Mean_row_stride=mean.stride(0), RSTD_ptr=rstd, RSTD_row_stride=rstd.stride(0), n_cols=cols,
                       eps=1e-5),
        lambda c: (rows,), [y, mean, rstd],
    )  # fmt: skip


def _glu(torch: Any, source: str, shape: tuple[int, int], dtype: Any, layout: str,
         gate: bool) -> Call:  # fmt: skip
    rows = shape[0]
    a, b = _tensor(torch, shape, dtype, layout), _tensor(torch, shape, dtype, layout)
    c = _tensor(torch, shape, dtype, layout, "zeros")
    names = ("a_ptr", "b_ptr", "c_ptr") if gate else ("a", "b", "c")
    extra = {"gate_multiplier": 1.0} if gate else {}
    return Call(
        source, (a, b, c),
        lambda cfg: {names[0]: a, names[1]: b, names[2]: c, "stride": c.stride(0), **extra},
        lambda cfg: (rows,), [c],
    )  # fmt: skip


def liger_swiglu_fwd(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    return _glu(torch, "liger_kernel.ops.swiglu:_swiglu_forward_kernel", shape, dtype,
                layout, gate=True)  # fmt: skip


def liger_geglu_fwd(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    return _glu(torch, "liger_kernel.ops.geglu:_geglu_tanh_forward_kernel", shape, dtype,
                layout, gate=False)  # fmt: skip


def liger_dyt_fwd(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    rows, n = shape
    x, y = _tensor(torch, shape, dtype, layout), _tensor(torch, shape, dtype, layout, "zeros")
    alpha = torch.full((1,), 0.5, dtype=dtype, device=DEVICE)
    gamma, beta = _tensor(torch, (n,), dtype, "contiguous"), _tensor(torch, (n,), dtype, "contiguous")
    return Call(
        "liger_kernel.ops.dyt:_dyt_fwd_kernel", (x, y, alpha, gamma, beta),
        lambda c: dict(X=x, Y=y, Alpha=alpha, Gamma=gamma, Beta=beta),
        lambda c: (-(-n // c["BLOCK_N"]), rows), [y],
    )  # fmt: skip


def fla_cumsum_scalar(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    """shape: (T, scaled); B = 2 and H = 16 as the recipe binds them."""
    length, scaled = shape
    s = _tensor(torch, (2, length, 16), dtype, "misaligned" if layout == "misaligned" else "contiguous")
    o = torch.zeros((2, length, 16), dtype=torch.float32, device=DEVICE)
    scale = 0.5 if scaled else None
    return Call(
        "fla.ops.utils.cumsum:chunk_local_cumsum_scalar_kernel", (s, o, scale, None, None),
        lambda c: dict(s=s, o=o, scale=scale, cu_seqlens=None, chunk_indices=None, T=length),
        lambda c: (-(-length // c["BT"]) * 2 * 16,), [o],
    )  # fmt: skip


def fla_logsumexp(torch: Any, shape: tuple[int, int, int], dtype: Any, layout: str) -> Call:
    """shape: (rows, D, scaled)."""
    rows, d, scaled = shape
    x = _tensor(torch, (rows, d), dtype, "misaligned" if layout == "misaligned" else "contiguous")
    block = min(expr.next_pow2(d), 65536)
    z = torch.zeros((rows, -(-d // block)), dtype=torch.float32, device=DEVICE)
    scale = 0.5 if scaled else None
    return Call(
        "fla.ops.utils.logsumexp:logsumexp_fwd_kernel", (x, z, scale),
        lambda c: dict(x=x, z=z, scale=scale),
        lambda c: (rows, -(-d // c["B"])), [z],
    )  # fmt: skip


def _act_and_mul(torch: Any, source: str, shape: tuple[int, int], dtype: Any, layout: str,
                 names: tuple[str, str, str, str], extra: dict[str, Any]) -> Call:  # fmt: skip
    tokens, d = shape
    x = _tensor(torch, (tokens, 2 * d), dtype, layout)
    out = _tensor(torch, (tokens, d), dtype, layout, "zeros")
    return Call(
        source, (out, x),
        lambda c: {names[0]: out, names[1]: x, names[2]: out.stride(0), names[3]: x.stride(0), "d": d, **extra},
        lambda c: (tokens,), [out],
    )  # fmt: skip


def conch_silu_and_mul(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    return _act_and_mul(torch, "conch.kernels.activation.silu_and_mul:_silu_and_mul_kernel",
                        shape, dtype, layout, ("output_ptr", "x_ptr", "output_stride", "input_stride"), {})  # fmt: skip


def conch_gelu_tanh_and_mul(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    source = "conch.kernels.activation.gelu_tanh_and_mul:_gelu_tanh_and_mul_kernel"
    return _act_and_mul(torch, source, shape, dtype, layout,
                        ("out_ptr", "in_ptr", "out_stride", "in_stride"), {})  # fmt: skip


def conch_rms_norm(torch: Any, shape: tuple[int, int], dtype: Any, layout: str) -> Call:
    """shape: (tokens, hidden); layout "view" runs the fused-residual form (output None)."""
    tokens, hidden = shape
    contiguous = "misaligned" if layout == "misaligned" else "contiguous"  # conch assumes contiguous rows
    x, w = _tensor(torch, shape, dtype, contiguous), _tensor(torch, (hidden,), dtype, "contiguous")
    if layout == "view":
        residual = _tensor(torch, shape, dtype, contiguous)
        args: tuple[Any, ...] = (None, x, residual, w)
        outputs = [x, residual]
    else:
        out = _tensor(torch, shape, dtype, contiguous, "zeros")
        args = (out, x, None, w)
        outputs = [out]
    call = Call(
        "conch.kernels.normalization.rms_norm:_rms_norm_kernel", args,
        lambda c: dict(output_ptr=args[0], x_ptr=x, residual_ptr=args[2], weight_ptr=w, hidden_size=hidden,
                       epsilon=1e-6),
        lambda c: (tokens,), outputs,
    )  # fmt: skip
    if layout == "view":  # in place: x and residual are read and written
        call.restore = [(t, t.clone()) for t in outputs]
    return call


# kernel -> (case, dtypes, benchmark shapes, extra test shapes (odd sizes), layouts the kernel takes)
CASES: dict[
    str, tuple[Callable[..., Call], tuple[str, ...], list[tuple[int, ...]], list[tuple[int, ...]], tuple[str, ...]]
] = {
    "liger_rms_norm_fwd": (
        liger_rms_norm_fwd,
        ("float16", "bfloat16"),
        [(4096, 2048), (4096, 4096), (2048, 8192)],
        [(333, 1000), (64, 4095)],
        LAYOUTS,
    ),
    "liger_rms_norm_bwd": (
        liger_rms_norm_bwd,
        ("float16", "bfloat16"),
        [(4096, 1024), (4096, 2048), (8192, 4096)],
        [(333, 1000), (100, 3000)],
        LAYOUTS,
    ),
    "liger_layer_norm_fwd": (
        liger_layer_norm_fwd,
        ("float16", "bfloat16"),
        [(4096, 1024), (4096, 2048), (8192, 4096)],
        [(333, 1000), (64, 3000)],
        LAYOUTS,
    ),
    "liger_swiglu_fwd": (
        liger_swiglu_fwd,
        ("float16", "bfloat16"),
        [(4096, 2048), (4096, 4096), (2048, 11008)],
        [(333, 2048), (7, 11008)],
        LAYOUTS,
    ),
    "liger_geglu_fwd": (
        liger_geglu_fwd,
        ("float16", "bfloat16"),
        [(4096, 2048), (4096, 4096), (2048, 11008)],
        [(333, 4096), (7, 11008)],
        LAYOUTS,
    ),
    "liger_dyt_fwd": (
        liger_dyt_fwd,
        ("bfloat16",),
        [(4096, 4096), (8192, 4096), (4096, 8192)],
        [(333, 4096), (1, 8192)],
        ("contiguous",),
    ),
    "fla_cumsum_scalar": (
        fla_cumsum_scalar,
        ("float32",),
        [(4096, 0), (8192, 1), (16384, 0)],
        [(1000, 1), (63, 0)],
        ("contiguous", "misaligned"),
    ),
    "fla_logsumexp": (
        fla_logsumexp,
        ("float32",),
        [(4096, 1024, 0), (4096, 4096, 1), (1024, 32000, 0)],
        [(333, 1024, 1), (7, 32000, 0)],
        ("contiguous", "misaligned"),
    ),
    "conch_silu_and_mul": (
        conch_silu_and_mul,
        ("float16", "bfloat16"),
        [(4096, 4096), (8192, 11008), (2048, 14336)],
        [(333, 1000), (5, 4095)],
        LAYOUTS,
    ),
    "conch_gelu_tanh_and_mul": (
        conch_gelu_tanh_and_mul,
        ("float32",),
        [(4096, 4096), (8192, 11008), (2048, 14336)],
        [(333, 1000), (5, 4095)],
        LAYOUTS,
    ),
    "conch_rms_norm": (
        conch_rms_norm,
        ("float16", "bfloat16"),
        [(4096, 2048), (4096, 4096), (8192, 8192)],
        [(333, 1000), (5, 4095)],
        LAYOUTS,
    ),
}


def gpu_wheel(package: str) -> tuple[Any, Any]:
    """torch and the corpus wheel ``package`` for a GPU test module, which is skipped without a CUDA GPU, the
    wheel, or the corpus packages (liger-kernel, fla-core, conch-triton-kernels)."""
    import pytest

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU", allow_module_level=True)
    pkg = pytest.importorskip(package)
    for needed in ("liger_kernel", "fla", "conch"):
        pytest.importorskip(needed)
    return torch, pkg
