"""Tuning hooks for recipes/demo.yaml: make inputs for a key, and compute the reference.

``aotpack tune`` calls ``<kernel>_inputs(key, types)`` -> (args, outputs), where args is the call's
argument tuple and outputs the indexes of the arguments the kernel writes, and
``<kernel>_reference(args)`` -> the expected outputs, in float64.
"""

import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _randn(*shape, dtype):
    return torch.randn(*shape, device="cuda").to(DTYPES[dtype])


def add_inputs(key, types):
    n = key["n_elements"]
    x, y = _randn(n, dtype=types["T"]), _randn(n, dtype=types["T"])
    return (x, y, torch.empty_like(x)), (2,)


def add_reference(args):
    return [args[0] + args[1]]  # the same rounding as the kernel: rtol 0 checks bit-exactness


def softmax_inputs(key, types):
    x = _randn(4096, key["n_cols"], dtype=types["T"]) * 3
    return (torch.empty_like(x), x), (0,)


def softmax_reference(args):
    return [torch.softmax(args[1].double(), dim=1)]


def matmul_inputs(key, types):
    a = _randn(key["M"], key["K"], dtype=types["T"])
    b = _randn(key["K"], key["N"], dtype=types["T"])
    return (a, b, torch.empty(key["M"], key["N"], device="cuda", dtype=a.dtype)), (2,)


def matmul_reference(args):
    return [args[0].double() @ args[1].double()]


def rmsnorm_inputs(key, types):
    x = _randn(4096, key["n_cols"], dtype=types["T"])
    w = _randn(key["n_cols"], dtype=types["T"])
    return (torch.empty_like(x), x, w, 1e-6), (0,)


def rmsnorm_reference(args):
    _, x, w, eps = args
    x64 = x.double()
    return [x64 * torch.rsqrt(x64.pow(2).mean(dim=1, keepdim=True) + eps) * w.double()]


def layernorm_inputs(key, types):
    x = _randn(key["n_rows"], key["n_cols"], dtype=types["T"])
    w, b = _randn(key["n_cols"], dtype=types["T"]), _randn(key["n_cols"], dtype=types["T"])
    return (torch.empty_like(x), x, w, b, 1e-5), (0,)


def layernorm_reference(args):
    _, x, w, b, eps = args
    return [torch.nn.functional.layer_norm(x.double(), (x.shape[1],), w.double(), b.double(), eps)]
