"""Persistent matrix product C = A @ B through TMA tensor descriptors (Hopper and newer).

A (M x K), B (K x N) and C (M x N) are row-major tensors the launcher wraps in host tensor
descriptors: the hardware copies whole tiles into shared memory (and clips them at the edges, so
there are no masks), and wgmma reads them from there. A fixed number of programs (about one per
SM) walks the output tiles, GROUP_M tile rows at a time so that neighbours share tiles in L2.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_tma_kernel(
    a_desc, b_desc, c_desc, M, N, K, programs,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    group_size = GROUP_M * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, programs):
        first_m = (tile // group_size) * GROUP_M
        rows_in_group = min(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group_size) % rows_in_group
        pid_n = (tile % group_size) // rows_in_group
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_steps):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
