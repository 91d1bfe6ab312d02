"""What a compiled variant assumes of one argument: the states Triton's JIT keys an argument on, in its own
terms, as one closed vocabulary. A specialization class is one state per argument (``plan/classes.py``), spelled
one letter per argument (``spell``, and back: ``letters``), as class names, recorded rows and class-miss reports
write it. At the bottom of the house with the model that uses it: the recipe, the plan, the backends, record and
codegen speak it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

State = Literal["", "D", "1", "N"]

ANY: Final = ""  # nothing assumed
DIV16: Final = "D"  # divisible by 16 (an integer) or 16-byte aligned (a pointer)
DIVISOR: Final = 16  # what DIV16 divides by: Triton's divisibility specialization
ONE: Final = "1"  # equal to 1: folded into the code
NONE: Final = "N"  # None: folded too

# how a class name spells each state, one letter per argument (``DD_1``), and back
STATE_OF: Final[dict[str, State]] = {"D": DIV16, "1": ONE, "N": NONE, "_": ANY}
LETTER: Final[dict[str, str]] = {state: letter for letter, state in STATE_OF.items()}
# the states in the C runtime's order, with their names there (aot_spec_state: the build writes it, and the letters,
# into the generated aot_vocabulary.h, codegen/c.py)
RUNTIME_ORDER: Final[tuple[tuple[str, State], ...]] = (("ANY", ANY), ("DIV16", DIV16), ("ONE", ONE), ("NONE", NONE))
# what each letter says, for readers of a recipe (record writes the legend into the recipes it writes)
MEANING: Final[dict[State, str]] = {DIV16: "16-divisible or aligned", ONE: "equal to 1", NONE: "None", ANY: "nothing"}


def legend() -> str:
    """The letters and what each says: ``D = 16-divisible or aligned, 1 = equal to 1, ...``."""
    return ", ".join(f"{LETTER[state]} = {meaning}" for state, meaning in MEANING.items())


def spell(states: Iterable[str]) -> str:
    """States as letters, one per argument (``("D", "", "1")`` is ``D_1``)."""
    return "".join(LETTER[state] for state in states)


def letters(text: str, names: Sequence[str], which: str = "argument") -> tuple[State, ...] | str:
    """A class spelled one letter per argument named (``names``: ``which`` says what they are), back into its
    states; or why it is not one."""
    if len(text) != len(names) or any(c not in STATE_OF for c in text):
        *most, last = STATE_OF
        return (f"expected one letter per {which} ({len(names)}: {', '.join(names) or 'none'}), each "
                f"{', '.join(most)} or {last}")  # fmt: skip
    return tuple(STATE_OF[c] for c in text)


@dataclass(frozen=True, kw_only=True)
class SpecRule:
    """How a kernel's code specializes: its backend states it (``Kernel.specialization``, set by the backend's
    recipe reader), so that the plan asks what a class may be, never which backend builds it."""

    jit: bool  # per argument, on what Triton's JIT keys; False: on the recipe's hints only
    recorded: bool  # the classes a recording saw, and their floors (a kernel launched as Triton launches it)
    by_level: bool  # a class is named by its hint level and which optional arguments are None (CUDA's ids)
