"""``--widen NAME=VALUES``: a recording holds the values that ran; a constexpr widened takes a set of values
instead (the recipe builds their product), the set a deployment needs. Read here (``parse_widen``), and applied
to a recording's compilations (``widened``)."""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import UsageError
from ..limits import MAX_WIDEN
from ..values import Widened, constexpr_problem
from ..values import widened as widened_values
from .events import Compilation, Json, Row


def parse_widen(text: str) -> tuple[str, list[Widened]]:
    """``NAME=VALUES`` of ``--widen``: VALUES a comma-separated list (``1,2,4,8``), a range of integers
    (``1..64``), or of powers of two (``1..256:pow2``). UsageError says what is wrong."""
    shown = text if len(text) <= 60 else f"{text[:60]}..."  # what messages quote of it
    name, sep, values = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageError(f"--widen {shown!r}: expected NAME=VALUES, e.g. bs=1,2,4,8 or bs=1..256:pow2")
    ranged = re.fullmatch(r"(-?[0-9]{1,18})\.\.(-?[0-9]{1,18})(:pow2)?", values)
    found: list[Widened]
    if ranged:
        low, high, pow2 = int(ranged[1]), int(ranged[2]), bool(ranged[3])
        if pow2 and low <= 0:
            raise UsageError(f"--widen {shown!r}: a range of powers of two starts above 0")
        found = [1 << e for e in range(low.bit_length() - 1, high.bit_length()) if low <= 1 << e <= high] if pow2 \
            else list(range(low, high + 1)) if high - low < MAX_WIDEN else []  # fmt: skip
    else:
        found = [_widen_value(v, shown) for v in values.split(",")]
    if not found or len(found) > MAX_WIDEN:
        raise UsageError(f"--widen {shown!r}: give between 1 and {MAX_WIDEN} values")
    return name, list({(type(v), v): v for v in found}.values())  # 1 and true are two values


def _widen_value(text: str, whole: str) -> Widened:
    """One value of ``--widen``: a whole number of i64, a finite number, true/false, or a string of printable
    characters (a constexpr Triton takes as text)."""
    text = text.strip()
    if not text:  # (BLOCK=, or 1,,2: a value left out, not the empty text)
        raise UsageError(f"--widen {whole!r}: a value is empty; give NAME=VALUES, e.g. bs=1,2,4,8")
    value: Widened = text
    if re.fullmatch(r"-?[0-9]+", text):
        value = int(text[:20])  # 19 digits are past i64 already (and int() refuses past Python's digit limit)
    elif text in ("true", "false"):
        value = text == "true"
    elif re.fullmatch(r"-?[0-9.]+([eE][-+]?[0-9]+)?", text):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
    problem = constexpr_problem(value)
    if problem is not None:
        raise UsageError(f"--widen {whole!r}: {problem}")
    return value


def widened(compiled: list[Compilation], widen: dict[str, list[Widened]]) -> list[Compilation]:
    """Each compilation with a widened constexpr takes the set of values (a list: the recipe builds their
    product); compilations that a widened one covers are folded into it (their launches added)."""
    out: dict[Row, Compilation] = {}
    for c in compiled:
        consts = dict(c.constexprs)
        for name, values in widen.items():
            if name in consts:
                have = consts[name] if isinstance(consts[name], list) else [consts[name]]
                consts[name] = widened_values(have, values)
        c = replace(c, constexprs=tuple(consts.items()))
        same = out.get(c.variant)
        out[c.variant] = replace(c, launches=c.launches + (same.launches if same else 0))
    return list(out.values())


def varying(compiled: list[Compilation], picks: dict[str, list[Json]],
            widen: dict[str, list[Widened]]) -> list[tuple[str, str, list[int]]]:  # fmt: skip
    """(kernel, constexpr, its values) for each integer constexpr that took several values across one kernel's
    calls and that no --widen and no autotuner config gives: one that follows the problem (a batch size, a
    length), where a deployment's next value would be a compilation the recording never saw."""
    tuned: set[str] = set()
    for pick in (p for found in picks.values() for p in found):
        config = pick.get("config") if isinstance(pick, dict) else None
        tuned.update(config if isinstance(config, dict) else ())
    seen: dict[tuple[str, str], set[int]] = {}
    for c in compiled:
        for name, value in c.constexprs:
            if isinstance(value, int) and not isinstance(value, bool) and name not in widen and name not in tuned:
                seen.setdefault((c.function.ref, name), set()).add(value)
    return [(kernel, name, sorted(values)) for (kernel, name), values in sorted(seen.items()) if len(values) > 1]


def suggestion(name: str, values: list[int]) -> str:
    """The --widen option that covers ``values`` and those between them (powers of two: only those)."""
    low, high = values[0], values[-1]
    pow2 = low > 0 and all(v & (v - 1) == 0 for v in values)
    return f"--widen {name}={low}..{high}{':pow2' if pow2 else ''}"
