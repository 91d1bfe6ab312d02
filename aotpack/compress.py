"""The compression of kernel images in the wheel: a small LZ77 format whose decoder (in the C
runtime, ``aot_decompress``) is a few bounds-checked lines, so that a wheel still needs nothing but
the NVIDIA driver at run time. Images are decompressed only when their variant is first loaded.

Format: repeated ``literal length, literal bytes, match length[, match offset]`` with lengths and
offsets as LEB128 varints; a match copies ``length`` bytes from ``offset`` bytes back (overlap
allowed); a match length of 0 has no offset. The stream ends when the output reaches its size.
"""

from __future__ import annotations

MIN_MATCH = 6
WINDOW = 1 << 16


def _varint(value: int, out: bytearray) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return


def compress(data: bytes) -> bytes:
    out = bytearray()
    table: dict[bytes, int] = {}
    n, i, literal_start = len(data), 0, 0
    view = memoryview(data)
    while i + MIN_MATCH <= n:
        prefix = data[i : i + MIN_MATCH]
        j = table.get(prefix)
        table[prefix] = i
        if j is None or i - j > WINDOW:
            i += 1
            continue
        length = MIN_MATCH
        step = 256
        while step >= 1:  # extend the match in strides, then byte by byte
            while (
                i + length + step <= n and view[j + length : j + length + step] == view[i + length : i + length + step]
            ):
                length += step
            step //= 16
        _varint(i - literal_start, out)
        out += data[literal_start:i]
        _varint(length, out)
        _varint(i - j, out)
        i += length
        literal_start = i
    _varint(n - literal_start, out)
    out += data[literal_start:]
    _varint(0, out)
    return bytes(out)


def decompress(data: bytes, size: int) -> bytes:
    """The reference decoder (the C runtime has the same loop); raises ValueError on bad input."""
    out = bytearray()
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise ValueError("truncated image")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while len(out) < size:
        literals = varint()
        if pos + literals > len(data) or len(out) + literals > size:
            raise ValueError("literal run past the end")
        out += data[pos : pos + literals]
        pos += literals
        if len(out) == size:
            break
        length = varint()
        if length == 0:
            continue
        offset = varint()
        if offset == 0 or offset > len(out) or len(out) + length > size:
            raise ValueError("match out of range")
        for _ in range(length):
            out.append(out[-offset])
    return bytes(out)
