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


def test_a_case_over_its_budget_runs_again_alone_and_is_a_hang_only_when_over_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget measures the child's CPU seconds, which a loaded machine lengthens too: a case over its budget
    runs once more alone; over it again (a budget no run can meet), it stays a HANG."""
    files = generator.base_files(generator.BASES["triton"])[0]
    case = generator.Case(id="base/over", surface="base", base="triton", key="-", mutation="-",
                          make_files=generator.fixed(files), expect="valid", reason="the base", budget=0.0)  # fmt: skip
    (result,) = runner.run_cases([case], runner.Workspace(tmp_path / "a"), mode="fork", jobs=1)
    assert result.cls == "HANG" and "over its 0.0 s budget" in result.note

    runs: list[list[str]] = []
    real = runner._run

    def once_slow(cases: list[generator.Case], *args: object) -> list[runner.Result]:
        runs.append([c.id for c in cases])
        results = real(cases, *args)  # type: ignore[arg-type]
        if len(runs) == 1:  # the first run, under load: over its budget
            results = [runner.Result(r.case, "HANG", r.rc, 9.0, r.output, "9.00 s, over its 30.0 s budget")
                       for r in results]  # fmt: skip
        return results

    monkeypatch.setattr(runner, "_run", once_slow)
    calm = generator.Case(id="base/calm", surface="base", base="triton", key="-", mutation="-",
                          make_files=generator.fixed(files), expect="valid", reason="the base", budget=30)  # fmt: skip
    (result,) = runner.run_cases([calm], runner.Workspace(tmp_path / "b"), mode="fork", jobs=2)
    assert runs == [["base/calm"], ["base/calm"]]
    assert result.cls == "GOOD" and "over budget once under load (9.00 s" in result.note


def test_every_variable_the_runtime_reads_is_in_the_served_corpus() -> None:
    """The served surface keeps its own table of the runtime's variables; one added to _aotpack_env without a line
    there fails."""
    from aotpack.runtime import _aotpack_env
    from tests.hostile import served

    names = {v for k, v in vars(_aotpack_env).items() if k.isupper() and isinstance(v, str)}
    assert set(served.KINDS) == names
    assert {c.key for c in served.cases()} == names


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
