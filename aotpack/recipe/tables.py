"""Tuning tables: plain JSON, one file per package and arch, written by ``aotpack tune`` on a GPU
host and baked into the dispatcher by ``aotpack build`` (recipe key ``tables:``).

Format ``aotpack-tuning-table/1``::

    {"format": "aotpack-tuning-table/1", "package": "demo_kernels", "arch": "sm_90a",
     "device": "NVIDIA H100 80GB HBM3", "driver_cuda": "13.0", "date": "2026-11-22",
     "kernels": {"matmul": [{"key": [512, 512, 512], "types": {"T": "fp16"},
                             "config": "BLOCK_M=64,...", "median_us": {"<config>": 12.3, ...},
                             "rejected": {"<config>": "why"}}]}}

Rows hold the keys as measured, sorted by types then key; every mapping is written with sorted keys so
that diffs stay small. ``sms``: the GPU's multiprocessors (the held-out error of aotpack/selection.py's
rule counts programs per multiprocessor). A row with ``"validation": true`` is at a key ``tune: validate:``
drew as calls are: the build measures there the held-out error of the rule chosen without those rows
(aotpack/fitting.py), then chooses the rule from every row and the dispatcher looks them all up.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import fitting, limits, selection
from .._temp import atomic_file
from ..model import Kernel, Rule
from . import yamlnodes

FORMAT = "aotpack-tuning-table/1"


class TableError(ValueError):
    """A malformed table; the message names the file and the row."""


@dataclass(frozen=True, kw_only=True)
class Row:
    key: tuple[int, ...]
    types: tuple[tuple[str, str], ...]
    config: str
    # the calls' specialization class (a class name, or a hint level: 'hinted' or 'safe'); None: any
    specialization: str | None = None
    median_us: tuple[tuple[str, float], ...] = ()
    rejected: tuple[tuple[str, str], ...] = ()
    validation: bool = False  # a key drawn as calls are (tune: validate:): measures the rule chosen without it


@dataclass(frozen=True, kw_only=True)
class Table:
    package: str
    arch: str
    device: str
    driver_cuda: str
    date: str
    sms: int | None = None  # the GPU's multiprocessors (tables written before they held it: None)
    kernels: tuple[tuple[str, tuple[Row, ...]], ...] = field(default=())


def _check_text(value: str, at: str) -> None:
    """Text a table holds goes into the manifest and messages: printable, at most a line."""
    bad = yamlnodes.control_character(value, allowed="")
    if bad is not None or len(value) > 200:
        raise TableError(f"{at}: expected a line of printable text, got {value[:40]!r}")


def _row(kernel: str, index: int, raw: Any, where: str) -> Row:
    at = f"{where}: kernels.{kernel}[{index}]"
    if not isinstance(raw, dict) or not {"key", "config"} <= set(raw):
        raise TableError(f"{at}: a row needs 'key' and 'config'")
    key = raw["key"]
    if not isinstance(key, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in key):
        raise TableError(f"{at}.key: expected a list of integers >= 0 (key values), got {key!r:.80}")
    types = raw.get("types", {})
    if not isinstance(types, dict) or not all(isinstance(v, str) for v in types.values()):
        raise TableError(f"{at}.types: expected a mapping of type variables to dtypes")
    if not isinstance(raw["config"], str):
        raise TableError(f"{at}.config: expected a config label such as 'BLOCK=1024,w4,s3'")
    spec = raw.get("specialization")
    if spec is not None and (not isinstance(spec, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,64}", spec)):
        raise TableError(f"{at}.specialization: expected a class name such as 'hinted' or 'DD_1', got {spec!r:.80}")
    timings = raw.get("median_us", {})
    if not isinstance(timings, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in timings.values()
    ):
        raise TableError(f"{at}.median_us: expected a mapping of config labels to microseconds, got {timings!r:.80}")
    rejected = raw.get("rejected", {})
    if not isinstance(rejected, dict) or not all(isinstance(v, str) for v in rejected.values()):
        raise TableError(f"{at}.rejected: expected a mapping of config labels to reasons, got {rejected!r:.80}")
    validation = raw.get("validation", False)
    if not isinstance(validation, bool):
        raise TableError(f"{at}.validation: expected true or false, got {validation!r:.80}")
    if validation and not timings:
        raise TableError(f"{at}: a validation row needs 'median_us' (every config's time there)")
    for text in (raw["config"], *types, *types.values(), *timings, *rejected, *rejected.values()):
        _check_text(text, at)
    return Row(
        key=tuple(key), types=tuple(sorted(types.items())), config=raw["config"], specialization=spec,
        median_us=tuple(sorted((str(k), float(v)) for k, v in timings.items())),
        rejected=tuple(sorted((str(k), str(v)) for k, v in rejected.items())), validation=validation,
    )  # fmt: skip


def read(path: Path) -> Table:
    text = yamlnodes.read_text(path, "tuning table", "MAX_TABLE_BYTES")  # located errors of their own
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:  # nesting a table never needs
        raise TableError(f"{path}: not a tuning table (nested too deeply)") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise TableError(f"{path}: not a tuning table ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise TableError(f'{path}: not a tuning table (expected "format": "{FORMAT}")')
    for name in ("package", "arch", "device", "driver_cuda", "date"):
        if not isinstance(raw.get(name), str):
            raise TableError(f"{path}: missing '{name}'")
        _check_text(raw[name], f"{path}: {name}")
    sms = raw.get("sms")
    if sms is not None and (not isinstance(sms, int) or isinstance(sms, bool) or not 1 <= sms <= 1 << 16):
        raise TableError(f"{path}: 'sms' must be the GPU's multiprocessor count, got {sms!r:.40}")
    kernels = raw.get("kernels", {})
    if not isinstance(kernels, dict) or not all(isinstance(rows, list) for rows in kernels.values()):
        raise TableError(f"{path}: 'kernels' must map kernel names to lists of rows")
    return Table(
        package=raw["package"], arch=raw["arch"], device=raw["device"], driver_cuda=raw["driver_cuda"],
        date=raw["date"], sms=sms,
        kernels=tuple(
            (name, tuple(_row(name, i, r, str(path)) for i, r in enumerate(rows)))
            for name, rows in sorted(kernels.items())
        ),
    )  # fmt: skip


def to_json(table: Table) -> str:
    kernels = {
        name: [
            {
                "key": list(r.key),
                "types": dict(r.types),
                "config": r.config,
                **({"specialization": r.specialization} if r.specialization else {}),
                "median_us": {k: round(v, 3) for k, v in r.median_us},
                "rejected": dict(r.rejected),
                **({"validation": True} if r.validation else {}),
            }
            for r in sorted(rows, key=lambda r: (r.types, r.key, r.specialization or ""))
        ]
        for name, rows in table.kernels
    }
    body = {
        "format": FORMAT, "package": table.package, "arch": table.arch, "device": table.device,
        "driver_cuda": table.driver_cuda, "date": table.date, "kernels": kernels,
        **({"sms": table.sms} if table.sms is not None else {}),
    }  # fmt: skip
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def write(table: Table, path: Path) -> Path:
    """Write atomically (temp file + rename), so a killed tuner leaves the old table intact."""
    with atomic_file(path) as f:
        f.write(to_json(table).encode())
    return path


def apply(table: Table, kernels: list[Kernel], package: str) -> list[Kernel]:
    """The kernels with the table's rows added to their dispatch tables (for the table's arch, a
    table row replaces an inline row of the same key and types); ``fit`` then chooses their rule."""
    if table.package != package:
        raise TableError(f"the table is for package {table.package!r}, not {package!r}")
    by_name = {k.name: k for k in kernels}
    for name, rows in table.kernels:
        if name not in by_name:
            raise TableError(f"the table has rows for {name!r}, which the recipe does not define")
        kernel = by_name[name]
        if table.arch not in kernel.targets:
            raise TableError(f"arch {table.arch} is not a target of kernel {name!r}")
        new = [_rule(kernel, table.arch, f"kernels.{name}[{i}]", row) for i, row in enumerate(rows)]
        looked_up = [r for r, row in zip(new, rows, strict=True) if not row.validation]
        checks = [r for r, row in zip(new, rows, strict=True) if row.validation]
        replaced = {(r.key, r.arch, r.types, r.specialization) for r in new}
        kept = [r for r in kernel.rules if (r.key, r.arch, r.types, r.specialization) not in replaced]
        merged = dataclasses.replace(kernel, rules=(*kept, *looked_up), validation=(*kernel.validation, *checks))
        timed = Counter((r.arch, r.types, r.specialization) for r in timed_rows(merged))
        if timed and max(timed.values()) > limits.MAX_MEASURED_KEYS:
            raise TableError(f"kernels.{name}: {max(timed.values())} timed keys of one types and class; the "
                             f"dispatcher's rule is fitted to at most {limits.MAX_MEASURED_KEYS} "
                             "(limits.MAX_MEASURED_KEYS): tune fewer keys")  # fmt: skip
        if sum(timed.values()) > limits.MAX_MEASURED_ROWS:
            bound = limits.MAX_MEASURED_ROWS
            raise TableError(f"kernels.{name}: {sum(timed.values())} timed rows; the dispatcher's rule is fitted "
                             f"to at most {bound} (limits.MAX_MEASURED_ROWS): tune fewer keys")  # fmt: skip
        sms = table.sms or kernel.selection.sms
        by_name[name] = dataclasses.replace(merged, selection=dataclasses.replace(merged.selection, sms=sms))
    return [by_name[k.name] for k in kernels]


def timed_rows(kernel: Kernel) -> list[Rule]:
    """The kernel's rows with times, those it looks up and its validation rows alike: what
    limits.MAX_MEASURED_KEYS and limits.MAX_MEASURED_ROWS bound (apply; aotpack tune's refining stops short of them)."""
    return [r for r in (*kernel.rules, *kernel.validation) if r.median_us]


def fit(kernels: list[Kernel], blocks: Mapping[str, selection.Blocks] | None = None) -> list[Kernel]:
    """The kernels with their selection rule chosen from every applied table's measurements
    (aotpack/fitting.py), once all tables are in, and their validation rows among the rows the dispatcher looks up
    (the rule's held-out error was measured at them before they joined: fitting.choose); ``blocks``: per kernel,
    its variants' blocks per multiprocessor (None: not known; a rule counting waves of them is then not tried)."""
    out = []
    for k in kernels:
        if any(r.median_us for r in k.rules):
            chosen = fitting.choose(k, k.selection.sms or selection.DEFAULT_SMS,
                                    blocks.get(k.name, {}) if blocks is not None else None)  # fmt: skip
            k = dataclasses.replace(k, selection=chosen, rules=(*k.rules, *k.validation), validation=())
        out.append(k)
    return out


def _rule(kernel: Kernel, arch: str, at: str, row: Row) -> Rule:
    labels = {c.label: c for c in kernel.configs}
    if row.config not in labels:
        raise TableError(f"{at}: config {row.config!r} is not in the recipe's grid; re-run aotpack tune")
    if len(row.key) != len(kernel.key):
        raise TableError(f"{at}: the key has {len(row.key)} values, the recipe's {len(kernel.key)}")
    if set(dict(row.types)) != {v for v, _ in kernel.types}:
        raise TableError(f"{at}: types {dict(row.types)} do not name the kernel's type variables")
    for var, dtypes in kernel.types:
        if dict(row.types)[var] not in dtypes:
            raise TableError(f"{at}: {dict(row.types)[var]!r} is not one of {var}'s dtypes ({', '.join(dtypes)})")
    unknown = [label for label, _ in row.median_us if label not in labels]
    if unknown:
        raise TableError(f"{at}.median_us: config {unknown[0]!r} is not in the recipe's grid; re-run aotpack tune")
    return Rule(key=row.key, config=labels[row.config], arch=arch, types=row.types,
                specialization=row.specialization, median_us=row.median_us, where=kernel.where)  # fmt: skip
