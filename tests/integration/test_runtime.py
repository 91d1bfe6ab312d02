"""The generated runtime driven through a fake libcuda.so.1: dispatch, guards, grids, streams,
lazy loading from many threads, and the errors a user sees for a wrong GPU or an old driver. The tests that take
``machine`` run twice: the x86-64 wheel here, and the aarch64 wheel of the same recipe on an emulated aarch64
machine (tests/integration/machines.py); those of torch's tensors run here only (torch is not on that machine)."""

import json
import os
import subprocess
import textwrap

import pytest

from .helpers import run_on_fake_driver

PRELUDE = """
import small_kernels as k

class Array:
    \"\"\"A __cuda_array_interface__ producer with a made-up device address.\"\"\"
    def __init__(self, ptr, n, typestr="<f4", shape=None, strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape or (n,), "typestr": typestr,
                                         "strides": strides, "version": 3}
A = 0x100000000
"""


def run(code, installed, fake_driver, tmp_path, **env):
    return run_on_fake_driver(PRELUDE + textwrap.dedent(code), installed, fake_driver, tmp_path / "cuda.log", **env)


def test_dispatch_and_launch(installed_on, machine, tmp_path):
    out, log = run(
        """
        x, y, o = Array(A, 100000), Array(A + 0x1000000, 100000), Array(A + 0x2000000, 100000)
        print(k.select("add", x, y, o))
        k.add(x, y, o)
        k.add(x, y, o, stream=0x4d2)
        small = Array(A, 3000)
        print(k.select("add", small, small, small))
        k.add(small, small, small)
        odd = Array(A + 4, 100)
        print(k.select("add", odd, x, o, n_elements=100))
        print(k.select("add", Array(A, 64, "<f2"), Array(A, 64, "<f2"), Array(A, 64, "<f2")))
        """,
        installed_on, machine, tmp_path,
    )  # fmt: skip
    assert out == [
        "add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD",  # bucket 131072 is past the table's one row: clamped to it
        "add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDD_",  # 3000 is not 16-divisible: the JIT's class of that call
        "add/T=fp32,BLOCK=256,w4,s1/sm_90a/____",  # a misaligned x and n = 100: two assumptions broken
        "add/T=fp16,BLOCK=256,w4,s1/sm_90a/DDDD",  # dtype binds T
    ]
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 3
    assert "grid=391,1,1 block=128,1,1 shared=0 stream=(nil)" in launches[0]
    assert "p0=100000000 p1=101000000 p2=102000000 p3=100000" in launches[0]
    assert "stream=0x4d2" in launches[1]
    assert "grid=12,1,1" in launches[2] and "p3=3000" in launches[2]
    assert all(line.endswith("ctx=0x1000") for line in launches), "launched in the device's primary context"
    assert len([line for line in log if line.startswith("load")]) == 2, "one load per variant and device"


def test_sm86_runs_sm80_code_and_other_gpus_are_refused(installed_on, machine, tmp_path):
    code = """
    x = Array(A, 4096)
    try:
        print(k.select("add", x, x, x))
    except k.CudaError as e:
        print("CudaError:", e)
    """
    assert run(code, installed_on, machine, tmp_path, FAKE_CUDA_CC="86")[0] == ["add/T=fp32,BLOCK=256,w4,s1/sm_80/DDDD"]
    assert run(code, installed_on, machine, tmp_path, FAKE_CUDA_CC="75")[0] == [
        "CudaError: add(): the GPU (Fake GPU 0) has compute capability 7.5, but small_kernels was built for "
        "sm_80, sm_90a; rebuild with a target for this GPU"
    ]
    assert run(code, installed_on, machine, tmp_path, FAKE_CUDA_CC="100")[0][0].startswith(
        "CudaError: add(): the GPU (Fake GPU 0) has compute capability 10.0"
    )
    assert run(code, installed_on, machine, tmp_path, FAKE_CUDA_DEVICES="0")[0] == [
        "CudaError: no CUDA device: the NVIDIA driver is installed but sees no GPU (cuInit: CUDA_ERROR_NO_DEVICE); "
        "check CUDA_VISIBLE_DEVICES"
    ]


