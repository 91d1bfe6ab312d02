import os
import random

import pytest

from aotpack import compress


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"a",
        b"abcdef" * 1000,
        bytes(70_000),
        os.urandom(5000),
        bytes(random.Random(7).choice(b"\x00\x01\xff\x10") for _ in range(100_000)),
        b"header" + os.urandom(300) + b"header" + os.urandom(300) * 3,
    ],
)
def test_round_trip(data):
    packed = compress.compress(data)
    assert compress.decompress(packed, len(data)) == data


def test_cubin_like_data_shrinks():
    data = (b"\x00" * 64 + b"\x13\x37" * 40 + os.urandom(24)) * 500
    assert len(compress.compress(data)) < len(data) / 2


@pytest.mark.parametrize(
    ("packed", "size", "message"),
    [
        (b"\x05abc", 5, "literal run past the end"),
        (b"\x01a\x04\x05", 5, "match out of range"),  # offset 5 reaches before the start
        (b"\x80", 3, "truncated image"),
    ],
)
def test_damage_is_detected(packed, size, message):
    with pytest.raises(ValueError, match=message):
        compress.decompress(packed, size)
