"""What a compiled variant assumes of one argument: the states Triton's JIT keys an argument on, in its own
terms, as one closed vocabulary. A specialization class is one state per argument (``plan/classes.py``). At
the bottom of the house with the model that uses it: the recipe, the plan, the backends and codegen speak it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

State = Literal["", "D", "1", "N"]

ANY: Final = ""  # nothing assumed
DIV16: Final = "D"  # divisible by 16 (an integer) or 16-byte aligned (a pointer)
ONE: Final = "1"  # equal to 1: folded into the code
NONE: Final = "N"  # None: folded too

# how a class name spells each state, one letter per argument (``DD_1``), and back
STATE_OF: Final[dict[str, State]] = {"D": DIV16, "1": ONE, "N": NONE, "_": ANY}
LETTER: Final[dict[str, str]] = {state: letter for letter, state in STATE_OF.items()}


@dataclass(frozen=True, kw_only=True)
class SpecRule:
    """How a kernel's code specializes: its backend states it (``Kernel.specialization``, set by the backend's
    recipe reader), so that the plan asks what a class may be, never which backend builds it."""

    jit: bool  # per argument, on what Triton's JIT keys; False: on the recipe's hints only
    recorded: bool  # the classes a recording saw, and their floors (a kernel launched as Triton launches it)
    by_level: bool  # a class is named by its hint level and which optional arguments are None (CUDA's ids)
