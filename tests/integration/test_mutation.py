"""Mutation analysis on real TTIR: stores, atomics, computed and loop-carried pointers, read-only."""

import sys
import textwrap

import pytest

pytestmark = [pytest.mark.filterwarnings("ignore:TRITON_DEFAULT_FP_FUSION")]

KERNELS = textwrap.dedent(
    """
    import triton
    import triton.language as tl

    @triton.jit
    def store(x, out, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(out + i, tl.load(x + i, mask=i < n), mask=i < n)

    @triton.jit
    def atomic(x, total, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.atomic_add(total, tl.sum(tl.load(x + i, mask=i < n), axis=0))

    @triton.jit
    def computed(x, a, b, idx, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        where = tl.load(idx + i, mask=i < n)          # an index read from memory
        target = a if n > 100 else b                  # one of two outputs
        for _ in range(0, n, BLOCK):                  # carried through a loop
            target += BLOCK
        tl.store(target + where, tl.load(x + i, mask=i < n), mask=i < n)

    @triton.jit
    def reads(x, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.device_assert(tl.sum(tl.load(x + i, mask=i < n), axis=0) == tl.sum(tl.load(x + i, mask=i < n), axis=0))
    """
)


@pytest.mark.parametrize(
    ("name", "signature", "written"),
    [
        ("store", {"x": "*fp32", "out": "*fp32", "n": "i32"}, {"out"}),
        ("atomic", {"x": "*fp32", "total": "*fp32", "n": "i32"}, {"total"}),
        ("computed", {"x": "*fp32", "a": "*fp32", "b": "*fp32", "idx": "*i32", "n": "i32"}, {"a", "b"}),
        ("reads", {"x": "*fp32", "n": "i32"}, set()),
    ],
)
def test_written_arguments(tmp_path, name, signature, written):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from aotpack.backends.triton.mutation import written_arguments

    (tmp_path / "mutation_kernels.py").write_text(KERNELS)
    sys.path.insert(0, str(tmp_path))
    try:
        import mutation_kernels
    finally:
        sys.path.remove(str(tmp_path))
    fn = getattr(mutation_kernels, name)
    src = ASTSource(fn=fn, signature={**signature, "BLOCK": "constexpr"}, constexprs={"BLOCK": 128})
    ttir = triton.compile(src, target=GPUTarget("cuda", 80, 32)).asm["ttir"]
    assert written_arguments(ttir) == written