def test_the_driver_floor_is_the_oldest_ptxas_release(installed_on, machine, tmp_path):
    """The small wheel's cubins come from CUDA 12.2's ptxas (the default: the oldest found that builds the
    targets): a driver for CUDA 12.2 loads and launches them, one for CUDA 12.0 is refused with both
    versions named, before anything reaches the driver."""
    code = """
        x = Array(A, 4096)
        try:
            k.add(x, x, x)
            print("launched")
        except k.CudaError as e:
            print(e)
        """
    (tmp_path / "new").mkdir(), (tmp_path / "old").mkdir()
    out, log = run(code, installed_on, machine, tmp_path / "new", FAKE_CUDA_DRIVER="12020")
    assert out == ["launched"] and [line for line in log if line.startswith("launch")]
    out, log = run(code, installed_on, machine, tmp_path / "old", FAKE_CUDA_DRIVER="12000")
    assert out == [
        "the NVIDIA driver supports CUDA 12.0, but add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD needs a driver for "
        "CUDA 12.2 or newer; update the driver"
    ]
    assert not [line for line in log if line.startswith(("load", "launch"))]


def test_argument_errors_name_the_argument(installed_on, machine, tmp_path):
    out, _ = run(
        """
        x = Array(A, 4096)
        cases = [
            lambda: k.add(x, x),
            lambda: k.add(x, Array(A, 4096, "<i4"), x),
            lambda: k.add(x, Array(A, 100), x),
            lambda: k.add(x, 17, x),
            lambda: k.add(x, x, x, n_elements=1 << 33),
            lambda: k.add(x, x, x, stream="fast"),
            lambda: k.add(x, x, x, variant="add/nope"),
            lambda: k.add(x, x, x, variant="add/T=fp32,BLOCK=256,w4,s1/sm_80/____"),
            lambda: k.add(Array(A + 4, 4096), x, x, variant="add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD"),
            lambda: k.add(Array(A, 6, shape=(2, 3), strides=(4, 8)), x, x),
            lambda: k.add(x.__cuda_array_interface__["data"][0], x, x, n_elements=-1),
            lambda: k.select("mul", x),
        ]
        for case in cases:
            try:
                case()
                print("no error")
            except Exception as e:
                print(type(e).__name__ + ":", e)
        """,
        installed_on, machine, tmp_path,
    )  # fmt: skip
    assert out == [
        "TypeError: add() missing required argument 'out_ptr'",
        "TypeError: argument y_ptr: expected dtype fp32 (the dtype of x_ptr), got i32",
        "ValueError: argument y_ptr is too small: the kernel may touch 4096 elements from its start, the tensor spans 100",
        "ValueError: argument y_ptr: 0x11 is not a CUDA device pointer (CUDA_ERROR_INVALID_VALUE)",
        "ValueError: argument n_elements = 8589934592 does not fit in i32",
        "TypeError: argument stream: expected an integer CUstream handle or an object with .cuda_stream "
        "(torch.cuda.Stream), got str",
        "ValueError: add(): no variant add/nope; the package's __aotpack__ manifest lists them",
        "ValueError: variant add/T=fp32,BLOCK=256,w4,s1/sm_80/____ is not the code for this GPU (Fake GPU 0, which "
        "runs sm_90a code)",
        "ValueError: variant add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD assumes argument x_ptr is 16-divisible "
        "(16-byte aligned) (class DDDD), and this call's is not; pass a less specialized variant",
        "ValueError: argument x_ptr is too small: the kernel may touch 4096 elements from its start, the tensor spans 6",
        "ValueError: add(): grid dimension 0, cdiv(n_elements, BLOCK), is 0 for this call: nothing would run; check "
        "the arguments (an empty input?)",  # n_elements = -1: never a silent no-op
        "ValueError: unknown kernel 'mul'; this package has add",
    ]


