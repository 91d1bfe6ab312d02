"""The command line: ``aotpack build``, ``plan``, ``tune``, ``record``, ``inspect``, ``new``. The only place
errors are caught."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import __version__, facts
from .compilers import Outcome, Pruned
from .errors import AotpackError, UsageError
from .pipeline import build
from .plan import Variant, plan_summary, select
from .recipe import load


class _Progress:
    """A one-line counter on a terminal (done, cached, failed, ETA), plain lines otherwise (CI logs)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.done, self.cached, self.failed = total, 0, 0, 0
        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.start = time.monotonic()

    def __call__(self, variant: Variant, outcome: Outcome, cached: bool) -> None:
        self.done += 1
        self.cached += cached
        if isinstance(outcome, Pruned):
            self.failed += 1
            if not self.quiet:
                print(f"{chr(10) if self.tty else ''}pruned {outcome.variant_id}: {outcome.reason}", file=sys.stderr)
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        compiled = self.done - self.cached
        eta = elapsed / compiled * (self.total - self.done) if compiled else 0.0
        line = (f"[{self.done}/{self.total}] {self.cached} cached, {self.failed} failed, {elapsed:.0f}s, "
                f"eta {eta:.0f}s  {variant.id}")  # fmt: skip
        if self.tty:
            print(f"\r\033[K{line}", end="" if self.done < self.total else "\n", file=sys.stderr, flush=True)
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            print(line, file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aotpack", description="Ahead-of-time GPU kernel bundles as wheels.")
    parser.add_argument("--version", action="version", version=f"aotpack {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile a recipe into a repaired manylinux wheel")
    b.add_argument("recipe", type=Path)
    b.add_argument("-o", "--out-dir", type=Path, default=Path("dist"), help="where the wheel goes (default: dist)")
    b.add_argument("-j", "--jobs", type=_positive, default=None, help="parallel compile processes (default: all cores)")
    b.add_argument("--strict", action="store_true", help="fail when any variant fails to compile")
    b.add_argument("--only", action="append", default=[], metavar="GLOB", help="build only variant ids matching")
    b.add_argument("--keep-build-dir", type=Path, default=None, help="keep generated C and objects here")
    b.add_argument("--nvcc", default=None, help="the nvcc for CUDA kernels (default: $CUDA_HOME, PATH, pip)")
    b.add_argument("--cuda", type=_cuda, default=None, metavar="X.Y",
                   help="the oldest CUDA driver the wheel must load on (default: the recipe's cuda:, else the "
                        "oldest the toolchains found can build each target for)")  # fmt: skip
    b.add_argument(
        "--cache-dir", type=Path, default=None, help="compiled variants and wheels (default: ~/.cache/aotpack)"
    )
    b.add_argument("--no-cache", action="store_true", help="compile everything; read and write no cache")
    b.add_argument("-q", "--quiet", action="store_true")
    b.add_argument("-v", "--verbose", action="store_true", help="echo every external command")
    b.add_argument("--winners-only", action="store_true",
                   help="build only the configs the dispatch tables pick, and the defaults")  # fmt: skip
    b.add_argument("--line-info", action="store_true",
                   help="keep line info in Triton's cubins, for profilers; it holds the sources' absolute paths, "
                        "so the wheel is then tied to this checkout")  # fmt: skip
    t = sub.add_parser("tune", help="on a GPU host: time every variant of the installed package, write tables")
    t.add_argument("recipe", type=Path)
    t.add_argument("-o", "--out-dir", type=Path, default=Path("tables"), help="where the table goes (default: tables)")
    t.add_argument("--kernel", action="append", default=[], help="tune only this kernel (repeatable)")
    t.add_argument("--reps", type=int, default=30, help="timed runs per variant and key (median)")
    t.add_argument("--warmup", type=int, default=5, help="untimed runs first")
    i = sub.add_parser("inspect", help="show what a built wheel holds (its manifest)")
    i.add_argument("wheel", type=Path)
    i.add_argument("--json", action="store_true", help="print the manifest itself (schema: README.md)")
    n = sub.add_parser("new", help="start a kernel package: recipe, a Triton and a CUDA kernel, tests")
    n.add_argument("name", help="the Python package name (lower case, digits, _)")
    n.add_argument("--dir", type=Path, default=None, help="where to write it (default: ./NAME)")
    r = sub.add_parser("record", help="run a program under Triton's JIT and write the recipe of what it compiled",
                       usage="aotpack record -o RECIPE [--package NAME] -- python program.py [args...]")
    r.add_argument("-o", "--out", type=Path, required=True, help="the recipe to write (merged into if it exists)")
    r.add_argument("--package", default="recorded_kernels", help="package name of a new recipe")
    r.add_argument("program", nargs=argparse.REMAINDER, help="after --: the command, e.g. python run.py --flag")
    p = sub.add_parser("plan", help="list the variant ids a recipe builds")
    p.add_argument("recipe", type=Path)
    p.add_argument("--only", action="append", default=[], metavar="GLOB")
    return parser


def _writable_folder(path: Path, what: str) -> None:
    """Checked before any work, creating nothing: the folder is one this user can write in, or can
    be made inside the nearest folder that exists."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "it is" if existing == path else f"{existing} is"
        raise UsageError(f"{what} {path}: {where} a file, not a folder; give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: {existing} is not writable; give a folder you can write")


def _cuda(text: str) -> int:
    try:
        return facts.cuda_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes >= 1, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    verbose, quiet = getattr(args, "verbose", False), getattr(args, "quiet", False)
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    try:
        if args.command == "plan":
            rec = load(args.recipe)
            rec, variants = select(rec, tuple(args.only))
            for variant in variants:
                print(variant.id)
            for line in plan_summary(rec, variants):  # on stderr: the ids stay a clean list
                print(line, file=sys.stderr)
            return 0
        if args.command == "new":
            from .new import scaffold

            dest = args.dir or Path(args.name)
            files = scaffold(args.name, dest)
            print(f"wrote {len(files)} files to {dest}; next: aotpack build {dest / 'recipe.yaml'} -o {dest / 'dist'}")
            return 0
        if args.command == "inspect":
            from .inspect import describe, read_manifest

            manifest = read_manifest(args.wheel)
            print(json.dumps(manifest, indent=1, sort_keys=True) if args.json else describe(manifest, args.wheel.name))
            return 0
        if args.command == "record":
            from .record import recording, run_program

            _writable_folder(args.out.parent, "-o")
            program = args.program[1:] if args.program[:1] == ["--"] else args.program
            with recording(args.out, args.package) as recorded:
                run_program(program)
            launches = sum(c.launches for c in recorded.compilations())
            print(f"wrote {args.out}: {len(recorded.compiled)} compilations of "
                  f"{len({(c.module, c.function) for c in recorded.compiled.values()})} kernels, {launches} launches")
            for function, why in sorted(recorded.skipped.items()):
                print(f"not recorded: {function}: {why}", file=sys.stderr)
            return 0
        if args.command == "tune":
            from .tune import Options, tune

            _writable_folder(args.out_dir, "-o")
            opts = Options(warmup=args.warmup, reps=args.reps, kernels=tuple(args.kernel))
            print(f"wrote {tune(args.recipe, args.out_dir, opts)}")
            return 0
        for folder, what in ((args.out_dir, "-o"), (args.cache_dir, "--cache-dir"),
                             (args.keep_build_dir, "--keep-build-dir")):  # fmt: skip
            if folder is not None:
                _writable_folder(folder, what)
        if args.nvcc is not None and shutil.which(args.nvcc) is None:
            raise UsageError(f"--nvcc {args.nvcc}: no such executable; give the path of nvcc, or leave --nvcc out")
        total = len(select(load(args.recipe), tuple(args.only), winners_only=args.winners_only)[1])
        result = build(
            args.recipe, args.out_dir, jobs=args.jobs, strict=args.strict, select=tuple(args.only),
            keep_build_dir=args.keep_build_dir, progress=_Progress(total, args.quiet), nvcc=args.nvcc,
            winners_only=args.winners_only, cache_dir=args.cache_dir, use_cache=not args.no_cache,
            line_info=args.line_info, cuda_floor=args.cuda,
        )  # fmt: skip
        pruned = f", {len(result.pruned)} pruned" if result.pruned else ""
        cached = ", unchanged: from the cache" if result.cached else ""
        print(f"built {result.wheel} ({result.variants} variants{pruned}{cached})")
        return 0
    except AotpackError as exc:
        print(f"aotpack: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("aotpack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`aotpack plan ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0


if __name__ == "__main__":
    sys.exit(main())
