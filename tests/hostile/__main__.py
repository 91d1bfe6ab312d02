"""``python -m tests.hostile [--all] [--sample N] [--seed S] [--out DIR]``: run the hostile corpus and report."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from . import generator, runner, served


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.hostile", description=__doc__)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--all", action="store_true", help="every generated case")
    what.add_argument("--sample", type=int, default=300, help="a seeded sample of N cases (default 300)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--surface", action="append", choices=list(generator.SURFACES), help="only these surfaces")
    p.add_argument("--match", default=None, help="only cases whose id contains this text")
    p.add_argument(
        "--mode",
        choices=("fork", "subprocess"),
        default="fork",
        help="fork: a child of this process per case (fast); subprocess: a fresh interpreter per case",
    )
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="write results.json and report.txt here")
    p.add_argument("--list", action="store_true", help="list the cases' ids and exit")
    p.add_argument("--gaps", action="store_true", help="list keys the loader takes that no base holds")
    p.add_argument("--served", action="store_true", help="the served surface (tests/hostile/served.py) alone: builds "
                   "the small package and the fake driver first")  # fmt: skip
    args = p.parse_args(argv)
    if args.gaps:
        for where, keys in generator.uncovered().items():
            print(f"{where}: {', '.join(keys)}")
        return 0
    cases = list(served.cases()) if args.served else generator.generate(tuple(args.surface or generator.SURFACES))
    if args.match:
        cases = [c for c in cases if args.match in c.id]
    if not args.all:
        cases = sample(cases, args.sample, args.seed)
    if args.list:
        print("\n".join(c.id for c in cases))
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aotpack-hostile-") as tmp:
        site, driver = served.prepare(Path(tmp) / "served") if args.served else (None, None)
        ws = runner.Workspace(Path(tmp), site, driver)
        startup = runner.startup_time(ws) if args.mode == "subprocess" else 0.0
        results = runner.run_cases(cases, ws, mode=args.mode, jobs=args.jobs, startup=startup, progress=True)
    print(runner.report(results, args.out), end="")
    print(f"({time.monotonic() - started:.0f} s, mode {args.mode})", file=sys.stderr)
    return 1 if any(r.cls in runner.FAILING for r in results) else 0


def sample(cases: list[generator.Case], n: int, seed: int) -> list[generator.Case]:
    """``n`` cases, seeded: every surface and mutation kind first (one each), then at random."""
    rng = random.Random(seed)
    by_kind: dict[tuple[str, str], list[generator.Case]] = {}
    for c in cases:
        by_kind.setdefault((c.surface, c.mutation.split("#")[0]), []).append(c)
    chosen = [rng.choice(group) for _, group in sorted(by_kind.items())]
    rng.shuffle(chosen)
    chosen = chosen[:n]
    ids = {c.id for c in chosen}
    rest = [c for c in cases if c.id not in ids]
    chosen += rng.sample(rest, max(0, min(len(rest), n - len(chosen))))
    return chosen


if __name__ == "__main__":
    sys.exit(main())
