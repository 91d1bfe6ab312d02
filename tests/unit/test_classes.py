"""Which specialization classes a kernel gets (aotpack/plan/classes.py), read off recipes without Triton's JIT:
the shapes typical calls have, the classes of those calls whatever way the recipe writes them, one argument
given up alone, floors, the recipe's own classes and their names."""

import string
from pathlib import Path

import pytest

from aotpack import classnames, expr
from aotpack.backends import recipes as recipe
from aotpack.errors import RecipeError
from aotpack.plan import classes, typical
from aotpack.states import ANY, DIV16, LETTER, ONE

# liger-kernel's RMSNorm forward, as a user writes its recipe; $Y, $RSTD, ... are replaced per case. The
# kernel is a stand-in with the same parameters (the recipe loader reads its signature).
KERNEL = """
import triton
import triton.language as tl


@triton.jit
def rms(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, W_row_stride, RSTD_ptr, RSTD_row_stride, n_cols, eps,
        BLOCK: tl.constexpr):
    pass
"""
RECIPE = """
package: rms_kernels
version: 0.1.0
targets: [sm_90a]
kernels:
  rms:
    triton: rms.py:rms
    types: {T: [fp16]}
    args:
      Y_ptr: $Y
      Y_row_stride: $Ys
      X_ptr: $X
      X_row_stride: $Xs
      W_ptr: $W
      W_row_stride: $Ws
      RSTD_ptr: $RSTD
      RSTD_row_stride: $Rs
      n_cols: $n
      eps: {type: fp32, default: 1e-6}
      n_rows: {type: i32, default: "size(X_ptr, 0)", launch_only: true}
    constexprs: {BLOCK: [1024]}
    grid: [n_rows]
"""
PUBLISHED = {
    "Y": '{type: "*T", extent: "(n_rows - 1) * Y_row_stride + n_cols"}',
    "Ys": '{type: i32, default: "stride(Y_ptr, 0)"}',
    "X": '{type: "*T", extent: "(n_rows - 1) * X_row_stride + n_cols"}',
    "Xs": '{type: i32, default: "stride(X_ptr, 0)"}',
    "W": '{type: "*T", extent: n_cols}',
    "Ws": '{type: i32, default: "stride(W_ptr, 0)"}',
    "RSTD": '{type: "*fp32", extent: n_rows}',
    "Rs": '{type: i32, default: "stride(RSTD_ptr, 0)"}',
    "n": '{type: i32, default: "size(X_ptr, 1)"}',
}
# the same recipe, written the other ways users write it (the issue's own sample among them: hints, and the
# 1-D output's extent as a span over its stride)
EQUIVALENT = {
    "hints": {"Y": '{type: "*T:16", extent: "(n_rows - 1) * Y_row_stride + n_cols"}',
              "Ys": '{type: "i32:16", default: "stride(Y_ptr, 0)"}',
              "X": '{type: "*T:16", extent: "(n_rows - 1) * X_row_stride + n_cols"}',
              "Xs": '{type: "i32:16", default: "stride(X_ptr, 0)"}', "Ws": '{type: "i32:1", default: "stride(W_ptr, 0)"}',
              "RSTD": '{type: "*fp32:16", extent: "(n_rows - 1) * RSTD_row_stride + 1"}'},
    "spans": {"Y": '{type: "*T", extent: "(n_rows - 1) * Y_row_stride + (n_cols - 1) * 1 + 1"}',
              "W": '{type: "*T", extent: "(n_cols - 1) * W_row_stride + 1"}',
              "RSTD": '{type: "*fp32", extent: "(n_rows - 1) * RSTD_row_stride + 1"}'},
    "products": {"Y": '{type: "*T", extent: "n_rows * n_cols"}', "X": '{type: "*T", extent: "n_rows * n_cols"}'},
    "numel": {"Y": '{type: "*T", extent: "numel(X_ptr)"}', "W": '{type: "*T", extent: "numel(W_ptr)"}'},
    "explicit 1-D strides": {"Ws": "i32", "Rs": "i32"},
    "strides by span": {"Ys": "i32", "Xs": "i32", "W": '{type: "*T", extent: "(n_cols - 1) * W_row_stride + 1"}',
                        "Ws": "i32", "RSTD": '{type: "*fp32", extent: "(n_rows - 1) * RSTD_row_stride + 1"}',
                        "Rs": "i32"},
    "other tensors": {"n": '{type: i32, default: "size(Y_ptr, 1)"}'},
    "1-D size": {"n": '{type: i32, default: "numel(W_ptr)"}'},
    "sizes by the caller": {"n": "i32"},
}  # fmt: skip


