"""A real workload for `aotpack record` and its replay: liger-kernel's own autograd functions (SwiGLU
forward and backward, RMSNorm forward), called as a library user calls them; the library computes
the grids, block sizes and warps. Run as a program:

    python record_workload.py [OUT.pt] [--activate PACKAGE] [--unseen]

OUT.pt gets every result (CPU tensors). With --activate, PACKAGE.activate(fallback="error") first:
no JIT compilation is allowed, and the script counts them through Triton's own hook. It prints
`first-result-s <seconds>` (from after the imports of torch and liger and the inputs' allocation to
the first call's synchronized result: the package's import and activation, or the JIT's compilation,
included), `total-s` and `jit-compilations <n>`. With --unseen, RMSNorm alone at shapes the recording never saw
(odd widths: the same configs, other classes), and `class-misses <n>` when a package is activated.
"""

import sys
import time

import torch
from triton import knobs

SHAPES = [
    (4096, 4096, torch.bfloat16),
    (1000, 11008, torch.float16),
    (1, 4096, torch.bfloat16),
    (333, 2000, torch.float16),
]
UNSEEN = [(7, 4095, torch.bfloat16), (5, 2047, torch.float16), (3, 4093, torch.bfloat16)]  # RMSNorm only


def main(argv: list[str]) -> None:
    out = next((a for a in argv if a.endswith(".pt")), None)
    compiled = []
    previous = knobs.runtime.jit_cache_hook

    def count(**kwargs):
        compiled.append(kwargs["repr"])
        return previous(**kwargs) if previous else None

    knobs.runtime.jit_cache_hook = count
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = []
    unseen = "--unseen" in argv
    for rows, cols, dtype in UNSEEN if unseen else SHAPES:
        inputs.append(tuple(torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)
                            for shape in [(rows, cols)] * 4 + [(cols,)]))  # fmt: skip
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    torch.cuda.synchronize()
    t0 = time.perf_counter()  # from here: the package's import and activation, or the JIT's compilation
    package = None
    if "--activate" in argv:
        import importlib

        package = importlib.import_module(argv[argv.index("--activate") + 1])
        package.activate(fallback="error")

    results, first = [], None
    for a0, b0, g, x, w in inputs:
        if unseen:
            with torch.no_grad():
                results.append(LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False))
            continue
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        c = LigerSiLUMulFunction.apply(a, b)
        if first is None:
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
        c.backward(g)
        with torch.no_grad():
            y = LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False)
        results += [c.detach(), a.grad, b.grad, y]
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    first = total if first is None else first
    if package is not None:
        print(f"class-misses {sum(m['calls'] for m in package.stats()['class_misses'])}")
    print(f"first-result-s {first:.6f}")
    print(f"total-s {total:.6f}")
    print(f"jit-compilations {len(compiled)}")
    if out:
        torch.save([r.cpu() for r in results], out)


if __name__ == "__main__":
    main(sys.argv[1:])
