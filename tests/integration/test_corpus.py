"""The third-party corpus (tests/corpus/thirdparty.yaml) builds without a GPU: ten kernels of three
PyPI packages referenced as published, recipes without hints. What the build read from them (the
autotuner's configs and key, heuristics as bound constexprs, signature defaults, dtype constexprs,
the JIT's specialization), what it pruned at plan time, and how the runtime dispatches their calls
(on the fake driver) are checked here; tests/gpu/test_thirdparty.py compares them with the JIT."""

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest

from aotpack import build, model
from aotpack.backends import recipes as recipe
from aotpack.backends.triton import introspect
from aotpack.plan import classes
from aotpack.plan import variants as plan
from aotpack.recipe import sources as _sources
from aotpack.states import NONE

from .helpers import CAI_ARRAY, install_wheel, run_on_fake_driver

for needed in ("torch", "liger_kernel", "fla", "conch"):
    pytest.importorskip(needed, reason="the corpus packages come with the 'corpus' extra (make test installs it)")

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "thirdparty.yaml"


@pytest.fixture(scope="module")
def corpus() -> model.Recipe:
    return recipe.load(CORPUS)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    wheel = build(CORPUS, tmp_path_factory.mktemp("dist"), jobs=2).wheel
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


def test_the_corpus_is_real_third_party_code(corpus):
    sources = {k.name: k.source.module for k in corpus.kernels}
    assert len(sources) >= 10
    objects = [_sources.load(k.source) for k in corpus.kernels]
    wrapped = [o for o in objects if introspect.unwrap(o) is not o]
    assert len(wrapped) >= 3, "at least three published with @triton.autotune / @triton.heuristics"
    assert {m.split(".")[0] for m in sources.values() if m} == {"liger_kernel", "fla", "conch"}
    assert all(k.source.path is None for k in corpus.kernels), "referenced by module path, not copied"
    assert not any(a.hint for k in corpus.kernels for a in k.args), "no hints"


def test_what_the_build_reads_from_wrapped_kernels(corpus):
    kernels = {k.name: k for k in corpus.kernels}
    dyt = kernels["liger_dyt_fwd"]  # @triton.autotune: 18 configs (BLOCK_N x stages x warps), times N's 2 values
    assert len(dyt.configs) == 18 * 2 and {c.value("BLOCK_N") for c in dyt.configs} == {1024, 2048, 4096}
    assert {c.num_warps for c in dyt.configs} == {4, 8, 16} and {c.num_stages for c in dyt.configs} == {1, 2}
    cumsum = kernels["fla_cumsum_scalar"]  # heuristics over None arguments, do_not_specialize=['T']
    assert dict((n, __import__("aotpack").expr.unparse(e)) for n, e in cumsum.bound) == {
        "B": "size(s, 0)", "H": "size(s, 2)", "HAS_SCALE": "(none(scale) == 0)", "IS_VARLEN": "(none(cu_seqlens) == 0)"}  # fmt: skip
    assert cumsum.arg("T").jit_states == ("",) and cumsum.triton is not None
    assert cumsum.triton.fixed_constexprs == (("USE_GRAPH", False),)
    assert {c.num_warps for c in cumsum.configs} == {1, 2, 4, 8}
    bwd = kernels["liger_rms_norm_bwd"]
    assert bwd.triton is not None
    assert bwd.triton.dtype_constexprs == (("X_dtype", "T"),) and bwd.triton.fixed_constexprs == (("COMPUTE_DW", True),)
    # conch annotates its integers (`d: int`): the JIT keys them on divisibility, never folds a 1
    assert kernels["conch_silu_and_mul"].arg("d").jit_states == ("D", "")
    assert kernels["liger_rms_norm_fwd"].arg("n_cols").jit_states == ("1", "D", "")


def test_plan_builds_only_reachable_variants(corpus):
    kernels = {k.name: k for k in corpus.kernels}
    swiglu = kernels["liger_swiglu_fwd"]
    variants = [v for v in plan.plan_variants(corpus) if v.kernel is swiglu]
    # n_cols x BLOCK_SIZE = 9 pairs, of which next_pow2(n_cols) == BLOCK_SIZE holds for 3
    assert {(v.config.value("n_cols"), v.config.value("BLOCK_SIZE")) for v in variants} == {
        (2048, 2048), (4096, 4096), (11008, 16384)}  # fmt: skip
    reasons = {plan.unreachable(swiglu, c, classes.specs(swiglu)[0]) for c in swiglu.configs}
    assert "BLOCK_SIZE = next_pow2(n_cols) is 4096, not 2048" in reasons
    conch = kernels["conch_rms_norm"]
    for v in (v for v in plan.plan_variants(corpus) if v.kernel is conch):  # the residual flag follows None
        residual_none = v.state(conch.arg("residual_ptr")) == NONE
        assert v.config.value("cxpr_use_residual") is not residual_none


