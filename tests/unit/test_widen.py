"""A recipe's ``widen:``: read with a located error for each wrong value; the build widens every row of a
``launch: triton`` kernel that has the constexpr (idempotent with record's own widening); ``aotpack record``
keeps it, joined with ``--widen``, and widens the rows it writes with it: kept, new, and those a report adds."""

import json
import re
from pathlib import Path

import pytest
import yaml

from aotpack import record
from aotpack.backends import recipes as recipe
from aotpack.commands import cli
from aotpack.errors import RecipeError, UsageError
from aotpack.plan import variants as plan
from aotpack.record.write import _identities
from aotpack.runtime._aotpack_source import source_name

from .test_record_merge import ADD, event, events, recipe_dir

RECIPE = """\
package: recorded_kernels
version: 0.1.0
targets: [sm_90a]
widen: {BLOCK: [256, 512]}
kernels:
  add_kernel:
    triton: kernels/add_copy.py:add_kernel
    launch: triton
    args: {x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: i32}
    variants:
      - {config: {BLOCK: 1024, num_warps: 4, num_stages: 3}, class: DDDD, launches: 5}
"""


def blocks(path: Path) -> list[tuple[object, str]]:
    """The BLOCK and class of each variant the recipe builds."""
    (kernel,) = recipe.load(path).kernels
    return [(dict(p.config.constexprs)["BLOCK"], "".join(s or "_" for s in p.states)) for p in kernel.points]


def test_the_build_widens_every_row_of_a_recorded_kernel(tmp_path):
    path = recipe_dir(tmp_path, RECIPE)
    assert recipe.load(path).widen == (("BLOCK", (256, 512)),)
    assert blocks(path) == [(256, "DDDD"), (512, "DDDD"), (1024, "DDDD")]
    loaded = recipe.load(path)
    ids = [v.id for v in plan.plan_variants(loaded) if v.spec.origin == "recipe"]
    assert ids == [f"add_kernel/BLOCK={b},w4,s3/sm_90a/DDDD" for b in (256, 512, 1024)]
    summary = plan.plan_summary(loaded, tuple(plan.plan_variants(loaded)))
    assert summary[-1] == "widen: BLOCK takes 256, 512 in every row of add_kernel"


def test_widening_at_build_is_idempotent_with_recording_and_folds_the_rows_it_joins(tmp_path):
    """A row record widened already builds the same variants; rows the widening makes one product of build it
    once; two rows written alike are still refused."""
    path = recipe_dir(tmp_path, RECIPE)
    want = blocks(path)
    path.write_text(RECIPE.replace("BLOCK: 1024,", "BLOCK: [256, 512, 1024],"))
    assert blocks(path) == want
    row = "      - {config: {BLOCK: 1024, num_warps: 4, num_stages: 3}, class: DDDD, launches: 5}\n"
    path.write_text(RECIPE + row.replace("1024", "256"))
    assert sorted(blocks(path)) == want
    path.write_text(RECIPE + row)
    with pytest.raises(RecipeError, match=r":12:9: .*the same variant is listed twice \(first at line 11\)"):
        recipe.load(path)


def test_a_kernel_written_by_hand_is_not_widened_and_widen_needs_a_recorded_kernel(tmp_path):
    text = RECIPE.replace("widen: {BLOCK: [256, 512]}", "widen: {BLOCK: [256]}")
    path = recipe_dir(tmp_path, text + "  hand:\n    triton: kernels/other.py:add_kernel\n    args: "
                      "{x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: i32}\n    constexprs: "
                      "{BLOCK: [1024]}\n    grid: ['cdiv(n_elements, BLOCK)']\n")  # fmt: skip
    hand = next(k for k in recipe.load(path).kernels if k.name == "hand")
    assert [dict(c.constexprs)["BLOCK"] for c in hand.configs] == [1024]
    path.write_text(text.split("  add_kernel:")[0] + "  hand:" + path.read_text().split("  hand:")[1])
    with pytest.raises(RecipeError, match=r"r.yaml:4:9: widen: no kernel built from a recording .* 'BLOCK' \(the "
                                          r"recipe has none\)"):  # fmt: skip
        recipe.load(path)


