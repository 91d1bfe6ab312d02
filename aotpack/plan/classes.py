"""Which specialization classes a kernel's variants are compiled for.

Triton's JIT compiles a kernel once per class of call: per argument, an integer equal to 1 (folded
into the code), divisible by 16, or neither; a pointer 16-byte aligned or not; None (folded too).
Ahead of time there are no calls to wait for, so a Triton kernel gets:

1. **the classes of typical calls** (``aotpack/plan/typical.py``): the recipe's own expressions (argument
   defaults, extents) evaluated on calls that pass contiguous, 16-byte aligned tensors of the shapes the
   recipe implies, every size a multiple of 16, odd, or 8 modulo 16, each optional argument given or None.
   Equivalent recipes compute the same values for the same calls, so they get the same classes, whatever
   way they are written;
2. **one-argument relaxations** of the most common class (every size a multiple of 16; per choice of
   None arguments): a call that breaks one of its assumptions (a view at an odd offset, a strided
   row) loses that argument's state and keeps the others'. They are built for the configs the
   dispatcher can pick (its rows' and the default), since it picks the config first;
3. **floors**: the typical classes with every integer that no tensor determines given up (free and
   opaque ones: whatever their value, the rest holds); aligned pointers and nothing else; nothing at all
   (any call runs);
4. the recipe's ``classes:`` (for example what a deployed package reported as class misses).

A hint narrows nothing: ``:16``/``:1`` add their state where the JIT would key nothing; ``:16!`` is
assumed by every class, and calls that break it are refused. ``specialize: none`` builds the hint levels
(every hint assumed, then nothing); ``specialize: all`` every combination.

CUDA kernels have two levels: ``hinted`` (compiled with ``-DAOTPACK_HINTED=1``: every hint assumed)
and ``safe``. A class's ``level`` says the same of a Triton class (every hint holds, or not), so that
a dispatch row may name a level.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

from .. import classnames
from ..classnames import allowed, spell
from ..errors import RecipeError
from ..limits import MAX_CLASSES, MAX_ONE_INT_FLOORS
from ..model import Arg, Kernel
from ..states import ANY, DIV16, DIVISOR, NONE, ONE
from ..states import spell as spelled
from . import typical

Origin = Literal["typical", "recipe", "relaxed", "floor", "level"]


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A specialization class: per kernel argument, what its variants assume ("", "D", "1", "N")."""

    name: str
    states: tuple[str, ...]
    level: str  # "hinted" (every hint holds), "safe" (one does not), or "" for kernels without hints
    origin: Origin = "typical"

    @property
    def degree(self) -> int:
        return sum(s in (DIV16, ONE) for s in self.states)

    @property
    def picked_only(self) -> bool:
        """Built only for the configs the dispatcher can pick (a relaxation)."""
        return self.origin == "relaxed"

    def jit_terms(self, kernel: Kernel) -> dict[str, str]:
        """What the class assumes of each argument, as Triton's JIT keys name it."""
        return {a.name: s for a, s in zip(kernel.args, self.states, strict=True) if s}


# ---------------------------------------------------------------- the classes of typical calls


def _state(kernel: Kernel, arg: Arg, call: typical.Call) -> str:
    can = allowed(kernel, arg)
    if arg.name in call.none:
        return NONE
    if arg.pointer:
        state = DIV16
    elif arg.name in call.values:
        value = call.values[arg.name]
        state = ONE if value == 1 else DIV16 if value % DIVISOR == 0 else ANY
    else:
        state = ANY
    if state in can:
        return state
    return ANY if ANY in can else can[0]  # a required hint: every class assumes it


@dataclass(frozen=True)
class Typical:
    """The classes of a kernel's typical calls, per choice of None arguments (``groups``, each led by the call
    whose sizes are all multiples of 16 and free integers 1), and the same classes with every integer that
    no tensor determines given up (``known``: they hold for any value of those)."""

    groups: tuple[tuple[tuple[str, ...], ...], ...]
    known: tuple[tuple[str, ...], ...]


def typical_classes(kernel: Kernel) -> Typical:
    """The classes of the kernel's typical calls (module docstring), in a stable order."""
    groups: list[tuple[tuple[str, ...], ...]] = []
    known: dict[tuple[str, ...], None] = {}
    for group in typical.calls(kernel):
        found: dict[tuple[str, ...], None] = {}
        for call in group:
            states = tuple(_state(kernel, a, call) for a in kernel.args)
            found.setdefault(states, None)
            if call.unknown:
                given_up = tuple(ANY if a.name in call.unknown and ANY in allowed(kernel, a) else s
                                 for a, s in zip(kernel.args, states, strict=True))  # fmt: skip
                known.setdefault(given_up, None)
        groups.append(tuple(found))
    return Typical(groups=tuple(groups), known=tuple(known))


# ---------------------------------------------------------------- the classes


def _level(kernel: Kernel, states: tuple[str, ...]) -> str:
    hinted = [(a, s) for a, s in zip(kernel.args, states, strict=True) if a.hint is not None and not a.required]
    if not hinted:
        return ""
    return "hinted" if all(s == classnames.hint_state(a) for a, s in hinted) else "safe"


