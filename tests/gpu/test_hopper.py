"""The Hopper recipe on an sm_90 GPU: host TMA descriptors (matmul), device-side descriptors in
global scratch (attention), bound constexprs, and the launch paths around them: streams, threads,
graph capture, scratch growth and bad input."""

import math
import threading
from typing import Any

import pytest

from .helpers import run_tune

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("the Hopper recipe is built for sm_90a only", allow_module_level=True)
hopper = pytest.importorskip("hopper_kernels", reason="install the Hopper wheel (make gpu-test does)")

pytestmark = pytest.mark.gpu
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def variants(kernel: str) -> list[dict]:
    return hopper.__aotpack__["kernels"][kernel]["variants"]


def rel_err(out: Any, ref: Any) -> float:
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) output elements"
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def matmul_case(m: int, n: int, k: int, dtype: Any):
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    return a, b, c, a.float() @ b.float()


# ---------------------------------------------------------------- TMA matmul (host descriptors)


@pytest.mark.parametrize("variant", [v["id"] for v in variants("matmul_tma")])
def test_matmul_every_variant(variant):
    dtype = DTYPES[variant.split("T=")[1].split(",")[0]]
    a, b, c, ref = matmul_case(512, 768, 1024, dtype)
    # the persistent grid's size, as the variant's class assumes it (divisible by 16, 1, or anything)
    assumes = next(v for v in variants("matmul_tma") if v["id"] == variant)["assumes"]
    programs = {"D": 128, "1": 1}.get(assumes.get("programs", ""), 132)
    hopper.matmul_tma(a, b, c, programs=programs, variant=variant)
    assert rel_err(c, ref) < 1e-2


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 520, 264), (8, 1024, 8), (300, 4096, 1000)])
@pytest.mark.parametrize("dtype", DTYPES.values())
def test_matmul_dispatched(shape, dtype):
    m, n, k = shape
    a, b, c, ref = matmul_case(m, n, k, dtype)
    hopper.matmul_tma(a, b, c)
    assert rel_err(c, ref) < 1e-2
    # the JIT's class of the call: M, N, K each 16-divisible or not (programs, 132, is not)
    spelled = "".join("D" if d % 16 == 0 else "_" for d in shape) + "_"
    assert hopper.matmul_tma.select(a, b, c).split("/")[-1] == spelled


def test_matmul_fewer_programs_than_tiles_and_views():
    a, b, c, ref = matmul_case(1024, 1024, 512, torch.float16)
    hopper.matmul_tma(a, b, c, programs=7)
    assert rel_err(c, ref) < 1e-2
    # row-strided views (strides a multiple of 16 bytes) are fine: the descriptor carries the strides
    big = torch.randn(1024, 640, device="cuda", dtype=torch.float16)
    a_view = big[:, 64:576]
    c.fill_(float("nan"))
    hopper.matmul_tma(a_view, b, c)
    assert rel_err(c, a_view.float() @ b.float()) < 1e-2


def test_matmul_refuses_layouts_tma_cannot_read():
    a, b, c, _ = matmul_case(256, 256, 256, torch.float16)
    flat = torch.zeros(256 * 256 + 1, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"argument a_desc: a tensor descriptor needs a 16-byte aligned address"):
        hopper.matmul_tma(flat[1:].view(256, 256), b, c)
    with pytest.raises(ValueError, match=r"argument b_desc: .*last dimension contiguous.*stride 256"):
        hopper.matmul_tma(a, b.t(), c)
    odd = torch.zeros(256, 100, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"argument c_desc: .*multiple of 16 bytes; stride 100 of dimension 0 is 200"):
        hopper.matmul_tma(a, b[:, :100], odd)
    with pytest.raises(ValueError, match=r"argument a_desc: .*pass a tensor of 2 dimensions, not a raw pointer"):
        hopper.matmul_tma(a.data_ptr(), b, c, M=256, K=256)
    with pytest.raises(ValueError, match=r"argument a_desc: expected a tensor of 2 dimensions, got 3"):
        hopper.matmul_tma(a.view(1, 256, 256), b, c, M=256, K=256)
    with pytest.raises(TypeError, match=r"argument b_desc: expected dtype fp16 \(the dtype of a_desc\), got bf16"):
        hopper.matmul_tma(a, b.bfloat16(), c)
    # the context is healthy afterwards
    a, b, c, ref = matmul_case(256, 256, 256, torch.float16)
    hopper.matmul_tma(a, b, c)
    assert rel_err(c, ref) < 1e-2


