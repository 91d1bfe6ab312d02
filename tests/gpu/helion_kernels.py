"""Two Helion kernels with fixed configs (Helion takes no closures: they live in a module of their own), for
tests/gpu/workloads.py. Helion generates each one's Triton code into a temporary module at its first call."""

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[1], num_warps=4))
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        values = x[tile_n, :]
        amax = torch.amax(values, dim=1, keepdim=True)
        exp = torch.exp(values - amax)
        out[tile_n, :] = exp / torch.sum(exp, dim=1, keepdim=True)
    return out
