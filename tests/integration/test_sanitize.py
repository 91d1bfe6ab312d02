"""The shipped runtime and the generated C under AddressSanitizer and UndefinedBehaviorSanitizer:
sanitize_main.c drives the small recipe's C API on the fake driver (leaks checked) with good calls,
bad calls (dtypes, sizes, alignment, raw pointers, empty and negative grids, shapes past int64, too
many dimensions), launches whose grid, block, shared memory, scratch or descriptor sizes pass 64 bits,
a scratch pool the driver refuses to set up (destroyed, not leaked), and eight threads launching at once;
and the CPython binding, rebuilt with the sanitizers in place of the wheel's extension, takes every kind
of bad Python call (a DLPack pointer and byte offset past 64 bits among them). Any finding fails
the run (-fno-sanitize-recover). Skipped where no C compiler with the sanitizer runtimes is installed."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aotpack import build, runtime
from aotpack.pipeline import native

from .helpers import install_wheel

HERE = Path(__file__).parent
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]


def sanitizing_compiler(tmp_path: Path) -> str | None:
    for cc in ("gcc", "clang"):
        if shutil.which(cc) is None:
            continue
        probe = tmp_path / "probe.c"
        probe.write_text("int main(void) { return 0; }\n")
        done = subprocess.run([cc, *FLAGS, str(probe), "-o", str(tmp_path / "probe")], capture_output=True)
        if done.returncode == 0:
            return cc
    return None


@pytest.fixture(scope="module")
def sanitized(small_recipe, tmp_path_factory):
    """(compiler, the small recipe's generated sources, its wheel), or a skip."""
    tmp = tmp_path_factory.mktemp("sanitize")
    cc = sanitizing_compiler(tmp)
    if cc is None:
        pytest.skip("no C compiler with AddressSanitizer and UBSan runtimes (apt install gcc)")
    work = tmp / "build"
    wheel = build(small_recipe, tmp / "dist", jobs=2, keep_build_dir=work, use_cache=False).wheel
    return cc, work, wheel


def test_the_runtime_and_generated_code_are_clean_under_asan_and_ubsan(sanitized, fake_driver, tmp_path):
    cc, work, _ = sanitized
    program = tmp_path / "sanitized"
    sources = [
        HERE / "sanitize_main.c",
        work / "kernels.c",
        work / "capi.c",
        *(work / n for n in runtime.RUNTIME_SOURCES),
    ]
    subprocess.run([cc, *FLAGS, f"-I{work}", *map(str, sources), *native.SYSTEM_LIBRARIES, "-o", str(program)],
                   check=True, capture_output=True)  # fmt: skip
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver), "FAKE_CUDA_LOG": str(tmp_path / "cuda.log"),
           "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}  # fmt: skip
    run = subprocess.run([str(program)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "runtime error" not in run.stderr and "Sanitizer" not in run.stderr, run.stderr
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    assert lines["good"] == "add/T=fp32,BLOCK=256,w4,s1/sm_90a/DDDD"
    assert lines["fp16 with fp32"] == "argument y_ptr: expected dtype fp32 (the dtype of x_ptr), got fp16"
    assert lines["too small"].startswith("argument y_ptr is too small")
    # a misaligned x gives up x alone; raw pointers with an odd n: the JIT's class of that call
    assert lines["misaligned"].endswith("/_DDD") and lines["raw pointers"].endswith("/DDD_")
    assert lines["empty"].startswith("add(): grid dimension 0") and lines["negative"].startswith("add(): grid")
    assert lines["span past int64"] == "argument x_ptr: its shape and strides span more than 64-bit sizes"
    assert lines["nine dimensions"] == "argument x_ptr has 9 dimensions; at most 8 are supported"
    assert lines["threads"] == "done"
    # sizes past 64 bits are refused as bad values (a ValueError from Python), naming what to check
    assert lines["clusters"] == "launched"
    assert lines["clusters past int64"] == (
        "bad value: add(): grid dimension 0 is 4611686018427387904 clusters of 2 blocks, above the CUDA limit of "
        "2147483647 blocks; check the arguments"
    )
    assert lines["block past int64"] == (
        "bad value: add(): block 2097152x2097152x4194304 is not 1 to 1024 threads; check the arguments"
    )
    assert lines["shared past int64"].startswith(
        "bad value: add(): 9223372036854775807 bytes of dynamic shared memory (beside 1024 static) is over the"
    )
    assert lines["scratch pool refused"] == (
        "other error: creating a scratch memory pool on device 0 (Fake GPU 0) failed: CUDA_ERROR_INVALID_VALUE (1): "
        "fake driver error"
    )
    assert lines["scratch"] == "launched"
    for case in ("scratch past 64 bits", "scratch sum past 64 bits"):
        assert lines[case].startswith("bad value: add(): add/") and lines[case].endswith(
            "bytes of scratch memory per block, for 2147483647x65535x65535 blocks: more than 64-bit sizes hold; "
            "check the arguments (the grid)"
        ), lines[case]
    assert lines["descriptor stride past int64"] == (
        "bad value: argument x_ptr: its shape and strides span more than 64-bit sizes in bytes (stride "
        "4611686018427387904 of dimension 0, 4-byte elements)"
    )
    assert lines["descriptor span past int64"] == (
        "bad value: argument x_ptr: its shape and strides span more than 64-bit sizes in bytes (stride "
        "2199023255552 of dimension 0, 4-byte elements)"
    )
    assert lines["descriptor size past i32"] == (
        "bad value: argument x_ptr: a tensor descriptor needs sizes up to 2^31-1, got 2147483648 in dimension 1"
    )
    log = (tmp_path / "cuda.log").read_text().splitlines()
    launches = [line for line in log if line.startswith("launch")]
    assert len(launches) == 3 + 2 + 8 * 200  # good, misaligned, raw pointers, clusters, scratch, and the threads
    assert any(line.startswith("launchex add_kernel grid=32,1,1 block=128 ") for line in launches)  # 16 clusters of 2
    # the one launch with scratch: 4 programs of 256 bytes, and 128 to align them; none for the refused ones
    assert [line.split(" pool=")[0] for line in log if line.startswith("alloc")] == ["alloc 1152"]
    # the pool whose release threshold the driver refused is destroyed; the next launch makes another
    assert [line for line in log if line.startswith("pool")] == [
        "pool 0x5010 type=1 location=1,0", "pool 0x5010 attr 4=ffffffffffffffff", "pool 0x5010 destroyed",
        "pool 0x5020 type=1 location=1,0", "pool 0x5020 attr 4=ffffffffffffffff",
    ]  # fmt: skip


def test_threads_launching_at_once_race_on_nothing_under_tsan(sanitized, fake_driver, tmp_path):
    """Eight threads launch with changing keys: the lazy loads, the kernels' last picks (lock-free)
    and the device state are free of data races under ThreadSanitizer."""
    cc, work, _ = sanitized
    program = tmp_path / "tsan"
    sources = [
        HERE / "sanitize_main.c",
        work / "kernels.c",
        work / "capi.c",
        *(work / n for n in runtime.RUNTIME_SOURCES),
    ]
    done = subprocess.run([cc, "-fsanitize=thread", "-g", "-O1", f"-I{work}", *map(str, sources),
                           *native.SYSTEM_LIBRARIES, "-o", str(program)], capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"no ThreadSanitizer runtime here: {done.stderr[-300:]}")
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver), "TSAN_OPTIONS": "halt_on_error=1:report_signal_unsafe=0"}
    run = subprocess.run([str(program)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "ThreadSanitizer" not in run.stderr, run.stderr[-4000:]
    assert "threads: done" in run.stdout


def test_the_c_api_reads_no_uninitialized_memory_under_valgrind(sanitized, tmp_path):
    """A call's argument slots are not cleared (aot_call_start): memcheck runs the same program uninstrumented
    and finds no read of uninitialized memory on any path it takes. Skipped without valgrind."""
    cc, work, _ = sanitized
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt install valgrind)")
    program = tmp_path / "plain"
    sources = [
        HERE / "sanitize_main.c",
        work / "kernels.c",
        work / "capi.c",
        *(work / n for n in runtime.RUNTIME_SOURCES),
    ]
    subprocess.run([cc, "-O1", "-g", f"-I{work}", *map(str, sources), *native.SYSTEM_LIBRARIES, "-o", str(program)],
                   check=True, capture_output=True)  # fmt: skip
    # the fake driver too, by the same compiler for a plain x86-64 (zig's build targets this CPU, whose AVX-512
    # instructions valgrind cannot decode)
    driver = tmp_path / "driver"
    driver.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(driver / "libcuda.so.1"), str(HERE / "fake_libcuda.c"),
                    "-lpthread"], check=True, capture_output=True)  # fmt: skip
    env = {**os.environ, "LD_LIBRARY_PATH": str(driver), "FAKE_CUDA_LOG": str(tmp_path / "cuda.log")}
    run = subprocess.run(["valgrind", "--error-exitcode=9", "--track-origins=yes", str(program)], capture_output=True,
                         text=True, env=env, timeout=900)  # fmt: skip
    assert run.returncode == 0 and "ERROR SUMMARY: 0 errors" in run.stderr, run.stderr[-3000:]
    assert "threads: done" in run.stdout


