"""The third-party corpus (tests/corpus/thirdparty.yaml) on a GPU: every kernel, through the wheel and
through Triton's JIT with the same config, on random inputs of the benchmark shapes and odd ones, in
contiguous, strided-view and misaligned layouts. Where the variant aotpack launched was compiled for
the JIT's own specialization of the call, by the JIT's Triton release, the results must be identical
bit for bit; otherwise (another class, another release) they must agree to the dtype's rounding.

Needs the corpus wheel installed (``thirdparty_kernels``), torch, Triton, and the corpus packages
(liger-kernel, fla-core, conch-triton-kernels)."""

import pytest

from ..corpus.cases import CASES, compare, gpu_wheel, jit_class, pair

torch, pkg = gpu_wheel("thirdparty_kernels")

import triton  # noqa: E402

pytestmark = pytest.mark.gpu
SAME_TRITON = pkg.__aotpack__["toolchain"]["triton"] == triton.__version__

PARAMS = [
    (kernel, dtype, shape, layout)
    for kernel, (_, dtypes, shapes, odd, layouts) in CASES.items()
    for dtype in dtypes
    for shape in [*shapes, *odd]
    for layout in layouts
]


@pytest.mark.parametrize(("kernel", "dtype", "shape", "layout"), PARAMS, ids=lambda v: str(v).replace(" ", ""))
def test_matches_the_jit(kernel, dtype, shape, layout):
    case = CASES[kernel][0]
    torch.manual_seed(hash((kernel, dtype, shape, layout)) % 2**31)
    both = pair(pkg, kernel, case(torch, shape, getattr(torch, dtype), layout))
    entry = next(v for v in pkg.__aotpack__["kernels"][kernel]["variants"] if v["id"] == both.variant)
    compare(torch, both, SAME_TRITON and entry["assumes"] == jit_class(both.fn, both.jit_args))
