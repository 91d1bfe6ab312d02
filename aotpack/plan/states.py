"""What a compiled variant assumes of one argument: the states Triton's JIT keys an argument on, in its own
terms, as one closed vocabulary. A specialization class is one state per argument (``plan/classes.py``)."""

from __future__ import annotations

from typing import Final, Literal

State = Literal["", "D", "1", "N"]

ANY: Final = ""  # nothing assumed
DIV16: Final = "D"  # divisible by 16 (an integer) or 16-byte aligned (a pointer)
ONE: Final = "1"  # equal to 1: folded into the code
NONE: Final = "N"  # None: folded too