def test_torch_tensors_are_read_as_far_as_the_kernel_measures_them(installed, fake_driver, tmp_path):
    """The binding's torch path without a GPU: CPU tensors stand in for cuda:0 (get_device answers 0, the
    fake driver takes any address). add reads only its tensors' extents: a contiguous tensor is measured
    by is_contiguous() and numel(), any other by its shape and strides, and the extent check holds
    either way (a strided tensor's span, not its element count, is what the kernel can touch)."""
    out, log = run(
        """
        import torch
        torch.Tensor.get_device = lambda self: 0
        class Counted(torch.Tensor):  # a subclass: the binding calls its methods as Python would
            reads = []
            def stride(self, *a): Counted.reads.append("stride"); return super().stride(*a)
            def numel(self): Counted.reads.append("numel"); return super().numel()
            def is_contiguous(self, *a, **kw): Counted.reads.append("is_contiguous"); return super().is_contiguous(*a, **kw)
            @property
            def shape(self): Counted.reads.append("shape"); return super().shape
        x = torch.zeros(4096)
        cases = {
            "contiguous": torch.zeros(4096),
            "too small": torch.zeros(100),
            "strided, wide enough": torch.zeros(8192)[::2],
            "strided, too small": torch.zeros(4096)[::2],
            "2-D": torch.zeros(64, 64),
            "transposed": torch.zeros(64, 64).t(),
            "12 dimensions": torch.zeros([2] * 12),
        }
        for name, y in cases.items():
            try:
                k.add(x, y, x, n_elements=4096)
                print(name, "launched")
            except ValueError as e:
                print(name, e)
        for y in (torch.zeros(4096), torch.zeros(8192)[::2]):
            Counted.reads.clear()
            k.add(x, y.as_subclass(Counted), x)
            print(*dict.fromkeys(Counted.reads))  # once each: torch's dispatch may re-enter an override
        """,
        installed, fake_driver, tmp_path,
    )  # fmt: skip
    too_small = "argument y_ptr is too small: the kernel may touch 4096 elements from its start, the tensor spans"
    assert out == [
        "contiguous launched",
        f"too small {too_small} 100",
        "strided, wide enough launched",
        f"strided, too small {too_small} 4095",  # 2048 elements at stride 2
        "2-D launched",
        "transposed launched",
        "12 dimensions launched",  # more than a shape holds (8), but only its extent matters to add
        "is_contiguous numel",
        "is_contiguous shape stride",
    ]
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 7 and all("p3=4096" in line for line in launches)


EXCHANGE = """
import ctypes, torch
lib = ctypes.CDLL({library!r})
api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype, api.PyCapsule_GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_New.restype, api.PyCapsule_New.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
lib.fake_exchange.restype, lib.fake_exchange.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_uint32]
NAME = ctypes.c_char_p(b"dlpack_exchange_api")  # kept alive: a capsule holds only the pointer to its name
table = api.PyCapsule_GetPointer(torch.Tensor.__dlpack_c_exchange_api__, NAME)
torch.Tensor.__dlpack_c_exchange_api__ = api.PyCapsule_New(lib.fake_exchange(table, {minor}), NAME, None)
ctypes.c_int.in_dll(lib, "fake_exchange_device").value = {device}
reads = []
def counted(name):  # the method path, counted; get_device answers {device} for the CPU tensors
    method = getattr(torch.Tensor, name)
    def read(self, *args, **kwargs):
        reads.append(name)
        return {device} if name == "get_device" else method(self, *args, **kwargs)
    return read
for name in ("get_device", "data_ptr", "is_contiguous", "numel", "stride"):
    setattr(torch.Tensor, name, counted(name))
"""


