"""`aotpack record` merging into a recipe never damages it: every recipe of the repository and generated
placements of comments, anchors and quoting take a new recording with only what it adds changed; a
re-recording leaves the file byte-identical (not written); a failed recording or a malformed recipe leaves it
as it was. The recordings are agent events, as record_agent writes them (no GPU, no Triton)."""

import difflib
import importlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from aotpack import limits, record
from aotpack.backends import recipes as recipe
from aotpack.commands import cli
from aotpack.errors import OutputError, RecipeError, RecordError
from aotpack.record import kernels, program

ROOT = Path(__file__).resolve().parents[2]
ADD = (ROOT / "examples" / "add.py").read_text()
SOURCE = "add_copy.py"  # the written-out source every recorded kernel here names (kernels/add_copy.py)
REF = f"kernels/{SOURCE}:add_kernel"


def event(dtype: str = "fp32", block: int = 1024, n: str = "D", warps: int = 4, arch: int = 90,
          source: str = SOURCE, number: int = 0) -> dict[str, Any]:  # fmt: skip
    """A compile event of add_kernel(x, y, out, n, BLOCK) as the agent writes it; ``n``: n_elements' class."""
    signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "n_elements": "i32",
                 "BLOCK": "constexpr"}  # fmt: skip
    attrs = [[[i], [["tt.divisibility", 16]]] for i in range(4 if n == "D" else 3)]
    params = [["x_ptr", False], ["y_ptr", False], ["out_ptr", False], ["n_elements", False], ["BLOCK", True]]
    function = {"module": "m", "qualname": "add_kernel", "name": "add_kernel", "identity": source, "source": source,
                "params": params}  # fmt: skip
    return {"event": "compile", "number": number, "function": function, "signature": signature,
            "constants": [[[4], block]], "attrs": attrs, "num_warps": warps, "num_stages": 3, "options": {},
            "arch": arch, "sources": {source: ADD}}  # fmt: skip


def events(*compiled: dict[str, Any]) -> record.Events:
    out = record.Events()
    for number, e in enumerate(compiled):
        out.add({**e, "number": number})
    return out


def row(dtype: str | None, block: int, cls: str = "DDDD", warps: int = 4, launches: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"types": {"T": dtype}} if dtype else {}
    return {**out, "config": {"BLOCK": block, "num_warps": warps, "num_stages": 3}, "class": cls,
            "launches": launches}  # fmt: skip


# a recording to merge, and how it changes a recipe's data: a new row and target; a new dtype (the kernel's
# arguments take a type variable); a new kernel (another function)
def _new_row(data: dict[str, Any]) -> None:
    data["targets"] = sorted({*data["targets"], "sm_80"})
    kernel = data["kernels"]["add_kernel"]
    kernel["variants"].append(row(None, 512, "DDD_"))


def _new_dtype(data: dict[str, Any]) -> None:
    kernel = data["kernels"]["add_kernel"]
    kernel["types"] = {"T": ["fp16", "fp32"]}
    kernel["args"] = {"x_ptr": "*T", "y_ptr": "*T", "out_ptr": "*T", "n_elements": "i32"}
    kernel["variants"] = [{"types": {"T": "fp32"}, **r} for r in kernel["variants"]] + [row("fp16", 256)]


def _new_kernel(data: dict[str, Any]) -> None:
    data["kernels"]["add_kernel_2"] = {"triton": "kernels/other.py:add_kernel", "launch": "triton",
                                       "args": {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                                "n_elements": "i32"}, "variants": [row(None, 1024)]}  # fmt: skip


RECORDINGS = {
    "new row": ([event(block=512, n="", arch=80)], _new_row),
    "new dtype": ([event("fp16", 256)], _new_dtype),
    "new kernel": ([event(source="other.py")], _new_kernel),
}

HAND = """\
  add:
    doc: >
      out = x + y,
      written by hand.
    triton: kernels/add_copy.py:add_kernel
    args:
      x_ptr: "*fp32"
      y_ptr: '*fp32'
      out_ptr: {type: "*fp32"}
      n_elements: {type: i32, default: numel(out_ptr)}
    constexprs: {BLOCK: [1024]}
    grid: ["cdiv(n_elements, BLOCK)"]
"""

BASE = (
    """\
# The team's recipe: recorded, then edited by hand.
package: recorded_kernels
version: 0.10
summary: 'Kernels, in quotes'
license: "Apache-2.0"
targets: [sm_90a]
kernels:
  add_kernel:
    triton: kernels/add_copy.py:add_kernel
    launch: triton
    args: {x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: i32}
    variants:
      - {config: {BLOCK: 1024, num_warps: 4, num_stages: 3}, class: DDDD, launches: 5}
      - {config: {BLOCK: 2048, num_warps: 8, num_stages: 3}, class: DDDD, launches: 2}
"""
    + HAND
)


def _block_scalar_lines(text: str) -> set[int]:
    """The lines of ``text`` that are a block scalar's content (a comment there would be text)."""
    inside, out, indent = False, set(), 0
    for i, line in enumerate(text.splitlines()):
        if inside and (not line.strip() or len(line) - len(line.lstrip()) > indent):
            out.add(i)
            continue
        inside = line.rstrip().endswith((": |", ": >"))
        indent = len(line) - len(line.lstrip())
    return out


