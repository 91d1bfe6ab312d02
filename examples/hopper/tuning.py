"""Tuning hooks for recipes/hopper.yaml (``aotpack tune``): inputs for a problem key and the
reference result."""

import math

import torch


def attention_inputs(key, types):
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[types["T"]]
    shape = (4, 16, key["seq"], key["head_dim"])
    q, k, v = (torch.randn(shape, device="cuda").to(dtype) for _ in range(3))
    return (q, k, v, torch.empty_like(q), 1 / math.sqrt(key["head_dim"]), key["seq"], 64, key["causal"]), (3,)


def attention_reference(args):
    q, k, v, _, scale, _, _, causal = args
    return [torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=bool(causal),
                                                             scale=scale)]  # fmt: skip
