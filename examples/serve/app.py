"""A toy model served with Triton kernels: the program docs/walkthrough.md records, rehearses, builds and serves.

Its attention block normalizes with a Triton layer norm and weighs with a Triton softmax (examples/layernorm.py,
examples/softmax.py), launched the way a kernel library launches them: the grid and the constexprs follow the
input (4 rows per program for short rows; a softmax block of the next power of two of the row, up to 1024).
Each request is checked against torch's own layer norm and softmax.

    python examples/serve/app.py warmup                       # the shapes a warm-up runs
    python examples/serve/app.py traffic                      # other requests: the lengths a server meets
    python examples/serve/app.py traffic --kernels app_kernels   # the same, on the built package's variants

With --kernels, the package is activated with fallback="error": a call no variant serves raises instead of
compiling. Without a GPU it says so and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/: the kernels' modules

from layernorm import layernorm_kernel
from softmax import softmax_kernel

HIDDEN = 768
REQUESTS = {  # tokens per request (a batch's sequences laid end to end)
    "warmup": [64, 128, 512],
    "traffic": [48, 77, 200, 130, 1000, 5],
}


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    rows_per_program = 4 if cols <= 4096 else 1
    block = min(triton.next_power_of_2(cols), 1024)
    grid = (triton.cdiv(rows, rows_per_program),)
    layernorm_kernel[grid](out, x, weight, bias, eps, rows, cols, ROWS=rows_per_program, BLOCK=block)
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = min(triton.next_power_of_2(cols), 1024)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=4)
    return out


class Attention(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)

    def forward(self, x: torch.Tensor, triton_kernels: bool = True) -> torch.Tensor:
        norm = layer_norm if triton_kernels else self._torch_norm
        h = norm(x, self.norm.weight, self.norm.bias)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        scores = (q @ k.T) / q.shape[-1] ** 0.5
        weights = softmax(scores) if triton_kernels else torch.softmax(scores.float(), dim=-1).to(scores.dtype)
        return x + weights @ v

    def _torch_norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float()).to(x.dtype)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python examples/serve/app.py", description=__doc__.splitlines()[0])
    parser.add_argument("requests", choices=sorted(REQUESTS), help="which request lengths to run")
    parser.add_argument("--kernels", metavar="PACKAGE", help="activate this aotpack package (fallback='error')")
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        print("app.py: no CUDA GPU here; it serves on one (the walkthrough's build step needs none)")
        return 2
    if opts.kernels:
        package = importlib.import_module(opts.kernels)
        package.activate(fallback="error")
    torch.manual_seed(0)
    model = Attention(HIDDEN).to("cuda", torch.float16)
    with torch.no_grad():
        for tokens in REQUESTS[opts.requests]:
            x = torch.randn(tokens, HIDDEN, device="cuda", dtype=torch.float16)
            y, ref = model(x), model(x, triton_kernels=False)
            error = (y.float() - ref.float()).abs().max().item()
            print(f"request of {tokens:4} tokens: max |error| against torch {error:.1e}")
    if opts.kernels:
        calls = sum(m["calls"] for m in package.stats()["class_misses"])
        print(
            f"{opts.kernels}: {len(REQUESTS[opts.requests])} requests served with no compilation; "
            f"calls in a class the JIT would have compiled another for: {calls}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
