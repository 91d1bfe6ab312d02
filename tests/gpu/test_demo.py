"""Every demo kernel and variant against torch on random data, with poisoned outputs, odd sizes,
misaligned views, streams, graphs, threads and bad input."""

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .helpers import run_tune

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
demo = pytest.importorskip("demo_kernels", reason="install the demo wheel (make gpu-test does)")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="session")
def target() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def variants_for(kernel: str, target: str) -> list[dict]:
    return [v for v in demo.__aotpack__["kernels"][kernel]["variants"] if v["target"] == target]


def poisoned(*shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) output elements"
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def ids(kernel, target):
    return [v["id"] for v in variants_for(kernel, target)]


def test_every_target_of_this_gpu_is_built(target):
    for kernel in ("add", "softmax", "matmul", "rmsnorm"):
        assert ids(kernel, target), f"no {kernel} variant for {target}"


# ---------------------------------------------------------------- add


@pytest.mark.parametrize("n", [1, 1000, 4096, 100_003, 1 << 20])
@pytest.mark.parametrize("dtype", DTYPES.values())
def test_add_dispatched(n, dtype):
    x = torch.randn(n, device="cuda").to(dtype)
    y = torch.randn(n, device="cuda").to(dtype)
    out = poisoned(n, dtype=dtype)
    demo.add(x, y, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_add_every_variant(target):
    for vid in ids("add", target):
        variant = next(v for v in variants_for("add", target) if v["id"] == vid)
        dtype = DTYPES[variant["types"]["T"]]
        n = 65_536 + 16 * 7 if variant["assumes"].get("n_elements") == "D" else 65_536 + 5
        x = torch.randn(n, device="cuda").to(dtype)
        y = torch.randn(n, device="cuda").to(dtype)
        out = poisoned(n, dtype=dtype)
        demo.add(x, y, out, variant=vid)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y), vid


