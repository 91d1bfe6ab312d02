"""Attention forward, out = softmax(scale * Q K^T) V, one pass with an online softmax (Hopper).

Q, K, V and out are contiguous (batch, heads, seq, HEAD_DIM) tensors. Each program takes BLOCK_M
query rows of one head and builds tensor descriptors over that head's rows on the device
(``tl.make_tensor_descriptor``): the descriptors live in global scratch memory the launcher
provides, and their bounds clip the tiles at the end of the sequence. CAUSAL masks keys after the
query (CAUSAL is 0 or 1). Scores are kept in base 2 (exp2) with the scale folded in.
"""

import triton
import triton.language as tl


@triton.jit
def attention_fwd_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, scale, seq,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
    q_desc = tl.make_tensor_descriptor(q_ptr + head, [seq, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr + head, [seq, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr + head, [seq, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(out_ptr + head, [seq, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])

    q = q_desc.load([start_m, 0])
    rows = start_m + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_max = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    row_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
    end = tl.minimum(start_m + BLOCK_M, seq) if CAUSAL else seq
    for start_n in range(0, end, BLOCK_N):
        k = k_desc.load([start_n, 0])
        scores = tl.dot(q, k.T) * qk_scale
        keep = (start_n + cols)[None, :] < seq
        if CAUSAL:
            keep = keep & ((start_n + cols)[None, :] <= rows[:, None])
        scores = tl.where(keep, scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        p = tl.math.exp2(scores - new_max[:, None])
        correction = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * correction + tl.sum(p, 1)
        v = v_desc.load([start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc * correction[:, None])
        row_max = new_max
    o_desc.store([start_m, 0], (acc / row_sum[:, None]).to(o_desc.dtype))
