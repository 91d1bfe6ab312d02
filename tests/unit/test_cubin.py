"""The registers a cubin records for its kernels (``.nv.info`` attribute records), read from ELF files made here:
a real cubin's are checked against cuobjdump in tests/integration/test_blackwell.py."""

import struct

import pytest

from aotpack.backends.triton.cubin import EIATTR_REGCOUNT, EIFMT_SVAL, registers

pytestmark = pytest.mark.unit

EIFMT_HVAL = 0x03  # a record holding its 2-byte value inline


def record(form: int, attribute: int, value: bytes = b"", inline: int = 0) -> bytes:
    return struct.pack("<BBH", form, attribute, len(value) if form == EIFMT_SVAL else inline) + value


def regcount(symbol: int, count: int) -> bytes:
    return record(EIFMT_SVAL, EIATTR_REGCOUNT, struct.pack("<II", symbol, count))


def elf(symbols: list[str], sections: dict[str, bytes]) -> bytes:
    """An ELF64 little-endian object (EM_CUDA) with these symbols (.symtab, .strtab) and sections."""
    strtab = b"\0" + b"".join(name.encode() + b"\0" for name in symbols)
    offsets = [1 + sum(len(n) + 1 for n in symbols[:i]) for i in range(len(symbols))]
    symtab = bytes(24) + b"".join(struct.pack("<IBBHQQ", off, 0x12, 0, 0, 0, 0) for off in offsets)
    named = [(".shstrtab", 3, 0, 0, b""), (".strtab", 3, 0, 0, strtab), (".symtab", 2, 2, 24, symtab)]
    named += [(name, 0x70000000, 0, 0, data) for name, data in sections.items()]
    shstrtab = b"\0" + b"".join(n.encode() + b"\0" for n, *_ in named)
    named[0] = (".shstrtab", 3, 0, 0, shstrtab)
    body, headers, at = b"", [bytes(64)], 64
    for name, kind, link, entsize, data in named:
        headers.append(struct.pack("<IIQQQQIIQQ", shstrtab.index(name.encode() + b"\0"), kind, 0, 0, at + len(body),
                                   len(data), link, 0, 1, entsize))  # fmt: skip
        body += data
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, 64 + len(body), 0, 64, 0, 0, 64,
                                 len(headers), 1)  # fmt: skip
    return header + body + b"".join(headers)


def test_the_registers_of_each_kernel_are_read_from_its_record():
    info = record(EIFMT_HVAL, 0x1B, inline=7) + regcount(1, 40) + record(EIFMT_SVAL, 0x23, bytes(12)) + regcount(2, 168)
    image = elf(["other_kernel", "kern"], {".nv.info": info})
    assert registers(image, "kern") == 168 and registers(image, "other_kernel") == 40
    assert registers(image, "missing") is None
    apart = elf(["kern"], {".nv.info": record(EIFMT_HVAL, 0x1B, inline=1), ".nv.info.kern": regcount(1, 255)})
    assert registers(apart, "kern") == 255  # a kernel's own section holds its record (other ptxas releases)


@pytest.mark.parametrize(
    "info",
    [
        regcount(9, 32),  # a symbol the table lacks
        regcount(1, 32)[:-3],  # a record cut short
        record(EIFMT_SVAL, EIATTR_REGCOUNT, bytes(4)),  # too small to hold (symbol, count)
        record(EIFMT_SVAL, 0x23, b"\xff" * 2) + b"\x04",  # the section ends inside a header
    ],
)
def test_a_record_that_does_not_say_gives_none(info):
    assert registers(elf(["kern"], {".nv.info": info}), "kern") is None


@pytest.mark.parametrize("image", [b"", b"\x7fELF", b"\x7fELF" + bytes(60), b"MZ" + bytes(200)])
def test_what_is_no_cubin_gives_none(image):
    assert registers(image, "kern") is None
    whole = elf(["kern"], {".nv.info": regcount(1, 64)})
    assert registers(whole, "kern") == 64 and registers(whole[: len(whole) // 2], "kern") is None
    shoff = struct.unpack_from("<Q", whole, 0x28)[0]
    info = shoff + 4 * 64  # .nv.info's section header: type at +4, flags at +8, offset at +24, size at +32
    for field, value in ((0x28, 1 << 63), (info + 24, (1 << 64) - 1), (info + 32, 1 << 40)):
        damaged = bytearray(whole)
        struct.pack_into("<Q", damaged, field, value)
        assert registers(bytes(damaged), "kern") is None
    for field, value, form in ((info + 4, 8, "<I"), (info + 8, 0x800, "<Q")):  # SHT_NOBITS; SHF_COMPRESSED
        damaged = bytearray(whole)
        struct.pack_into(form, damaged, field, value)
        if form == "<I":
            struct.pack_into("<Q", damaged, info + 32, 1 << 40)  # a terabyte the file does not hold
        assert registers(bytes(damaged), "kern") is None
