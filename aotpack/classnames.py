"""How a kernel's specialization classes are named: one letter per argument a class can give more than one state
(``keyed``; the letters: states.py), as ``aotpack plan``, ``select()``, ids, a recipe's ``classes:`` and class-miss
reports spell them, and which states a class may give each argument (``allowed``). Below the recipe reader, which
reads ``classes:`` with it, and the plan (plan/classes.py), which builds the classes.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import Arg, Kernel
from .states import ANY, DIV16, LETTER, NONE, ONE, letters
from .states import spell as spelled


def hints_only(kernel: Kernel) -> bool:
    """Only the hint levels are built: the code does not specialize as the JIT does, or ``specialize: none``."""
    return not kernel.specialization.jit or kernel.specialize == "none"


def hint_state(arg: Arg) -> str:
    """The state a hint on the argument assumes (``:1``, or ``:16``)."""
    return ONE if arg.hint == 1 else DIV16


def allowed(kernel: Kernel, arg: Arg) -> tuple[str, ...]:
    """The states a class may give the argument: what the kernel's Triton release keys it on (and a hint's
    state; a required hint's only), with None where the argument is optional. Hints only (CUDA kernels,
    ``specialize: none``): the hint or nothing."""
    if hints_only(kernel) or arg.launch_only or arg.descriptor or arg.kind not in ("tensor", "int"):
        states: tuple[str, ...] = (hint_state(arg), ANY) if arg.hint is not None else (ANY,)
    elif arg.hint is not None and not arg.required:  # what the JIT keys, and the hint even where it keys nothing
        states = tuple(s for s in (ONE, DIV16, ANY) if s in arg.jit_states or s == hint_state(arg))
    else:
        states = arg.jit_states
    if arg.required and arg.hint is not None:
        states = (hint_state(arg),)
    return states + ((NONE,) if arg.optional else ())


def keyed(kernel: Kernel) -> list[Arg]:
    """The arguments a class name spells, in order: those a class can give more than one state."""
    return [a for a in kernel.args if len(allowed(kernel, a)) > 1]


def spell(kernel: Kernel, states: Mapping[str, str]) -> str:
    """A class's name: one letter per keyed argument (``plain`` when none is)."""
    return spelled([states.get(a.name, ANY) for a in keyed(kernel)]) or "plain"


def read(kernel: Kernel, name: str) -> tuple[str, ...] | str:
    """A class name back into one state per argument, or why it is not one of this kernel's."""
    args = keyed(kernel)
    states = letters(name, [a.name for a in args], "argument the JIT keys")
    if isinstance(states, str):
        return states
    given = {a.name: state for a, state in zip(args, states, strict=True)}
    out = []
    for arg in kernel.args:
        can = allowed(kernel, arg)
        state = given.get(arg.name, can[0])
        if state not in can:
            return f"argument {arg.name} cannot be {LETTER[state]!r} (it can be {', '.join(LETTER[s] for s in can)})"
        out.append(state)
    return tuple(out)


def recorded_name(kernel: Kernel, states: tuple[str, ...]) -> str:
    """A recorded class's name: one letter per argument the JIT keys (or that may be None)."""
    return spelled([s for a, s in zip(kernel.args, states, strict=True) if a in lettered(kernel)]) or "plain"


def lettered(kernel: Kernel) -> list[Arg]:
    """The arguments a class name of the kernel has a letter for (the runtime spells a call's JIT class so)."""
    how = kernel.specialization
    if how.recorded:
        return [a for a in kernel.args if len(a.jit_states) > 1 or a.optional]
    return [a for a in kernel.args if a.optional] if how.by_level else keyed(kernel)
