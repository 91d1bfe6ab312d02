"""What aotpack builds is what the installed Triton's JIT compiles, byte for byte: for each corpus kernel called as
its library calls it (tests/corpus/cases.py: a benchmark shape and an odd one, contiguous tensors, every dtype), the cubin of the variant aotpack planned for the call's class is the cubin Triton's own JIT compiles
for that call, and so is its metadata (entry, shared memory, warps, stages, CTAs, scratch): for every target the
recipe lists, and for the same kernel written the other equivalent ways users write it (tests/corpus/variations.py).

The JIT side is that release's own ``JITFunction.run(..., warmup=True)`` on CPU tensors, with a stub driver that
reports the recipe's target: the release's binder computes the specialization and the constexprs from the
argument objects, and the launch is skipped; nothing comes from aotpack's plan but the config. Both sides run one
ptxas (Triton's own, the JIT's default) without line info: a build's default older ptxas (for older drivers)
assembles other SASS from the same PTX by design.

It runs with whatever Triton is importable: `make test` with the newest, `make test-releases` with each older
supported release (tests/releases.py)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import yaml

from aotpack.backends import recipes as recipe
from aotpack.backends.triton import compiler as triton_backend
from aotpack.plan import variants as plan

from .. import jit_stub
from ..corpus import cases, variations

torch = pytest.importorskip("torch")

# contiguous calls of a benchmark shape and an odd one: their classes are the ones every recipe builds
# (tests/integration/test_variations.py); strided and misaligned calls may run a floor class instead
CALLS = [
    (kernel, dtype, shape, "contiguous")
    for kernel, (_, dtypes, shapes, odd, _) in cases.CASES.items()
    for dtype in dtypes
    for shape in (shapes[0], odd[0])
]
# the recipes written the other equivalent ways (tests/corpus/variations.py) are compared on their first dtype
VARIED = {(kernel, dtypes[0]) for kernel, (_, dtypes, _, _, _) in cases.CASES.items()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The corpus recipe's variants and its equivalent recipes' (kernels named ``<kernel>__<variation>``)."""
    path = tmp_path_factory.mktemp("variations") / "variations.yaml"
    path.write_text(yaml.safe_dump(variations.generate(variations.common_calls(), one_dtype=True), sort_keys=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the corpus packages warn at import
        return [*plan.plan_variants(recipe.load(variations.CORPUS)), *plan.plan_variants(recipe.load(path))]


@pytest.fixture(scope="module")
def compiler(corpus):
    """aotpack's compiler with one ptxas for every target: Triton's own (the JIT's default)."""
    with pytest.MonkeyPatch.context() as mp:  # Triton's own even where the environment names another
        for name in triton_backend.USER_PTXAS:
            mp.delenv(name, raising=False)
        own = next(p for p in triton_backend.ptxas_candidates() if p.origin.endswith(", ptxas"))
    targets = sorted({v.target for v in corpus})
    return triton_backend.TritonCompiler(line_info=False, ptxas=tuple((t, (own,)) for t in targets)), own.path


@pytest.mark.parametrize(("kernel", "dtype", "shape", "layout"), CALLS, ids=lambda v: str(v).replace(" ", ""))
def test_the_cubin_for_a_call_s_class_is_the_jit_s(corpus, compiler, tmp_path_factory, monkeypatch, kernel, dtype,
                                                   shape, layout):  # fmt: skip
    """For every target the recipe lists, and for every equivalent recipe of the kernel: the variant built for the
    call's class, with the first config, is the JIT's compilation of the call with that config."""
    from aotpack import facts
    from aotpack.backends.base import Artifact

    monkeypatch.setattr(cases, "DEVICE", "cpu")
    call = cases.CASES[kernel][0](torch, shape, getattr(torch, dtype), layout)
    fn = cases.jit_function(call.source)
    want = cases.jit_class(fn, call.jit_kwargs({}))
    short = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}[dtype]
    names = {kernel} | ({v.kernel.name for v in corpus if v.kernel.name.startswith(kernel + "__")}
                        if (kernel, dtype) in VARIED else set())  # fmt: skip
    built = [v for v in corpus if v.kernel.name in names and short in dict(v.binding).values()
             and v.spec.jit_terms(v.kernel) == want]  # fmt: skip
    first = next((v.config for v in built if v.kernel.name == kernel), None)
    assert first is not None, f"no variant of {kernel} {dtype} is built for the JIT's class {want}"
    compared = [v for v in built if v.config == first]
    missing = names - {v.kernel.name for v in compared}
    assert not missing, f"{sorted(missing)}: no variant for the JIT's class {want} with {kernel}'s config {first}"
    assert {v.target for v in compared} >= {v.target for v in corpus if v.kernel.name == kernel}

    config = {**dict(first.constexprs), "num_warps": first.num_warps, "num_stages": first.num_stages}
    params = {p.name for p in fn.params}
    args = {**call.jit_kwargs(config), **{k: v for k, v in config.items() if k in params}}
    jit: dict[str, Any] = {}
    for variant in compared:
        if variant.target not in jit:
            capability = facts.archs()[variant.target].capability
            with jit_stub.jit_on(capability, str(tmp_path_factory.getbasetemp() / "jit-cache"), compiler[1]):
                jit[variant.target] = fn.run(grid=(1,), warmup=True, num_warps=config["num_warps"],
                                             num_stages=config["num_stages"], **args)  # fmt: skip
        meta, artifact = jit[variant.target].metadata, compiler[0].compile(variant)
        assert isinstance(artifact, Artifact), artifact
        assert (artifact.entry, artifact.shared, artifact.num_warps) == (meta.name, meta.shared, meta.num_warps)
        theirs = {"num_stages": meta.num_stages, "num_ctas": meta.num_ctas, "global_scratch": meta.global_scratch_size}
        assert {k: v for k, v in artifact.metadata if k in theirs} == {k: str(v) for k, v in theirs.items()}
        assert artifact.image == jit[variant.target].asm["cubin"], f"{variant.id}: the cubin differs from the JIT's"
