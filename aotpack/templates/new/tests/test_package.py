"""The built $name wheel where no GPU is needed: the package, its kernels and its manifest."""

import inspect

import $name


def test_the_package_lists_its_kernels_and_variants():
    assert set($name.__aotpack__["kernels"]) == {"axpy", "relu"}
    for kernel in ("axpy", "relu"):
        variants = $name.__aotpack__["kernels"][kernel]["variants"]
        assert {v["id"] for v in variants} == set(getattr($name, kernel).variants)
        assert {v["target"] for v in variants} == {"sm_80", "sm_90a"}
    assert "alpha" in inspect.signature($name.axpy).parameters