BAD_CALLS = """
import ctypes

import small_kernels as k

class Array:
    def __init__(self, ptr, n, typestr="<f4", shape=None, strides=None, data=None):
        self.__cuda_array_interface__ = {"data": data if data is not None else (ptr, False), "shape": shape or (n,),
                                         "typestr": typestr, "strides": strides, "version": 3}

class Weird:
    def __dlpack__(self):
        return "not a capsule"

class DLTensor(ctypes.Structure):  # dlpack.h's, one fp32 dimension on CUDA device 0
    _fields_ = [("data", ctypes.c_uint64), ("device", ctypes.c_int32 * 2), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]

class Offset:  # a DLPack producer whose data pointer and byte offset are the test's
    def __init__(self, data, byte_offset):
        self.shape = (ctypes.c_int64 * 1)(4096)
        self.tensor = DLTensor(data, (2, 0), 1, 2, 32, 1, self.shape, None, byte_offset)

    def __dlpack__(self):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.tensor), b"dltensor", None)

A = 0x100000000
x = Array(A, 4096)
calls = [
    lambda: k.add(x, x, x), lambda: k.add(x, x), lambda: k.add(*[x] * 70), lambda: k.add(x, x, x, bogus=1),
    lambda: k.add(x, x, x, n_elements="many"), lambda: k.add(x, x, x, n_elements=1 << 80),
    lambda: k.add(x, Array(A, 4096, "<i8"), x), lambda: k.add(x, Array(A, 10, shape=(2, 3, 4, 5, 6, 7, 8, 9, 10)), x),
    lambda: k.add(x, Array(A, 1, shape=(1 << 62, 8), strides=(32, 4)), x), lambda: k.add(x, Weird(), x),
    lambda: k.add(x, Array(A, 4, data=("x", False)), x), lambda: k.add(x, Array(A, 4, shape="abc"), x),
    lambda: k.add(x, -1, x), lambda: k.add(x, x, x, stream=object()), lambda: k.add(x, x, x, variant=7),
    lambda: k.add(x, x, x, variant="a" * 5000), lambda: k.add.select(n_elements=1 << 70, T="fp32"),
    lambda: k.add(x, x, x, n_elements=0), lambda: k.add(x, Offset(A, 256), x),
    lambda: k.add(x, Offset(0xFFFFFFFFFFFFF000, 0x2000), x), lambda: k.autotune(True, per="key") or k.add(x, x, x),
]
for call in calls:
    try:
        call()
        print("ok")
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}")
"""