def placements(text: str) -> dict[str, str]:
    """``text`` with a comment at each place one can go: a line of its own before each line (as indented as
    it), and at the end of each line; a blank line between rows."""
    lines = text.splitlines(keepends=True)
    scalar = _block_scalar_lines(text)
    out = {}
    for i, line in enumerate(lines):
        if i in scalar:
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out[f"line before {i + 1}"] = "".join([*lines[:i], f"{indent}# a note before line {i + 1}\n", *lines[i:]])
        out[f"trailing {i + 1}"] = "".join([*lines[:i], line.rstrip("\n") + f"  # a note on line {i + 1}\n",
                                            *lines[i + 1:]])  # fmt: skip
    rows = [i for i, line in enumerate(lines) if line.lstrip().startswith("- {config")]
    out["blank between rows"] = "".join([*lines[: rows[1]], "\n", *lines[rows[1] :]])
    return out


def comments(text: str) -> list[str]:
    return [m[1] for line in text.splitlines() if (m := re.search(r"(?:^|\s)(#.*)$", line))]


def recipe_dir(tmp_path: Path, text: str) -> Path:
    """A recipe holding ``text``, its kernels beside it (as record writes them out)."""
    (tmp_path / "kernels").mkdir(exist_ok=True)
    for name in (SOURCE, "other.py", "third.py"):
        (tmp_path / "kernels" / name).write_text(ADD)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return path


def loads(path: Path) -> bool:
    try:
        recipe.load(path)
    except RecipeError:
        return False
    return True


def merge_and_check(path: Path, recorded: list[dict[str, Any]], expect: Any) -> str:
    """Merge ``recorded`` into ``path`` and check what the module docstring promises; the merged text."""
    before = path.read_text()
    loaded_before = loads(path)
    wanted = json.loads(json.dumps(yaml.safe_load(before)))  # what aliases share, each place its own
    expect(wanted)
    assert record.write(path, events(*recorded), "recorded_kernels")
    after = path.read_text()
    assert set(comments(before)) <= set(comments(after)), "a comment was lost"
    assert _canonical(yaml.safe_load(after)) == _canonical(wanted)
    if loaded_before:
        assert loads(path), "the merged recipe no longer loads"
    # the same recording again: the recipe holds it all, and is not written
    stamp = path.stat().st_mtime_ns
    assert not record.write(path, events(*recorded), "recorded_kernels")
    assert path.read_text() == after and path.stat().st_mtime_ns == stamp
    return after


def _canonical(data: Any) -> Any:
    """Rows and picks as sets: their order is the merge's choice (sorted, as a new recipe has them)."""
    if isinstance(data, dict):
        return {k: (sorted(json.dumps(r, sort_keys=True) for r in v) if k in ("variants", "autotuned")
                    and isinstance(v, list) else _canonical(v)) for k, v in data.items()}  # fmt: skip
    return [_canonical(v) for v in data] if isinstance(data, list) else data


def _repository_recipes() -> list[Path]:
    found = [*ROOT.glob("recipes/**/*.yaml"), *ROOT.glob("examples/**/*.yaml"),
             *ROOT.glob("aotpack/templates/**/recipe.yaml"), *ROOT.glob("tests/**/*.yaml")]  # fmt: skip
    return sorted(p for p in found if re.search(r"^kernels:", p.read_text(), re.MULTILINE))


