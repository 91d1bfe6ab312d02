"""A torch.compile'd function for tests/gpu/workloads.py, in a file of its own: Dynamo keys the profile a recording
of it holds (which sizes changed) on the content of the file holding the compiled function, so that an edit of
the workloads' file leaves this recording valid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def compiled_small(mark: Callable[[str], None], rows: tuple[int, ...] = (64, 192),
                   marked: bool = False, hint: int | None = None) -> dict[str, Any]:  # fmt: skip
    """A function under torch.compile with Liger's RMSNorm inside the graph (Dynamo captures the user kernel,
    Inductor compiles its copy beside its own fused kernels), forward and backward at two shapes: the second
    makes Dynamo compile the graph anew with the rows dynamic, or the rows are dynamic from the first call
    (``marked``: ``torch._dynamo.mark_dynamic``, as a server marks its batch dimension; ``hint``: the size
    Inductor tunes the rows for, whatever the first rows are: ``hint_override``). (``dynamic=True``, every
    size symbolic, fails in Dynamo on Liger's autograd function with torch 2.11, under the JIT alone.)"""
    import torch
    from liger_kernel.transformers import LigerRMSNorm

    torch.manual_seed(0)
    norm = LigerRMSNorm(256).to(device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    @torch.compile
    def step(x: Any) -> Any:
        return torch.nn.functional.gelu(norm(x) @ weight).float().square().mean()

    out: dict[str, Any] = {}
    mark("ready")
    for i, n in enumerate(rows):
        x = torch.randn(n, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        if marked:
            torch._dynamo.mark_dynamic(x, 0, **({} if hint is None else {"hint_override": hint}))
        loss = step(x)
        loss.backward()
        out[f"loss{i}"], out[f"grad{i}"] = loss.detach(), x.grad
        if i == 0:
            mark("first_step")
    out["weight_grad"] = weight.grad
    return out