def test_the_python_binding_is_clean_under_asan_and_ubsan(sanitized, fake_driver, tmp_path):
    """The wheel's extension, rebuilt from its generated sources with the sanitizers (libasan preloaded
    into Python), takes good and bad calls of every kind; leaks are not checked (CPython keeps memory
    to the end by design)."""
    cc, work, wheel = sanitized
    site = install_wheel(wheel, tmp_path / "site")
    extension = next((site / "small_kernels").glob("_native*.so"))
    sources = [work / name for name in ("kernels.c", "module.c", *runtime.RUNTIME_SOURCES, *runtime.BINDING_SOURCES)]
    subprocess.run([cc, *FLAGS, "-shared", "-fPIC", f"-DPy_LIMITED_API={native.LIMITED_API}", f"-I{work}",
                    *(f"-I{work / d}" for d in native.python_include(work)), *map(str, sources),
                    *native.SYSTEM_LIBRARIES, "-o", str(extension)],
                   check=True, capture_output=True)  # fmt: skip
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env = {**os.environ, "PYTHONPATH": str(site), "LD_LIBRARY_PATH": str(fake_driver), "LD_PRELOAD": libasan,
           "FAKE_CUDA_LOG": str(tmp_path / "cuda.log"), "ASAN_OPTIONS": "detect_leaks=0",
           "UBSAN_OPTIONS": "print_stacktrace=1"}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(BAD_CALLS)], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0 and "runtime error" not in run.stderr and "Sanitizer" not in run.stderr, run.stderr
    out = run.stdout.splitlines()
    assert "libasan" in subprocess.run(["ldd", str(extension)], capture_output=True, text=True).stdout
    T, V = "TypeError", "ValueError"
    assert [line.split(":")[0] for line in out] == [
        "ok",
        T,
        T,
        T,
        T,
        V,
        T,
        V,
        V,
        T,
        T,
        T,
        V,
        T,
        T,
        V,
        T,
        V,
        "ok",
        V,
        "ok",
    ]
    # a DLPack address past 64 bits is refused before anything reads it, not wrapped to a small one
    assert out[-2] == (
        "ValueError: argument y_ptr: its DLPack data pointer 0xfffffffffffff000 plus byte offset 8192 is past 64-bit "
        "addresses"
    )