@pytest.mark.parametrize("original", _repository_recipes(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_recipe_of_the_repository_takes_a_recording_and_keeps_every_line(tmp_path, original):
    rel = original.relative_to(ROOT)
    shutil.copytree(original.parent, tmp_path / rel.parent, symlinks=True)
    if not (tmp_path / "examples").exists():  # what recipes name by relative path
        (tmp_path / "examples").symlink_to(ROOT / "examples")
    path = tmp_path / rel
    try:
        record.existing_recipe(path)
    except RecipeError:
        pytest.skip("not a recipe record merges into")
    recipe_dir(path.parent, path.read_text())  # the recorded kernels' sources beside it
    recorded, _ = RECORDINGS["new kernel"]
    name = kernels._kernel_name("add_kernel", set(yaml.safe_load(original.read_text())["kernels"]))

    def added(data: dict[str, Any]) -> None:
        _new_kernel(data)
        data["kernels"][name] = data["kernels"].pop("add_kernel_2")
        data["targets"] = sorted({*data.get("targets", ()), "sm_90a"})
        for constexpr, values in (data.get("widen") or {}).items():  # a recipe's widen: every new row takes it
            for row in data["kernels"][name]["variants"]:
                if constexpr in row["config"]:
                    row["config"][constexpr] = values

    before = path.read_text().splitlines()
    after = merge_and_check(path, recorded, added).splitlines()
    # every line as it was: the merge only added lines (the kernel), and changed the targets where they lacked one
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        assert tag in ("equal", "insert") or all("targets" in line for line in before[i1:i2]), before[i1:i2]


@pytest.mark.parametrize("what", RECORDINGS)
@pytest.mark.parametrize("text", placements(BASE).values(), ids=placements(BASE).keys())
def test_comments_anywhere_survive_a_merge(tmp_path, text, what):
    after = merge_and_check(recipe_dir(tmp_path, text), *RECORDINGS[what])
    # the lines a merge may change: the targets it adds to; a kernel's args and rows, where a new dtype makes
    # a type variable of them; no other line changes, or goes
    changes = {"new row": ("targets: [",), "new dtype": ("    args: {", "      - {config"), "new kernel": ()}[what]
    lines, merged = text.splitlines(), after.splitlines()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, lines, merged, autojunk=False).get_opcodes():
        assert tag in ("equal", "insert") or all(line.startswith(changes) for line in lines[i1:i2]), lines[i1:i2]
    for line in ("version: 0.10", "summary: 'Kernels, in quotes'", 'license: "Apache-2.0"', "    doc: >",
                 "      written by hand.", "      y_ptr: '*fp32'", "      x_ptr: \"*fp32\""):  # fmt: skip
        assert line in after.splitlines() or any(line in a for a in after.splitlines()), line
    if what == "new row":  # rows already there stay as written: their launch counts too
        assert "class: DDDD, launches: 5}" in after and "class: DDDD, launches: 2}" in after


def test_a_new_recipe_is_written_as_before_and_keeps_launch_counts(tmp_path):
    path = tmp_path / "r.yaml"
    recorded = events(event(), event(block=512))
    recorded.add({"event": "launches", "counts": {"0": 3}})
    assert record.write(path, recorded, "mine")
    assert path.read_text() == record.recipe_text(recorded.compilations(), {}, None, "mine")
    assert "class: DDDD, launches: 3}" in path.read_text()
    again = events(event())
    again.add({"event": "launches", "counts": {"0": 4}})  # more launches of a row the recipe has
    stamp = path.stat().st_mtime_ns
    assert not record.write(path, again, "mine") and path.stat().st_mtime_ns == stamp
    assert "class: DDDD, launches: 3}" in path.read_text()


def test_a_file_of_comments_keeps_them(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("# the team's recipe, to be\n\n# recorded into\n")
    assert record.write(path, events(event()), "mine")
    text = path.read_text()
    assert text.startswith("# the team's recipe, to be\n# recorded into\n# Written by aotpack record")
    assert yaml.safe_load(text)["package"] == "mine"


ANCHORS = """\
package: p
version: 0.1.0
summary: &doc plain text
targets: &targets [sm_90a]
kernels:
  add_kernel:
    triton: kernels/add_copy.py:add_kernel
    launch: triton
    targets: *targets
    args: &args {x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: i32}
    variants: &rows
      - &first {config: {BLOCK: 1024, num_warps: 4, num_stages: 3}, class: DDDD, launches: 5}
  copy:
    triton: kernels/other.py:add_kernel
    launch: triton
    doc: *doc
    args: *args
    variants: *rows
  again:
    triton: kernels/third.py:add_kernel
    launch: triton
    args: *args
    variants: [*first]
"""


ALIASED = {
    "new row": RECORDINGS["new row"],  # the targets change; add_kernel's (an alias of them) stay as they were
    "new dtype": RECORDINGS["new dtype"],  # add_kernel's args change; copy's (an alias of them) stay
    "row of the aliased kernel": ([event(block=512, source="other.py")],
                                  lambda data: data["kernels"]["copy"]["variants"].append(row(None, 512))),
}  # fmt: skip


@pytest.mark.parametrize("what", ALIASED)
def test_anchors_and_aliases_keep_what_they_say(tmp_path, what):
    """A change to a node that others alias changes it alone: the aliases keep saying what they said."""
    after = merge_and_check(recipe_dir(tmp_path, ANCHORS), *ALIASED[what])
    assert "&first" in after and "*first" in after and "*doc" in after


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("- {config: {BLOCK: 1024, num_warps: 4, num_stages: 3}, class: DDDD, launches: 5}", "- {class: DDDD}"),
         "r.yaml:13:9: kernels.add_kernel.variants[0]: missing required key 'config'"),
        (("    variants:\n", "    variants: {}\n    rows:\n"), "r.yaml:12:15: kernels.add_kernel.variants: expected a list"),
        (("args: {x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: i32}", "args: [x_ptr]"),
         "r.yaml:11:11: kernels.add_kernel.args: expected a mapping"),
        (("args: {x_ptr: '*fp32',", "args: {x_ptr: [fp32],"), "kernels.add_kernel.args.x_ptr: expected a single value"),
        (("class: DDDD, launches: 5", "class: [D], launches: 5"), "variants[0].class: expected a single value"),
        (("class: DDDD, launches: 5", "class: DDD, launches: 5"),
         "r.yaml:13:69: kernels.add_kernel.variants[0].class: expected one letter per argument (4: x_ptr, "),
        (("class: DDDD, launches: 5", "class: DDDD, launches: many"), "variants[0].launches: expected an integer"),
        (("{config: {BLOCK: 1024,", "{types: {T: [fp32]}, config: {BLOCK: 1024,"), "variants[0].types.T: expected a"),
        (("{config: {BLOCK: 1024,", "{config: {BLOCK: {1: 2},"), "config.BLOCK: keys must be strings, got 1"),
        (("num_warps: 4, num_stages: 3}, class: DDDD, launches: 5", "num_warps: 4.5}, class: DDDD"),
         "config.num_warps: expected an integer, got 4.5"),
        (("    launch: triton\n", "    launch: triton\n    options: {num_ctas: [1]}\n"), "options.num_ctas: expected a"),
        (("    launch: triton\n", "    launch: triton\n    autotuned: [{1: a}]\n"), "autotuned[0]: keys must be strings"),
        (("targets: [sm_90a]", "targets: [[sm_90a]]"), "r.yaml:6:11: targets[0]: expected a single value"),
        (("targets: [sm_90a]", "targets: {sm_90a: 1}"), "r.yaml:6:10: targets: expected a list"),
        (("kernels:\n", "kernels:\n  1: {}\n"), "keys must be strings, got 1"),
        (("{BLOCK: [1024]}", "{BLOCK: [1024], BLOCK: [512]}"),  # in a kernel written by hand: not yamlnodes'
         "r.yaml:25:33: duplicate key 'BLOCK' in kernels.add.constexprs"),
    ],
)  # fmt: skip
def test_a_malformed_recipe_is_a_located_error_and_stays_as_it_was(tmp_path, monkeypatch, change, message):
    assert change[0] in BASE
    path = recipe_dir(tmp_path, BASE.replace(*change))
    before = path.read_bytes()
    with pytest.raises(RecipeError) as err:
        record.write(path, events(event(block=512)), "recorded_kernels")
    assert message in str(err.value) and re.match(r".*r\.yaml:\d+:\d+: ", str(err.value)), str(err.value)
    assert path.read_bytes() == before

    def run(*_: Any) -> record.Outcome:
        raise AssertionError("the program ran although its recording could not be merged")

    monkeypatch.setattr(program, "run", run)
    with pytest.raises(RecipeError):
        record.record(["python", "-c", "pass"], path, "recorded_kernels")
    assert path.read_bytes() == before


