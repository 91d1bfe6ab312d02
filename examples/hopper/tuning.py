"""Tuning hooks for recipes/hopper.yaml (``aotpack tune``): inputs for a problem key and the
reference result."""

import math

import torch


def _dtype(types):
    return {"fp16": torch.float16, "bf16": torch.bfloat16}[types["T"]]


def matmul_inputs(key, types):
    a = torch.randn(key["M"], key["K"], device="cuda").to(_dtype(types))
    b = torch.randn(key["K"], key["N"], device="cuda").to(_dtype(types))
    return (a, b, torch.empty(key["M"], key["N"], device="cuda", dtype=a.dtype)), (2,)


def matmul_reference(args):
    return [args[0].float() @ args[1].float()]


def attention_inputs(key, types):
    shape = (4, 16, key["seq"], key["head_dim"])
    q, k, v = (torch.randn(shape, device="cuda").to(_dtype(types)) for _ in range(3))
    return (q, k, v, torch.empty_like(q), 1 / math.sqrt(key["head_dim"]), key["seq"], 64, key["causal"]), (3,)


def attention_reference(args):
    q, k, v, _, scale, _, _, causal = args
    return [torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=bool(causal),
                                                             scale=scale)]  # fmt: skip