def _floors(kernel: Kernel) -> list[tuple[str, ...]]:
    out = []
    for none in typical.nones(kernel):
        for aligned in (True, False):
            states = []
            for a in kernel.args:
                can = [s for s in allowed(kernel, a) if s != NONE]
                if a.name in none:
                    states.append(NONE)
                elif len(can) == 1:
                    states.append(can[0])
                else:
                    states.append(DIV16 if aligned and a.pointer and DIV16 in can else ANY)
            out.append(tuple(states))
    return out


def _relaxed(kernel: Kernel, classes: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Each class with one argument's D or 1 given up."""
    out = []
    for states in classes:
        for i, arg in enumerate(kernel.args):
            if states[i] in (DIV16, ONE) and ANY in allowed(kernel, arg):
                out.append((*states[:i], ANY, *states[i + 1 :]))
    return out


def _every(kernel: Kernel) -> list[tuple[str, ...]]:
    combos = list(itertools.product(*(allowed(kernel, a) for a in kernel.args)))
    if len(combos) > MAX_CLASSES:
        raise RecipeError(
            f"kernels.{kernel.name}.specialize: 'all' makes {len(combos)} classes (at most {MAX_CLASSES}); "
            "use 'common', or pin arguments with hints (':16!')", kernel.where,
        )  # fmt: skip
    return [tuple(c) for c in combos]


def _hinted_and_plain(kernel: Kernel) -> list[tuple[str, ...]]:
    """Every hint assumed, then nothing (what CUDA kernels and ``specialize: none`` build), per None choice."""
    out = []
    for none in typical.nones(kernel):
        for hinted in (True, False):
            out.append(tuple(
                NONE if a.name in none
                else classnames.hint_state(a) if a.hint is not None and (hinted or a.required)
                else ANY
                for a in kernel.args
            ))  # fmt: skip
    return out


def specs(kernel: Kernel) -> tuple[Spec, ...]:
    """The kernel's specialization classes, most specialized first (module docstring)."""
    found: dict[tuple[str, ...], Origin] = {}

    def add(origin: Origin, classes: list[tuple[str, ...]]) -> None:
        for states in classes:
            found.setdefault(states, origin)

    how = kernel.specialization
    if how.recorded:  # the classes a recording saw, then each one's floor (a deployment's other values)
        add("recipe", [p.states for p in kernel.points])
        add("floor", [floor for p in kernel.points for floor in recorded_floors(kernel, p.states)])
    elif classnames.hints_only(kernel):
        add("level", _hinted_and_plain(kernel))
    elif kernel.specialize == "all":
        add("typical", _every(kernel))
    else:
        common = typical_classes(kernel)
        add("typical", [states for group in common.groups for states in group])
        add("recipe", list(kernel.classes))
        add("floor", [*common.known, *_floors(kernel)])
        add("relaxed", _relaxed(kernel, [group[0] for group in common.groups]))
    if how.recorded:
        names = {s: classnames.recorded_name(kernel, s) for s in found}
    else:
        names = {s: spell(kernel, dict(zip((a.name for a in kernel.args), s, strict=True))) for s in found}
    made = [Spec(name=names[s], states=s, level=_level(kernel, s), origin=o) for s, o in found.items()]
    if how.by_level:  # named by level, and which optional arguments are None
        optional = [i for i, a in enumerate(kernel.args) if a.optional]
        made = [Spec(name="-".join(p for p in (s.level, spelled(s.states[i] for i in optional)) if p)
                     or "plain", states=s.states, level=s.level, origin=s.origin) for s in made]  # fmt: skip
    return tuple(sorted(made, key=lambda s: -s.degree))


def recorded_floors(kernel: Kernel, states: tuple[str, ...]) -> list[tuple[str, ...]]:
    """What a call with a recorded config and types but values the recording never saw runs: where the recorded
    class has at most MAX_ONE_INT_FLOORS 16-divisible integers, the class with one of them not (a server's next
    request changes one size, the batch or the length, the others stay: the very class the JIT compiles for
    it); the class with nothing assumed of the integers' divisibility (pointers aligned as allocators give
    them); then with nothing assumed of the pointers' alignment either (a sliced tensor: a class miss). What is
    folded into the code (an argument equal to 1, or None) stays: another value is another signature. At most
    MAX_ONE_INT_FLOORS + 2 floors a recorded class."""
    relaxable = [i for i, (a, s) in enumerate(zip(kernel.args, states, strict=True))
                 if s == DIV16 and ANY in a.jit_states]  # fmt: skip
    ints = [i for i in relaxable if not kernel.args[i].pointer]

    def relaxed(which: list[int]) -> tuple[str, ...]:
        return tuple(ANY if i in which else s for i, s in enumerate(states))

    singles = [relaxed([i]) for i in ints] if 1 < len(ints) <= MAX_ONE_INT_FLOORS else []
    floors = (*singles, relaxed(ints), relaxed(relaxable))
    return [floor for floor in dict.fromkeys(floors) if floor != states]
