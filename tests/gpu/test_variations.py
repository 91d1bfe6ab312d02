"""The corpus kernels' recipes written the other equivalent ways (tests/corpus/variations.py; the wheel
``variations_kernels`` from ``make variations-matched``), on a GPU against Triton's JIT: for every variation,
dtype built, test shape and layout, the wheel is called as the kernel's library calls it (the JIT's arguments by
name). A contiguous call runs the JIT's own class; where the wheel was built by the JIT's Triton release, the
results are identical bit for bit whenever the classes are the same (else they agree to the dtype's rounding).

Needs the wheel installed, torch, Triton and the corpus packages (liger-kernel, fla-core, conch-triton-kernels)."""

import pytest

from ..corpus.cases import CASES, compare, gpu_wheel, jit_class, pair

torch, pkg = gpu_wheel("variations_kernels")

import triton  # noqa: E402

pytestmark = pytest.mark.gpu
SAME_TRITON = pkg.__aotpack__["toolchain"]["triton"] == triton.__version__
_TORCH = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def _params():
    for name, entry in pkg.__aotpack__["kernels"].items():
        kernel = name.split("__")[0]
        _, _, shapes, odd, layouts = CASES[kernel]
        dtypes = sorted({_TORCH[b["T"] if "T" in b else next(iter(b.values()))] for b in entry["bindings"]})
        for dtype in dtypes:
            for shape in [*shapes, *odd]:
                for layout in layouts:
                    yield name, dtype, shape, layout


@pytest.mark.parametrize(("name", "dtype", "shape", "layout"), list(_params()), ids=lambda v: str(v).replace(" ", ""))
def test_every_equivalent_recipe_matches_the_jit(name, dtype, shape, layout):
    kernel = name.split("__")[0]
    torch.manual_seed(hash((name, dtype, shape, layout)) % 2**31)
    both = pair(pkg, name, CASES[kernel][0](torch, shape, getattr(torch, dtype), layout), by_name=True)
    entry = next(v for v in pkg.__aotpack__["kernels"][name]["variants"] if v["id"] == both.variant)
    jit = jit_class(both.fn, both.jit_args)
    if layout == "contiguous":
        assert entry["assumes"] == jit, f"{both.variant} runs {entry['assumes']}, the JIT compiles {jit}"
    compare(torch, both, SAME_TRITON and entry["assumes"] == jit)