def test_an_alias_bomb_is_refused_before_ruamel_reads_it(tmp_path, monkeypatch):
    lines = ["package: p", "version: 0.1.0", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = recipe_dir(tmp_path, "\n".join([*lines, "kernels: {}", ""]))
    before = path.read_bytes()
    monkeypatch.setattr("ruamel.yaml.YAML.load", lambda *_: pytest.fail("ruamel.yaml read an alias bomb"))
    with pytest.raises(RecipeError, match=f"more than {limits.MAX_YAML_VALUES} values"):
        record.write(path, events(event()), "p")
    assert path.read_bytes() == before


def _renamed(e: dict[str, Any]) -> dict[str, Any]:
    """A compilation of a version of add_kernel whose last argument is ``n`` (a report from another checkout)."""
    e["function"]["params"][3][0] = "n"
    e["signature"]["n"] = e["signature"].pop("n_elements")
    return e


def test_a_kernel_whose_arguments_changed_is_refused_and_the_recipe_kept(tmp_path):
    path = recipe_dir(tmp_path, BASE)
    before = path.read_bytes()
    with pytest.raises(RecordError, match=r"kernel add_kernel of the recipe was recorded with the arguments "
                       r"\(x_ptr, y_ptr, out_ptr, n_elements\); kernels/add_copy.py:add_kernel now takes \(x_ptr, "
                       r"y_ptr, out_ptr, n\): delete kernel add_kernel"):  # fmt: skip
        record.write(path, events(_renamed(event(block=512))), "recorded_kernels")
    assert path.read_bytes() == before


def test_a_recording_that_ran_well_but_cannot_be_merged_is_kept_beside_the_recipe(tmp_path, monkeypatch):
    """The program ended well, and the recipe cannot take its rows (its kernel was recorded with other arguments):
    the recipe stays as it was, and the recording is not lost."""
    path = recipe_dir(tmp_path, BASE)
    before = path.read_bytes()
    monkeypatch.setattr(program, "run", fake_run(0, False, _renamed(event(block=512))))
    with pytest.raises(RecordError, match=r"delete kernel add_kernel .*; what it recorded \(1 compilation\) is in "
                       r".*r.partial.yaml$"):  # fmt: skip
        record.record(["python", "prog.py"], path, "recorded_kernels")
    assert path.read_bytes() == before
    partial = yaml.safe_load((tmp_path / "r.partial.yaml").read_text())
    assert list(partial["kernels"]["add_kernel"]["args"]) == ["x_ptr", "y_ptr", "out_ptr", "n"]


@pytest.mark.parametrize("fails", ["recipe", "folder"])
@pytest.mark.parametrize(("errno", "reason", "advice"), [
    (28, "No space left on device", "free space there, or write somewhere else"),
    (1, "Operation not permitted", r"make it writable for you \(a read-only folder or file system, an immutable file"),
    (36, "File name too long", r"a name in the path is longer than the system takes \(\d+ bytes\)")])  # fmt: skip
def test_a_recording_whose_recipe_cannot_be_written_is_kept_and_said_where(tmp_path, monkeypatch, fails, errno,
                                                                           reason, advice):  # fmt: skip
    """Any OS error writing the recipe (an unwritable, full or vanished folder, an immutable file, a name too long):
    an output error (exit 9) saying what to do about that error; the recording is kept beside it, or where nothing
    can be written beside it, in a folder of its own."""
    path = recipe_dir(tmp_path, BASE)
    before = path.read_bytes()
    monkeypatch.setattr(program, "run", fake_run(0, False, event(block=512, n="", arch=80)))
    real = program.write  # type: ignore[attr-defined]

    def write(out: Path, *args: Any, **kwargs: Any) -> bool:
        if out == path or (fails == "folder" and out.parent == tmp_path):
            raise OSError(errno, reason, str(out))
        return real(out, *args, **kwargs)

    monkeypatch.setattr(program, "write", write)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "system-tmp"))  # (where a folder of its own goes)
    (tmp_path / "system-tmp").mkdir()
    with pytest.raises(OutputError, match=rf"cannot write .*r.yaml: {reason}; {advice}.*; what it recorded "
                       r"\(1 compilation\) is in (?P<where>.*)$") as caught:  # fmt: skip
        record.record(["python", "prog.py"], path, "recorded_kernels")
    where = Path(str(caught.value).rsplit(" is in ", 1)[1])
    assert path.read_bytes() == before
    assert where.parent == tmp_path if fails == "recipe" else where.parent.parent == tmp_path / "system-tmp"
    assert [v["config"]["BLOCK"] for v in yaml.safe_load(where.read_text())["kernels"]["add_kernel"]["variants"]] == [
        512
    ]


