"""The runtime's LZ4 decoder and image check, as the wheel's C library ships them: the decoder called
through ctypes on streams made by lz4 (the reference) and on damaged ones; a damaged image in an
installed package refused by its CRC-32 on first load, with a message."""

import ctypes
import os
import random
import shutil

import lz4.block
import pytest

from .helpers import run_on_fake_driver


@pytest.fixture(scope="module")
def decode(installed):
    lib = ctypes.CDLL(str(installed / "small_kernels" / "libsmall_kernels.so"))
    fn = lib.aot_lz4_decode
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int

    def run(src: bytes, want: int) -> bytes | None:
        out = ctypes.create_string_buffer(want + 1)
        return out.raw[:want] if fn(src, len(src), out, want) == 0 else None

    return run


def samples() -> list[bytes]:
    rng = random.Random(5)
    return [b"", b"a", b"abcd" * 3, bytes(70_000), os.urandom(3000), rng.randbytes(500) * 300,
            bytes(rng.choice(b"\x00\x01\xff") for _ in range(50_000)),
            b"head" + os.urandom(100) + b"head" * 100 + os.urandom(20_000)]  # fmt: skip


@pytest.mark.parametrize("mode", ["default", "high_compression"])
def test_decodes_what_lz4_encodes(decode, mode):
    for data in samples():
        packed = lz4.block.compress(data, mode=mode, store_size=False)
        assert decode(packed, len(data)) == data
        if data:
            assert decode(packed, len(data) // 3) == data[: len(data) // 3]  # a prefix: up to an image's end
            assert decode(packed, len(data) + 1) is None  # the block ends short


def test_damaged_streams_are_refused_not_overrun(decode):
    data = random.Random(1).randbytes(400) * 50
    packed = lz4.block.compress(data, mode="high_compression", store_size=False)
    rng = random.Random(2)
    refused = 0
    for _ in range(2000):
        bad = bytearray(packed)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        cut = bytes(bad[: rng.randrange(len(bad) + 1)]) if rng.random() < 0.3 else bytes(bad)
        out = decode(cut, len(data))  # never reads or writes out of bounds (the sanitizer test runs the same C)
        refused += out is None
    assert refused > 100
    assert decode(b"\x1f" + b"\x00" * 17, 100) is None  # offset 0
    assert decode(b"\x10a\x05\x00", 100) is None  # a match reaching before the start


def test_a_damaged_image_is_refused_on_first_load(installed, fake_driver, tmp_path):
    """Flip a byte inside an image block of the installed library: the variant's first load fails with a
    message naming it, and nothing reaches the driver."""
    site = tmp_path / "site"
    shutil.copytree(installed, site)
    library = site / "small_kernels" / "libsmall_kernels.so"
    data = bytearray(library.read_bytes())
    code = """
import small_kernels as k, zlib
m = k.__aotpack__["kernels"]["add"]
for v in m["variants"]:
    try:
        image = k._native._image("add", v["id"])
        print("ok", v["id"], zlib.crc32(image))
    except k.CudaError as e:
        print("refused", e)
"""
    before, _ = run_on_fake_driver(code, site, fake_driver, tmp_path / "a.log")
    assert all(line.startswith("ok") for line in before) and len(before) == 48
    # the first block's LZ4 data: find the start of the first image (ELF magic as the first literals)
    start = data.find(b"\x7fELF\x02\x01\x01", 1)  # past the library's own header
    assert start > 0
    data[start + 200] ^= 0x55
    library.write_bytes(bytes(data))
    after, _ = run_on_fake_driver(code, site, fake_driver, tmp_path / "b.log")
    refused = [line for line in after if line.startswith("refused")]
    assert refused and all("its kernel image is damaged (CRC-32 mismatch); reinstall the package" in r for r in refused)
    assert len(refused) < len(after), "only the damaged block's images"
