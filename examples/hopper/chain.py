"""out = a * x + b element-wise, written to run in chains of dependent launches.

Launched with programmatic dependent launch (PDL), the next kernel in the stream may start while
this one drains, so each program first waits for the previous kernel's writes (``gdc_wait``) and,
once its work is issued, lets the next kernel launch (``gdc_launch_dependents``). A fixed number of
programs strides over the data, so the grid also fits a cooperative launch. Without PDL both calls
are no-ops.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def axpb_kernel(x_ptr, out_ptr, a, b, n, programs, BLOCK: tl.constexpr):
    gdc_wait()
    for start in tl.range(tl.program_id(0) * BLOCK, n, programs * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * a + b, mask=mask)
    gdc_launch_dependents()