def fake_run(status: int, stopped: bool, *recorded: dict[str, Any]) -> Any:
    """program.run as it would end for a program that compiled ``recorded`` and ended with ``status``."""

    def run(argv: list[str], folder: Path, extra_env: dict[str, str] | None = None) -> record.Outcome:
        (folder / "events").mkdir()
        lines = [json.dumps({**e, "number": n}) for n, e in enumerate(recorded)]
        (folder / "events" / "1.jsonl").write_text("\n".join(lines) + "\n")
        return record.Outcome(status=status, stopped=stopped)

    return run


@pytest.mark.parametrize(("status", "stopped", "says"), [(3, False, "exited with status 3"),
                         (-9, False, "was killed by SIGKILL"), (-15, False, "was killed by SIGTERM")])  # fmt: skip
def test_a_failed_recording_leaves_the_recipe_and_keeps_its_capture_beside_it(tmp_path, monkeypatch, status,
                                                                              stopped, says):  # fmt: skip
    path = recipe_dir(tmp_path, BASE)
    before, stamp = path.read_bytes(), path.stat().st_mtime_ns
    monkeypatch.setattr(program, "run", fake_run(status, stopped, event(block=512)))
    with pytest.raises(RecordError, match=f"the recorded program {says}: {path} is left as it was"):
        record.record(["python", "prog.py"], path, "recorded_kernels")
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stamp
    partial = yaml.safe_load((tmp_path / "r.partial.yaml").read_text())
    assert partial["kernels"]["add_kernel"]["variants"] == [row(None, 512)]


@pytest.mark.parametrize(("status", "stopped"), [(0, False), (-15, True), (-2, True), (130, True)])
def test_a_program_that_ends_well_or_is_stopped_is_merged(tmp_path, monkeypatch, status, stopped):
    path = recipe_dir(tmp_path, BASE)
    monkeypatch.setattr(program, "run", fake_run(status, stopped, event(block=512, n="", arch=80)))
    assert record.record(["python", "prog.py"], path, "recorded_kernels").written
    data = yaml.safe_load(BASE)
    _new_row(data)
    assert _canonical(yaml.safe_load(path.read_text())) == _canonical(data)
    assert not (tmp_path / "r.partial.yaml").exists()


def test_nothing_compiled_writes_nothing(tmp_path, monkeypatch):
    path = recipe_dir(tmp_path, BASE)
    stamp = path.stat().st_mtime_ns
    monkeypatch.setattr(program, "run", fake_run(0, False))
    assert not record.record(["python", "prog.py"], path, "recorded_kernels").written
    assert path.stat().st_mtime_ns == stamp and path.read_text() == BASE
    new = tmp_path / "new.yaml"
    assert not record.record(["python", "prog.py"], new, "recorded_kernels").written and not new.exists()


def test_widening_replaces_the_rows_it_covers(tmp_path):
    path = recipe_dir(tmp_path, BASE)
    widen = dict([record.parse_widen("BLOCK=1024,2048")])
    assert record.write(path, events(event()), "recorded_kernels", widen=widen)
    rows = yaml.safe_load(path.read_text())["kernels"]["add_kernel"]["variants"]
    assert [(r["config"]["BLOCK"], r["config"]["num_warps"]) for r in rows] == [([1024, 2048], 4), ([1024, 2048], 8)]
    assert "# The team's recipe" in path.read_text() and loads(path)
    assert not record.write(path, events(event(block=2048)), "recorded_kernels", widen=widen)


