"""One reader for each kind of value a user gives as text, wherever it is given: a size (``aotpack cache --trim``,
``$AOTPACK_CACHE_SIZE``), a count (``-j``, ``jobs`` in ``[tool.aotpack]`` or ``-C jobs=``, ``tune --reps``), a
boolean (``-C strict=``), a path on the command line, a value a constexpr is widened to (``--widen``, a recipe's
``widen:``); and the one way aotpack opens a file it reads but did not write (``open_regular``).

A number is ASCII digits only, at most ``limits.MAX_DIGITS`` of them: no sign, spaces, underscores, exponent,
``0x``, ``inf`` or ``nan`` (which ``int()`` or ``float()`` would take) and no other script's digits (which
``str.isdigit()`` would). Each reader refuses the rest with one ValueError saying what it expected and what it
got; the caller names the place (an option, a setting, a variable) and raises it as its own error."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from .limits import (
    MAX_CONSTEXPR_TEXT,
    MAX_DIGITS,
    MAX_JOBS,
    MAX_PROGRAM_RUNS,
    MAX_RECORD_BYTES,
    MAX_SIZE,
    MAX_TUNE_RUNS,
)

Widened = int | float | bool | str  # a value a constexpr is widened to

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
RELEASE = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,63}")  # a release as a package's own metadata names it (2.11.0+cu130)
_SIZE = re.compile(r"([0-9]+)(?:\.([0-9]+))?([KMGT]?)B?", re.IGNORECASE)
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def size(text: str, what: str) -> int:
    """Bytes from a size such as 4096, 500M, 1.5G or 2GB (binary units: K is 1024 bytes)."""
    m = _SIZE.fullmatch(text)
    whole, fraction, unit = (m[1], m[2] or "", m[3].upper()) if m else ("", "", "")
    if m and len(whole) + len(fraction) <= MAX_DIGITS:
        value: int = int(whole) * _UNITS[unit] + int(fraction or "0") * _UNITS[unit] // 10 ** len(fraction)
        if value <= MAX_SIZE:
            return value
    raise ValueError(
        f"expected {what}: bytes in ASCII digits, a decimal point allowed, then optionally K, M, G or T (binary "
        f"units) and B, such as 4096, 500M or 1.5G, at most {MAX_SIZE >> 40}T; got {text!r}"
    )


def count(value: str | int, what: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high``: text of ASCII digits, or an integer (TOML's own)."""
    number: int | None = None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= MAX_DIGITS:
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    if number is not None and low <= number <= high:
        return number
    raise ValueError(f"expected {what}: a whole number from {low} to {high} in ASCII digits; got {value!r}")


def jobs(value: str | int) -> int:
    """Parallel compiles (``-j``, the ``jobs`` setting)."""
    return count(value, "a number of parallel compiles", 1, MAX_JOBS)


def runs(value: str, low: int) -> int:
    """Runs of a kernel per variant and key when tuning (``--reps`` from 1, ``--warmup`` from 0)."""
    return count(value, "a number of runs", low, MAX_TUNE_RUNS)


def budget_seconds(value: str) -> int:
    """``aotpack tune --budget``: whole seconds, 1 to a week."""
    return count(value, "a number of seconds", 1, 7 * 24 * 3600)


def program_runs(value: str) -> int:
    """How often ``aotpack record`` runs the program at most (``--runs``)."""
    return count(value, "a number of runs of the program", 1, MAX_PROGRAM_RUNS)


def boolean(value: str | bool, what: str) -> bool:
    """true or false (also 1 or 0, in any case) as text, or TOML's own true or false."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _BOOLEANS:
        return _BOOLEANS[value.lower()]
    raise ValueError(f"expected {what}: true or false (or 1 or 0, in any case); got {value!r}")


def constexpr_problem(value: object) -> str | None:
    """Why ``value`` cannot be a constexpr's (in a recipe's grid, a recorded row, ``widen:`` and ``--widen``), or
    None: a whole number of at most 18 digits (within i64), a finite number, true/false, or printable text of at
    most ``limits.MAX_CONSTEXPR_TEXT`` characters (empty too: Triton takes it, a library's eviction policy left
    empty, and so does a recording)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if abs(value) < 10**18 else f"{str(value)[:30]}... is past a 64-bit integer"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if isinstance(value, str) and value.isprintable():
        if len(value) > MAX_CONSTEXPR_TEXT:
            return (f"{value[:30]!r}... has {len(value)} characters; a constexpr's text has at most "
                    f"{MAX_CONSTEXPR_TEXT} (aotpack's limits.MAX_CONSTEXPR_TEXT)")  # fmt: skip
        return None
    return f"{repr(value)[:40]} is not a value (a number, true, false or printable text)"


def widened(have: list[Any], values: list[Widened]) -> list[Any]:
    """A constexpr's values (``have``) with those it is widened to: each once (1 and true are two values), in
    one order (by kind, then value), so that widening twice, at record time and at build time, changes nothing."""
    unique = {(type(v), v): v for v in [*have, *values]}
    return sorted(unique.values(), key=lambda v: (str(type(v)), v if isinstance(v, (int, float, str)) else repr(v)))


def path(text: str) -> Path:
    """A path given on the command line; an empty one (which Path would read as '.') is refused."""
    if not text:
        raise ValueError("expected a path; got '' (for the current folder, give .)")
    return Path(text)


def kind(mode: int) -> str:
    """What a file's mode says it is, in a message's words: "a file", "a folder", "a FIFO", ..."""
    return next((name for test, name in _KINDS if test(mode)), "something else")


def open_regular(file: Path, follow_links: bool = True) -> tuple[BinaryIO, os.stat_result]:
    """``file`` opened for reading, with its status, when it is a regular file (without ``follow_links``, not
    a link either); OSError otherwise. A FIFO or device is opened without blocking and refused unread, so a
    wrong path costs no wait and no read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(file, flags)
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise OSError(f"{kind(found.st_mode)}, not a regular file")
    return os.fdopen(fd, "rb"), found


def json_depth(value: object) -> int:
    """How deeply a JSON value nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            stack += [(child, depth + 1) for child in children]
    return deepest


def read_plain(file: Path) -> bytes:
    """A file of a recording (a cache entry's, a set's), read through the descriptor checked: a regular file with
    one name (no link, no hard link to a file elsewhere, nothing that blocks); OSError otherwise. What was checked is
    what is read: a file swapped for a link after the recipe was read is refused, not followed."""
    opened, found = open_regular(file, follow_links=False)
    with opened:
        if found.st_nlink != 1:
            raise OSError(f"a file of {found.st_nlink} names (a hard link), not one of the recording's own")
        return opened.read()


def read_record(file: Path) -> Any:
    """A small JSON file that aotpack keeps for itself (a cache's size.json, a toolchain's stamp), read without
    following a link and at most MAX_RECORD_BYTES of it; OSError or ValueError when it is not one."""
    opened, _ = open_regular(file, follow_links=False)
    with opened:
        data = opened.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"{file} is over {MAX_RECORD_BYTES} bytes")
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{file} nests too deeply") from None
