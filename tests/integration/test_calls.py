"""Calling convention and scalars of a real build (tests/fixtures/scalars.yaml): Python's argument
order with interleaved defaults, every scalar type packed as Triton packs it (bytes read back from
the fake driver), defaults of every type, stubs that parse and type-check, and the C API's order."""

import ast
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aotpack import build

from .helpers import install_wheel, run_on_fake_driver
from .machines import Machine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OUT = 0x100000000  # a made-up device address, 16-byte aligned

PRELUDE = f"""
import scalar_kernels as k

class Array:
    def __init__(self, ptr, n, strides=None):
        self.__cuda_array_interface__ = {{"data": (ptr, False), "shape": (n,), "typestr": "<f8",
                                         "strides": strides, "version": 3}}
out = Array({OUT}, 16)
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    wheel = build(FIXTURES / "scalars.yaml", tmp_path_factory.mktemp("dist"), jobs=2).wheel
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def site_on(site, machine, tmp_path_factory) -> Path:
    """The same recipe's wheel for the machine (aarch64's C ABI packs the same bytes), installed for it."""
    return machine.site(FIXTURES / "scalars.yaml", lambda: site, tmp_path_factory)


def call(code: str, site: Path, fake_driver: "Path | Machine", tmp_path: Path) -> tuple[list[str], list[list[str]]]:
    """stdout lines, and per launch the fake driver's packed parameters: (offsets, bytes)."""
    out, log = run_on_fake_driver(PRELUDE + textwrap.dedent(code), site, fake_driver, tmp_path / "cuda.log")
    params = [line.split()[1:] for line in log if line.startswith("params")]
    return out, params


def packed(*values: tuple[str, object]) -> str:
    """The bytes the runtime should pass: each value at its natural alignment, as struct packs it."""
    data = b""
    for fmt, value in values:
        size = struct.calcsize(fmt)
        data += b"\0" * (-len(data) % size) + struct.pack("<" + fmt, value)
    return data.hex()


