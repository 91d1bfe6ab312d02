"""Class misses into the recipe: what a built package's calls ran below the class Triton's JIT would
have compiled for them (``pkg.stats()``; the reports packages write at exit into the folder
``AOTPACK_REPORT`` names) becomes each kernel's ``classes:``, so that the next build has those classes.

The recipe is edited where it stands: the new list replaces the old ``classes:`` value, or a
``classes:`` line is added after the kernel's last entry; every other byte stays as written (comments,
order, quoting). The edited text must load as a recipe before it replaces the file (atomically).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import classnames, values
from .._temp import atomic_file
from ..backends import recipes as recipe
from ..errors import RecipeError, RecordError, UsageError
from ..limits import MAX_REPORT_BYTES, MAX_REPORTS
from ..model import Kernel
from ..plan import classes
from ..recipe import yamlnodes
from ..runtime._aotpack_folders import others_write
from ..runtime._aotpack_report import REPORT_FORMAT
from ..runtime._aotpack_source import is_source_name, source_name
from .events import Compile, read_event


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
    files: int = 0  # the reports read


_MAX_CLASS = 4096  # characters of a class as a report writes it (a letter per argument, with its shape)


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
            if not fields[0].isidentifier() or not all(f.isprintable() and len(f) <= _MAX_CLASS for f in fields):
                raise ValueError(f"a class miss names no kernel and class aotpack writes: {row!r:.200}")
            out.append(Miss(package=str(report["package"]), kernel=fields[0], ran=fields[1], jit=fields[2],
                            calls=row["calls"]))  # fmt: skip
        return out
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{where}: {exc}") from None


def read_reports(paths: Iterable[Path], package: str | None = None) -> Reported:
    """What report files say, or every ``*.json`` report in a folder. Reports come from other processes, often
    other machines: untrusted input. Each is read once, through the descriptor checked: a regular file (a link in
    a folder, a FIFO, a device refused), the user's own and writable by no one else, as its folder is (one that
    other users may write is refused unless sticky), within ``MAX_REPORT_BYTES``; each compile event it holds is
    one aotpack reads (its written-out sources named by their text's hash, nothing else). ``package``: the
    recipe's, where a report of another package is refused (``aotpack record --report``). RecordError, naming the
    file and what to fix, otherwise."""
    files: list[tuple[Path, bool]] = []  # (file, named in a folder: a link there is refused)
    for path in paths:
        if path.is_dir():
            _trusted(path, path.stat(), "report folder")
            listed = sorted(p for p in path.glob("*.json") if not p.is_dir())
            if len(listed) > MAX_REPORTS:
                raise RecordError(f"{path}: {len(listed)} reports, more than the {MAX_REPORTS} read from one folder")
            files += [(p, True) for p in listed]
        elif path.exists():
            files.append((path, False))
        else:
            raise UsageError(f"--report {path}: no such report file or folder")
    found: list[Miss] = []
    compiled: list[dict[str, Any]] = []
    for file, in_folder in files:
        report = _read(file, in_folder)
        if package is not None and isinstance(report, dict) and report.get("package") != package:
            raise RecordError(f"{file}: a report of package {str(report.get('package'))!r:.80}, not of the recipe's "
                              f"{package!r}: give the reports of this recipe's package")  # fmt: skip
        found += from_stats(report, str(file))
        events = report.get("compilations") or []
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise RecordError(f"{file}: its compilations are not a list of events")
        for event in events:
            try:
                read = read_event(event)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:  # (Unreadable is a ValueError)
                raise RecordError(f"{file}: an event aotpack does not read ({exc!s:.200}): not a report aotpack "
                                  "wrote, or a damaged one") from None  # fmt: skip
            if isinstance(read, Compile):
                _sources_as_written(file, read)
        compiled += events
    return Reported(misses=found, compilations=compiled, files=len(files))


def _sources_as_written(file: Path, event: Compile) -> None:
    """A report's compilation gives the text of a written-out source only under the name ``activate()`` gives it
    (its text's hash, ``_aotpack_source.source_name``): that text is written into the recipe's ``kernels/``, and
    another name, or another text under a name, would put a report's text in place of a recorded kernel's source.
    (A source it names without its text is one of ``kernels/`` already: a plain file name, events.py checks.)"""
    for name, text in event.sources.items():
        if not is_source_name(name) or source_name(text) != name:
            raise RecordError(f"{file}: a compilation of {event.function.ref:.100} gives the text of a written-out "
                              f"source as {name!r:.60}, which is not its text's hash (sha256, 16 digits, .py) as "
                              "aotpack names one: not a report aotpack wrote")  # fmt: skip


def _trusted(path: Path, st: os.stat_result, what: str) -> None:
    """A report, or its folder, that only this user can have written (the rule activate() holds Inductor's cache
    folder to: ``_aotpack_folders.others_write``; a report folder may be sticky, as /tmp is)."""
    why = others_write(st, sticky=stat.S_ISDIR(st.st_mode))
    if why is not None:
        raise RecordError(f"{path}: {why} (a {what}); reports are read only from your own files and folders, which "
                          "others cannot write: chmod go-w it, or copy the reports into a folder of yours")  # fmt: skip


def _read(file: Path, listed: bool) -> Any:
    """One report, read through the descriptor that was checked (no second open that a swap could redirect)."""
    try:
        opened, st = values.open_regular(file, follow_links=not listed)
    except OSError as exc:
        why = "a link (a report folder's files are read only as themselves)" if listed and file.is_symlink() else (
            exc.strerror or str(exc))  # fmt: skip
        raise RecordError(f"{file}: cannot be read as a report: {why}") from None
    with opened:
        _trusted(file, st, "report")
        data = opened.read(MAX_REPORT_BYTES + 1)
    if len(data) > MAX_REPORT_BYTES:
        raise RecordError(f"{file}: larger than a report can be ({MAX_REPORT_BYTES} bytes)")
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested past json's reach
        raise RecordError(f"{file}: not a JSON report ({exc})") from None


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
