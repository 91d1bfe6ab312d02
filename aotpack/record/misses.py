"""Class misses into the recipe: what a built package's calls ran below the class Triton's JIT would
have compiled for them (``pkg.stats()``; the reports packages write at exit into the folder
``AOTPACK_REPORT`` names) becomes each kernel's ``classes:``, so that the next build has those classes.

The recipe is edited where it stands: the new list replaces the old ``classes:`` value, or a
``classes:`` line is added after the kernel's last entry; every other byte stays as written (comments,
order, quoting). The edited text must load as a recipe before it replaces the file (atomically).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import classnames
from .._temp import atomic_file
from ..backends import recipes as recipe
from ..errors import RecipeError, RecordError, UsageError
from ..limits import MAX_REPORT_BYTES, MAX_REPORTS
from ..model import Kernel
from ..plan import classes
from ..recipe import yamlnodes
from ..runtime._aotpack_report import REPORT_FORMAT


@dataclass(frozen=True, kw_only=True)
class Miss:
    """Calls of a package's kernel that ran class ``ran`` where the JIT would have compiled ``jit``."""

    package: str
    kernel: str
    ran: str
    jit: str
    calls: int


@dataclass(frozen=True)
class Reported:
    """What reports say: class misses, and what Triton's JIT compiled while a package was activated with
    ``fallback="jit"`` (compile events, as ``aotpack record``'s agent writes them)."""

    misses: list[Miss]
    compilations: list[dict[str, Any]]


def from_stats(report: Any, where: str) -> list[Miss]:
    """The misses of one report (``pkg.stats()``), checked; RecordError naming ``where`` otherwise."""
    try:
        if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT:
            raise ValueError(f"not an aotpack report (format {REPORT_FORMAT})")
        out = []
        for row in report["class_misses"]:
            fields = (row["kernel"], row["ran"], row["jit"])
            if not all(isinstance(f, str) for f in fields) or type(row["calls"]) is not int or row["calls"] < 0:
                raise ValueError(f"a class miss is malformed: {row!r:.200}")
            out.append(Miss(package=str(report["package"]), kernel=fields[0], ran=fields[1], jit=fields[2],
                            calls=row["calls"]))  # fmt: skip
        return out
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{where}: {exc}") from None


def read_reports(paths: Iterable[Path]) -> Reported:
    """What report files say, or every ``*.json`` report in a folder."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            listed = sorted(p for p in path.glob("*.json") if p.is_file())
            if len(listed) > MAX_REPORTS:
                raise RecordError(f"{path}: {len(listed)} reports, more than the {MAX_REPORTS} read from one folder")
            files += listed
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"--report {path}: no such report file or folder")
    found: list[Miss] = []
    compiled: list[dict[str, Any]] = []
    for file in files:
        if file.stat().st_size > MAX_REPORT_BYTES:
            raise RecordError(f"{file}: larger than a report can be ({MAX_REPORT_BYTES} bytes)")
        try:
            report = json.loads(file.read_bytes().decode())
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested past json's reach
            raise RecordError(f"{file}: not a JSON report ({exc})") from None
        found += from_stats(report, str(file))
        events = report.get("compilations") or []
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise RecordError(f"{file}: its compilations are not a list of events")
        compiled += events
    return Reported(misses=found, compilations=compiled)


def add_classes(path: Path, misses: list[Miss]) -> list[str]:
    """Add the JIT classes of the misses of ``path``'s package to its kernels' ``classes:``; one line
    per kernel changed or miss left out (with why). The file is left as it was when nothing changes."""
    text = yamlnodes.read_text(path, "recipe")
    rec = recipe.parse(text, path)  # a broken recipe is refused, located, before anything is written
    kernels = {k.name: k for k in rec.kernels}
    wanted: dict[str, list[str]] = {}
    notes = []
    for miss in misses:
        kernel = kernels.get(miss.kernel)
        if miss.package != rec.package or kernel is None:
            continue
        if kernel.triton is None or kernel.triton.launch != "call" or kernel.specialize != "common":
            notes.append(f"{miss.kernel}: class {miss.jit} not added (classes: is for Triton kernels the "
                         "dispatcher calls, with specialize: common)")  # fmt: skip
            continue
        states = classnames.read(kernel, miss.jit)
        if isinstance(states, str):
            notes.append(f"{miss.kernel}: class {miss.jit} not added: {states}")
            continue
        have = [s.states for s in classes.specs(kernel) if s.origin in ("typical", "recipe")]
        if states not in have and miss.jit not in wanted.setdefault(miss.kernel, []):
            wanted[miss.kernel].append(miss.jit)
    edits = []
    root = yamlnodes.parse(text, path, "recipe")
    for name, new in wanted.items():
        if new:
            edits.append(_edit(text, root.mapping(())["kernels"].mapping(()), name, kernels[name], new))
            notes.append(f"{name}: added {', '.join(new)} to classes")
    if not edits:
        return notes
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    try:
        recipe.parse(text, path)
    except RecipeError as exc:  # aotpack's own edit broke it: a bug, said as such
        raise RecordError(f"adding classes to {path} would make it unreadable ({exc}); it is left unchanged") from None
    with atomic_file(path) as f:
        f.write(text.encode())
    return notes


def _end(text: str, node: yaml.Node) -> int:
    """Where a value's last character is written: a block collection's own end lies past the comments that
    follow it, so its last item's end is taken."""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    end = node.end_mark.index
    while end > node.start_mark.index and text[end - 1] in " \t\r\n":  # a block scalar's
        end -= 1
    return end


def _flow(names: list[str]) -> str:
    return "[" + ", ".join(json.dumps(n) for n in names) + "]"


def _edit(
    text: str, kernels: dict[str, yamlnodes.Node], name: str, kernel: Kernel, new: list[str]
) -> tuple[int, int, str]:
    """(start, end, text) that gives kernel ``name`` its classes plus ``new``."""
    node = kernels[name].node
    assert isinstance(node, yaml.MappingNode)
    names = [a.name for a in kernel.args]
    present = [classnames.spell(kernel, dict(zip(names, s, strict=True))) for s in kernel.classes]
    value = _flow(present + new)
    for key, item in node.value:
        if key.value == "classes":
            return item.start_mark.index, item.end_mark.index, value
    if node.flow_style:  # {...}: before the closing brace
        end = node.end_mark.index - 1
        return end, end, f", classes: {value}"
    line_end = text.find("\n", _end(text, node.value[-1][1]))
    line_end = len(text) if line_end < 0 else line_end
    indent = " " * node.value[0][0].start_mark.column
    return line_end, line_end, f"\n{indent}classes: {value}"