def load(folder, **changes):
    (folder / "rms.py").write_text(KERNEL)
    return recipe.parse(text(**changes), folder / "r.yaml").kernels[0]


def text(**changes):
    return string.Template(RECIPE).substitute({**PUBLISHED, **changes})


def typical_terms(kernel):
    return [{a.name: s for a, s in zip(kernel.args, t, strict=True) if s} for g in classes.typical_classes(kernel).groups
            for t in g]  # fmt: skip


CONTIGUOUS = {"Y_ptr": DIV16, "X_ptr": DIV16, "W_ptr": DIV16, "W_row_stride": ONE, "RSTD_ptr": DIV16,
              "RSTD_row_stride": ONE}  # fmt: skip
WIDE = {**CONTIGUOUS, "Y_row_stride": DIV16, "X_row_stride": DIV16, "n_cols": DIV16}  # n_cols a multiple of 16


def test_the_published_recipe_gets_the_classes_of_contiguous_calls(kernel_dir):
    kernel = load(kernel_dir)
    # the JIT's classes of contiguous calls: a width that is a multiple of 16, and one that is not
    assert typical_terms(kernel) == [WIDE, CONTIGUOUS]
    built = {s.name: s for s in classes.specs(kernel)}
    assert [n for n, s in built.items() if s.origin == "typical"] == ["DDDDD1D1D", "D_D_D1D1_"]
    assert {n for n, s in built.items() if s.origin == "floor"} == {"D_D_D_D__", "_________"}
    # each assumption of the common class given up alone, for the configs the dispatcher picks
    relaxed = [n for n, s in built.items() if s.origin == "relaxed"]
    assert len(relaxed) == 9 and all(sum(a != b for a, b in zip(n, "DDDDD1D1D", strict=True)) == 1 for n in relaxed)


@pytest.mark.parametrize("way", sorted(EQUIVALENT))
def test_equivalent_recipes_get_the_same_typical_classes(kernel_dir, way):
    """The classes of the contiguous calls, the common one first; more only where the recipe relates an
    integer to no tensor (a stride the caller passes: it may be 1 or 16-divisible)."""
    got = typical_terms(load(kernel_dir, **EQUIVALENT[way]))
    assert got[0] == WIDE and CONTIGUOUS in got
    if way != "explicit 1-D strides":
        assert got == [WIDE, CONTIGUOUS]


def test_hints_narrow_nothing_and_a_required_hint_pins_its_argument(kernel_dir):
    hinted = load(kernel_dir, **EQUIVALENT["hints"])
    assert classnames.allowed(hinted, hinted.arg("Y_row_stride")) == (ONE, DIV16, ANY)
    assert [s.name for s in classes.specs(hinted)] == [s.name for s in classes.specs(load(kernel_dir))]
    pinned = load(kernel_dir, n='{type: "i32:16!", default: "size(X_ptr, 1)"}')
    assert classnames.allowed(pinned, pinned.arg("n_cols")) == (DIV16,)
    assert all(s.states[pinned.args.index(pinned.arg("n_cols"))] == DIV16 for s in classes.specs(pinned))
    assert len(classnames.keyed(pinned)) == len(classnames.keyed(hinted)) - 1  # its letter leaves the names


def test_an_unrelated_integer_is_one_or_divisible_and_its_floor_gives_it_up(kernel_dir):
    """W_row_stride with no default and an extent that does not name it: nothing says what it is."""
    kernel = load(kernel_dir, Ws="i32")
    seen = {t.get("W_row_stride") for t in typical_terms(kernel)}
    assert seen == {ONE, DIV16}
    floors = [s.jit_terms(kernel) for s in classes.specs(kernel) if s.origin == "floor"]
    assert {k: v for k, v in WIDE.items() if k != "W_row_stride"} in floors


@pytest.mark.parametrize(
    ("text", "dims"),
    [
        ("(n_rows - 1) * Y_row_stride + n_cols", [("n_rows", "Y_row_stride"), ("n_cols", None)]),
        ("(n_rows - 1) * Y_row_stride + (n_cols - 1) * 1 + 1", [("n_rows", "Y_row_stride"), ("n_cols", "1")]),
        ("1 + (n_cols - 1) * W_row_stride", [("n_cols", "W_row_stride")]),
        ("n_rows * n_cols", [("n_rows", None), ("n_cols", None)]),
        ("n_cols", [("n_cols", None)]),
        ("(n_rows - 1) * Y_row_stride - n_cols", None),  # not a span
        ("n_rows + n_cols", None),  # two innermost sizes
    ],
)
def test_a_typical_tensor_s_shape_is_read_off_its_extent(kernel_dir, text, dims):
    kernel = load(kernel_dir)
    arg = kernel.arg("Y_ptr")
    layout = typical._layout(kernel, type(arg)(**{**arg.__dict__, "extent": expr.parse(text)}))
    got = None if layout is None else [(expr.unparse(s), r if r is None else expr.unparse(r)) for s, r in layout.dims]
    assert got == dims