def test_a_misaligned_view_gives_up_its_own_alignment_only():
    base = torch.randn(4097, device="cuda")
    x, y = base[1:], torch.randn(4096, device="cuda")
    out = poisoned(4096, dtype=torch.float32)
    assert x.data_ptr() % 16 != 0
    assert demo.select("add", x, y, out).endswith("/_DDD")
    aligned = demo.select("add", base[:4096], y, out)
    assert aligned.endswith("/DDDD")
    demo.add(x, y, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    with pytest.raises(ValueError, match="assumes argument x_ptr is 16-divisible"):
        demo.add(x, y, out, variant=aligned)


def test_an_odd_length_runs_the_jit_s_class_of_it():
    x, y = torch.randn(1001, device="cuda"), torch.randn(1001, device="cuda")
    out = poisoned(1001, dtype=torch.float32)
    assert demo.select("add", x, y, out).endswith("/DDD_")
    assert demo.select("add", x[:992], y[:992], out[:992]).endswith("/DDDD")


def log2_approx(x):
    x = max(1, x)
    e = x.bit_length() - 1
    return e + (x - (1 << e)) / (1 << e)


def levels(info):
    """Each class's hint level, as tables name them: 'hinted' when every hinted argument holds its hint."""
    hints = {a["name"]: "1" if a["type"].endswith(":1") else "D" for a in info["args"]
             if ":" in a["type"] and not a["type"].endswith("!")}  # fmt: skip
    return {c["name"]: ("hinted" if all(c["assumes"].get(n) == h for n, h in hints.items()) else "safe") if hints
            else "" for c in info["specializations"]}  # fmt: skip


def expected_config(kernel, target, types, key, spec, satisfied=None):
    """The dispatcher's rule, written again in Python: among the rows for this arch, types and the
    call's class `spec` or a class it also satisfies (rows that name them beat rows that do not, the
    call's own class beats the others), the nearest row at or above the bucketed key in every
    dimension, else the nearest row; nearness is the summed |log2| gap. `satisfied`: the classes the
    call satisfies (a key-only select satisfies every class)."""
    info = demo.__aotpack__["kernels"][kernel]
    classes = [c["name"] for c in info["specializations"]]
    satisfied = classes if satisfied is None else satisfied
    level = levels(info)

    def serves(row_spec):  # a row naming a hint level serves every class of that level
        return row_spec is None or any(c == row_spec or level[c] == row_spec for c in satisfied)

    rows = [
        r for r in info["dispatch"]
        if r["arch"] in (None, target) and r["types"] in ({}, types) and serves(r["specialization"])
    ]  # fmt: skip
    if not rows:
        return info["default_config"]
    v = [1 << max(0, (x - 1).bit_length()) for x in key] if info["bucket"] == "pow2" else list(key)

    def own(row_spec):
        return row_spec is not None and (row_spec == spec or level[spec] == row_spec)

    def rank(r):
        score = (r["arch"] is not None) * 8 + (r["types"] != {}) * 4 + own(r["specialization"]) * 2
        score += r["specialization"] is not None
        up = all(a >= b for a, b in zip(r["key"], v, strict=True))
        dist = sum(abs(log2_approx(a) - log2_approx(b)) for a, b in zip(r["key"], v, strict=True))
        return (-score, not up, dist)

    return min(rows, key=rank)["config"]


@pytest.mark.parametrize("n", [1, 100, 4096, 5000, 70_000, 1_000_000, 3_000_000, 1 << 26])
def test_dispatch_rounds_up_and_clamps_like_the_table(target, n):
    x = torch.empty(n, device="cuda")
    chosen = demo.add.select(x, x, x).split("/")
    classes = {c["name"]: c["assumes"] for c in demo.__aotpack__["kernels"]["add"]["specializations"]}
    spec = chosen[3]  # the call's class; it satisfies every class that assumes less
    assert spec == ("DDDD" if n % 16 == 0 else "DDD_")
    satisfied = [c for c, assumes in classes.items() if assumes.items() <= classes[spec].items()]
    assert chosen[1] == "T=fp32," + expected_config("add", target, {"T": "fp32"}, [n], spec, satisfied)
    by_key = demo.add.select(n_elements=n, T="fp32")
    first = next(iter(classes))  # a key select assumes the most
    assert by_key.split("/")[1] == "T=fp32," + expected_config("add", target, {"T": "fp32"}, [n], first)


@functools.cache
def demo_kernel(name):
    """The demo's kernel as its build read it: the recipe with its tables' rows, the validation rows among those the
    dispatcher looks up (tables.fit)."""
    from aotpack.backends import recipes

    kernel = next(k for k in recipes.load(Path(__file__).resolve().parents[2] / "recipes" / "demo.yaml").kernels
                  if k.name == name)  # fmt: skip
    return dataclasses.replace(kernel, rules=(*kernel.rules, *kernel.validation), validation=())


def predicted_config(kernel, target, types, key, spec):
    """The config the rule between measured keys picks (aotpack/selection.py), with the rule the build chose (the
    manifest's selection), from the timed rows of this arch, types and class, the call's work counted on this GPU
    and the rows' on the one that timed them; None where the wheel has no such rule or rows (the nearest row's
    config is then the dispatcher's: expected_config)."""
    from aotpack import manifest, selection

    info = demo.__aotpack__["kernels"][kernel]
    rule = info.get("selection")
    k = demo_kernel(kernel)
    group = (target, tuple(sorted(types.items())), spec)
    rows = selection.grouped(k).get(group)
    if not rule or not rule["neighbours"] or not rows:
        return None
    work = selection.tiles(k)
    labels = [c.label for c in k.configs]
    blocks = selection.blocks_of(manifest.blocks_of(demo.__aotpack__, k), group) if rule.get("own_occupancy") else ()
    occupancy = blocks or tuple(rule.get("occupancy", {}).get(label, 0) for label in labels)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    c = selection.predict(rows, key, rule["neighbours"], rule["scale"], work, selection.consts_of(k, work), sms,
                          occupancy=occupancy, fixed=rule.get("fixed", 0), row_sms=k.selection.sms,
                          row_occupancy=blocks or None)  # fmt: skip
    return None if c is None else labels[c]


@pytest.mark.parametrize("mnk", [(64, 64, 64), (300, 200, 100), (1000, 1000, 1000), (5000, 100, 3000), (96, 4000, 1),
                                 (2656, 1961, 696), (17, 106, 6321), (8192, 8192, 8192)])  # fmt: skip
def test_matmul_key_select_matches_the_table(target, mnk):
    """A select by key values picks what the rule the build chose picks between the timed keys of the class a key
    select assumes (the most), or the nearest row's config where that class has no timed rows on this GPU."""
    chosen = demo.matmul.select(M=mnk[0], N=mnk[1], K=mnk[2], T="bf16")
    first = demo.__aotpack__["kernels"]["matmul"]["specializations"][0]["name"]  # a key select assumes the most
    expected = predicted_config("matmul", target, {"T": "bf16"}, mnk, first)
    expected = expected or expected_config("matmul", target, {"T": "bf16"}, list(mnk), first)
    assert chosen.split("/")[1] == "T=bf16," + expected
    assert chosen.split("/")[2] == target and chosen in demo.matmul.variants


@pytest.mark.parametrize("mnk", [(64, 64, 64), (300, 200, 100), (1000, 1000, 1000), (5000, 100, 3000), (96, 4000, 1)])
def test_select_planned_for_this_gpu_is_what_it_runs(target, mnk):
    """select(..., target=, sms=) naming this very GPU picks what a call on it picks: with the CUDA tensors
    themselves, with CPU copies of their shapes and alignment, and by key values."""
    m, n, k = mnk
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a, b, c = (torch.randn(s, device="cuda", dtype=torch.float16) for s in ((m, k), (k, n), (m, n)))
    here = demo.matmul.select(a, b, c)
    assert demo.matmul.select(a, b, c, target=target, sms=sms) == here
    on_cpu = [torch.empty(t.shape, dtype=t.dtype) for t in (a, b, c)]
    if all(t.data_ptr() % 16 == 0 for t in on_cpu):  # (the CPU allocator aligns to 64 bytes)
        assert demo.matmul.select(*on_cpu, target=target, sms=sms) == here
    key = demo.matmul.select(M=m, N=n, K=k, T="fp16")
    assert demo.matmul.select(M=m, N=n, K=k, T="fp16", target=target, sms=sms) == key


# ---------------------------------------------------------------- softmax


@pytest.mark.parametrize("cols", [1, 100, 1000, 1025, 4096, 7919])
@pytest.mark.parametrize("dtype", DTYPES.values())
def test_softmax_dispatched(cols, dtype):
    x = (torch.randn(37, cols, device="cuda") * 4).to(dtype)
    out = poisoned(37, cols, dtype=dtype)
    demo.softmax(out, x)
    torch.cuda.synchronize()
    assert rel_err(out, torch.softmax(x.double(), dim=1)) < TOL[dtype] * 4


def test_softmax_every_variant_on_strided_rows(target):
    for variant in variants_for("softmax", target):
        dtype = DTYPES[variant["types"]["T"]]
        assumes = variant["assumes"]  # what the class assumes, as the JIT keys it
        stride = 3008 if assumes.get("in_row_stride") == "D" else 3000  # rows that start 16-aligned, or not
        out_stride = 3008 if assumes.get("out_row_stride") == "D" else 3000
        cols = 2992 if assumes.get("n_cols") == "D" else 2999
        wide = (torch.randn(53, stride, device="cuda") * 3).to(dtype)
        x = wide[:, :cols]
        out = poisoned(53, out_stride, dtype=dtype)[:, :cols]
        demo.softmax(out, x, variant=variant["id"])
        torch.cuda.synchronize()
        assert rel_err(out, torch.softmax(x.double(), dim=1)) < TOL[dtype] * 4, variant["id"]


def test_softmax_handles_minus_infinity():
    x = torch.randn(4, 300, device="cuda")
    x[:, :299] = float("-inf")
    out = poisoned(4, 300, dtype=torch.float32)
    demo.softmax(out, x)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.softmax(x, dim=1))


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize("mnk", [(64, 64, 64), (257, 193, 129), (512, 512, 512), (1000, 3000, 700)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matmul_dispatched(mnk, dtype):
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    c = poisoned(m, n, dtype=dtype)
    demo.matmul(a, b, c)
    torch.cuda.synchronize()
    assert rel_err(c, a.double() @ b.double()) < TOL[dtype]


def _rows(rows, cols, stride_state, dtype, poison=False):
    """A (rows, cols) view whose row stride is 16-divisible or not, as a class assumes it."""
    stride = cols + (-cols % 16 if stride_state == "D" else (1 if cols % 16 == 0 else 0))
    full = poisoned(rows, stride, dtype=dtype) if poison else torch.randn(rows, stride, device="cuda").to(dtype)
    return full[:, :cols]


def test_matmul_every_variant(target):
    for variant in variants_for("matmul", target):
        dtype = DTYPES[variant["types"]["T"]]
        assumes = variant["assumes"]  # sizes and row strides as its class assumes them (16-divisible or not)
        m, n, k = (256 if assumes.get(d) == "D" else s for d, s in (("M", 255), ("N", 190), ("K", 131)))
        a = _rows(m, k, assumes.get("stride_am"), dtype)
        b = _rows(k, n, assumes.get("stride_bk"), dtype)
        c = _rows(m, n, assumes.get("stride_cm"), dtype, poison=True)
        demo.matmul(a, b, c, variant=variant["id"])
        torch.cuda.synchronize()
        assert rel_err(c, a.double() @ b.double()) < TOL[dtype], variant["id"]


def test_matmul_transposed_operand():
    a = torch.randn(300, 200, device="cuda", dtype=torch.float16).t()  # 200 x 300, column-major
    b = torch.randn(300, 130, device="cuda", dtype=torch.float16)
    c = poisoned(200, 130, dtype=torch.float16)
    chosen = demo.select("matmul", a, b, c)  # stride_am == 1, stride_ak == 300: the unit-stride classes do not apply
    assumes = next(v["assumes"] for v in variants_for("matmul", chosen.split("/")[2]) if v["id"] == chosen)
    assert "stride_ak" not in assumes and "stride_am" not in assumes
    demo.matmul(a, b, c)
    torch.cuda.synchronize()
    assert rel_err(c, a.double() @ b.double()) < TOL[torch.float16]


# ---------------------------------------------------------------- streams, graphs, threads, interop


@pytest.mark.parametrize("how", ["torch current stream", "stream=torch.cuda.Stream", "stream=int handle"])
def test_launches_on_the_callers_stream(how):
    """The side stream is kept busy; a launch queued on it must not have run when the default
    stream, which does not wait for it, takes a snapshot of the output."""
    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = poisoned(n, dtype=torch.float32)
    demo.add(x, y, out)  # loads the variant first: loading a module may wait for the device's work
    out.fill_(float("nan"))
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(500_000_000)  # a few hundred milliseconds of GPU time
    if how == "torch current stream":
        with torch.cuda.stream(side):
            demo.add(x, y, out)
    elif how == "stream=torch.cuda.Stream":
        demo.add(x, y, out, stream=side)
    else:
        demo.add(x, y, out, stream=side.cuda_stream)
    snapshot = out.clone()  # on the default stream
    torch.cuda.current_stream().synchronize()
    assert torch.isnan(snapshot).all(), "the kernel ran before the stream it was given was free"
    side.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_cuda_graph_capture_and_replay():
    x = torch.randn(3000, device="cuda", dtype=torch.float16)
    y = torch.randn(3000, device="cuda", dtype=torch.float16)
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    out, sm, c = (
        torch.empty_like(x),
        torch.empty(256, 128, device="cuda", dtype=torch.float16),
        torch.empty(256, 64, device="cuda", dtype=torch.float16),
    )
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (loads the modules) outside capture
        demo.add(x, y, out)
        demo.softmax(sm, a)
        demo.matmul(a, b, c)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        demo.add(x, y, out)
        demo.softmax(sm, a)
        demo.matmul(a, b, c)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        a.copy_(torch.randn_like(a))
        out.fill_(float("nan"))
        sm.fill_(float("nan"))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
        assert rel_err(sm, torch.softmax(a.double(), dim=1)) < 4e-3
        assert rel_err(c, a.double() @ b.double()) < 2e-3


def test_first_calls_from_many_threads_in_a_fresh_process():
    code = textwrap.dedent(
        """
        import threading, torch, demo_kernels as d
        n = 1 << 16
        xs = [torch.randn(n, device="cuda") for _ in range(16)]
        outs = [torch.full((n,), float("nan"), device="cuda") for _ in range(16)]
        torch.cuda.synchronize()
        errors = []
        barrier = threading.Barrier(16)
        def work(i):
            try:
                barrier.wait()
                d.add(xs[i], xs[i], outs[i])
                d.matmul(xs[i][:4096].view(64, 64).half(), xs[i][:4096].view(64, 64).half(),
                         torch.empty(64, 64, device="cuda", dtype=torch.half))
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        torch.cuda.synchronize()
        assert not errors, errors
        for x, o in zip(xs, outs):
            assert torch.equal(o, x + x)
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_torch_tensors_are_read_by_one_c_call():
    """Where torch has DLPack's C exchange API (torch 2.11 on the H100 has), the binding reads a torch
    tensor in one C call: no tensor method runs, a view at an offset and a transposed operand get their
    own address and strides (their results are right), and the extent and contiguity checks hold."""
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no DLPack C exchange API")
    code = textwrap.dedent(
        """
        import torch
        calls = []
        for name in ("get_device", "data_ptr", "is_contiguous", "numel", "stride"):
            def counted(self, *args, _method=getattr(torch.Tensor, name), _name=name, **kwargs):
                calls.append(_name)
                return _method(self, *args, **kwargs)
            setattr(torch.Tensor, name, counted)  # before the binding first sees torch: it would use these
        import demo_kernels as d
        n = 100_003
        base = torch.randn(2 * n + 1, device="cuda")
        x, y = base[1:n + 1], torch.randn(n, device="cuda")  # x: at an offset, not 16-byte aligned
        out = torch.full((n,), float("nan"), device="cuda")
        d.add(x, y, out)
        a = torch.randn(300, 200, device="cuda", dtype=torch.float16).t()
        b = torch.randn(300, 130, device="cuda", dtype=torch.float16)
        c = torch.full((200, 130), float("nan"), device="cuda", dtype=torch.float16)
        d.matmul(a, b, c)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)
        assert ((c.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()) < 2e-3
        for bad, error in ((out[:100], "out_ptr is too small"), (base[::2][:n], "out_ptr must be contiguous")):
            try:
                d.add(x, y, bad, n_elements=n)
            except ValueError as e:
                assert error in str(e), e
            else:
                raise AssertionError(f"taken: {error}")
        print("methods called:", calls)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "methods called: []"


class _Cai:
    """A minimal __cuda_array_interface__ producer (as CuPy or Numba would be)."""

    def __init__(self, t):
        self.__cuda_array_interface__ = t.__cuda_array_interface__
        self._keep = t


class _DLPackOnly:
    """A producer with __dlpack__ and no __cuda_array_interface__ (as JAX arrays are)."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__()


@pytest.mark.parametrize(("producer", "n"), [(_Cai, 5000), (_DLPackOnly, 4099)])
def test_array_producers(producer, n):
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = poisoned(n, dtype=torch.float32)
    demo.add(producer(x), producer(y), producer(out))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_raw_pointers():
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    out = poisoned(5000, dtype=torch.float32)
    demo.add(x.data_ptr(), y.data_ptr(), out, n_elements=5000)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    with pytest.raises(TypeError, match="cannot tell the dtype T"):
        demo.add(x.data_ptr(), y.data_ptr(), out.data_ptr(), n_elements=5000)
    with pytest.raises(TypeError, match="raw pointer"):
        demo.add(x.data_ptr(), y.data_ptr(), out.data_ptr())


# ---------------------------------------------------------------- bad input is an exception, never a crash


def test_bad_input_raises_naming_the_argument():
    x = torch.randn(100, device="cuda")
    out = torch.empty(100, device="cuda")
    cases = [
        (lambda: demo.add(x, x), TypeError, "missing required argument 'out_ptr'"),
        (lambda: demo.add(x, x, out, 100, 5), TypeError, "at most 4 positional"),
        (lambda: demo.add(x, x, out, bogus=1), TypeError, "unexpected keyword argument 'bogus'"),
        (
            lambda: demo.add(x, x.int(), out),
            TypeError,
            "argument y_ptr: expected dtype fp32 .the dtype of x_ptr., got i32",
        ),
        (lambda: demo.add(x, x.double(), out), TypeError, "y_ptr"),
        (lambda: demo.add(x, x.cpu(), out), ValueError, "argument y_ptr is on cpu"),
        (lambda: demo.add(x, x[:50], out), ValueError, "argument y_ptr is too small"),
        (lambda: demo.add(x, x, out, n_elements="7"), TypeError, "argument n_elements: expected an integer"),
        (lambda: demo.add(x, x, out, n_elements=1 << 40), ValueError, "n_elements .* does not fit in i32"),
        (lambda: demo.add(x, [1, 2], out), TypeError, "argument y_ptr: expected a CUDA tensor"),
        (lambda: demo.add(x, x, out, stream="s"), TypeError, "argument stream"),
        (lambda: demo.add(x, x, out, variant="nope"), ValueError, "no variant nope"),
        (lambda: demo.add(x, 12345, out), ValueError, "argument y_ptr: 0x3039 is not a CUDA device pointer"),
        (lambda: demo.softmax(out, x), ValueError, "size\\(in_ptr, 1\\) needs a tensor of at least 2 dimensions"),
        (lambda: demo.matmul(x.half().view(10, 10), x.half().view(10, 10), out.view(10, 10)), TypeError, "c_ptr"),
    ]
    for call, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            call()
    # the context is healthy after all of that
    demo.add(x, x, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + x)


# ---------------------------------------------------------------- rmsnorm (CUDA C++)


def rmsnorm_ref(x, w, eps):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(dim=1, keepdim=True) + eps) * w.double()


@pytest.mark.parametrize("cols", [16, 1000, 1024, 4096, 5000, 16384])
@pytest.mark.parametrize("dtype", DTYPES.values())
def test_rmsnorm_dispatched(cols, dtype):
    x = torch.randn(29, cols, device="cuda").to(dtype)
    w = torch.randn(cols, device="cuda").to(dtype)
    out = poisoned(29, cols, dtype=dtype)
    demo.rmsnorm(out, x, w, 1e-6)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_ref(x, w, 1e-6)) < TOL[dtype] * 2
    spec = demo.select("rmsnorm", out, x, w, 1e-6).rsplit("/", 1)[1]
    assert spec == ("hinted" if cols % 16 == 0 else "safe")


def test_rmsnorm_every_variant(target):
    for variant in variants_for("rmsnorm", target):
        dtype = DTYPES[variant["types"]["T"]]
        cols = 4096 if variant["specialization"] == "hinted" else 4099
        x = torch.randn(33, cols, device="cuda").to(dtype)
        w = torch.randn(cols, device="cuda").to(dtype)
        out = poisoned(33, cols, dtype=dtype)
        demo.rmsnorm(out, x, w, 1e-5, variant=variant["id"])
        torch.cuda.synchronize()
        assert rel_err(out, rmsnorm_ref(x, w, 1e-5)) < TOL[dtype] * 2, variant["id"]


def test_rmsnorm_misaligned_and_non_contiguous():
    base = torch.randn(8 * 1024 + 8, device="cuda", dtype=torch.float16)
    x = base[8:].view(8, 1024)  # 16 bytes off: still aligned
    assert demo.select("rmsnorm", torch.empty_like(x), x, torch.ones(1024, device="cuda", dtype=torch.half),
                       1e-6).endswith("/hinted")  # fmt: skip
    x = base[1 : 1 + 8 * 1024].view(8, 1024)  # 2 bytes off
    w = torch.randn(1024, device="cuda", dtype=torch.float16)
    out = poisoned(8, 1024, dtype=torch.float16)
    assert demo.select("rmsnorm", out, x, w, 1e-6).endswith("/safe")
    demo.rmsnorm(out, x, w, 1e-6)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_ref(x, w, 1e-6)) < 2e-3
    with pytest.raises(ValueError, match="argument x must be contiguous"):
        demo.rmsnorm(out, torch.randn(1024, 8, device="cuda", dtype=torch.half).t(), w, 1e-6)
    with pytest.raises(TypeError, match="argument eps: expected a float"):
        demo.rmsnorm(out, x, w, "small")


def test_rmsnorm_in_a_cuda_graph():
    x = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        demo.rmsnorm(out, x, w, 1e-6)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        demo.rmsnorm(out, x, w, 1e-6)
    x.copy_(torch.randn_like(x))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_ref(x, w, 1e-6)) < 1.6e-2


# ---------------------------------------------------------------- runtime autotuning


def test_runtime_autotune_on_the_gpu(tmp_path):
    code = textwrap.dedent(
        f"""
        import torch, demo_kernels as d
        d.autotune(True, cache={str(tmp_path / "tuned.json")!r})
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        c = torch.full((8192, 8192), float("nan"), device="cuda", dtype=torch.float16)
        table = d.matmul.select(a, b, c)
        d.matmul(a, b, c)
        torch.cuda.synchronize()
        err = ((c.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()).item()
        print(table, d.matmul.select(a, b, c), err)
        """
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    _, tuned, err = first.stdout.split()
    first = demo.__aotpack__["kernels"]["matmul"]["specializations"][0]["name"]
    assert float(err) < 2e-3 and tuned.startswith("matmul/T=fp16,") and tuned.endswith("/" + first)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert second.stdout.split()[1] == tuned, "the cache file carries the choice to a new process"
    saved = json.loads((tmp_path / "tuned.json").read_text())
    assert [e["key"] for e in saved["entries"]] == [[8192, 8192, 8192]]


def test_runtime_autotune_skips_graph_capture():
    x = torch.randn(3 << 20, device="cuda")  # bucket 4M: no row in the table
    y, out = torch.randn_like(x), torch.empty_like(x)
    before = demo.add.select(x, y, out)
    demo.autotune(True)
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            demo.add(x[:4096], y[:4096], out[:4096])  # loads modules outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            demo.add(x, y, out)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
        assert demo.add.select(x, y, out) == before, "nothing was tuned while capturing"
    finally:
        demo.autotune(False)


def test_aotpack_tune_drives_the_installed_wheel(tmp_path):
    """aotpack tune on this GPU (one kernel, few runs): a table with a row per binding, key and
    specialization, each naming a config of the grid that passed the check, with its timings."""
    table, data = run_tune("demo.yaml", "add", tmp_path, timeout=300)
    assert table.name.startswith("demo_kernels.sm_")
    assert data["device"] == torch.cuda.get_device_name() and data["arch"] == table.name.split(".")[1]
    rows = data["kernels"]["add"]
    # types x keys x the class the inputs select (aligned, 16-divisible sizes) and every class they satisfy
    assert len(rows) == 3 * 5 * len(demo.__aotpack__["kernels"]["add"]["specializations"])
    configs = {c for c in demo.__aotpack__["kernels"]["add"]["variants"] for c in [c["config"]]}
    for row in rows:
        assert row["config"] in configs and row["median_us"][row["config"]] == min(row["median_us"].values())
        assert row["rejected"] == {} and all(t > 0 for t in row["median_us"].values())


# ---------------------------------------------------------------- torch ops


def test_torch_ops_are_registered_with_their_writes():
    assert demo.ops is torch.ops.demo_kernels  # registered on first use of demo.ops
    schema = str(torch.ops.demo_kernels.add.default._schema)
    assert "Tensor(a2!) out_ptr" in schema and "Tensor x_ptr" in schema, schema
    assert "Tensor(a2!) c_ptr" in str(torch.ops.demo_kernels.matmul.default._schema)
    assert "Tensor(a0!) out" in str(torch.ops.demo_kernels.rmsnorm.default._schema)


def test_torch_ops_pass_opcheck():
    demo.torch_ops()
    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    torch.library.opcheck(torch.ops.demo_kernels.add.default, (x, y, torch.empty_like(x)))
    a = torch.randn(37, 300, device="cuda", dtype=torch.float16)
    torch.library.opcheck(torch.ops.demo_kernels.softmax.default, (torch.empty_like(a), a))


def test_torch_compile_fullgraph_and_cuda_graph():
    demo.torch_ops()

    def step(a, b, w):
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        torch.ops.demo_kernels.matmul(a, b, c)
        out = torch.empty_like(c)
        torch.ops.demo_kernels.rmsnorm(out, c, w, 1e-6)
        return out * 2

    compiled = torch.compile(step, fullgraph=True)  # raises on any graph break
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 512, device="cuda", dtype=torch.float16)
    w = torch.randn(512, device="cuda", dtype=torch.float16)
    ref = step(a, b, w)
    got = compiled(a, b, w)
    torch.cuda.synchronize()
    assert rel_err(got, ref.double()) < 2e-3

    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    out = torch.empty_like(x)
    torch.ops.demo_kernels.add(x, y, out)  # warm up (module load) outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.ops.demo_kernels.add(x, y, out)
    x.copy_(torch.randn_like(x))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_cupy_inputs():
    cupy = pytest.importorskip("cupy")
    a, b = cupy.random.rand(5000, dtype=cupy.float32), cupy.random.rand(5000, dtype=cupy.float32)
    c = cupy.full(5000, cupy.nan, dtype=cupy.float32)
    demo.add(a, b, c, stream=cupy.cuda.get_current_stream().ptr)
    cupy.cuda.get_current_stream().synchronize()
    assert bool(cupy.all(c == a + b))


def test_c_api_example_program(tmp_path):
    """examples/capi_demo.cpp, compiled against the installed wheel's header and library."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    package = Path(demo.__file__).parent
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    exe = tmp_path / "capi_demo"
    build = subprocess.run(
        [compiler, str(Path(__file__).resolve().parents[2] / "examples" / "capi_demo.cpp"), f"-I{demo.get_include()}",
         f"-I{cuda / 'include'}", f"-L{package}", "-ldemo_kernels", f"-Wl,-rpath,{package}", f"-L{cuda / 'lib64'}",
         "-lcudart", f"-Wl,-rpath,{cuda / 'lib64'}", "-o", str(exe)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "refused as expected: argument x_ptr is too small" in run.stdout
    assert run.stdout.splitlines()[-1].startswith("ok: add/T=fp32,")
