"""Class misses into a recipe (aotpack/record/misses.py): reports read and checked, and each kernel's ``classes:``
written where the recipe stands, every other byte as it was."""

import json

import pytest

from aotpack import limits
from aotpack.backends import recipes as recipe
from aotpack.errors import RecipeError, RecordError, UsageError
from aotpack.record import misses

from ..shared import GOOD


def miss(jit="_DD_", kernel="add", package="kit", calls=2):
    return misses.Miss(package=package, kernel=kernel, ran="____", jit=jit, calls=calls)


def write(folder, text):
    path = folder / "r.yaml"
    path.write_text(text)
    return path


def test_a_classes_line_is_added_after_the_kernel_s_last_entry(kernel_dir):
    text = "# our kernels\n" + GOOD.replace("num_warps: 8}}\n", "num_warps: 8}}  # tuned by hand\n") + "# end\n"
    path = write(kernel_dir, text)
    assert misses.add_classes(path, [miss(), miss(), miss(jit="DD_D")]) == ["add: added _DD_, DD_D to classes"]
    after = path.read_text()
    assert after == text.replace("# tuned by hand\n", '# tuned by hand\n    classes: ["_DD_", "DD_D"]\n')
    (kernel,) = recipe.load(path).kernels
    assert len(kernel.classes) == 2
    assert misses.add_classes(path, [miss()]) == [] and path.read_text() == after, "already there: unchanged"


def test_an_existing_list_is_extended_in_place(kernel_dir):
    text = GOOD.replace("    grid:", '    classes: ["D_DD"]   # from production\n    grid:')
    path = write(kernel_dir, text)
    misses.add_classes(path, [miss()])
    assert path.read_text() == text.replace('["D_DD"]   #', '["D_DD", "_DD_"]   #')


def test_a_kernel_written_as_a_flow_mapping_gets_the_key_inside_it(kernel_dir):
    flow = ('  add: {triton: add.py:add_kernel, types: {T: [fp32]}, args: {x_ptr: "*T", y_ptr: "*T", out_ptr: "*T",'
            ' n_elements: i32}, constexprs: {BLOCK: [256]}, grid: ["cdiv(n_elements, BLOCK)"]}\n')  # fmt: skip
    text = GOOD[: GOOD.index("  add:\n")] + flow
    path = write(kernel_dir, text)
    misses.add_classes(path, [miss(jit="_DDD")])
    assert path.read_text() == text.replace("]}\n", '], classes: ["_DDD"]}\n')
    assert recipe.load(path).kernels[0].classes


@pytest.mark.parametrize(
    ("reported", "note"),
    [
        (miss(jit="DD"), "add: class DD not added: expected one letter per argument the JIT keys (4: x_ptr, y_ptr, "
                         "out_ptr, n_elements), each D, 1, N or _"),
        (miss(jit="1DDD"), "add: class 1DDD not added: argument x_ptr cannot be '1' (it can be D, _)"),
    ],
)  # fmt: skip
def test_a_class_the_kernel_cannot_have_is_said_and_nothing_written(kernel_dir, reported, note):
    path = write(kernel_dir, GOOD)
    assert misses.add_classes(path, [reported]) == [note]
    assert path.read_text() == GOOD


def test_other_packages_and_kernels_are_left_alone(kernel_dir):
    path = write(kernel_dir, GOOD)
    assert misses.add_classes(path, [miss(package="other"), miss(kernel="mul")]) == []
    assert path.read_text() == GOOD


def test_a_recipe_that_does_not_load_is_refused_and_kept(kernel_dir):
    text = GOOD.replace("num_warps: [4, 8]", "num_warp: [4, 8]")
    path = write(kernel_dir, text)
    with pytest.raises(RecipeError, match="unknown key 'num_warp'"):
        misses.add_classes(path, [miss()])
    assert path.read_text() == text


def report(**changes):
    body = {"format": "aotpack-report/1", "package": "kit", "version": "1.0.0", "class_misses_lost": 0,
            "class_misses": [{"kernel": "add", "ran": "____", "jit": "_DD_", "calls": 3}]}  # fmt: skip
    return json.dumps({**body, **changes})


def test_reports_are_read_from_files_and_folders(tmp_path):
    (tmp_path / "kit.1.json").write_text(report())
    (tmp_path / "kit.2.json").write_text(report(class_misses=[]))
    (tmp_path / "notes.txt").write_text("not a report")
    assert misses.read_reports([tmp_path]).misses == [miss(calls=3)]
    assert misses.read_reports([tmp_path]).files == 2  # (notes.txt is no report)
    assert misses.read_reports([tmp_path / "kit.1.json"]) == misses.Reported(misses=[miss(calls=3)], compilations=[],
                                                                             files=1)  # fmt: skip


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe", "not a JSON report"),
        (b"[1, 2]", "not an aotpack report (format aotpack-report/1)"),
        (report(format="other").encode(), "not an aotpack report"),
        (report(class_misses=[{"kernel": "add"}]).encode(), "'ran'"),
        (report(class_misses=[{"kernel": "add", "ran": 1, "jit": "_", "calls": 1}]).encode(), "malformed"),
        (report(class_misses=[{"kernel": "add", "ran": "_", "jit": "_", "calls": -1}]).encode(), "malformed"),
        (report(class_misses=5).encode(), "not iterable"),
        (report(class_misses=[{"kernel": "../../x", "ran": "_", "jit": "_", "calls": 1}]).encode(), "names no kernel"),
        (
            report(class_misses=[{"kernel": "add", "ran": "_", "jit": "D\x1b[2J", "calls": 1}]).encode(),
            "names no kernel and class aotpack writes",
        ),
        (
            report(class_misses=[{"kernel": "add", "ran": "_" * 5000, "jit": "_", "calls": 1}]).encode(),
            "names no kernel",
        ),
        (b" " * (limits.MAX_REPORT_BYTES + 1), "larger than a report can be"),
    ],
)
def test_a_bad_report_is_refused_naming_the_file(tmp_path, content, message):
    bad = tmp_path / "kit.9.json"
    bad.write_bytes(content)
    with pytest.raises(RecordError, match=str(bad)) as info:
        misses.read_reports([bad])
    assert message in str(info.value)


def test_a_missing_report_is_refused(tmp_path):
    with pytest.raises(UsageError, match=f"--report {tmp_path / 'nowhere'}: no such report file or folder"):
        misses.read_reports([tmp_path / "nowhere"])
