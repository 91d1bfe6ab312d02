import dataclasses
from pathlib import Path

import pytest

from aotpack import model, plan, recipe
from aotpack.errors import RecipeError

from ..shared import GOOD


def load(folder: Path) -> model.Recipe:
    return recipe.parse(GOOD, folder / "r.yaml")


def test_plan_is_the_full_product_with_stable_ids(kernel_dir):
    variants = plan.plan_variants(load(kernel_dir))
    # 2 targets x 2 types x 4 configs x (hinted, safe)
    assert len(variants) == 32
    assert len({v.id for v in variants}) == 32
    assert variants[0].id == "add/T=fp32,BLOCK=256,w4,s3/sm_80/hinted"
    assert variants[1].id == "add/T=fp32,BLOCK=256,w4,s3/sm_80/safe"
    assert variants[-1].id == "add/T=fp16,BLOCK=1024,w8,s3/sm_90a/safe"
    assert [v.id for v in plan.plan_variants(load(kernel_dir))] == [v.id for v in variants]
    assert variants[-1].dtype_of("x_ptr") == "fp16" and variants[-1].dtype_of("n_elements") == "i32"


def test_without_hints_the_jit_common_classes_are_built(kernel_dir):
    text = GOOD.replace('"*T:16"', '"*T"').replace('"i32:16"', '"i32"')
    variants = plan.plan_variants(recipe.parse(text, kernel_dir / "r.yaml"))
    # aligned pointers with a 16-divisible size; aligned with any size; nothing assumed
    assert [v.id.rsplit("/", 1)[1] for v in variants[:3]] == ["DDDD", "DDD_", "____"]
    assert len(variants) == 48
    assert variants[0].spec.jit_terms(variants[0].kernel) == {"x_ptr": "D", "y_ptr": "D", "out_ptr": "D",
                                                               "n_elements": "D"}  # fmt: skip


def test_specialize_none_means_one_plain_variant(kernel_dir):
    text = (
        GOOD.replace('"*T:16"', '"*T"')
        .replace('"i32:16"', '"i32"')
        .replace("    grid:", "    specialize: none\n    grid:")
    )
    variants = plan.plan_variants(recipe.parse(text, kernel_dir / "r.yaml"))
    assert len(variants) == 16 and variants[0].id == "add/T=fp32,BLOCK=256,w4,s3/sm_80"


def test_select_by_glob(kernel_dir):
    rec = load(kernel_dir)
    narrowed, chosen = plan.select(rec, ("add/T=fp16,*/sm_90a/*",))
    assert len(chosen) == 8 and all("T=fp16" in v.id and "sm_90a" in v.id for v in chosen)
    assert narrowed.targets == ("sm_90a",) and narrowed.kernels[0].targets == ("sm_90a",)
    assert plan.select(rec, ()) == (rec, plan.plan_variants(rec))


def test_a_selection_keeps_its_defaults_and_drops_the_rest(kernel_dir):
    """A config without the default gets the default back for the same types, target and class; a kernel
    no pattern reaches is dropped, not refused."""
    rec = load(kernel_dir)
    _, chosen = plan.select(rec, ("add/T=fp32,BLOCK=256,w4,*/sm_80/hinted",))
    assert [v.id for v in chosen] == [
        "add/T=fp32,BLOCK=256,w4,s3/sm_80/hinted",
        "add/T=fp32,BLOCK=1024,w4,s3/sm_80/hinted",
    ]
    two = dataclasses.replace(rec, kernels=(rec.kernels[0], dataclasses.replace(rec.kernels[0], name="other")))
    narrowed, chosen = plan.select(two, ("other/*",))
    assert [k.name for k in narrowed.kernels] == ["other"] and {v.kernel.name for v in chosen} == {"other"}
    with pytest.raises(RecipeError, match="no variant id matches nothing"):
        plan.select(rec, ("nothing",))


def test_row_strides_go_with_their_sizes():
    demo = recipe.load(Path(__file__).parents[2] / "recipes" / "demo.yaml")
    matmul = next(k for k in demo.kernels if k.name == "matmul")
    units = plan.unit_strides(matmul)
    assert units == {"stride_ak", "stride_bn", "stride_cn"}
    # (M - 1) * stride_am + (K - 1) * stride_ak + 1: in a contiguous A, stride_am == K
    assert plan.row_strides(matmul, units) == {"K": ("stride_am",), "N": ("stride_bk", "stride_cm")}
    classes = {s.name: s.jit_terms(matmul) for s in plan.specs(matmul)}
    # every subset of M, N, K odd has its class: a contiguous matmul of any shape runs the JIT's code
    assert len(classes) == 8 + 2
    k_odd = next(terms for terms in classes.values() if "K" not in terms and "M" in terms and "N" in terms)
    assert "stride_am" not in k_odd and k_odd["stride_bk"] == "D" and k_odd["stride_ak"] == "1"


@pytest.mark.parametrize(
    "text, fields",
    [
        ("add/T=fp32,BLOCK=1024,w4,s1/sm_90a/hinted", ("add", "T=fp32,BLOCK=1024,w4,s1", "sm_90a", "hinted")),
        ("add/BLOCK=1024,w4,s1/sm_80", ("add", "BLOCK=1024,w4,s1", "sm_80", "plain")),
        ("k/MODE=a/b,w4,s3/compute_90", ("k", "MODE=a/b,w4,s3", "compute_90", "plain")),  # a string constexpr with '/'
        ("k/MODE=a/b,w4,s3/sm_90a/DD_1", ("k", "MODE=a/b,w4,s3", "sm_90a", "DD_1")),
    ],
)
def test_a_variant_id_reads_back_into_its_fields(text, fields):
    ident = plan.VariantId.parse(text)
    assert (ident.kernel, ident.point, ident.target, ident.specialization) == fields
    assert str(ident) == text


@pytest.mark.parametrize("text", ["add", "add/x", "add/x/sm_99z", "/x/sm_80", "add//sm_80"])
def test_what_is_not_a_variant_id_is_refused(text):
    with pytest.raises(ValueError, match="is not a variant id"):
        plan.VariantId.parse(text)


def test_every_planned_id_reads_back(kernel_dir):
    rec = load(kernel_dir)
    for v in plan.plan_variants(rec):
        assert plan.VariantId.parse(v.id) == v.ident
