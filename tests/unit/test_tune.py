"""What aotpack tune does around each run that a kernel's @triton.autotune asks for."""

import dataclasses

import pytest

from aotpack import recipe, tune

from .test_recipe import GOOD

torch = pytest.importorskip("torch")


def test_reset_to_zero_and_restore_value_before_each_run(kernel_dir):
    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    kernel = dataclasses.replace(kernel, reset_to_zero=("out_ptr",), restore_value=("x_ptr",))
    x, y, out = torch.arange(4.0), torch.ones(4), torch.full((4,), 7.0)
    sets = [([x, y, out], [2])]
    prepare = tune._preparer(kernel, sets)
    x.mul_(10)  # a run wrote into what it should only have read ...
    out.fill_(3)  # ... and accumulated into its output
    prepare(sets[0][0])
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and out.tolist() == [0.0] * 4 and y.tolist() == [1.0] * 4