# ---------------------------------------------------------------- attention (device descriptors, scratch)


def attention_ref(q, k, v, causal, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v.float()


def attention_case(shape, dtype):
    q, k, v = (torch.randn(*shape, device="cuda").to(dtype) for _ in range(3))
    out = torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    return q, k, v, out


@pytest.mark.parametrize("variant", [v["id"] for v in variants("attention")])
def test_attention_every_variant(variant):
    fields = dict(part.split("=") for part in variant.split("/")[1].split(",") if "=" in part)
    causal = int(fields["CAUSAL"])
    seq = 336 if variant.endswith("/D") else 333  # class D assumes seq % 16 == 0
    q, k, v, out = attention_case((2, 3, seq, int(fields["HEAD_DIM"])), DTYPES[fields["T"]])
    hopper.attention(q, k, v, out, 1 / math.sqrt(q.shape[-1]), causal=causal, variant=variant)
    assert rel_err(out, attention_ref(q, k, v, causal)) < 1e-2


@pytest.mark.parametrize("shape", [(1, 1, 1, 64), (2, 4, 1024, 64), (1, 2, 1000, 128), (3, 5, 77, 128)])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_dispatched(shape, causal):
    q, k, v, out = attention_case(shape, torch.bfloat16)
    hopper.attention(q, k, v, out, 1 / math.sqrt(shape[-1]), causal=causal)
    assert rel_err(out, attention_ref(q, k, v, causal)) < 1e-2
    assert f"HEAD_DIM={shape[-1]},CAUSAL={causal}," in hopper.attention.select(q, k, v, out, 1.0, causal=causal)


def test_attention_bound_constexprs_and_required_alignment():
    q, k, v, out = attention_case((1, 2, 128, 96), torch.float16)
    with pytest.raises(ValueError, match=r"attention\(\): this call needs HEAD_DIM = 96, CAUSAL = 0, for which no "):
        hopper.attention(q, k, v, out, 0.1)
    q, k, v, out = attention_case((1, 2, 128, 64), torch.float16)
    with pytest.raises(ValueError, match=r"CAUSAL = 2"):
        hopper.attention(q, k, v, out, 0.1, causal=2)
    flat = torch.zeros(2 * 128 * 64 + 1, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"argument k_ptr must be 16-byte aligned \(the kernel was built for that\)"):
        hopper.attention(q, flat[1:].view(1, 2, 128, 64), v, out, 0.1)
    wrong = next(x["id"] for x in variants("attention") if "HEAD_DIM=128" in x["id"] and "T=fp16" in x["id"])
    with pytest.raises(ValueError, match=r"was built for other values of the constexprs this call fixes"):
        hopper.attention(q, k, v, out, 0.1, variant=wrong)


def test_attention_on_two_streams_with_different_grids():
    """Interleaved launches on two streams, a small grid and a large one, each with its scratch
    from the pool: all give the right answer."""
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    cases = [attention_case((1, 2, 64, 64), torch.float16), attention_case((4, 8, 2048, 64), torch.float16)]
    for _ in range(3):
        for stream, (q, k, v, out) in zip(streams, cases, strict=True):
            with torch.cuda.stream(stream):
                out.fill_(float("nan"))
                hopper.attention(q, k, v, out, 0.125, causal=1)
    torch.cuda.synchronize()
    for q, k, v, out in cases:
        assert rel_err(out, attention_ref(q, k, v, 1)) < 1e-2


def test_attention_from_threads():
    errors = []
    results = []

    def work():
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                q, k, v, out = attention_case((2, 2, 512, 128), torch.float16)
                for _ in range(5):
                    hopper.attention(q, k, v, out, 0.09)
            stream.synchronize()
            results.append(rel_err(out, attention_ref(q, k, v, 0, scale=0.09)))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 8 and max(results) < 1e-2, results


def test_graph_capture_with_scratch_and_descriptors():
    """A graph of attention (scratch allocated and freed inside the graph) and the TMA matmul,
    replayed on fresh inputs, while eager calls on the same shapes run between replays."""
    q, k, v, out = attention_case((2, 4, 256, 64), torch.float16)
    a, b, c, _ = matmul_case(512, 512, 512, torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (loads the modules) outside the capture
        hopper.attention(q, k, v, out, 0.125)
        hopper.matmul_tma(a, b, c)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hopper.attention(q, k, v, out, 0.125)
        hopper.matmul_tma(a, b, c)
    for _ in range(3):
        for x in (q, k, v, a, b):
            x.copy_(torch.randn_like(x, dtype=torch.float32))
        out.fill_(float("nan"))
        c.fill_(float("nan"))
        graph.replay()
        eager = torch.empty_like(out)
        hopper.attention(k, q, v, eager, 0.125)  # an eager call between replays, its scratch from the pool
        torch.cuda.synchronize()
        assert rel_err(out, attention_ref(q, k, v, 0)) < 1e-2
        assert rel_err(eager, attention_ref(k, q, v, 0)) < 1e-2
        assert rel_err(c, a.float() @ b.float()) < 1e-2


# ---------------------------------------------------------------- clusters, PDL, cooperative launches


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pdl_chain_in_clusters(dtype):
    """Twenty dependent launches on one stream in 2-block clusters, each reading what the previous
    one wrote while programmatic dependent launch lets it start early; then the same chain captured
    in a graph and replayed."""
    n = (1 << 24) + 48  # long enough for launches to overlap; not a multiple of the block
    x = torch.randn(n, device="cuda").to(dtype)
    bufs = [x.clone(), torch.full_like(x, float("nan"))]
    ref = x.clone()
    for i in range(20):
        hopper.axpb_pdl(bufs[i % 2], bufs[1 - i % 2], 1.01, 0.5 - i / 40)
        ref = (ref.float() * 1.01 + (0.5 - i / 40)).to(dtype)
    torch.cuda.synchronize()
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    assert rel_err(bufs[0], ref) < tol

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(6):
            hopper.axpb_pdl(bufs[i % 2], bufs[1 - i % 2], 0.5, 1.0)
    start = torch.randn(n, device="cuda").to(dtype)
    bufs[0].copy_(start)
    graph.replay()
    ref = start
    for _ in range(6):
        ref = (ref.float() * 0.5 + 1.0).to(dtype)
    torch.cuda.synchronize()
    assert rel_err(bufs[0], ref) < tol


def test_cooperative_launch_and_its_limit():
    x = torch.randn(3_000_000, device="cuda")
    out = torch.full_like(x, float("nan"))
    hopper.axpb_cooperative(x, out, 2.0, -1.0)
    assert rel_err(out, x * 2 - 1) < 1e-6
    with pytest.raises(hopper.CudaError, match=r"launching axpb_cooperative/.*COOPERATIVE_LAUNCH_TOO_LARGE"):
        hopper.axpb_cooperative(x, out, 2.0, -1.0, programs=1_000_000)
    out.fill_(float("nan"))  # the failed launch left the context usable
    hopper.axpb_cooperative(x, out, 3.0, 0.0)
    assert rel_err(out, x * 3) < 1e-6


# ---------------------------------------------------------------- tuning with bound constexprs


def test_aotpack_tune_skips_variants_built_for_other_bound_values(tmp_path):
    """aotpack tune of the attention (few runs): for each key (seq, head size, causality) only the
    four configs built for that head size and causality are timed; each row names one of them."""
    table, data = run_tune("hopper.yaml", "attention", tmp_path, timeout=400)
    assert table.name == "hopper_kernels.sm_90a.json"
    rows = data["kernels"]["attention"]
    assert len(rows) == 2 * 6 * 2  # types x keys x the classes (seq 16-divisible: D, and nothing: _)
    seen = set()
    for row in rows:
        fields = dict(f.split("=") for f in row["config"].split(",") if "=" in f)
        assert int(fields["HEAD_DIM"]) == row["key"][1]
        assert len(row["median_us"]) == 4 and row["rejected"] == {}, row
        assert row["median_us"][row["config"]] == min(row["median_us"].values())
        seen.add((tuple(sorted(row["types"].items())), row["specialization"], row["key"][0], fields["HEAD_DIM"],
                  fields["CAUSAL"]))  # fmt: skip
    assert len(seen) == len(rows), "one row per key, causal and non-causal apart"