def test_a_merge_next_to_lines_ruamel_writes_otherwise_keeps_them(tmp_path):
    """ruamel.yaml joins a flow list written over lines, and writes null as nothing; the merge keeps the
    file's text there and changes only the lines it adds."""
    text = (
        BASE.replace("targets: [sm_90a]", "targets: [\n  sm_90a\n]")
        .replace('grid: ["cdiv(n_elements, BLOCK)"]', 'grid: ["cdiv(n_elements,\n      BLOCK)"]')
        .replace("{config: {BLOCK: 2048,", "{config: {BLOCK: null,")
    )
    path = recipe_dir(tmp_path, text)
    record.write(path, events(event(block=512)), "recorded_kernels")
    after = path.read_text()
    assert "targets: [\n  sm_90a\n]" in after and "BLOCK: null," in after and 'BLOCK)"]' in after
    assert [line for line in after.splitlines() if line not in text.splitlines()] == [
        "      - {config: {BLOCK: 512, num_warps: 4, num_stages: 3}, class: DDDD, launches: 0}"
    ]


@pytest.mark.parametrize(
    ("kind", "message"),
    [("folder", "a folder; give the recipe file to write"), ("empty", "-o .: a folder"),
     ("dangling", "which does not exist; give the recipe file itself, or remove the link"),
     ("fifo", "not a regular file (a FIFO, socket or device)"), ("unwritable", "is not writable")],
)  # fmt: skip
def test_o_that_cannot_take_a_recipe_is_refused_before_the_program_runs(tmp_path, monkeypatch, capsys, kind,
                                                                        message):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    out = {"folder": tmp_path, "empty": Path(""), "dangling": tmp_path / "link.yaml", "fifo": tmp_path / "fifo",
           "unwritable": tmp_path / "locked" / "r.yaml"}[kind]  # fmt: skip
    if kind == "dangling":
        out.symlink_to(tmp_path / "gone.yaml")
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "unwritable":
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere")
        out.parent.mkdir()
        out.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setattr(program, "run", lambda *_: pytest.fail("the program ran"))
    assert cli.main(["record", "-o", str(out), "--", "python", "-c", "pass"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aotpack: error: -o ") and message in err and err.count("\n") == 1, err


def test_a_recipe_record_wrote_takes_a_new_target_and_rows_line_by_line(tmp_path):
    """record writes the top level's lists otherwise than its rows (``- sm_90a`` at the key's column): a new
    target changes the targets' lines only, new rows are lines of their own."""
    path = recipe_dir(tmp_path, "")
    path.unlink()
    record.write(path, events(event()), "mine")
    before = path.read_text()
    assert "targets:\n- sm_90a\n" in before
    assert record.write(path, events(event(block=512, arch=80), event("fp32", 256, arch=90)), "mine")
    after = path.read_text().splitlines()
    removed = [line for line in before.splitlines() if line not in after]
    added = [line for line in after if line not in before.splitlines()]
    assert removed == ["- sm_90a"] and added[:2] == ["  - sm_80", "  - sm_90a"], (removed, added)
    assert [line for line in added[2:] if not line.startswith("      - {config: {BLOCK: ")] == []
    assert yaml.safe_load(path.read_text())["targets"] == ["sm_80", "sm_90a"]


def test_numbers_stay_as_written(tmp_path):
    """ruamel.yaml writes a number it reads anew (a float's last digit, 010 read as ten): the merge does not."""
    text = BASE.replace("BLOCK: 2048,", "BLOCK: 8.041978596258752e-291,").replace(
        "{BLOCK: [1024]}", "{BLOCK: [010, 0x1F, 1_000]}"
    )
    path = recipe_dir(tmp_path, text)
    merge_and_check(path, *RECORDINGS["new row"])
    assert "BLOCK: 8.041978596258752e-291," in path.read_text() and "{BLOCK: [010, 0x1F, 1_000]}" in path.read_text()
    merge_and_check(path, *RECORDINGS["new dtype"])  # each row rewritten (a type variable): what it says kept


def test_a_single_target_written_alone_takes_another(tmp_path):
    """``targets: sm_90a`` is the list [sm_90a]: a recording on the same target changes nothing, one on another
    makes it a list of both."""
    path = recipe_dir(tmp_path, BASE.replace("targets: [sm_90a]", "targets: sm_90a"))
    assert not record.write(path, events(event(block=1024)), "recorded_kernels")
    assert record.write(path, events(event(block=512, arch=80)), "recorded_kernels")
    assert yaml.safe_load(path.read_text())["targets"] == ["sm_80", "sm_90a"]
    assert loads(path)


def _picks(*picks: tuple[list[int], int]) -> dict[str, Any]:
    """The autotuner's picks of add_kernel in one process: (key, BLOCK) each."""
    function = event()["function"]
    return {"event": "picks", "function": function, "picks": [
        {"key": key, "config": {"BLOCK": block, "num_warps": 4, "num_stages": 3}} for key, block in picks]}  # fmt: skip


def test_a_key_the_autotuner_picked_again_keeps_the_recipe_s_pick(tmp_path):
    """An autotuner times anew in every run and may pick another config for a key the recipe has a pick for: the
    recipe's pick stands (one per key, or the recipe would not load), a new key's pick is added, and a run that
    picks nothing new leaves the file as it was (a GPU recording of fla-core's kernels did this)."""
    path = recipe_dir(tmp_path, BASE)
    assert record.write(path, events(event(), _picks(([4096], 1024))), "recorded_kernels")
    first = path.read_bytes()
    assert not record.write(path, events(event(), _picks(([4096], 2048))), "recorded_kernels")
    assert path.read_bytes() == first
    assert record.write(path, events(event(), _picks(([4096], 2048), ([8192], 2048))), "recorded_kernels")
    picked = yaml.safe_load(path.read_text())["kernels"]["add_kernel"]["autotuned"]
    assert sorted((p["key"], p["config"]["BLOCK"]) for p in picked) == [([4096], 1024), ([8192], 2048)]
    assert loads(path)


def test_an_event_line_nested_past_json_s_reach_is_skipped(tmp_path):
    """The program's processes write the event lines; one nested too deeply to read is skipped, as a short one is."""
    (tmp_path / "1.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n" + json.dumps(event()) + "\n")
    assert len(record.read_events(tmp_path).compiled) == 1


@pytest.mark.parametrize("attribute", [["tt.divisibility"], [], ["tt.divisibility", 16, 1], 5])
def test_a_compile_event_whose_attribute_is_not_a_pair_is_skipped_and_said(attribute):
    """An argument's attribute is a (name, value) pair; any other shape skips that compilation, named, and the
    recording goes on (it raised IndexError from the class reading)."""
    damaged = event()
    damaged["attrs"] = [[[0], [attribute]]]
    recorded = events(damaged, event(block=2048))
    assert len(recorded.compiled) == 1
    assert [name for name in recorded.skipped] == ["kernels/add_copy.py:add_kernel"]


def _with_triton(version: str, *compiled: dict[str, Any]) -> record.Events:
    recorded = events(*compiled)
    recorded.add({"event": "triton", "version": version})
    return recorded


def test_the_recipe_names_the_triton_release_the_recording_ran(tmp_path):
    """A recording is one Triton release's code: a new recipe says which (triton:), so that a build anywhere uses
    that release or says why not; a recipe without one takes it as one more line; one that names it keeps it."""
    path = recipe_dir(tmp_path, "")
    assert record.write(path, _with_triton("3.6.0", event()), "recorded_kernels")
    data = yaml.safe_load(path.read_text())
    assert list(data)[:4] == ["package", "version", "summary", "triton"] and data["triton"] == "3.6.0"
    assert loads(path)
    mine = path.read_text().replace("triton: 3.6.0\n", "# my comment\n")
    path.write_text(mine)
    assert record.write(path, _with_triton("3.6.0", event(block=2048)), "recorded_kernels")
    merged = path.read_text()
    assert "# my comment\n" in merged and yaml.safe_load(merged)["triton"] == "3.6.0" and loads(path)
    assert [line for line in merged.splitlines() if line not in mine.splitlines()] == [
        "triton: 3.6.0", "      - {config: {BLOCK: 2048, num_warps: 4, num_stages: 3}, class: DDDD, launches: 0}"
    ]  # fmt: skip
    path.write_text(merged.replace("triton: 3.6.0", "triton: '3.6'"))
    assert record.write(path, _with_triton("3.6.1", event(block=512)), "recorded_kernels")
    assert yaml.safe_load(path.read_text())["triton"] == "3.6" and loads(path)


@pytest.mark.parametrize(
    ("named", "ran", "says"),
    [("3.7", ("3.6.0",), r"the recipe names triton: 3.7, and the program ran Triton 3.6.0: .*record under Triton 3.7"),
     (None, ("3.6.0", "3.7.1"), r"the program's processes ran Triton 3.6.0 and 3.7.1: a recipe is one release's code")],
)  # fmt: skip
def test_a_recording_of_another_triton_than_the_recipe_names_is_refused_and_the_recipe_kept(tmp_path, named, ran,
                                                                                            says):  # fmt: skip
    path = recipe_dir(tmp_path, "")
    assert record.write(path, events(event()), "recorded_kernels")
    if named:
        path.write_text(path.read_text().replace("targets:", f"triton: '{named}'\ntargets:"))
    before = path.read_bytes()
    recorded = events(event(block=2048))
    for version in ran:
        recorded.add({"event": "triton", "version": version})
    with pytest.raises(RecordError, match=says):
        record.write(path, recorded, "recorded_kernels")
    assert path.read_bytes() == before


@pytest.mark.parametrize("version", ["3.6.0+git1234", "", 3.6, None, "x" * 100])
def test_a_triton_event_that_names_no_release_is_skipped_and_said(version):
    recorded = events(event())
    recorded.add({"event": "triton", "version": version}, "4242")
    assert not recorded.tritons and list(recorded.skipped) == ["an event of 4242"]


def test_a_constexpr_that_took_several_values_is_said_with_the_widen_that_covers_it():
    """A constexpr that follows the problem (a batch size, a length) took several values while recording: the next
    one a deployment meets would be a compilation, so record says which --widen builds each value."""
    from aotpack.record import widen

    compiled = events(event(block=64), event(block=16), event(block=256, dtype="fp16")).compilations()
    assert widen.varying(compiled, {}, {}) == [(REF, "BLOCK", [16, 64, 256])]
    assert widen.suggestion("BLOCK", [16, 64, 256]) == "--widen BLOCK=16..256:pow2"
    assert widen.suggestion("bs", [1, 3]) == "--widen bs=1..3"
    assert widen.varying(compiled, {}, {"BLOCK": [1, 2]}) == []  # widened already
    picked: dict[str, list[Any]] = {"x": [{"key": [1], "config": {"BLOCK": 64, "num_warps": 4, "num_stages": 3}}]}
    assert widen.varying(compiled, picked, {}) == []  # an autotuner's config: it varies by design
    assert widen.varying(events(event(block=64), event(block=64, warps=8)).compilations(), {}, {}) == []


def test_a_kernel_recorded_by_module_path_takes_the_rows_of_its_written_out_recording(tmp_path, monkeypatch):
    """An earlier recording named a library's kernel ``module:qualname``; one now writes its source out: its rows
    go to that kernel (no second kernel), whose ``triton:`` stays, and no unnamed source is written beside it."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.py").write_text(ADD)  # the events' module
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    path = tmp_path / "r.yaml"
    assert record.write(path, events({**event(), "function": {**event()["function"], "source": None}}), "mine")
    assert yaml.safe_load(path.read_text())["kernels"]["add_kernel"]["triton"] == "m:add_kernel"
    assert record.write(path, events(event(block=512)), "mine")
    kernels = yaml.safe_load(path.read_text())["kernels"]
    assert list(kernels) == ["add_kernel"] and kernels["add_kernel"]["triton"] == "m:add_kernel"
    assert sorted(r["config"]["BLOCK"] for r in kernels["add_kernel"]["variants"]) == [512, 1024]
    assert not (tmp_path / "kernels").exists()
    fresh = tmp_path / "new" / "r.yaml"
    fresh.parent.mkdir()
    assert record.write(fresh, events(event(block=512)), "mine")  # a new recipe names the written-out source
    assert yaml.safe_load(fresh.read_text())["kernels"]["add_kernel"]["triton"] == REF
    assert (fresh.parent / "kernels" / SOURCE).read_text() == ADD


def test_a_program_that_is_a_file_the_shell_would_not_run_says_how_to_run_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.py").write_text("print('ran')\n")
    with pytest.raises(RecordError, match=r"program prog.py is a file that is not executable: record `-- python "
                       r"prog.py`"):  # fmt: skip
        program.command(["prog.py"])
    (tmp_path / "run").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "run", 0o755)
    with pytest.raises(RecordError, match=r"no such program on PATH: run; give ./run to run the file here"):
        program.command(["run"])
    assert program.command(["./run", "x"]) == ["./run", "x"]
    with pytest.raises(RecordError, match=r"no such program: nothing-here \(not a file, and not on PATH\)"):
        program.command(["nothing-here"])


def test_a_function_the_recipe_names_by_hand_is_matched_by_its_source_not_its_text(tmp_path):
    """The recipe names add.py:add_kernel (by hand); the program compiled that function, which a recording names by
    its written-out copy: the same source identity activate() uses, so no second kernel (add_kernel_2) is added,
    and the recording says why its rows are not."""
    pytest.importorskip("triton")
    from aotpack.backends.triton import introspect
    from aotpack.model import Source
    from aotpack.recipe import sources
    from aotpack.runtime import _aotpack_identity

    (tmp_path / "add.py").write_text(ADD)
    path = tmp_path / "r.yaml"
    path.write_text("package: k\nversion: 0.1.0\ntargets: [sm_90a]\nkernels:\n  add:\n    triton: add.py:add_kernel\n"
                    "    args: {x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: i32}\n"
                    "    constexprs: {BLOCK: [1024]}\n    grid: ['cdiv(n_elements, BLOCK)']\n")  # fmt: skip
    before = path.read_text()
    fn = introspect.unwrap(sources.load(Source(path=tmp_path / "add.py", module=None, function="add_kernel")))
    compiled = event(block=512)
    compiled["function"]["identity"] = _aotpack_identity.identity(fn)
    recorded = events(compiled)
    record.write(path, recorded, "recorded_kernels")
    assert path.read_text() == before and not (tmp_path / "kernels").exists()
    (why,) = recorded.skipped.values()
    assert why.startswith("the recipe's kernel 'add', written by hand, is this function: its grid builds it")
    # another function (another source) is still a kernel of its own
    other = event(block=512, source="other.py")
    record.write(path, events(other), "recorded_kernels")
    assert sorted(yaml.safe_load(path.read_text())["kernels"]) == ["add", "add_kernel"]


def test_record_writes_no_recipe_the_build_would_refuse(tmp_path, monkeypatch):
    """record plans what it is about to write, as aotpack build will: a recipe the build would refuse (a fault of
    record's) is not written, and the error says so."""
    writing = importlib.import_module("aotpack.record.write")  # (the module: the package's `write` is its function)

    def refuse(loaded):
        raise RecipeError("planted: the build refuses this")

    monkeypatch.setattr(writing, "plan_variants", refuse)
    path = tmp_path / "r.yaml"
    with pytest.raises(RecordError, match=r"aotpack record made a recipe that aotpack build refuses \(planted"):
        record.write(path, events(event()), "recorded_kernels")
    assert not path.exists()
    assert record.write(path, events(event()), "recorded_kernels", check=False) and path.exists()  # (the partial)
