import dataclasses
import itertools
from pathlib import Path

import pytest

from aotpack import model
from aotpack.backends import recipes as recipe
from aotpack.errors import UsageError
from aotpack.plan import classes
from aotpack.plan import variants as plan

from ..shared import GOOD


def load(folder: Path) -> model.Recipe:
    return recipe.parse(GOOD, folder / "r.yaml")


def test_plan_is_the_full_product_with_stable_ids(kernel_dir):
    variants = plan.plan_variants(load(kernel_dir))
    # 2 targets x 2 types x (4 configs x 3 classes (DDDD, DDD_, ____) + 2 dispatched configs x 3 more)
    assert len(variants) == 72
    assert len({v.id for v in variants}) == 72
    assert variants[0].id == "add/T=fp32,BLOCK=256,w4,s3/sm_80/DDDD"
    assert variants[1].id == "add/T=fp32,BLOCK=256,w4,s3/sm_80/DDD_"
    assert variants[-1].id == "add/T=fp16,BLOCK=1024,w8,s3/sm_90a/____"
    assert [v.id for v in plan.plan_variants(load(kernel_dir))] == [v.id for v in variants]
    assert variants[-1].dtype_of("x_ptr") == "fp16" and variants[-1].dtype_of("n_elements") == "i32"


def test_hints_change_no_class_the_jit_keys(kernel_dir):
    """With or without ':16' hints the same classes are built: those of typical calls (aligned pointers, a size
    that is a multiple of 16 or not), each argument given up alone, and nothing assumed."""
    hinted = plan.plan_variants(load(kernel_dir))
    text = GOOD.replace('"*T:16"', '"*T"').replace('"i32:16"', '"i32"')
    plain = plan.plan_variants(recipe.parse(text, kernel_dir / "r.yaml"))
    assert [v.id for v in plain] == [v.id for v in hinted]
    assert [(s.name, s.origin) for s in classes.specs(plain[0].kernel)] == [
        ("DDDD", "typical"), ("DDD_", "typical"), ("_DDD", "relaxed"), ("D_DD", "relaxed"), ("DD_D", "relaxed"),
        ("____", "floor")]  # fmt: skip
    assert plain[0].spec.jit_terms(plain[0].kernel) == {"x_ptr": "D", "y_ptr": "D", "out_ptr": "D",
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
    assert len(chosen) == 18 and all("T=fp16" in v.id and "sm_90a" in v.id for v in chosen)
    assert narrowed.targets == ("sm_90a",) and narrowed.kernels[0].targets == ("sm_90a",)
    assert plan.select(rec, ()) == (rec, plan.plan_variants(rec))


def test_a_selection_keeps_its_defaults_and_drops_the_rest(kernel_dir):
    """A config without the default gets the default back for the same types, target and class; a kernel
    no pattern reaches is dropped, not refused."""
    rec = load(kernel_dir)
    _, chosen = plan.select(rec, ("add/T=fp32,BLOCK=256,w4,*/sm_80/DDDD",))
    assert [v.id for v in chosen] == [
        "add/T=fp32,BLOCK=256,w4,s3/sm_80/DDDD",
        "add/T=fp32,BLOCK=1024,w4,s3/sm_80/DDDD",
    ]
    two = dataclasses.replace(rec, kernels=(rec.kernels[0], dataclasses.replace(rec.kernels[0], name="other")))
    narrowed, chosen = plan.select(two, ("other/*",))
    assert [k.name for k in narrowed.kernels] == ["other"] and {v.kernel.name for v in chosen} == {"other"}
    with pytest.raises(UsageError, match="--only nothing: no variant id matches"):
        plan.select(rec, ("nothing",))


def test_row_strides_go_with_their_sizes():
    """A contiguous matmul of any M, N, K (each a multiple of 16 or not) has its class: the row strides follow
    the sizes they equal ((M - 1) * stride_am + (K - 1) * stride_ak + 1: in a contiguous A, stride_am == K),
    the inner strides are 1."""
    demo = recipe.load(Path(__file__).parents[2] / "recipes" / "demo.yaml")
    matmul = next(k for k in demo.kernels if k.name == "matmul")
    (typical,) = classes.typical_classes(matmul).groups
    terms = [{n: s for n, s in zip((a.name for a in matmul.args), t, strict=True) if s} for t in typical]
    assert len(terms) == 8
    for t in terms:
        assert t["a_ptr"] == t["b_ptr"] == t["c_ptr"] == "D"
        assert t["stride_ak"] == t["stride_bn"] == t["stride_cn"] == "1"
        assert t.get("stride_am") == t.get("K") and t.get("stride_bk") == t.get("stride_cm") == t.get("N")
    assert {(t.get("M"), t.get("N"), t.get("K")) for t in terms} == set(itertools.product(("D", None), repeat=3))


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


def test_planning_writes_nothing_beside_the_kernels(tmp_path):
    """`aotpack plan` imports the recipe's kernel files (and the helpers they import) to read their signatures: in
    a fresh interpreter that would write bytecode (__pycache__) into the user's folders; it writes none."""
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "examples", tmp_path / "examples")
    shutil.copytree(root / "recipes", tmp_path / "recipes")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-m", "aotpack", "plan", "recipes/demo.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_only_a_build_chooses_dispatch_rules_and_only_for_the_kernels_it_builds(monkeypatch, capsys, tmp_path):
    """Choosing the rule between measured keys takes seconds for the demo's tables: ``aotpack plan``, loading a
    recipe and the recipe checks of ``aotpack record`` read no rule and fit none; a build fits the rules of the
    kernels it generates code for, those --only leaves in, once they are compiled (a rule may count programs in
    waves of the variants' blocks per multiprocessor, known from their cubins)."""
    from aotpack.commands import cli
    from aotpack.pipeline import build as pipeline
    from aotpack.recipe import tables

    fitted: list[list[str]] = []

    compiled: list[str] = []

    def refused(kernels, blocks=None):
        assert compiled, "fitted before the variants were compiled"
        fitted.append([k.name for k in kernels])
        raise AssertionError("fitted")

    def compile_none(rec, variants, *args, **kwargs):
        compiled.extend(v.id for v in variants)
        return []

    monkeypatch.setattr(tables, "fit", refused)
    monkeypatch.setattr(pipeline, "_compile", compile_none)
    monkeypatch.setattr(pipeline, "_check_outcomes", lambda *a: ())
    monkeypatch.setattr(pipeline, "_check_mutation", lambda *a: None)
    demo = Path(__file__).parents[2] / "recipes" / "demo.yaml"
    assert cli.main(["plan", str(demo), "-q"]) in (0, None)
    assert "matmul/T=fp16," in capsys.readouterr().out
    rec = recipe.load(demo)
    assert fitted == [] and any(k.rules for k in rec.kernels)
    options = pipeline.BuildOptions(out_dir=tmp_path / "dist", select=("matmul/*",), use_cache=False)
    with pytest.raises(AssertionError, match="fitted"):
        pipeline.run(rec, options)
    assert fitted == [["matmul"]]
