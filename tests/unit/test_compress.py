"""Kernel images as the wheel stores them: solid LZ4 blocks per kernel and target, each image placed
with its CRC-32 (the C runtime's decoder is tested on a built library in tests/integration/test_images.py)."""

import os
import random
import zlib

import pytest

from aotpack.codegen import compress


def cubin_like(seed: int, size: int) -> bytes:
    """Related images: a shared body with a few bytes changed, as variants of one kernel are."""
    rng = random.Random(seed)
    body = bytearray(random.Random(0).randbytes(size // 4) * 4)
    for _ in range(20):
        body[rng.randrange(size)] = rng.randrange(256)
    return bytes(body)


def test_every_image_comes_back_with_its_checksum():
    groups = [[cubin_like(i, 30_000) for i in range(9)], [b""], [os.urandom(200_000)], [b"x" * 10, b"y"]]
    blocks, placements = compress.pack(groups)
    flat = [image for group in groups for image in group]
    assert len(placements) == len(flat)
    for image, where in zip(flat, placements, strict=True):
        assert where.size == len(image) and where.crc32 == zlib.crc32(image)
        assert compress.unpack(blocks[where.block], where) == image
    # the 9 related images share blocks of at most BLOCK_BYTES, and compress well together
    first = {p.block for p in placements[:9]}
    assert len(first) == 3  # 4 + 4 + 1 images of 30 kB in 128 KiB blocks
    assert all(blocks[b].raw_size <= compress.BLOCK_BYTES for b in first)
    assert sum(len(blocks[b].data) for b in first) < 9 * 30_000 / 4
    # an image larger than a block gets one of its own; groups never share a block
    assert blocks[placements[10].block].raw_size == 200_000
    assert len({p.block for p in placements[9:10]} & first) == 0
    assert placements[11].block == placements[12].block != placements[10].block


def test_packing_is_deterministic():
    groups = [[cubin_like(i, 20_000) for i in range(5)]]
    assert compress.pack(groups) == compress.pack(groups)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damage_is_detected(damage):
    blocks, placements = compress.pack([[cubin_like(1, 50_000), cubin_like(2, 50_000)]])
    block = blocks[0]
    data = bytearray(block.data)
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    else:
        del data[len(data) // 2 :]
    with pytest.raises(ValueError, match="damaged"):
        for where in placements:
            compress.unpack(compress.Block(bytes(data), block.raw_size), where)


def test_version_names_the_format_and_level():
    assert compress.version().startswith("LZ4 block ") and f"HC level {compress.LEVEL}" in compress.version()