@pytest.mark.parametrize(
    ("widen", "where", "message"),
    [
        ("[BLOCK]", "4:8", "expected a mapping"),
        ("{BLOCK: 256}", "4:16", r"widen.BLOCK: expected a list of the values the constexpr takes, such as \[1, 2, 4, 8\]"),
        ("{1BLOCK: [1]}", "4:9", r"widen: '1BLOCK' is not a constexpr's name \(a Python identifier\)"),
        ("{BLOCK: []}", "4:16", r"widen.BLOCK: give between 1 and 4096 values \(aotpack's limits.MAX_WIDEN\); 0 are given"),
        ("{BLOCK: [" + ", ".join(map(str, range(1, 4099))) + "]}", "4:16", "give between 1 and 4096 values"),
        ("{BLOCK: [null]}", "4:17", r"widen.BLOCK\[0\]: None is not a value \(a number, true, false or printable"),
        ("{BLOCK: [1, .inf]}", "4:20", r"widen.BLOCK\[1\]: inf is not a finite number"),
        ("{BLOCK: [.nan]}", "4:17", "nan is not a finite number"),
        ("{BLOCK: [1000000000000000000]}", "4:17", "1000000000000000000... is past a 64-bit integer"),
        ('{BLOCK: ["a\\tb"]}', "4:17", r"'a\\tb' is not a value"),
        ("{BLOCK: [{dtype: fp16}]}", "4:17", r"widen.BLOCK\[0\]: expected a single value, got a mapping"),
        ("{BLOCK: [1, 2, 1]}", "4:23", r"widen.BLOCK\[2\]: 1 is listed twice \(first at line 4\)"),
        ("{BLCK: [1]}", "4:9", "no kernel built from a recording .* 'BLCK' — did you mean 'BLOCK'\\?"),
        ("{BLOCK: [1], BLOCK: [2]}", "4:21", "duplicate key 'BLOCK' in widen"),
    ],
)  # fmt: skip
def test_a_wrong_widen_is_a_located_error(tmp_path, widen, where, message):
    path = recipe_dir(tmp_path, RECIPE.replace("{BLOCK: [256, 512]}", widen))
    with pytest.raises(RecipeError) as caught:
        recipe.load(path)
    assert str(caught.value).startswith(f"{path}:{where}: "), str(caught.value)
    assert re.search(message, str(caught.value)), str(caught.value)


def test_values_of_every_kind_are_taken_once_each(tmp_path):
    path = recipe_dir(tmp_path, RECIPE.replace("[256, 512]", "[1, true, 0.5, fast, -3, '']"))
    assert recipe.load(path).widen == (("BLOCK", (1, True, 0.5, "fast", -3, "")),)


def test_record_keeps_widen_and_widens_kept_new_and_reported_rows(tmp_path, capsys):
    path = recipe_dir(tmp_path, RECIPE.split("widen:")[0] + "kernels:" + RECIPE.split("kernels:")[1])
    assert record.write(path, events(event(block=2048)), "recorded_kernels", widen={"BLOCK": [256, 512]})
    data = yaml.safe_load(path.read_text())
    assert data["widen"] == {"BLOCK": [256, 512]}
    rows = data["kernels"]["add_kernel"]["variants"]
    assert [r["config"]["BLOCK"] for r in rows] == [[256, 512, 1024], [256, 512, 2048]]  # kept, new
    assert "widen: {BLOCK: [256, 512]}\n" in path.read_text()
    # a report (AOTPACK_REPORT) merged without --widen: its row takes the recipe's widen: too. activate() names
    # the function's written-out source by its text's hash, and its identity is the recorded kernel's
    report = tmp_path / "rep.json"
    reported = {**event(block=4096, n=""), "number": 0}
    identity = {v: k for k, v in _identities(yaml.safe_load(path.read_text()), tmp_path).items()}["add_kernel"]
    name = source_name(ADD)
    reported["function"] = {**reported["function"], "source": name, "identity": identity}
    reported["sources"] = {name: ADD}
    report.write_text(json.dumps({"format": "aotpack-report/1", "package": "recorded_kernels", "class_misses": [],
                                  "compilations": [reported]}))  # fmt: skip
    assert cli.main(["record", "-o", str(path), "--report", str(report)]) == 0
    assert "1 compilation reported" in capsys.readouterr().out
    rows = yaml.safe_load(path.read_text())["kernels"]["add_kernel"]["variants"]
    assert [(r["config"]["BLOCK"], r["class"]) for r in rows] == [
        ([256, 512, 1024], "DDDD"), ([256, 512, 2048], "DDDD"), ([256, 512, 4096], "DDD_")]  # fmt: skip
    assert cli.main(["record", "-o", str(path), "--report", str(report)]) == 0
    assert "unchanged" in capsys.readouterr().out, "merging the same report again changes nothing"
    assert cli.main(["record", "-o", str(path), "--report", str(report), "-q"]) == 0
    assert capsys.readouterr() == ("", ""), "-q: nothing said of a merge that went well"
    assert len(blocks(path)) == 7  # 256, 512, 1024, 2048 of DDDD (the two rows overlap: built once); 3 of DDD_
    # --widen again: its values join those kept, in order, and every row of the kernel takes them
    before = path.read_text()
    assert record.write(path, events(event(block=2048)), "recorded_kernels", widen={"BLOCK": [64, 256]})
    data = yaml.safe_load(path.read_text())
    assert data["widen"] == {"BLOCK": [256, 512, 64]}
    assert [r["config"]["BLOCK"] for r in data["kernels"]["add_kernel"]["variants"]] == [
        [64, 256, 512, 1024], [64, 256, 512, 2048], [64, 256, 512, 4096]]  # fmt: skip
    changed = set(before.splitlines()) ^ set(path.read_text().splitlines())
    assert {line.split(":")[0].strip() for line in changed} == {"widen", "- {config"}, "only widen: and rows change"
    assert not record.write(path, events(event(block=2048)), "recorded_kernels", widen={"BLOCK": [64]})