def test_span_dimensions_follow_their_strides_defaults_not_the_written_order():
    """(N - 1) * stride_bn + (K - 1) * stride_bk + 1 with stride_bk = stride(b, 0): b is K x N, row-major."""
    path = Path(__file__).parents[2] / "recipes" / "demo.yaml"
    demo = path.read_text()
    flipped_text = demo.replace('"(K - 1) * stride_bk + (N - 1) * stride_bn + 1"',
                                '"(N - 1) * stride_bn + (K - 1) * stride_bk + 1"')  # fmt: skip
    assert flipped_text != demo
    flipped = recipe.parse(flipped_text, path)
    original = recipe.load(path)
    pick = [next(k for k in r.kernels if k.name == "matmul") for r in (flipped, original)]
    assert classes.typical_classes(pick[0]) == classes.typical_classes(pick[1])


def test_recipe_classes_are_read_and_refused_with_the_fix(kernel_dir):
    kernel = load(kernel_dir)
    assert classnames.read(kernel, "_DDDD1D1D") == ("", DIV16, DIV16, DIV16, DIV16, ONE, DIV16, ONE, DIV16, "", "")
    assert str(classnames.read(kernel, "DDD")).startswith("expected one letter per argument the JIT keys (9: Y_ptr, ")
    assert classnames.read(kernel, "1DDDD1D1D") == "argument Y_ptr cannot be '1' (it can be D, _)"
    with pytest.raises(RecipeError, match=r"kernels.rms.classes\[0\]: 'DD': expected one letter per argument"):
        recipe.parse(text().replace("    grid:", "    classes: [DD]\n    grid:"),
                     kernel_dir / "r.yaml")  # fmt: skip
    added_text = text().replace("    grid:", '    classes: ["DDD_D1D1D"]\n    grid:')
    (kernel,) = recipe.parse(added_text, kernel_dir / "r.yaml").kernels
    added = next(s for s in classes.specs(kernel) if s.name == "DDD_D1D1D")
    assert added.origin == "recipe" and not added.picked_only


def _recorded(*kinds):
    """A recorded kernel's arguments as recorded_floors reads them: pointers ('p') and integers ('i')."""
    from types import SimpleNamespace

    args = [
        SimpleNamespace(pointer=k == "p", jit_states=(DIV16, ANY) if k == "p" else (DIV16, ONE, ANY)) for k in kinds
    ]
    return SimpleNamespace(args=args)


def test_a_recorded_class_gets_a_floor_per_integer_then_all_integers_then_pointers_too():
    """A server's next call changes one size (the batch or the length): the class with that integer alone not
    16-divisible is the JIT's own; then every integer, then the pointers too. What is folded (1) stays."""
    kernel = _recorded("p", "p", "i", "i", "i")
    floors = ["".join(LETTER[s] for s in f) for f in classes.recorded_floors(kernel, (DIV16, DIV16, DIV16, ONE, DIV16))]
    assert floors == ["DD_1D", "DDD1_", "DD_1_", "__" + "_1_"]


def test_one_integer_floors_are_bounded():
    """Past MAX_ONE_INT_FLOORS divisible integers, a class gets the two wide floors alone (the variants a recorded
    row builds stay at most MAX_ONE_INT_FLOORS + 3 per config)."""
    from aotpack.limits import MAX_ONE_INT_FLOORS

    many = _recorded("p", *("i" * (MAX_ONE_INT_FLOORS + 1)))
    states = (DIV16,) * (MAX_ONE_INT_FLOORS + 2)
    assert len(classes.recorded_floors(many, states)) == 2
    few = _recorded("p", *("i" * MAX_ONE_INT_FLOORS))
    assert len(classes.recorded_floors(few, states[:-1])) == MAX_ONE_INT_FLOORS + 2
    one = _recorded("p", "i")  # a single integer: its one floor is the every-integer floor
    assert len(classes.recorded_floors(one, (DIV16, DIV16))) == 2