def test_the_wheel_dispatches_third_party_calls(site, fake_driver, tmp_path):
    manifest = json.loads((site / "thirdparty_kernels" / "manifest.json").read_text())["kernels"]
    assert all(entry["variants"] for entry in manifest.values())
    ast.parse((site / "thirdparty_kernels" / "__init__.pyi").read_text())
    code = CAI_ARRAY + textwrap.dedent("""
        import torch
        import thirdparty_kernels as k
        print(hasattr(torch.ops.thirdparty_kernels, "conch_rms_norm"))  # not at import: on first use of k.ops

        def rms(rows, cols, x_at=A, row=None):
            strides = None if row is None else (row * 2, 2)
            return [Array(A + (1 << 28), (rows, cols), strides=strides), Array(x_at, (rows, cols), strides=strides),
                    Array(A + (2 << 28), (cols,)), Array(A + (3 << 28), (rows,), "<f4")]
        print(k.liger_rms_norm_fwd.select(*rms(4096, 2048)))       # the common case: the JIT's class exactly
        print(k.liger_rms_norm_fwd.select(*rms(4096, 1000)))       # odd width: unit strides still folded
        print(k.liger_rms_norm_fwd.select(*rms(64, 2048, A + 2)))  # a misaligned input
        print(k.liger_rms_norm_fwd.select(*rms(64, 2048, row=2072)))  # strided rows
        print(k.liger_rms_norm_fwd(*rms(4096, 2048), eps=1e-5, offset=0.0))
        print(k.ops is torch.ops.thirdparty_kernels)
        print(sorted(n for n in dir(torch.ops.thirdparty_kernels) if not n.startswith("_"))[:3])
        print(torch.ops.thirdparty_kernels.liger_rms_norm_fwd.default._schema)
        """)
    out, log = run_on_fake_driver(code, site, fake_driver, tmp_path / "cuda.log")
    assert out.pop(0) == "False"
    config = "T=fp16,casting_mode=0,elementwise_affine=true"
    # per argument (Y, Y_row_stride, X, X_row_stride, W, W_row_stride, RSTD, RSTD_row_stride, n_cols):
    # aligned pointers, row strides and width divisible by 16, the 1-D tensors' strides equal to 1
    assert out[0] == f"liger_rms_norm_fwd/{config},BLOCK_SIZE=2048,w8,s3/sm_90a/DDDDD1D1D"
    assert out[1] == f"liger_rms_norm_fwd/{config},BLOCK_SIZE=1024,w4,s3/sm_90a/D_D_D1D1_"
    assert out[2] == f"liger_rms_norm_fwd/{config},BLOCK_SIZE=2048,w8,s3/sm_90a/DD_DD1D1D"  # only X given up
    assert out[3] == f"liger_rms_norm_fwd/{config},BLOCK_SIZE=2048,w8,s3/sm_90a/D_D_D1D1_"
    assert out[4] == "None"
    assert out.pop(5) == "True"
    assert out[5] == ["conch_gelu_tanh_and_mul", "conch_rms_norm", "conch_silu_and_mul"].__repr__()
    # the torch schema follows the calling order: tensors first (the written ones marked), then defaults
    names = re.findall(r" (\w+)(?=[,)=])", out[6].split("(", 1)[1])
    assert names == ["Y_ptr", "X_ptr", "W_ptr", "RSTD_ptr", "Y_row_stride", "X_row_stride", "W_row_stride",
                     "RSTD_row_stride", "n_cols", "eps", "offset", "n_rows"], out[6]  # fmt: skip
    assert "Tensor(a0!) Y_ptr" in out[6] and "float? eps=None" in out[6]
    assert len([line for line in log if line.startswith("launch")]) == 1


def test_a_torch_op_that_cannot_be_registered_is_skipped_with_a_warning(site, fake_driver, tmp_path):
    code = """
        import warnings
        import torch
        def refuse(name, *args, **kwargs):
            raise RuntimeError(f"schema for {name} refused")
        torch.library.custom_op = refuse
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import thirdparty_kernels as k
            print(len(caught))  # importing registers nothing
            print(k.torch_ops())
        print(len([w for w in caught if issubclass(w.category, RuntimeWarning)]))
        print(next(str(w.message) for w in caught if "conch_rms_norm" in str(w.message)))
        print(k.conch_rms_norm.__name__, len(k.conch_rms_norm.variants) > 0)
        """
    out, _ = run_on_fake_driver(code, site, fake_driver, tmp_path / "cuda.log")
    assert out[:2] == ["0", "[]"]
    out = out[2:]
    assert out[0] == "11"  # one warning per kernel, each naming it and the reason
    assert out[1] == ("thirdparty_kernels: kernel conch_rms_norm is not registered as "
                      "torch.ops.thirdparty_kernels.conch_rms_norm: RuntimeError: schema for "
                      "thirdparty_kernels::conch_rms_norm refused")  # fmt: skip
    assert out[2] == "conch_rms_norm True"
