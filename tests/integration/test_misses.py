"""Class misses, end to end on the fake driver: a call that runs a less specialized class than Triton's JIT
would compile for it is counted (``pkg.stats()``), warned once when asked, written at exit under
AOTPACK_REPORT; ``aotpack record --report`` adds the JIT's class to the recipe's ``classes:`` (every other
byte kept), and the rebuilt wheel runs that class."""

import json
import textwrap

from aotpack import build
from aotpack.backends import recipes as recipe
from aotpack.commands import cli

from .helpers import install_wheel, run_on_fake_driver

PRELUDE = """
import warnings
import small_kernels as k

class Array:
    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": "<f4", "version": 3}
A = 0x100000000
x, y, o = Array(A, 4096), Array(A + 0x1000000, 4096), Array(A + 0x2000000, 4096)
odd = Array(A + 4, 100)  # misaligned, and 100 is not 16-divisible: two assumptions of every built class but ____
"""


def run(code, site, fake_driver, tmp_path, **env):
    return run_on_fake_driver(PRELUDE + textwrap.dedent(code), site, fake_driver, tmp_path / "cuda.log", **env)


def test_misses_are_counted_warned_once_and_reported_at_exit(installed, fake_driver, tmp_path):
    reports = tmp_path / "reports"
    out, log = run(
        """
        k.add(x, y, o)                              # the JIT's class: not a miss
        print(k.stats()["class_misses"])
        k.warn_class_misses(True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                k.add(odd, y, o, n_elements=100)
        print(len(caught), caught[0].category.__name__ if caught else None)
        print(caught[0].message if caught else None)
        print(k.stats()["class_misses"], k.stats()["class_misses_lost"])
        print(k.add.select(odd, y, o, n_elements=100))
        """,
        installed, fake_driver, tmp_path, AOTPACK_REPORT=str(reports),
    )  # fmt: skip
    assert out[0] == "[]"
    assert out[1] == "1 ClassMissWarning"
    assert out[2].startswith("small_kernels.add: a call ran class ____ where Triton's JIT would compile class _DD_; "
                             "add it to the recipe (kernels.add.classes: [_DD_])")  # fmt: skip
    assert out[3] == "[{'kernel': 'add', 'ran': '____', 'jit': '_DD_', 'calls': 3}] 0"
    assert out[4].endswith("/sm_90a/____")
    assert len([line for line in log if line.startswith("launch")]) == 4
    (report,) = reports.glob("small_kernels.*.json")
    data = json.loads(report.read_text())
    assert data["class_misses"] == [{"kernel": "add", "ran": "____", "jit": "_DD_", "calls": 3}]
    assert data["package"] == "small_kernels" and data["format"] == "aotpack-report/1"
    assert not [p for p in reports.iterdir() if p.name.startswith(".")], "no temporary file left"


def test_record_adds_the_missed_class_and_the_rebuilt_wheel_runs_it(small_recipe, installed, fake_driver,
                                                                     tmp_path, capsys):  # fmt: skip
    reports = tmp_path / "reports"
    run("k.add(odd, y, o, n_elements=100)\n", installed, fake_driver, tmp_path, AOTPACK_REPORT=str(reports))
    mine = tmp_path / "small.yaml"
    original = "# the team's recipe\n" + small_recipe.read_text().replace(
        "    autotune: true\n", "    autotune: true  # keep\n"
    )
    mine.write_text(original)
    assert cli.main(["record", "-o", str(mine), "--report", str(reports)]) == 0
    assert f"{mine}: add: added _DD_ to classes" in capsys.readouterr().out
    edited = mine.read_text()
    assert edited.replace('\n    classes: ["_DD_"]', "") == original, "only the classes line is added"
    (kernel,) = recipe.load(mine).kernels
    assert kernel.classes == (("", "D", "D", ""),)
    assert cli.main(["record", "-o", str(mine), "--report", str(reports)]) == 0
    assert mine.read_text() == edited, "recording the same misses again changes nothing"
    site = install_wheel(build(mine, tmp_path / "dist", jobs=2).wheel, tmp_path / "site")
    out, _ = run("print(k.add.select(odd, y, o, n_elements=100))\nk.add(odd, y, o, n_elements=100)\n"
                 "print(k.stats()['class_misses'])\n", site, fake_driver, tmp_path)  # fmt: skip
    assert out[0].endswith("/sm_90a/_DD_") and out[1] == "[]"