def test_record_refuses_a_widen_no_recorded_kernel_takes(tmp_path):
    path = tmp_path / "new.yaml"
    (tmp_path / "kernels").mkdir()
    with pytest.raises(UsageError, match=r"--widen bs=\.\.\.: no recorded kernel takes a constexpr 'bs' \(their "
                                          r"constexprs: BLOCK\); widen one of theirs"):  # fmt: skip
        record.write(path, events(event()), "recorded_kernels", widen={"bs": [1, 2]})
    assert not path.exists()
    assert record.write(path, events(event()), "recorded_kernels", widen={"BLOCK": [1, 2]})
    assert yaml.safe_load(path.read_text())["widen"] == {"BLOCK": [1, 2]}
    assert [b for b, _ in blocks(path)] == [1, 2, 1024]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("BLOCK: 1180591620717411303424, num_warps: 4, num_stages: 3", "1180591620717411303424... is past a 64-bit"),
        ("BLOCK: '" + "x" * 100_000 + "', num_warps: 4, num_stages: 3", "has 100000 characters; a constexpr's text "
         "has at most 1024"),
        ("BLOCK: .inf, num_warps: 4, num_stages: 3", "inf is not a finite number"),
        ("BLOCK: 1024, num_warps: 4, num_stages: 100000000000000000000", r"expected num_stages from 1 to 32 "
         r"\(aotpack's limits.MAX_STAGES\), got 100000000000000000000"),
        ("BLOCK: 1024, num_warps: 4, num_stages: 1e20", "expected an integer"),
    ],
)  # fmt: skip
def test_a_recorded_row_past_what_the_build_takes_is_a_located_error_when_read(tmp_path, row, message):
    """plan (and every reader) applies the build's own bounds to recorded rows, as to a grid written by hand."""
    path = recipe_dir(tmp_path, RECIPE.replace("widen: {BLOCK: [256, 512]}\n", "").replace(
        "BLOCK: 1024, num_warps: 4, num_stages: 3", row))  # fmt: skip
    with pytest.raises(RecipeError, match=rf"r.yaml:10:\d+: .*{message}"):
        recipe.load(path)


def test_a_grid_written_by_hand_has_the_same_bounds(tmp_path):
    text = RECIPE.split("  add_kernel:")[0].replace("widen: {BLOCK: [256, 512]}\n", "") + (
        "  hand:\n    triton: kernels/add_copy.py:add_kernel\n    args: {x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: "
        "'*fp32', n_elements: i32}\n    constexprs: {BLOCK: [1024, 1180591620717411303424]}\n    num_stages: [3, 99]\n"
        "    grid: ['cdiv(n_elements, BLOCK)']\n")  # fmt: skip
    path = recipe_dir(tmp_path, text)
    with pytest.raises(RecipeError, match=r"constexprs.BLOCK\[1\]: 1180591620717411303424... is past a 64-bit"):
        recipe.load(path)
    path.write_text(text.replace(", 1180591620717411303424", ""))
    with pytest.raises(RecipeError, match=r"num_stages\[1\]: .*32"):
        recipe.load(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("BLOCK=", "a value is empty"),
        ("BLOCK=1,,2", "a value is empty"),
        ("BLOCK=1, ", "a value is empty"),
        ("BLOCK", "expected NAME=VALUES"),
        ("1x=2", "expected NAME=VALUES"),
        ("BLOCK=1..99999999999", "give between 1 and 4096 values"),
    ],
)
def test_a_widen_option_that_gives_no_value_or_no_name_is_a_usage_error(text, message):
    from aotpack.record import parse_widen

    with pytest.raises(UsageError, match=message):
        parse_widen(text)
    assert parse_widen("BLOCK=1,x,true,2.5") == ("BLOCK", [1, "x", True, 2.5])
