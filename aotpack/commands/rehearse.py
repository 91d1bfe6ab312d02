"""``aotpack rehearse``: the recording (a recipe, built first, or its wheel) rehearsed against a second program before
deploying; what it prints. The rehearsal itself is ``record.rehearse``'s."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import RecordError, UsageError
from ..record.rehearse import rehearse
from ..words import plural

KINDS = {"jit": "Triton's JIT compiles", "kernel": "Triton compiles", "module": "Triton builds with a C compiler",
         "cpp": "Inductor runs a C++ compiler for"}  # fmt: skip


def main(args: argparse.Namespace) -> None:
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise UsageError("give the program to rehearse after --: aotpack rehearse RECIPE -- python traffic.py")
    with tempfile.TemporaryDirectory(prefix="aotpack-rehearse-") as tmp:
        work = Path(tmp)
        wheel = args.recording if args.recording.suffix == ".whl" else _built(args.recording, work / "dist", args)
        result = rehearse(program, wheel, work)
    if not args.quiet:
        print(f"rehearsed {' '.join(program)} with {result.package} activated (every compilation listed), empty "
              "Triton and Inductor caches, a HOME of its own", file=sys.stderr)  # fmt: skip
    for finding in result.findings:
        process = f" (process {finding.process})" if finding.process is not None else ""
        print(f"{KINDS.get(finding.kind, finding.kind)} {finding.name}{process}: {finding.why}")
    if not result.outcome.ok:
        raise RecordError(f"the rehearsed program exited with status {result.outcome.status}")
    if result.findings:
        raise RecordError(f"{plural(len(result.findings), 'compilation')} a served process would meet (above): "
                          f"record them (aotpack record -o RECIPE -- {' '.join(program)} merges into RECIPE) and "
                          "rebuild")  # fmt: skip
    if not args.quiet:
        print("no compilation: the program is served with none, and with no C compiler", file=sys.stderr)


def _built(recipe: Path, out: Path, args: argparse.Namespace) -> Path:
    """The recipe built (as ``aotpack build`` builds it, with the Triton release it names), its wheel."""
    if not recipe.is_file():
        raise UsageError(f"{recipe}: no such recipe or wheel")
    cmd = [sys.executable, "-m", "aotpack", "build", str(recipe), "-o", str(out), "-q"]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RecordError(f"{recipe} did not build (aotpack build said why, above): nothing to rehearse")
    return Path(done.stdout.strip().splitlines()[-1])
