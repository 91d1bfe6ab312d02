"""The runtime on every visible GPU (needs two or more): calls with tensors on any device, threads
calling on different devices at once, scratch pools and TMA descriptors per device (the Hopper
wheel), graph capture on a device other than 0, and one call's tensors on two devices refused."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    pytest.skip("needs two or more CUDA GPUs", allow_module_level=True)
demo = pytest.importorskip("demo_kernels", reason="install the demo wheel (make gpu-test does)")

pytestmark = pytest.mark.gpu
DEVICES = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
HOPPER = all(torch.cuda.get_device_capability(d) == (9, 0) for d in DEVICES)


def rel_err(out: Any, ref: Any) -> float:
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) output elements"
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("device", DEVICES)
def test_every_demo_kernel_on_each_device(device):
    x, y = torch.randn(100003, device=device), torch.randn(100003, device=device)
    out = torch.full_like(x, float("nan"))
    demo.add(x, y, out)
    rows = torch.randn(37, 1000, device=device)
    soft = torch.full_like(rows, float("nan"))
    demo.softmax(soft, rows)
    a = torch.randn(300, 200, device=device, dtype=torch.float16)
    b = torch.randn(200, 150, device=device, dtype=torch.float16)
    c = torch.full((300, 150), float("nan"), device=device, dtype=torch.float16)
    demo.matmul(a, b, c)
    with torch.cuda.device(device):
        torch.cuda.synchronize()
    assert torch.equal(out, x + y)
    assert rel_err(soft, torch.softmax(rows, -1)) < 1e-5
    assert rel_err(c, a.float() @ b.float()) < 1e-2


def test_the_callers_stream_on_another_device():
    """A call with tensors on cuda:1 runs on that device's current stream: it waits there behind a
    long sleep, while another stream of the device still sees the poisoned output."""
    with torch.cuda.device(1):
        busy, other = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda:1")
    out = torch.empty_like(x)
    demo.add(x, x, out)  # loads the variant on device 1 first: a module load may wait for the device's work
    out.fill_(float("nan"))
    torch.cuda.synchronize(1)
    with torch.cuda.stream(busy):
        torch.cuda._sleep(200_000_000)
        demo.add(x, x, out)
    with torch.cuda.stream(other):
        seen = out.clone()
    other.synchronize()
    assert torch.isnan(seen).all()
    busy.synchronize()
    assert torch.equal(out, x + x)


def test_threads_calling_on_different_devices_at_once():
    errors, done = [], []
    barrier = threading.Barrier(2 * len(DEVICES))

    def work(device: str) -> None:
        try:
            with torch.cuda.device(device):
                stream = torch.cuda.Stream()
                with torch.cuda.stream(stream):
                    x, y = torch.randn(65536, device=device), torch.randn(65536, device=device)
                    out = torch.empty_like(x)
                    barrier.wait()
                    for _ in range(200):
                        out.fill_(float("nan"))
                        demo.add(x, y, out)
                stream.synchronize()
                assert torch.equal(out, x + y)
                done.append(device)
        except Exception as exc:  # reported below
            errors.append((device, exc))

    threads = [threading.Thread(target=work, args=(d,)) for d in DEVICES * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(done) == sorted(DEVICES * 2)


def test_graph_capture_on_device_1():
    with torch.cuda.device(1):
        x, y = torch.randn(4096, device="cuda:1"), torch.randn(4096, device="cuda:1")
        out = torch.empty_like(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            demo.add(x, y, out)  # loads the module on device 1 outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # a stream of device 1 named: torch.cuda.graph's default capture stream is made once per process, on
        # the device current at its first use (device 0 where test_demo.py captured first)
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(device=1)):
            demo.add(x, y, out)
        for _ in range(3):
            x.copy_(torch.randn_like(x))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out, x + y)


def test_tensors_on_two_devices_in_one_call_are_refused():
    x = torch.randn(4096, device="cuda:0")
    y = torch.randn(4096, device="cuda:1")
    out = torch.empty_like(x)
    with pytest.raises(ValueError, match=r"argument y_ptr is on cuda:1 but x_ptr is on cuda:0; put all on one device"):
        demo.add(x, y, out)


@pytest.mark.skipif(not HOPPER, reason="the Hopper wheel is built for sm_90a")
def test_scratch_pools_and_tma_descriptors_per_device():
    """Attention (device-side descriptors in pool scratch) and the TMA matmul (host descriptors) on
    every device, interleaved, and captured in a graph on device 1."""
    hopper = pytest.importorskip("hopper_kernels")
    cases = {}
    for device in DEVICES:
        q, k, v = (torch.randn(2, 4, 256, 64, device=device, dtype=torch.float16) for _ in range(3))
        a = torch.randn(512, 256, device=device, dtype=torch.float16)
        b = torch.randn(256, 384, device=device, dtype=torch.float16)
        cases[device] = (q, k, v, torch.empty_like(q), a, b, torch.empty(512, 384, device=device, dtype=torch.float16))
    for _ in range(3):
        for q, k, v, out, a, b, c in cases.values():
            out.fill_(float("nan"))
            c.fill_(float("nan"))
            hopper.attention(q, k, v, out, 0.125)
            hopper.matmul_tma(a, b, c)
    for device, (q, k, v, out, a, b, c) in cases.items():
        with torch.cuda.device(device):
            torch.cuda.synchronize()
        ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * 0.125, -1) @ v.float()
        assert rel_err(out, ref) < 1e-2, device
        assert rel_err(c, a.float() @ b.float()) < 1e-2, device
    q, k, v, out, a, b, c = cases["cuda:1"]
    with torch.cuda.device(1):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(device=1)):  # (see test_graph_capture_on_device_1)
            hopper.attention(q, k, v, out, 0.125)
            hopper.matmul_tma(a, b, c)
        out.fill_(float("nan"))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
    ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * 0.125, -1) @ v.float()
    assert rel_err(out, ref) < 1e-2 and rel_err(c, a.float() @ b.float()) < 1e-2


ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT)])}


def tuned(out: Path, *where: str) -> list[dict]:
    """`aotpack tune` of the demo's add kernel with ``where`` (--devices ... or --executor ...): the table's rows."""
    cmd = [sys.executable, "-m", "aotpack", "tune", str(ROOT / "recipes" / "demo.yaml"), "--kernel", "add",
           "--reps", "5", "--warmup", "2", *where, "-o", str(out)]  # fmt: skip
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (table,) = out.glob("*.json")
    return json.loads(table.read_text())["kernels"]["add"]


def same_rows(one: list[dict], many: list[dict]) -> None:
    """The same rows in the same order (the winners may differ by timing noise), each with its timings."""
    assert [(r["key"], r["types"], r.get("specialization")) for r in one] == [
        (r["key"], r["types"], r.get("specialization")) for r in many
    ]
    assert all(r["config"] in dict(r["median_us"]) for r in many)


def test_tuning_on_every_gpu_writes_the_table_one_gpu_writes(tmp_path):
    """`aotpack tune --devices all` against `--devices 0`."""
    same_rows(tuned(tmp_path / "one", "--devices", "0"), tuned(tmp_path / "all", "--devices", "all"))


def test_tuning_on_a_dask_cluster_of_the_gpus_writes_the_table_one_gpu_writes(tmp_path):
    """`aotpack tune --executor`: a scheduler and one worker process per GPU (CUDA_VISIBLE_DEVICES,
    --nthreads 1), as on several hosts; the hooks travel with the tasks."""
    dask = pytest.importorskip("distributed")
    file = tmp_path / "scheduler.json"
    cli = [sys.executable, "-m"]
    procs = [subprocess.Popen([*cli, "distributed.cli.dask_scheduler", "--scheduler-file", str(file), "--port", "0",
                               "--dashboard-address", ":0"], env=ENV)]  # fmt: skip
    try:
        for _ in range(600):
            if file.exists():
                break
            time.sleep(0.1)
        for i in range(torch.cuda.device_count()):
            procs.append(subprocess.Popen([*cli, "distributed.cli.dask_worker", "--scheduler-file", str(file),
                                           "--nthreads", "1", "--no-dashboard"],
                                          env={**ENV, "CUDA_VISIBLE_DEVICES": str(i)}, cwd=tmp_path))  # fmt: skip
        with dask.Client(scheduler_file=str(file)) as client:
            client.wait_for_workers(torch.cuda.device_count(), timeout=180)
            address = client.scheduler.address
        same_rows(tuned(tmp_path / "one", "--devices", "0"), tuned(tmp_path / "cluster", "--executor", address))
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=60)
