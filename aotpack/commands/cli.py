"""The command line: ``aotpack build``, ``plan``, ``tune``, ``record``, ``inspect``, ``new``. The only place
errors are caught."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import logging
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .. import facts, values
from .._version import __version__
from ..backends import recipes
from ..backends.cuda.compiler import find_nvcc
from ..backends.recipes import load
from ..backends.triton import releases, toolchain
from ..backends.triton.recipe import wanted_triton
from ..errors import AotpackError, OutputError, UsageError, advice, shown
from ..manifest import read_wheel
from ..pipeline import cache, native
from ..pipeline.build import BuildOptions, run
from ..plan.variants import plan_document, plan_summary, select
from ..record import RUNS, parse_widen
from ..words import plural
from . import record, rehearse
from .checks import writable_folder
from .inspect import describe
from .new import scaffold
from .progress import Progress
from .tune import tune
from .tune_measure import Options

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

CACHE_SHOWN = "$XDG_CACHE_HOME/aotpack, or ~/.cache/aotpack"  # where cache.default_dir() is, as help says it
REPS, WARMUP = 30, 5  # aotpack tune's timed and untimed runs per variant and key


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that help and usage that cannot be written (standard output on a full disk) are
    an error said by main(), not dropped with the command ending well."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if message:
            (file or sys.stderr).write(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="aotpack", description="Ahead-of-time GPU kernel bundles as wheels.")
    parser.add_argument("--version", action="version", version=f"aotpack {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for verb in (_build_verb, _tune_verb, _inspect_verb, _new_verb, _record_verb, _rehearse_verb, _cache_verb,
                 _plan_verb):  # fmt: skip
        verb(sub)  # (in this order in --help)
    return parser


def _build_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    b = sub.add_parser("build", help="compile a recipe into a repaired manylinux wheel")
    b.add_argument("recipe", type=_path, help="the recipe file (docs/recipe.md)")
    b.add_argument("-o", "--out-dir", type=_path, default=Path("dist"), help="where the wheel goes (default: dist)")
    b.add_argument("-j", "--jobs", type=_positive, default=None, help="parallel compile processes (default: all cores)")
    b.add_argument("--strict", action="store_true", help="fail when any variant fails to compile")
    b.add_argument("--only", action="append", default=[], metavar="GLOB", help="build only variant ids matching")
    b.add_argument("--keep-build-dir", type=_path, default=None, help="keep generated C and objects here")
    b.add_argument("--nvcc", default=None, help="the nvcc for CUDA kernels (default: $CUDA_HOME, PATH, pip)")
    b.add_argument("--cuda", type=_cuda, default=None, metavar="X.Y",
                   help="the oldest CUDA driver the wheel must load on; Triton kernels are then assembled by the "
                        "newest ptxas within it (default: the recipe's cuda:, else the oldest the toolchains found "
                        "can build each target for)")  # fmt: skip
    b.add_argument(
        "--cache-dir",
        type=_path,
        default=None,
        help=f"compiled variants and wheels (default: {CACHE_SHOWN})",
    )
    b.add_argument("--no-cache", action="store_true", help="compile everything; read and write no cache")
    b.add_argument("--platform", choices=sorted(native.PLATFORMS), action="append", default=None,
                   help="the machine the wheel is for (default: this one's); the cubins are the same, the C is "
                        "cross-compiled; repeated, one wheel per machine")  # fmt: skip
    _triton_options(b, "build")
    b.add_argument("--executor", default=None, metavar="dask://HOST:PORT",
                   help="compile on this Dask cluster (pip install 'aotpack[dask]'; workers need aotpack and the "
                        "same toolchain)")  # fmt: skip
    _amount(b, quiet="only the wheel's path, and warnings and errors", verbose="echo every external command")
    b.add_argument("--winners-only", action="store_true",
                   help="build only the configs the dispatch tables pick, and the defaults")  # fmt: skip
    b.add_argument("--line-info", action="store_true",
                   help="keep line info in Triton's cubins, for profilers; it holds the sources' absolute paths, "
                        "so the wheel is then tied to this checkout")  # fmt: skip


def _tune_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    t = sub.add_parser("tune", help="on a GPU host: time every variant of the installed package, write tables")
    t.add_argument("recipe", type=_path, help="the recipe the installed package was built from")
    t.add_argument("-o", "--out-dir", type=_path, default=Path("tables"), help="where the table goes (default: tables)")
    t.add_argument("--kernel", action="append", default=[], help="tune only this kernel (repeatable)")
    t.add_argument("--reps", type=_reps, default=REPS,
                   help=f"timed runs per variant and key, their median taken (default: {REPS})")  # fmt: skip
    t.add_argument("--warmup", type=_warmup, default=WARMUP, help=f"untimed runs first (default: {WARMUP})")
    t.add_argument("--devices", default=None, metavar="all|0,1,...",
                   help="spread the keys over these GPUs, one process each (default: the current GPU)")  # fmt: skip
    t.add_argument("--budget", type=_budget, default=None, metavar="SECONDS",
                   help="start no key past this many seconds; the table holds the keys timed by then, listed "
                        "keys first, then tune.sample's, tune.validate's, then tune.refine's "
                        "(default: no limit)")  # fmt: skip
    t.add_argument("--executor", default=None, metavar="dask://HOST:PORT",
                   help="tune on a Dask cluster's GPU workers instead (one worker per GPU, --nthreads 1)")  # fmt: skip
    t.add_argument("--keep", type=_path, default=None, metavar="TABLE",
                   help="keep this table's rows (one this kind of GPU wrote, a tune the budget ended): time only the "
                        "keys it lacks, refine from them all, and write them all")  # fmt: skip
    _amount(t, quiet="only the table's path, and warnings and errors", verbose="log every variant's time at each key")


def _inspect_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    i = sub.add_parser("inspect", help="show what a built wheel holds (its manifest)")
    i.add_argument("wheel", type=_path, help="the .whl file")
    i.add_argument("--json", action="store_true",
                   help="print the manifest itself (schema: docs/build.md), whatever -q or -v say")  # fmt: skip
    _amount(
        i,
        quiet="only its first line (package, version, tags)",
        verbose="list every variant id and whole sha256 digests",
    )


def _new_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    n = sub.add_parser("new", help="start a kernel package: recipe, a Triton and a CUDA kernel, tests")
    n.add_argument("name", help="the Python package name (lower case, digits, _)")
    n.add_argument("--dir", type=_path, default=None, help="where to write it (default: ./NAME)")
    n.add_argument("--replaces", metavar="DIST", default=None,
                   help="a deliberate fork: NAME may be that of DIST (installed, or pip, setuptools, wheel, "
                   "triton, torch, aotpack), which installing the wheel replaces; its recipe says 'replaces: "
                   "DIST'")  # fmt: skip
    _amount(n, quiet="errors only", verbose="list every file written")


def _record_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    r = sub.add_parser(
        "record",
        help="run a program under Triton's JIT and write the recipe of what it compiled (and the classes its calls "
        "of built packages missed)",
        usage="aotpack record -o RECIPE [--package NAME] [--widen NAME=VALUES] [--runs N] [--report PATH] [-q | -v] "
        "[-- python program.py [args...]]",
    )
    r.add_argument("-o", "--out", type=_path, required=True, help="the recipe to write (merged into if it exists)")
    r.add_argument("--package", default="recorded_kernels", help="package name of a new recipe")
    r.add_argument("--widen", type=parse_widen, action="append", default=[], metavar="NAME=VALUES",
                   help="build every recorded variant with constexpr NAME also at these values (1,2,4,8; 1..64; "
                   "1..256:pow2): the set a deployment needs (repeatable)")  # fmt: skip
    r.add_argument("--runs", type=_runs, default=RUNS, metavar="N",
                   help=f"run the program at most N times (default {RUNS}): again while a run changes torch.compile's "
                   "profile of which sizes change, so that the recording holds the graphs a served process "
                   "compiles; 1: once")  # fmt: skip
    r.add_argument("--report", type=_path, action="append", default=[], metavar="PATH",
                   help="class misses reported elsewhere (a file, or an AOTPACK_REPORT folder) to add to the "
                   "recipe's classes: (repeatable; without a program, only these)")  # fmt: skip
    _amount(r, quiet="warnings and errors only (no counts, no advice)", verbose="echo the program's command line")
    r.add_argument("program", nargs=argparse.REMAINDER, help="after --: the command, e.g. python run.py --flag")


def _rehearse_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    h = sub.add_parser(
        "rehearse",
        help="before deploying: build a recording and run another program (a traffic sample) with it activated, "
        "in empty caches and a HOME of its own; list each compilation a served process would meet, and why",
        usage="aotpack rehearse RECIPE|WHEEL [-q | -v] -- python program.py [args...]",
    )
    h.add_argument(
        "recording", type=_path, help="the recorded recipe (built first, as aotpack build does), or its wheel"
    )
    _amount(h, quiet="the compilations alone", verbose="echo the program's command line")
    h.add_argument("program", nargs=argparse.REMAINDER, help="after --: the command, e.g. python traffic.py")


def _cache_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    c = sub.add_parser("cache", help="show the cache of compiled variants and wheels; trim or clear it")
    c.add_argument(
        "--cache-dir",
        type=_path,
        default=None,
        help=f"the cache (default: {CACHE_SHOWN})",
    )
    what = c.add_mutually_exclusive_group()
    what.add_argument("--trim", type=_size, default=None, metavar="SIZE",
                      help="drop the least recently used entries until it holds at most SIZE (500M, 10G)")  # fmt: skip
    what.add_argument("--clear", action="store_true", help="remove every entry")
    _amount(c, quiet="errors only", verbose="name every entry dropped, and give the size of each kind")


def _plan_verb(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser("plan", help="list the variant ids a recipe builds")
    p.add_argument("recipe", type=_path, help="the recipe file (docs/recipe.md)")
    p.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="list only variant ids matching (repeatable)")  # fmt: skip
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (kernels, their backends and variant ids, totals; docs/cli.md) "
                   "instead of the ids")  # fmt: skip
    _triton_options(p, "plan")
    p.add_argument("--cache-dir", type=_path, default=None,
                   help=f"where --triton's release is kept (default: {CACHE_SHOWN})")  # fmt: skip
    _amount(p, quiet="only the variant ids (or --json's document), and warnings and errors",
            verbose="give each config and class skipped, with its reason")  # fmt: skip


def _amount(verb: argparse.ArgumentParser, quiet: str, verbose: str) -> None:
    """-q and -v, every verb's, one excluding the other: how much it says. main() sets the log level from them
    (warnings only, or debug too); ``quiet`` says what a quiet verb prints, ``verbose`` what a verbose one
    adds."""
    amount = verb.add_mutually_exclusive_group()
    amount.add_argument("-q", "--quiet", action="store_true", help=f"print {quiet}")
    amount.add_argument("-v", "--verbose", action="store_true", help=f"say more: {verbose}")


def _triton_options(verb: argparse.ArgumentParser, what: str) -> None:
    """--triton and --wheelhouse: the Triton release a verb that imports the kernels runs with (``_release``)."""
    verb.add_argument("--triton", default=None, metavar="X.Y[.Z]", type=_option(_release_text),
                      help=f"{what} with this Triton release (default: the recipe's triton:, else the installed "
                           "one); another than the installed one is kept in the cache and used there, this "
                           "environment untouched")  # fmt: skip
    verb.add_argument("--wheelhouse", type=_path, default=None, metavar="DIR",
                      help=f"install --triton's release only from this folder of wheels (default: "
                           f"${toolchain.WHEELHOUSE}, else pip's index)")  # fmt: skip


def _cuda(text: str) -> int:
    try:
        return facts.cuda_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


T = TypeVar("T")


def _option(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An option's type from one of the readers of values.py: its message is what argparse says."""

    def typed(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return typed


def _release_text(text: str) -> str:
    """--triton's value, checked as a release (an empty one is no release: it named the installed one silently)."""
    toolchain.Request.parse(text)
    return text


_positive = _option(values.jobs)
_size = _option(cache.parse_size)
_reps = _option(lambda text: values.runs(text, 1))
_warmup = _option(lambda text: values.runs(text, 0))
_budget = _option(values.budget_seconds)
_path = _option(values.path)
_runs = _option(values.program_runs)


def _cache_command(folder: Path | None, trim: int | None, verbose: bool = False) -> str:
    """aotpack cache: what the cache holds, after trimming it to ``trim`` bytes when given (``verbose``: each entry
    dropped named, and each kind's size)."""
    cache.size_limit()  # the bound a build keeps: refused here as a build refuses it
    store = cache.Cache(folder or cache.default_dir())
    entries, done, named = store.entries(), "", []
    if trim is not None:  # one walk of the cache, not two
        trimmed = store.trim(trim, entries)
        done = f"dropped {plural(len(trimmed.dropped), 'entry', 'entries')} ({trimmed.freed / 1e6:.1f} MB); "
        if trimmed.failed:
            raise UsageError(f"{done}{len(trimmed.failed)} could not be removed, such as {trimmed.failed[0]}: make "
                             f"{store.root} writable, or remove them yourself")  # fmt: skip
        dropped = set(trimmed.dropped)
        entries = [e for e in entries if e not in dropped]
        named = [f"dropped {e.path}" for e in trimmed.dropped]
    kind = {e: "link" if e.link else e.path.parent.name for e in entries}
    kinds = Counter(kind.values())
    tools = sorted(e.path.name.removeprefix("triton-") for e in entries if kind[e] == toolchain.FOLDER)
    listed = f" ({', '.join(tools)})" if tools else ""
    links = f", {plural(kinds['link'], 'link')} (not followed; --clear removes the links)" if kinds["link"] else ""
    total = sum(e.bytes for e in entries)
    variants = len(entries) - kinds["wheels"] - len(tools) - kinds["link"]
    shown = (
        f"{done}{store.root}: {plural(variants, 'compiled variant')}, {plural(kinds['wheels'], 'wheel')} and "
        f"{plural(len(tools), 'Triton toolchain')}{listed}{links}, {total / 1e6:.1f} MB; a build keeps it to "
        f"{cache.size_setting()} (${cache.SIZE_SETTING})"
    )
    if not verbose:
        return shown
    names, sizes = {"wheels": "wheels", toolchain.FOLDER: "Triton toolchains"}, Counter[str]()
    for entry in entries:  # (a compiled variant's file sits in its shard, named by its key)
        if not entry.link:
            sizes[names.get(kind[entry], "compiled variants")] += entry.bytes
    return "\n".join([*named, shown, *(f"  {k}: {n / 1e6:.1f} MB" for k, n in sorted(sizes.items()))])


def _plan(args: argparse.Namespace) -> int | None:
    release = _release(args, fetch=args.triton is not None)  # (a listing fetches no Triton the recipe alone names)
    if release is not None:  # the kernels are read as that release reads them, in a child
        if not args.quiet:
            print(f"planning with Triton {release.version} kept in aotpack's cache ({release.path})", file=sys.stderr)
        return toolchain.run_build(release, args.argv)
    rec, variants = select(load(args.recipe), tuple(args.only))
    if args.json:
        print(json.dumps(plan_document(rec, variants), indent=1))
    else:
        for variant in variants:
            print(variant.id)
    if not args.quiet:
        for line in plan_summary(rec, variants, every=args.verbose):  # on stderr: the ids stay a clean list
            print(line, file=sys.stderr)
    return None


def _new(args: argparse.Namespace) -> None:
    dest = args.dir or Path(args.name)
    files = scaffold(args.name, dest, args.replaces)
    if args.verbose:
        for file in files:
            print(f"wrote {file}")
    if not args.quiet:
        print(
            f"wrote {plural(len(files), 'file')} to {dest}; next: pip wheel --no-build-isolation {dest} -w "
            f"{dest / 'dist'} (or aotpack build {dest / 'recipe.yaml'} -o {dest / 'dist'}; a build with isolation "
            "needs aotpack's wheel where pip looks: PIP_FIND_LINKS)"
        )


def _cache(args: argparse.Namespace) -> None:
    shown = _cache_command(args.cache_dir, 0 if args.clear else args.trim, args.verbose)
    if not args.quiet:
        print(shown)


def _inspect(args: argparse.Namespace) -> None:
    manifest = read_wheel(args.wheel)
    if args.json:
        print(json.dumps(manifest, indent=1, sort_keys=True))
        return
    shown = describe(manifest, args.wheel.name, every=args.verbose)
    print(shown.partition("\n")[0] if args.quiet else shown)


def _tune(args: argparse.Namespace) -> None:
    writable_folder(args.out_dir, "-o")
    opts = Options(warmup=args.warmup, reps=args.reps, kernels=tuple(args.kernel), budget=args.budget)
    table = tune(args.recipe, args.out_dir, opts, devices=args.devices, executor=args.executor, keep=args.keep)
    print(table if args.quiet else f"wrote {table}")


def _build(args: argparse.Namespace) -> int | None:
    for folder, what in ((args.out_dir, "-o"), (args.cache_dir, "--cache-dir"),
                         (args.keep_build_dir, "--keep-build-dir")):  # fmt: skip
        if folder is not None:
            writable_folder(folder, what)
    if args.nvcc is not None and shutil.which(args.nvcc) is None:
        raise UsageError(f"--nvcc {args.nvcc}: no such executable; give the path of nvcc, or leave --nvcc out")
    if toolchain.check_active() is None and (args.triton is not None or wanted_triton(args.recipe) is not None):
        _can_build_cuda(args)  # (before another Triton is fetched, the build that would need nvcc fails now)
    release = _release(args)
    if release is not None:  # another Triton than this environment's: the build runs with it, in a child
        if not args.quiet:
            print(f"building with Triton {release.version} kept in aotpack's cache ({release.path})", file=sys.stderr)
        return toolchain.run_build(release, args.argv)
    rec = load(args.recipe)
    for platform in dict.fromkeys(args.platform or [None]):  # one wheel each (with the cache, one compile)
        started = time.monotonic()
        options = BuildOptions(
            out_dir=args.out_dir, jobs=args.jobs, strict=args.strict, select=tuple(args.only),
            keep_build_dir=args.keep_build_dir, nvcc=args.nvcc, winners_only=args.winners_only,
            cache_dir=args.cache_dir, use_cache=not args.no_cache, line_info=args.line_info, cuda_floor=args.cuda,
            executor=args.executor, platform=platform,
        )  # fmt: skip
        result = run(rec, options, Progress(args.quiet))
        # the result alone, for a script: $(aotpack build -q recipe.yaml), a line per wheel
        print(result.wheel if args.quiet else result.said(time.monotonic() - started))
    return None


def _can_build_cuda(args: argparse.Namespace) -> None:
    """A recipe with CUDA kernels needs an nvcc: looked for before anything is fetched for the build."""
    if any(k.backend == "cuda" for k in recipes.sources(args.recipe).kernels):
        find_nvcc(args.nvcc)


def _release(args: argparse.Namespace, fetch: bool = True) -> toolchain.Toolchain | None:
    """The toolchain a build runs with, where --triton (or the recipe's triton:) names another release than the
    one installed; None to build here (``fetch`` False: also where none is kept, said)."""
    if toolchain.check_active() is not None:
        return None  # the build's child: its release is first on the path
    wanted, where = (args.triton, "--triton") if args.triton is not None else (wanted_triton(args.recipe), "")
    if wanted is None:
        return None
    try:
        request = toolchain.Request.parse(wanted)
    except ValueError as exc:
        raise UsageError(f"{where} {wanted}: {exc}") from None  # the recipe's own value was checked with its line
    found = toolchain.needed(request, args.cache_dir or cache.default_dir(), args.wheelhouse, fetch)
    if found is None and not fetch and not _installed_is(request):
        print(f"the recipe names Triton {wanted}, which is neither installed nor kept in aotpack's cache: planning "
              f"with the installed one (--triton {wanted} fetches it)", file=sys.stderr)  # fmt: skip
    return found


def _installed_is(request: toolchain.Request) -> bool:
    try:
        return request.matches(releases.installed_version())
    except AotpackError:  # (none installed, or one aotpack is not tested with: the plan says so itself)
        return False


COMMANDS: dict[str, Callable[[argparse.Namespace], int | None]] = {
    "build": _build, "tune": _tune, "inspect": _inspect, "new": _new, "record": record.main,
    "rehearse": rehearse.main, "cache": _cache, "plan": _plan,
}  # fmt: skip


class _Closed(io.TextIOBase):
    """Standard output or error as Python has it when the process started with it closed (``cmd >&-``): None, which
    every print would meet as an AttributeError. Writing to it is the OSError a closed descriptor gives."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "it is closed")


def main(argv: Sequence[str] | None = None) -> int:
    for name in ("stdout", "stderr"):  # (started with one closed: said as a closed stream, not a traceback)
        if getattr(sys, name) is None:
            setattr(sys, name, _Closed())
    try:
        try:
            args = _parser().parse_args(argv)  # an option's reader may raise aotpack's own error (--widen)
        except SystemExit:  # --help, --version, a usage error: what argparse printed reaches its reader, or is
            sys.stdout.flush()  # an OSError said below
            raise
        args.argv = list(sys.argv[1:] if argv is None else argv)
        level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
        logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
        code = COMMANDS[args.command](args) or 0
        sys.stdout.flush()  # (what it printed reaches its reader now, or fails here, not at exit)
        return code
    except AotpackError as exc:
        print(shown(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("aotpack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`aotpack plan ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    except OSError as exc:  # the system refused what no reader or writer of aotpack's turned into its own error
        if exc.filename:  # (a file: named, with what to do about it)
            name = str(exc.filename)
            print(shown(AotpackError(f"{name}: {exc.strerror or exc}; {advice(exc.errno, name, 'give another path')}")),
                  file=sys.stderr)  # fmt: skip
            return AotpackError.exit_code
        # what the command prints cannot be written (standard output on a full disk, closed): said once
        if not isinstance(sys.stdout, _Closed):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        with contextlib.suppress(OSError):  # (standard error closed too: the exit code says it)
            print(f"aotpack: error: cannot write standard output: {exc.strerror or exc}", file=sys.stderr)
        return OutputError.exit_code


if __name__ == "__main__":
    sys.exit(main())
