"""The $name kernels on a GPU against torch (skipped without one)."""

import pytest

import $name

torch = pytest.importorskip("torch")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 1000, 4096, 1_000_003])
def test_axpy(dtype, n):
    x, y = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
    out = torch.full_like(x, float("nan"))
    $name.axpy(x, y, out, 0.5)
    torch.cuda.synchronize()
    expected = (0.5 * x.float() + y.float()).to(dtype)
    torch.testing.assert_close(out, expected, rtol=1e-2 if dtype != torch.float32 else 1e-6, atol=1e-2)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n", [1, 777, 65536])
def test_relu(dtype, n):
    x = torch.randn(n, device="cuda").to(dtype)
    out = torch.full_like(x, float("nan"))
    $name.relu(x, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)