@pytest.mark.parametrize("minor, device", [(2, 1), (1, 0)], ids=["exchange API 1.2", "1.1: methods"])
def test_torch_tensors_through_dlpacks_c_exchange_api(installed, fake_driver, fake_exchange, tmp_path, minor, device):
    """torch >= 2.10 describes a tensor to C in one call (DLPack's C exchange API, on torch.Tensor):
    pointer, device, dtype, shape and strides, and gives the current stream, without a Python method
    call per attribute. A table older than 1.2 is not used. What the exchange cannot describe
    (more dimensions than the runtime holds and not contiguous, a dtype no kernel takes) is read
    by the method path, which words the error, and every check holds on both paths."""
    out, log = run(
        EXCHANGE.format(library=str(fake_exchange), minor=minor, device=device)
        + textwrap.dedent("""
        x = torch.zeros(4096)
        cases = {
            "contiguous": torch.zeros(4096),
            "too small": torch.zeros(100),
            "strided, wide enough": torch.zeros(8192)[::2],
            "strided, too small": torch.zeros(4096)[::2],
            "transposed": torch.zeros(64, 64).t(),
            "12 dimensions": torch.zeros([2] * 12),
            "a Parameter": torch.nn.Parameter(torch.zeros(4096)),
            "12 dimensions, transposed": torch.zeros([2] * 12).transpose(0, 11),
            "complex": torch.zeros(4096, dtype=torch.complex64),
        }
        for name, y in cases.items():
            reads.clear()
            try:
                k.add(x, y, x, n_elements=4096)
                result = "launched"
            except (TypeError, ValueError) as e:
                result = str(e)
            print(name, "|", result, "|", *dict.fromkeys(reads))
        exchanged = ctypes.c_long.in_dll(lib, "fake_exchange_streams").value
        k.add(x, x, x, stream=0x77)
        print("streams asked", ctypes.c_long.in_dll(lib, "fake_exchange_streams").value - exchanged)
        """),
        installed, fake_driver, tmp_path, FAKE_CUDA_DEVICES="2",
    )  # fmt: skip
    too_small = "argument y_ptr is too small: the kernel may touch 4096 elements from its start, the tensor spans"
    methods = minor < 2
    x_reads = " get_device data_ptr is_contiguous numel" if methods else ""  # x, contiguous, comes first
    strided = " get_device data_ptr is_contiguous numel stride" if methods else ""
    assert out == [
        f"contiguous | launched |{x_reads}",
        f"too small | {too_small} 100 |{x_reads}",
        f"strided, wide enough | launched |{strided}",
        f"strided, too small | {too_small} 4095 |{strided}",
        f"transposed | launched |{strided}",
        f"12 dimensions | launched |{x_reads}",
        f"a Parameter | launched |{x_reads}",  # its methods are torch.Tensor's, called by name
        f"12 dimensions, transposed | argument y_ptr has 12 dimensions; at most 8 are supported |"
        f"{x_reads or ' get_device data_ptr is_contiguous'} stride",
        f"complex | argument y_ptr has dtype torch.complex64, which no kernel here takes |{x_reads or ' get_device data_ptr'}",
        "streams asked 0",
    ]
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 6 and all("p3=4096" in line for line in launches)
    stream = "0x5001" if not methods else "(nil)"  # the exchange's current stream of device 1; torch's raw one
    assert all(f"stream={stream} " in line for line in launches[:5]), launches
    assert all(f"ctx={hex(0x1000 + device)}" in line for line in launches), "on the tensors' device"
    assert "stream=0x77 " in launches[5]


def test_first_calls_from_many_threads_load_each_variant_once(installed_on, machine, tmp_path):
    _, log = run(
        """
        import threading
        x = Array(A, 1 << 20)
        barrier = threading.Barrier(16)
        def work():
            barrier.wait()
            for _ in range(50):
                k.add(x, x, x)
        threads = [threading.Thread(target=work) for _ in range(16)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        """,
        installed_on, machine, tmp_path,
    )  # fmt: skip
    assert len([line for line in log if line.startswith("load")]) == 1
    assert len([line for line in log if line.startswith("launch")]) == 800


def test_repeated_calls_reuse_a_pick_only_for_the_same_types_states_and_key(installed_on, machine, tmp_path):
    """A kernel keeps its last picks; one made for an aligned call or another dtype never serves a
    call that differs in them, also while threads call with different arguments at once."""
    out, _ = run(
        """
        import threading
        n = 100000
        calls = [
            ((Array(A, n), Array(A, n), Array(A, n)), {}),                        # aligned, n 16-divisible
            ((Array(A + 4, n), Array(A, n), Array(A, n)), {}),                    # misaligned x
            ((Array(A, n), Array(A, n), Array(A, n)), {"n_elements": 99999}),     # n not 16-divisible
            ((Array(A, n, "<f2"), Array(A, n, "<f2"), Array(A, n, "<f2")), {}),   # fp16
        ]
        want = ["add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD", "add/T=fp32,BLOCK=256,w4,s1/sm_90a/_DDD",
                "add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDD_", "add/T=fp16,BLOCK=256,w4,s1/sm_90a/DDDD"]
        wrong = []
        barrier = threading.Barrier(8)
        def work(first):
            barrier.wait()
            for i in range(2000):
                j = (first + i) % len(calls)
                args, kwargs = calls[j]
                got = k.add.select(*args, **kwargs)
                if got != want[j]:
                    wrong.append((j, got))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(len(wrong), wrong[:3])
        """,
        installed_on, machine, tmp_path,
    )  # fmt: skip
    assert out == ["0 []"]


