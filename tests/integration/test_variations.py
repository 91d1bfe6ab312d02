"""The recipe-variation test, without a GPU: every corpus kernel written the other equivalent ways users
write it (tests/corpus/variations.py: hints, span and product extents, strides the caller passes, all at
once); for each, the classes aotpack builds for every config include the class Triton's JIT compiles for
each of the kernel's contiguous calls (its benchmark shapes and odd ones, every dtype), as Triton's own
binder computes it from the arguments the kernel's library passes. tests/gpu/test_variations.py runs the
same recipes on the GPU against the JIT."""

import warnings

import pytest
import yaml

from aotpack.backends import recipes as recipe
from aotpack.plan import classes

from ..corpus import cases, variations

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    text = yaml.safe_dump(variations.generate(variations.common_calls()), sort_keys=False)
    path = tmp_path_factory.mktemp("variations") / "variations.yaml"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the corpus packages warn at import
        corpus = recipe.load(variations.CORPUS)
        return [*corpus.kernels, *recipe.load(path).kernels]


def test_every_variation_is_generated(kernels):
    names = {k.name for k in kernels}
    for kernel in cases.CASES:
        assert f"{kernel}__hints" in names  # every kernel has pointers to hint
    assert len(names) > 4 * len(cases.CASES)


CALLS = [
    (kernel, dtype, shape)
    for kernel, (_, dtypes, shapes, odd, _) in cases.CASES.items()
    for dtype in dtypes
    for shape in [*shapes, *odd]
]


@pytest.mark.parametrize(("kernel", "dtype", "shape"), CALLS, ids=lambda v: str(v).replace(" ", ""))
def test_the_jit_class_of_every_contiguous_call_is_built_whatever_the_recipe(kernels, monkeypatch, kernel, dtype,
                                                                             shape):  # fmt: skip
    monkeypatch.setattr(cases, "DEVICE", "cpu")
    call = cases.CASES[kernel][0](torch, shape, getattr(torch, dtype), "contiguous")
    want = cases.jit_class(cases.jit_function(call.source), call.jit_kwargs({}))
    written = [k for k in kernels if k.name == kernel or k.name.startswith(kernel + "__")]
    assert len(written) >= 2
    for k in written:
        built = [s.jit_terms(k) for s in classes.specs(k) if not s.picked_only]
        assert want in built, f"{k.name}: the JIT's class {want} of {shape} {dtype} is not built for every config"
