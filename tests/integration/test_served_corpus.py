"""The hostile corpus's served surface (tests/hostile/served.py): every variable the runtime reads, set to every kind
of bad value, in a served program's process and in one it starts, on the small package built here and the fake
driver. Each runs to its end with Triton's compilation refused, warnings naming the variable, within its budget,
and writes nothing outside its folder."""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile import runner, served


@pytest.fixture
def reachable() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="aotpack-served-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_every_runtime_variable_with_every_bad_value_leaves_a_served_program_running(installed, fake_driver,
                                                                                     reachable):  # fmt: skip
    cases = list(served.cases())
    results = runner.run_cases(cases, runner.Workspace(reachable, installed, fake_driver), mode="fork", jobs=2)
    text = runner.report(results, None)
    assert not [r for r in results if r.cls not in ("GOOD", "SKIPPED")], text