def test_kernel_objects_select_by_key(installed_on, machine, tmp_path):
    out, _ = run(
        """
        import inspect
        print(k.add.select(n_elements=100, T="fp16"))
        print(k.add.select(n_elements=1 << 30, T="fp32", device=0))
        for bad in ({"T": "fp32"}, {"n_elements": 5}):
            try:
                k.add.select(**bad)
            except TypeError as e:
                print(e)
        print(k.add, len(k.add.variants), k.add.variants[0])
        print(inspect.signature(k.add))
        print(k.add.__doc__.splitlines()[0])
        print(k.add.__name__, type(k.add).__call__ is k._native._Kernel.__call__)  # the call goes straight to C
        for bad in (("nope",), ()):
            try:
                k._native._Kernel(*bad)
            except (TypeError, ValueError) as e:
                print(type(e).__name__, e)
        """,
        installed_on, machine, tmp_path,
    )  # fmt: skip
    assert out == [
        "add/T=fp16,BLOCK=256,w4,s1/sm_90a/DDDD",
        "add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD",  # past the table's one row: clamped to it
        "add.select(): give the key values n_elements",
        "add.select(): name the types, one of: T=fp32; T=fp16",
        "<kernel add: 48 variants> 48 add/T=fp32,BLOCK=256,w4,s1/sm_80/DDDD",
        "(x_ptr, y_ptr, out_ptr, n_elements=None, *, stream=None, variant=None)",
        "The add kernel.",
        "add True",
        "ValueError no kernel nope",
        "TypeError function takes exactly 1 argument (0 given)",
    ]


def test_runtime_autotune_times_untabled_keys_once_and_shares_them(installed_on, machine, tmp_path):
    cache = tmp_path / "tuned.json"
    code = f"""
        k.autotune(True, cache={str(cache)!r})
        x = Array(A, 100000)
        print(k.add.select(x, x, x))      # the table has only 4096: clamped, not yet tuned
        k.add(x, x, x)                    # times BLOCK=256 and BLOCK=1024, remembers the winner
        k.add(x, x, x)
        print(k.add.select(x, x, x))
        exact = Array(A, 4096)
        k.add(exact, exact, exact)        # a key the table has: never timed
        """
    out, log = run(code, installed_on, machine, tmp_path)
    launches = [line for line in log if line.startswith("launch")]
    # 2 configs x (2 warm-ups + 5 timed) + the call itself, then one launch for each later call
    assert len(launches) == 2 * 7 + 1 + 1 + 1
    # every timed run starts from a cold L2: a buffer of twice the L2 (50 MiB on the fake) cleared before it
    timing = log[: [i for i, line in enumerate(log) if line.startswith("launch")][2 * 7]]
    flushes = [line for line in timing if line.startswith("memset")]
    assert len(flushes) == 2 * 7 and all(f" 0 {100 << 20} " in line for line in flushes)
    assert [line.split()[0] for line in timing if line.split()[0] in ("memset", "launch")] == ["memset", "launch"] * 14
    assert any(line.startswith("alloc 104857600") for line in timing) and any(
        line.startswith("free") for line in timing
    )
    assert out == ["add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD", "add/T=fp32,BLOCK=1024,w4,s1/sm_90a/DDDD"]
    saved = json.loads(cache.read_text())
    assert saved["format"] == "aotpack-autotune/2" and saved["package"] == "small_kernels"
    assert saved["entries"] == [{"config": "BLOCK=1024,w4,s1", "specialization": "DDDD", "kernel": "add",
                                 "key": [131072], "target": "sm_90a", "types": {"T": "fp32"}}]  # fmt: skip

    (tmp_path / "cuda.log").unlink()
    out, log = run(code, installed_on, machine, tmp_path)  # a new process reads the cache: no timing
    assert out == ["add/T=fp32,BLOCK=1024,w4,s1/sm_90a/DDDD"] * 2
    assert len([line for line in log if line.startswith("launch")]) == 3


