"""Reading a kernel as Triton does (aotpack/backends/triton/introspect.py), on a fixture wrapped as libraries publish
kernels: the autotuner's configs and key, heuristics translated into the expression language (and
the one that cannot be), do_not_specialize, signature defaults."""

from pathlib import Path

from aotpack import expr
from aotpack.backends.triton import introspect
from aotpack.model import Source
from aotpack.recipe import sources as _sources

FIXTURE = Source(path=Path(__file__).resolve().parents[1] / "fixtures" / "kernels" / "wrapped.py", module=None,
                 function="scale_kernel")  # fmt: skip


def test_a_wrapped_kernel_is_read_through_its_wrappers():
    info = introspect.describe(_sources.load(FIXTURE))
    assert [(dict(c.kwargs), c.num_warps) for c in info.configs] == [
        ({"BLOCK": 64}, 2), ({"BLOCK": 64}, 4), ({"BLOCK": 128}, 2), ({"BLOCK": 128}, 4)]  # fmt: skip
    assert info.key == ("n",) and info.reset_to_zero == ("out",)
    heuristics = {h.name: h for h in info.heuristics}
    assert heuristics["EVEN"].expression == "min((((n % BLOCK) == 0) != 0), (((n < 16) == 0) != 0))"
    assert heuristics["HAS_BIAS"].expression == "(none(bias) == 0)"
    assert heuristics["WIDE"].expression is None and "not a lambda" in heuristics["WIDE"].reason
    for h in (heuristics["EVEN"], heuristics["HAS_BIAS"]):
        assert h.expression is not None and expr.is_boolean(expr.parse(h.expression))


def test_the_jit_rule_is_read_per_argument():
    info = introspect.describe(_sources.load(FIXTURE))
    assert info.param("n").int_states == ("1", "D", "")  # the JIT folds 1 and keys on 16-divisibility
    assert info.param("stride").int_states == ("",)  # do_not_specialize
    assert info.param("x").pointer_states == ("D", "")
    assert info.param("FLAG").has_default and info.param("FLAG").default == 3
