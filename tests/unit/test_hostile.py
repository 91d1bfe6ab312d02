"""The hostile corpus (tests/hostile), a bounded seeded sample: every surface and mutation kind once, then at
random, each case in a forked child with a timeout. No traceback, hang, crash, wrong accept or stray write may
come out. ``python -m tests.hostile --all`` runs the whole corpus (README of tests/hostile: its docstring)."""

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile import generator, runner
from tests.hostile.__main__ import sample

SAMPLE = int(os.environ.get("AOTPACK_HOSTILE_SAMPLE", "600"))  # every surface and mutation kind once (563)
SEED = int(os.environ.get("AOTPACK_HOSTILE_SEED", "29"))


def test_the_generator_names_every_case_once_and_covers_every_surface() -> None:
    cases = generator.generate()
    assert len({c.id for c in cases}) == len(cases)
    assert {c.surface for c in cases} == set(generator.SURFACES)
    assert all(c.reason for c in cases if c.expect != "invalid"), "a valid or open case says why"


def test_the_bases_are_valid(tmp_path: Path) -> None:
    """Each base plans as is: a case changes one thing of a valid recipe."""
    files = {name: generator.base_files(base)[0] for name, base in generator.BASES.items()}
    cases = [generator.Case(id=f"base/{name}", surface="base", base=name, key="-", mutation="-",
                            make_files=generator.fixed(f), expect="valid", reason="the base", budget=30)
             for name, f in files.items()]  # fmt: skip
    results = runner.run_cases(cases, runner.Workspace(tmp_path), mode="fork", jobs=2)
    assert [(r.case.id, r.cls, r.note) for r in results if r.cls != "GOOD"] == []


def test_every_setting_of_the_backend_is_in_the_corpus() -> None:
    """The corpus keeps its own table of the PEP 517 backend's settings (written from the docs, not derived from
    the code it tests); a setting added to the backend without a line here fails."""
    from aotpack import build_meta

    kinds = {key: kind.__name__ for key, kind in build_meta.SETTINGS.items()}
    assert generator.SETTING_KINDS == kinds and set(generator.SETTINGS) == set(kinds)


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A workspace folder the "non-root" cases' user (nobody, when the tests run as root) can reach: not under
    pytest's own temporary folder, whose ancestors are its owner's alone."""
    folder = Path(tempfile.mkdtemp(prefix="aotpack-hostile-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(sys.platform != "linux", reason="fork, FIFOs and /proc")
def test_a_sample_of_the_hostile_corpus(reachable: Path) -> None:
    cases = sample(generator.generate(), SAMPLE, SEED)
    results = runner.run_cases(cases, runner.Workspace(reachable), mode="fork", jobs=2)
    text = runner.report(results, None)
    failing = [r for r in results if r.cls in runner.FAILING]
    assert not failing, text
