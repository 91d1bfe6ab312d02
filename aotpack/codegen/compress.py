"""How kernel images are stored in the wheel: LZ4 blocks, a standard format (the LZ4 block format of
lz4/lz4's ``doc/lz4_Block_format.md``) whose decoder in the C runtime (``aot_lz4_decode``) is a few
bounds-checked lines, so that a wheel still needs nothing but the NVIDIA driver at run time.

Variants of one kernel and target differ in a few constants and instructions, so images are packed
solid: each block holds consecutive images of one kernel and target, up to ``BLOCK_BYTES`` (or one
image, when that is larger), compressed as one LZ4 block at high compression by ``lz4`` from PyPI.
On the demo recipe this is 3.8x on the line-info-free cubins where compressing each image alone is
2.5x, and the wheel's deflate finds another 1.2x in LZ4's uncoded literals. A variant's first load
decodes its block (at most ``BLOCK_BYTES`` plus one image: tens of microseconds) and checks the
image's CRC-32 before the driver sees it. zstd packs 1.4x tighter, but its decoder is thousands of
lines; the driver's compressed fatbins need no decoder of ours, but fatbinary from a CUDA toolkit at
build time, and they would reach the driver unchecked.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

BLOCK_BYTES = 128 * 1024  # raw bytes per block: the larger, the tighter and the slower a first load
LEVEL = 12  # LZ4-HC's highest level: the build pays once, the decoder's speed does not depend on it


@dataclass(frozen=True)
class Block:
    """Consecutive images, compressed together."""

    data: bytes  # the LZ4 block
    raw_size: int


@dataclass(frozen=True)
class Placement:
    """Where one image lies: its block, its offset and size in the block unpacked, its CRC-32."""

    block: int
    offset: int
    size: int
    crc32: int


def pack(images: Sequence[Sequence[bytes]]) -> tuple[tuple[Block, ...], tuple[Placement, ...]]:
    """Pack groups of related images (one group per kernel and target); blocks never span groups.
    Returns the blocks and, in the order given, where each image lies."""
    blocks: list[Block] = []
    placements: list[Placement] = []
    for group in images:
        pending: list[bytes] = []
        size = 0  # of the pending images: the next one's offset
        for image in group:
            if pending and size + len(image) > BLOCK_BYTES:
                blocks.append(_block(pending))
                pending, size = [], 0
            placements.append(Placement(len(blocks), size, len(image), zlib.crc32(image)))
            pending.append(image)
            size += len(image)
        if pending:
            blocks.append(_block(pending))
    return tuple(blocks), tuple(placements)


def _block(images: list[bytes]) -> Block:
    import lz4.block  # build-time only: the runtime has its own decoder

    raw = b"".join(images)
    data: bytes = lz4.block.compress(raw, mode="high_compression", compression=LEVEL, store_size=False)
    return Block(data, len(raw))


def unpack(block: Block, where: Placement) -> bytes:
    """The reference for the C runtime's path: decode the block, cut the image out, check its CRC-32;
    raises ValueError on damage."""
    import lz4.block

    try:
        raw: bytes = lz4.block.decompress(block.data, uncompressed_size=block.raw_size)
    except lz4.block.LZ4BlockError as e:
        raise ValueError(f"damaged block: {e}") from None
    image = raw[where.offset : where.offset + where.size]
    if len(raw) != block.raw_size or len(image) != where.size or zlib.crc32(image) != where.crc32:
        raise ValueError("damaged image: its CRC-32 does not match")
    return image


def version() -> str:
    """What made the blocks (it decides their bytes, so it is part of the toolchain)."""
    import lz4

    return f"LZ4 block {lz4.library_version_string()!s} HC level {LEVEL}, {BLOCK_BYTES // 1024} KiB blocks"
