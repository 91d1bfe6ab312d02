"""``aotpack record``: what the command line asks (the recipe to write, checked before the program runs; the
program after ``--``; reports of class misses), and what it prints. The recording itself is
``record``'s."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..errors import RecordError, UsageError, printable
from ..record import Events, check_package, existing_recipe, misses, record, widen, write
from ..words import plural
from .checks import writable_folder


def main(args: argparse.Namespace) -> None:
    """What -q leaves out is ``said``: the counts of what was recorded, the classes added, the advice; warnings
    (nothing written, a function not recorded) stay."""

    def said(line: str, file: TextIO = sys.stdout) -> None:
        if not args.quiet:
            print(line, file=file)

    check_package(args.package)
    out = args.out
    _check_out(out)
    writable_folder(out.parent, "-o")
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    found = _from_reports(args, said) if args.report else []
    if program or not args.report:
        summary = record(program, args.out, args.package, dict(args.widen), args.runs)
        compiled = summary.events.compilations()
        counts = _counts(summary.events)
        if summary.runs > 1:
            counts += f" (the program ran {summary.runs} times: torch.compile's caches as its last run left them)"
        if summary.written:
            said(f"wrote {args.out}: {counts}")
        elif compiled or summary.events.cached or summary.events.inductor:
            said(f"{args.out} unchanged: it holds the rows of all {counts}")
        else:
            print(f"{args.out} not written: the program compiled no Triton kernel", file=sys.stderr)
        _say_skipped(summary.events)
        for kernel, name, values in widen.varying(compiled, summary.events.picks, dict(args.widen)):
            shown = ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "")
            said(f"{kernel}: constexpr {name} took {len(values)} values ({shown}); if it follows the problem (a "
                 f"batch size, a length), {widen.suggestion(name, values)} (or the range you serve) builds "
                 "each value of it, not only those that ran", file=sys.stderr)  # fmt: skip
        found += summary.misses
    if found and args.out.is_file():
        for line in misses.add_classes(args.out, found):
            said(f"{args.out}: {line}")
    elif found:
        print(f"{plural(len(found), 'class miss', 'class misses')} reported; none added ({args.out} does not exist)",
              file=sys.stderr)  # fmt: skip


def _from_reports(args: argparse.Namespace, said: Callable[[str], None]) -> list[misses.Miss]:
    """What ``--report`` files say: the compilations they list, written into the recipe; their class misses,
    returned."""
    reported = misses.read_reports(args.report, _package(args.out, args.package))
    if not (reported.misses or reported.compilations):  # (good news, or the wrong folder: said either way)
        shown = ", ".join(map(str, args.report))
        print(f"--report {shown}: {plural(reported.files, 'report')}, with no class miss and no compilation: nothing "
              f"to add to {args.out}" + ("" if reported.files else " (a served process writes its report, "
              "<package>.<pid>.json, at its exit into the folder AOTPACK_REPORT names)"), file=sys.stderr)  # fmt: skip
    if reported.compilations:  # what activated packages let Triton's JIT compile elsewhere
        events = Events()
        for number, event in enumerate(reported.compilations):
            event.setdefault("number", number)
            events.add(event, "report")
        counted = plural(len(events.compiled), "compilation")
        _say_skipped(events)
        if not events.compiled:
            raise RecordError(f"--report: none of the {plural(len(reported.compilations), 'reported event')} is a "
                              f"compilation aotpack records ({_why_not(events)}); {args.out} not written")  # fmt: skip
        if write(args.out, events, args.package, widen=dict(args.widen)):
            said(f"wrote {args.out}: {counted} reported")
        else:
            said(f"{args.out} unchanged: it holds the rows of all {counted} reported")
    return reported.misses


def _say_skipped(events: Events) -> None:
    """What was not recorded and why; the names and reasons come from the program's processes or a report (escaped,
    bounded)."""
    for function, why in sorted(events.skipped.items()):
        print(f"not recorded: {printable(function[:200])}: {printable(why[:500])}", file=sys.stderr)


def _why_not(events: Events) -> str:
    """Why a report's events recorded nothing, in a few words: the first reason skipped, or their kinds."""
    if events.skipped:
        function, why = min(events.skipped.items())
        return f"{function}: {why}"[:300]
    return "launch counts and picks only, without the compilations they count"


def _package(out: Path, package: str) -> str:
    """The package of the recipe a recording goes into: the recipe's own where it exists (--package names a new
    one's)."""
    found = existing_recipe(out, document=False)
    data = found.data if found is not None else None
    return str(data["package"]) if isinstance(data, dict) and isinstance(data.get("package"), str) else package


def _check_out(out: Path) -> None:
    """The recipe to write, checked before the program runs: what it records would have nowhere to go."""
    try:
        os.lstat(out)
    except FileNotFoundError:
        pass
    except OSError as exc:  # a name the system refuses (too long, a folder in the path that is a file)
        raise UsageError(f"-o {str(out)[:200]}: {exc.strerror or exc}; give a recipe file the system can "
                         "create") from None  # fmt: skip
    if out.is_dir():
        raise UsageError(f"-o {out}: a folder; give the recipe file to write, e.g. -o {out / 'recipe.yaml'}")
    if out.is_symlink() and not out.exists():
        raise UsageError(f"-o {out}: a symlink to {os.readlink(out)}, which does not exist; give the recipe file "
                         "itself, or remove the link")  # fmt: skip
    if out.exists() and not out.is_file():
        raise UsageError(f"-o {out}: not a regular file (a FIFO, socket or device); give the recipe file to write")


def _counts(events: Events) -> str:
    """What a recording saw, in words: the JIT's compilations, the Triton cache entries of what other callers of
    triton.compile (Inductor) compiled and of Triton's modules, and the processes whose torch.compile caches it
    saved."""
    compiled = events.compilations()
    kernels = len({c.function.identity for c in compiled})
    launches = plural(sum(c.launches for c in compiled), "launch", "launches")
    counts = f"{plural(len(compiled), 'compilation')} of {plural(kernels, 'kernel')}, {launches}"
    cached = plural(len(events.cached), "Triton cache entry", "Triton cache entries")
    graphs = f"torch.compile's caches of {plural(len(events.inductor), 'process', 'processes')}"
    return counts + (f", {cached}" if events.cached else "") + (f", {graphs}" if events.inductor else "")