def test_runtime_autotune_per_key_times_each_key_value_like_triton(installed_on, machine, tmp_path):
    cache = tmp_path / "tuned.json"
    code = f"""
        k.autotune(True, cache={str(cache)!r}, per="key")
        for n in (100000, 100000, 100001, 4096):  # two new values in one bucket; 4096 is the table's row
            x = Array(A, n)
            k.add(x, x, x)
        try:
            k.autotune(True, per="row")
        except ValueError as exc:
            print(exc)
        """
    out, log = run(code, installed_on, machine, tmp_path)
    assert len([line for line in log if line.startswith("launch")]) == 2 * (2 * 7 + 1) + 1 + 1
    assert out == ["autotune(per='row'): expected 'bucket' or 'key'"]
    saved = json.loads(cache.read_text())
    assert [e["key"] for e in saved["entries"]] == [[100000], [100001]]


def test_runtime_autotune_never_times_during_capture_or_when_off(installed_on, machine, tmp_path):
    code = """
        x = Array(A, 100000)
        k.add(x, x, x)                    # off by default
        k.autotune(True)
        k.add(x, x, x)                    # the stream is capturing: use the table
        print(k.add.select(x, x, x))
        """
    out, log = run(code, installed_on, machine, tmp_path, FAKE_CUDA_CAPTURING="1")
    assert len([line for line in log if line.startswith("launch")]) == 2
    assert out == ["add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD"]


def test_runtime_autotune_cache_is_safe_with_many_processes(installed_on, machine, tmp_path):
    cache = tmp_path / "tuned.json"
    env = {**os.environ, **machine.env, "PYTHONPATH": str(installed_on), "LD_LIBRARY_PATH": str(machine.fake_driver),
           "AOTPACK_AUTOTUNE": "1", "AOTPACK_AUTOTUNE_CACHE": str(cache)}  # fmt: skip
    procs = [
        subprocess.Popen([*machine.python, "-c", PRELUDE + f"x = Array(A, {n})\nk.add(x, x, x)\n"], env=env)
        for n in (10_000, 20_000, 40_000, 80_000, 160_000, 320_000)
    ]
    assert [p.wait(timeout=240) for p in procs] == [0] * 6
    keys = sorted(e["key"][0] for e in json.loads(cache.read_text())["entries"])
    assert keys == [16384, 32768, 65536, 131072, 262144, 524288]
    assert not list(tmp_path.glob(".autotune-*")), "no temporary file is left behind"


def test_dlpack_producers(installed_on, machine, tmp_path):
    out, log = run(
        """
        import ctypes

        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                        ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]

        class Managed(ctypes.Structure):
            _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

        class Producer:
            def __init__(self, ptr, n, code=2, bits=32, device_type=2):
                self.shape = (ctypes.c_int64 * 1)(n)
                self.managed = Managed(DLTensor(ptr, device_type, 0, 1, code, bits, 1, self.shape, None, 16))
            def __dlpack__(self, stream=None):
                return new_capsule(ctypes.addressof(self.managed), b"dltensor", None)

        x, y, o = Producer(A, 1000), Producer(A + 4096, 1000), Producer(A + 8192, 1000)
        k.add(x, y, o)
        for bad in (Producer(A, 1000, code=5, bits=64), Producer(A, 1000, device_type=1)):
            try:
                k.add(bad, y, o)
            except Exception as e:
                print(type(e).__name__ + ":", e)
        """,
        installed_on, machine, tmp_path,
    )  # fmt: skip
    (launch,) = [line for line in log if line.startswith("launch")]
    assert f"p0={0x100000000 + 16:x} p1={0x100001000 + 16:x} p2={0x100002000 + 16:x} p3=1000" in launch
    assert out == [
        "TypeError: argument x_ptr has DLPack dtype (code 5, 64 bits), which no kernel here takes",
        "ValueError: argument x_ptr is not in CUDA memory (DLPack device type 1); select(..., target='sm_90a') says "
        "which variant a GPU would run",
    ]