def fp16(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def bf16_truncated(x: float) -> int:  # Triton's launcher truncates a float to bf16; aotpack does the same
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16


def test_required_arguments_first_then_defaults(site_on, machine, tmp_path):
    out, params = call(
        """
        print(k.scalars.select(out, 5, 9, 2.5))
        k.scalars(out, 5, 9, 2.5)                                   # defaults for everything else
        k.scalars(out, 5, 9, 2.5, 2, 32, 8, -0.1, 3.0, 0.25, False, 16)  # then positionally after them
        k.scalars(out, h_fp64=2.5, d_u64=2**64 - 1, b_i64=-2**63, e_fp16=65504.0, flag=0)
        """,
        site_on, machine, tmp_path,
    )  # fmt: skip
    # the JIT's class of this call: out aligned, out_stride == 1, n == numel(out) == 16 divisible by 16, the
    # other integers not (b_i64 and d_u64, which no tensor determines, are given up by a floor class)
    assert out == ["scalars/BLOCK=16,w1,s1/sm_90a/D1____D"]
    scratch = [("Q", 0), ("Q", 0)]  # Triton's two trailing scratch pointers
    # out_stride == 1 is folded into the code (as the JIT does) and not passed
    assert params[0][-1] == "bytes=" + packed(
        ("Q", OUT), ("i", 3), ("q", 5), ("I", 7), ("Q", 9), ("H", fp16(1.0)), ("H", bf16_truncated(1.5)),
        ("f", 1e-6), ("d", 2.5), ("I", 1), ("i", 16), *scratch,
    )  # fmt: skip
    # out_stride given as 2: passed (a less specialized class), a_i32 = 32 after it
    assert params[1][-1] == "bytes=" + packed(
        ("Q", OUT), ("i", 2), ("i", 32), ("q", 5), ("I", 8), ("Q", 9), ("H", fp16(-0.1)), ("H", bf16_truncated(3.0)),
        ("f", 0.25), ("d", 2.5), ("I", 0), ("i", 16), *scratch,
    )  # fmt: skip
    assert params[2][-1] == "bytes=" + packed(
        ("Q", OUT), ("i", 3), ("q", -(2**63)), ("I", 7), ("Q", 2**64 - 1), ("H", fp16(65504.0)),
        ("H", bf16_truncated(1.5)), ("f", 1e-6), ("d", 2.5), ("I", 0), ("i", 16), *scratch,
    )  # fmt: skip


def test_scalar_errors_name_the_argument(site_on, machine, tmp_path):
    out, _ = call(
        """
        for kwargs in ({"e_fp16": 70000.0}, {"flag": 2}, {"c_u32": -1}, {"a_i32": 2**31}, {"h_fp64": "x"},
                       {"flag": "yes"}, {"nope": 1}):
            try:
                k.scalars(out, 5, 9, **{"h_fp64": 2.5, **kwargs})
                print("no error")
            except (TypeError, ValueError) as e:
                print(type(e).__name__ + ": " + str(e))
        try:
            k.scalars(out, 5)
        except TypeError as e:
            print("TypeError: " + str(e))
        """,
        site_on, machine, tmp_path,
    )  # fmt: skip
    assert out == [
        "ValueError: argument e_fp16 = 70000 does not fit in fp16",
        "ValueError: argument flag = 2 is not a boolean",
        "ValueError: argument c_u32 = -1 does not fit in u32",
        "ValueError: argument a_i32 = 2147483648 does not fit in i32",
        "TypeError: argument h_fp64: expected a float, got str",
        "TypeError: argument flag: expected a bool, got str",
        "TypeError: scalars() got an unexpected keyword argument 'nope'",
        "TypeError: scalars() missing required argument 'd_u64'",
    ]


def test_stubs_docs_and_c_api_follow_the_calling_order(site, fake_driver, tmp_path):
    stub = (site / "scalar_kernels" / "__init__.pyi").read_text()
    ast.parse(stub)  # valid Python: no required parameter after one with a default
    call_line = next(line for line in stub.splitlines() if "def __call__" in line)
    names = re.findall(r"(\w+): ", call_line.split("(self, ")[1])
    assert names[:4] == ["out_ptr", "b_i64", "d_u64", "h_fp64"]
    assert "flag: Optional[bool] = None" in call_line and "e_fp16: Optional[float] = None" in call_line
    user = tmp_path / "user.py"
    user.write_text("import scalar_kernels as k\nk.scalars(0, 1, 2, 3.0, a_i32=4, flag=True)\nk.scalars(0, 1.5)\n")
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--strict", str(user)], capture_output=True, text=True,
                          env={"MYPYPATH": str(site), "PATH": ""}, cwd=tmp_path)  # fmt: skip
    # the good call type-checks; the bad one is missing arguments and passes a float for an int
    assert "user.py:2" not in mypy.stdout and "user.py:3" in mypy.stdout, mypy.stdout
    header = (site / "scalar_kernels" / "include" / "scalar_kernels.h").read_text()
    assert ("int scalar_kernels_scalars(void *stream, int device, scalar_kernels_tensor out_ptr, int64_t b_i64, "
            "uint64_t d_u64, double h_fp64, const int32_t *out_stride, const int32_t *a_i32, const uint32_t *c_u32, "
            "const float *e_fp16, const float *f_bf16, const float *g_fp32, const bool *flag, const int32_t *n, "
            "char *error, size_t error_size);") in header  # fmt: skip
    out, _ = call("import inspect\nprint(inspect.signature(k.scalars))\n"
                  "print(next(ln for ln in k.scalars.__doc__.splitlines() if ln.startswith('  out_ptr')))",
                  site, fake_driver, tmp_path)  # fmt: skip
    assert out[0].startswith("(out_ptr, b_i64, d_u64, h_fp64, out_stride=None, a_i32=None,")
    assert out[1] == "  out_ptr: pointer to fp64 (extent n)"


SUMMARY = '"""; import os; os.system("echo pwned")  # */ int evil; /* ??/ \\N{BULLET} \\x41 é'
DOC = '*/ int evil; /* """ ??/ back\\slash\nsecond line'


def test_recipe_text_arrives_as_data(site, fake_driver, tmp_path):
    out, _ = call("print(repr(k.__doc__.splitlines()[0]))\nprint(repr(k.scalars.__doc__.split('\\n\\n')[0]))",
                  site, fake_driver, tmp_path)  # fmt: skip
    assert out == [repr(SUMMARY), repr(DOC)]
    metadata = next((site).glob("scalar_kernels-*.dist-info")).joinpath("METADATA").read_text()
    assert f"Summary: {SUMMARY}\n" in metadata and "Requires-Dist" not in metadata
    header = (site / "scalar_kernels" / "include" / "scalar_kernels.h").read_text()
    assert "evil" not in header and "pwned" not in header
