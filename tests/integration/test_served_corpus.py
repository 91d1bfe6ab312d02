"""The hostile corpus's served surface (tests/hostile/served.py): every variable the runtime reads, set to bad values,
in a served program's process and in one it starts, on the small package built here and the fake driver. Each runs
to its end with Triton's compilation refused, warnings naming the variable, within its budget, and writes nothing
outside its folder. A seeded sample here: every variable in each program once and every kind of value once, then at
random (AOTPACK_SERVED_SAMPLE cases; 0: all of them, as ``python -m tests.hostile --served`` runs them)."""

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile import runner, served

SAMPLE = int(os.environ.get("AOTPACK_SERVED_SAMPLE", "48"))


@pytest.fixture
def reachable() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="aotpack-served-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def sample(cases: list, n: int, seed: int = 58) -> list:
    """Every (program, variable) once and every kind of value once, then at random, ``n`` in all (0: every case)."""
    if n <= 0:
        return cases
    rng = random.Random(seed)
    chosen: dict[str, object] = {}
    for group in ("key", "mutation"):
        kinds: dict[tuple[str, str], list] = {}
        for c in cases:
            kinds.setdefault((c.base, getattr(c, group)), []).append(c)
        for _, members in sorted(kinds.items()):
            if not any(m.id in chosen for m in members):
                pick = rng.choice(members)
                chosen[pick.id] = pick
    rest = [c for c in cases if c.id not in chosen]
    return [*chosen.values(), *rng.sample(rest, max(0, min(len(rest), n - len(chosen))))]


def test_runtime_variables_with_bad_values_leave_a_served_program_running(installed, fake_driver, reachable):
    cases = sample(list(served.cases()), SAMPLE)
    assert {c.key for c in cases} == set(served.KINDS)
    results = runner.run_cases(cases, runner.Workspace(reachable, installed, fake_driver), mode="fork", jobs=2)
    text = runner.report(results, None)
    assert not [r for r in results if r.cls not in ("GOOD", "SKIPPED")], text
