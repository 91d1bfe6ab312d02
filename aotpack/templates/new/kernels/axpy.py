"""out = alpha * x + y, element-wise."""

import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x, y, out, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x + offsets, mask=mask).to(tl.float32)
    b = tl.load(y + offsets, mask=mask).to(tl.float32)
    tl.store(out + offsets, (alpha * a + b).to(out.dtype.element_ty), mask=mask)