def test_c_api_from_a_c_program(installed_on, machine, tmp_path):
    """lib<pkg>.so and its header, used by a C program with no Python in it (fake driver)."""
    package = installed_on / "small_kernels"
    program = tmp_path / "main.c"
    program.write_text(textwrap.dedent("""
        #include <stdio.h>
        #include "small_kernels.h"
        int main(void) {
          int64_t n = 1000;
          small_kernels_tensor t = {0x100000000ull, SMALL_KERNELS_FP32, 1, &n, NULL};
          char error[512], variant[128];
          if (small_kernels_add_select(NULL, 0, t, t, t, NULL, variant, sizeof variant, error, sizeof error)) return 1;
          if (small_kernels_add((void *)0x4d2, 0, t, t, t, NULL, error, sizeof error)) return 2;
          int32_t too_many = 5000;
          int rc = small_kernels_add(NULL, 0, t, t, t, &too_many, error, sizeof error);
          printf("%s\\n%d %s\\n", variant, rc, error);
          return 0;
        }
        """))  # fmt: skip
    exe = tmp_path / "main"
    subprocess.run(machine.compile_c("-Wall", "-Werror", f"-I{package / 'include'}", str(program), f"-L{package}",
                                     "-lsmall_kernels", f"-Wl,-rpath,{package}", "-o", str(exe)), check=True)  # fmt: skip
    env = {**machine.env, "LD_LIBRARY_PATH": str(machine.fake_driver), "FAKE_CUDA_LOG": str(tmp_path / "cuda.log")}
    proc = subprocess.run([*machine.prefix, str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDD_",  # 1000 is not a multiple of 16
        "-1 argument x_ptr is too small: the kernel may touch 5000 elements from its start, the tensor spans 1000",
    ]
    (launch,) = [ln for ln in (tmp_path / "cuda.log").read_text().splitlines() if ln.startswith("launch")]
    assert "grid=4,1,1" in launch and "stream=0x4d2" in launch and "p3=1000" in launch


ARITH = """\
package: arith_kernels
version: 0.1.0
targets: [sm_90a]
kernels:
  add:
    triton: {examples}/add.py:add_kernel
    args:
      x_ptr: {{type: "*fp32", extent: "n_elements * rep"}}
      y_ptr: {{type: "*fp32", extent: "n_elements + n_elements % d * 0"}}
      out_ptr: {{type: "*fp32", extent: n_elements}}
      n_elements: i64
      rep: {{type: i64, default: 1, launch_only: true}}
      d: {{type: i64, default: 1, launch_only: true}}
    constexprs: {{BLOCK: [1024]}}
    grid: ["cdiv(n_elements, BLOCK) + n_elements // d * 0"]
"""


def test_launch_arithmetic_is_total_and_an_empty_grid_is_an_error(machine, tmp_path):
    from pathlib import Path

    from aotpack import build

    recipe_path = tmp_path / "arith.yaml"
    recipe_path.write_text(ARITH.format(examples=Path(__file__).resolve().parents[2] / "examples"))
    site = machine.install(build(recipe_path, tmp_path / "dist", jobs=2, platform=machine.platform).wheel,
                           tmp_path / "site")  # fmt: skip
    code = """
        import arith_kernels as k
        A = 0x100000000
        for kwargs in ({"n_elements": 1 << 40, "rep": 1 << 40},      # the extent overflows int64
                       {"n_elements": -(1 << 63), "d": -1},          # INT64_MIN % -1 and // -1: no trap
                       {"n_elements": 0},                            # the grid is 0: nothing would run
                       {"n_elements": 4096, "d": -1}):               # fine: 4 programs
            try:
                k.add(A, A, A, **kwargs)
                print("launched")
            except ValueError as exc:
                print(exc)
        """
    out, log = run_on_fake_driver(textwrap.dedent(code), site, machine, tmp_path / "cuda.log")
    assert out == [
        "add(): a launch expression overflows 64-bit integers; check the arguments",
        "add(): a launch expression overflows 64-bit integers; check the arguments",
        "add(): grid dimension 0, (cdiv(n_elements, BLOCK) + ((n_elements // d) * 0)), is 0 for this call: nothing "
        "would run; check the arguments (an empty input?)",
        "launched",
    ]
    assert [line.split()[3] for line in log if line.startswith("launch")] == ["grid=4,1,1"]


def test_a_module_whose_function_is_missing_is_unloaded_each_time(installed_on, machine, tmp_path):
    code = """
        x = Array(A, 4096)
        for _ in range(2):
            try:
                k.add(x, x, x)
            except k.CudaError as exc:
                print(str(exc).split(":")[0])
        """
    out, log = run(code, installed_on, machine, tmp_path, FAKE_CUDA_NO_FUNCTION="1")
    assert out == ["finding add_kernel in add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD failed"] * 2
    events = [line.split()[0] for line in log if line.split()[0] in ("load", "unload", "launch")]
    assert events == ["load", "unload", "load", "unload"]
