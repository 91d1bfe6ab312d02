"""Recipe validation: every error message, exactly, with its file:line:col."""

import importlib.metadata
import math
from pathlib import Path
from typing import ClassVar

import packaging.utils
import pytest

from aotpack import errors, expr, model
from aotpack.backends import recipes as recipe
from aotpack.errors import RecipeError

from ..shared import GOOD


def parse(text: str, folder: Path) -> model.Recipe:
    return recipe.parse(text, folder / "r.yaml")


def test_good_recipe(kernel_dir: Path) -> None:
    r = parse(GOOD, kernel_dir)
    (k,) = r.kernels
    assert r.package == "kit" and r.targets == ("sm_80", "sm_90a")
    assert [a.name for a in k.args] == ["x_ptr", "y_ptr", "out_ptr", "n_elements"]
    assert k.arg("x_ptr").typevar and k.arg("x_ptr").hint == 16
    assert k.arg("n_elements").default == expr.parse("numel(out_ptr)")
    assert [c.label for c in k.configs] == [
        "BLOCK=256,w4,s3",
        "BLOCK=256,w8,s3",
        "BLOCK=1024,w4,s3",
        "BLOCK=1024,w8,s3",
    ]
    assert k.default.label == "BLOCK=1024,w4,s3"
    assert k.bindings == ((("T", "fp32"),), (("T", "fp16"),))
    assert k.rules[0].key == (4096,) and k.rules[0].config.label == "BLOCK=256,w8,s3"
    assert k.grid[1] == expr.Num(1) and k.grid[2] == expr.Num(1)
    assert k.source.path == kernel_dir / "add.py" and k.source.function == "add_kernel"


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def test_license_is_an_spdx_expression_normalized(kernel_dir: Path) -> None:
    assert parse(GOOD, kernel_dir).license is None
    assert parse(edit("version: 1.0.0", "version: 1.0.0\nlicense: apache-2.0 or mit"), kernel_dir).license == (
        "Apache-2.0 OR MIT"
    )


CASES = [
    (edit("    num_warps: [4, 8]", "    num_warp: [4, 8]"),
     "r.yaml:14:5: unknown key 'num_warp' in kernels.add — did you mean 'num_warps'?"),
    (edit("package: kit", "package: Kit-1"),
     "r.yaml:1:10: package: 'Kit-1' is not a valid package name (lower case letters, digits and _, starting with "
     "a letter, ending with a letter or digit); 'kit_1' is one"),
    (edit("version: 1.0.0", "version: one"), "r.yaml:2:10: version: 'one' is not a valid version (such as 1.0.2)"),
    (edit("targets: [sm_80, sm_90a]", "targets: [sm_80, sm_91]"),
     "r.yaml:3:18: targets[1]: unknown target 'sm_91' — did you mean 'sm_90'?"),
    (edit("targets: [sm_80, sm_90a]", "targets: [sm_80, sm_90]"),
     "r.yaml:3:10: targets: Triton cannot build 'sm_90' (kernel 'add'): it builds 9.0 and newer only as the "
     "arch-specific target; use 'sm_90a'"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "*fp33"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: unknown element type 'fp33' — did you mean 'fp32'?"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "*T:8"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: hint :8 is not supported (:16 = multiple of 16, :1 = equals 1)"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "T"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: type variable 'T' can only type a pointer"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: {type: "*T", default: 3}'),
     "r.yaml:10:36: kernels.add.args.y_ptr.default: pointer arguments take no default"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', "    grid: [cdiv(n_elements, BLOCK)]"),
     "r.yaml:15:27: kernels.add.grid[0]: expected ')' but found 'the end' (inside a YAML [...] list, quote an "
     "expression that contains a comma)"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', '    grid: ["cdiv(n_elemnts, BLOCK)"]'),
     "r.yaml:15:18: kernels.add.grid[0]: unknown name 'n_elemnts' — did you mean 'n_elements'? "
     "(known: BLOCK, n_elements)"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', '    grid: ["cdiv(x_ptr, BLOCK)"]'),
     "r.yaml:15:18: kernels.add.grid[0]: 'x_ptr' is a pointer argument; use numel(x_ptr) or size(x_ptr, 0)"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', '    grid: ["floor(n_elements)"]'),
     "r.yaml:15:13: kernels.add.grid[0]: unknown function 'floor' (known: cdiv, max, min, next_pow2, none, numel, "
     "size, stride)"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', "    grid: [1, 2, 3, 4]"),
     "r.yaml:15:11: kernels.add.grid: expected 1 to 3 grid expressions, got 4"),
    (edit("    key: [n_elements]", "    key: [BLOCK]"),
     "r.yaml:16:11: kernels.add.key[0]: unknown name 'BLOCK' (known: n_elements)"),
    (edit("    bucket: pow2", "    bucket: log2"),
     "r.yaml:17:13: kernels.add.bucket: unknown bucket rule 'log2' (expected one of: exact, pow2)"),
    (edit("    num_warps: [4, 8]", "    num_warps: [4, 6]"),
     "r.yaml:14:20: kernels.add.num_warps[1]: expected a power of two, got 6"),
    (edit("    default: {BLOCK: 1024, num_warps: 4}", "    default: {BLOCK: 1024}"),
     "r.yaml:18:14: kernels.add.default: {BLOCK: 1024} matches 2 configs; also give num_warps"),
    (edit("    default: {BLOCK: 1024, num_warps: 4}", "    default: {BLOCK: 512, num_warps: 4}"),
     "r.yaml:18:14: kernels.add.default: no config of the grid matches {BLOCK: 512, num_warps: 4}"),
    (edit("      - {key: [4096], config: {BLOCK: 256, num_warps: 8}}", "      - {key: [4096, 2], config: {BLOCK: 256}}"),
     "r.yaml:20:15: kernels.add.dispatch[0].key: expected 1 key values (n_elements), got 2"),
    (edit("    triton: add.py:add_kernel", "    triton: missing.py:add_kernel"),
     "r.yaml:6:13: kernels.add.triton: kernel source 'missing.py' not found (looked for {dir}/missing.py)"),
    (edit("    triton: add.py:add_kernel", "    triton: add_kernel"),
     "r.yaml:6:13: kernels.add.triton: expected 'path/to/file.py:function' or 'package.module:function', got "
     "'add_kernel'"),
    (edit("    types: {T: [fp32, fp16]}", "    types: {T: [fp32, fp32]}"),
     "r.yaml:7:16: kernels.add.types.T: expected a non-empty list of distinct dtypes"),
    (edit('      n_elements: {type: "i32:16", default: numel(out_ptr)}', '      n_elements: {type: "i32:16", default: n_elements}'),
     "r.yaml:12:45: kernels.add.args.n_elements.default: a default may read only arguments without a default, "
     "not 'n_elements'"),
    (GOOD + "  add:\n    triton: add.py:add_kernel\n", "r.yaml:21:3: duplicate key 'add' in kernels"),
    (GOOD.replace("version: 1.0.0\n", ""), "r.yaml:1:1: missing required key 'version'"),
    (edit('      y_ptr: "*T:16"', '      variant: "*T:16"'),
     "r.yaml:10:7: kernels.add.args: 'variant' cannot name an argument: use an identifier other than a Python "
     "keyword, stream and variant (every kernel takes those keywords)"),
    ("package: [1\n", "r.yaml:2:1: invalid YAML: expected ',' or ']', but got '<stream end>'"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "tensordesc<T[BLOCK, BLK]>"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: block dimension 'BLK' is neither a positive integer nor a constexpr "
     "— did you mean 'BLOCK'?"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: {type: "tensordesc<T[BLOCK]>", extent: n_elements}'),
     "r.yaml:10:53: kernels.add.args.y_ptr.extent: a tensor descriptor takes no 'extent': the hardware clips its "
     "loads and stores to the tensor's shape, and the launcher checks the tensor's layout"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "tensordesc<T[1, 2, 3, 4, 5, 6]>"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: a tensor descriptor's block has 1 to 5 dimensions, got 6"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "tensordesc<T[BLOCK, \u00b2]>"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: block dimension '\u00b2' is neither a positive integer nor a constexpr "
     "(constexprs: BLOCK)"),
    (edit('      y_ptr: "*T:16"', '      y_ptr: "tensordesc<T[BLOCK, ' + "9" * 5000 + ']>"'),
     "r.yaml:10:14: kernels.add.args.y_ptr: block dimension 999999999999... has more than 20 digits"),
    *[(edit('      y_ptr: "*T:16"', '      y_ptr: "tensordesc<T[BLOCK]>"').replace(
        "    constexprs: {BLOCK: [256, 1024]}", f"    constexprs: {{BLOCK: {values}}}").replace(
        "    default: {BLOCK: 1024, num_warps: 4}\n", "").replace("BLOCK: 256, ", ""),
       "r.yaml:10:7: kernels.add.args.y_ptr: block dimension 'BLOCK' must be a constexpr of positive integers")
      for values in ('["256"]', "[true]", "[0]", "[256, -1]", "[256.0]")],
    (edit("    constexprs: {BLOCK: [256, 1024]}", "    constexprs: {BLOCK: {values: [256, 1024], equal: n_elements}}"),
     "r.yaml:13:47: unknown key 'equal' in kernels.add.constexprs.BLOCK — did you mean 'equals'?"),
    (edit("    constexprs: {BLOCK: [256, 1024]}", "    constexprs: {BLOCK: {values: [256, 1024], equals: BLOCK}}"),
     "r.yaml:13:55: kernels.add.constexprs.BLOCK.equals: unknown name 'BLOCK' (known: n_elements)"),
    (edit("package: kit", "package: json"),
     "r.yaml:1:10: package: 'json' is a module of Python's standard library; choose another name"),
    (GOOD.replace("  add:\n", "  select:\n", 1),
     "r.yaml:5:3: kernel name 'select' would hide the package's own 'select'; rename the kernel"),
    # what could only fail every call is refused at load
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', "    grid: [0]"),
     "r.yaml:15:12: kernels.add.grid[0]: a grid dimension of 0 launches nothing: it must be at least 1"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', '    grid: ["n_elements // 0"]'),
     "r.yaml:15:24: kernels.add.grid[0]: division by zero"),
    (edit('    grid: ["cdiv(n_elements, BLOCK)"]', '    grid: ["cdiv(n_elements, 0)"]'),
     "r.yaml:15:13: kernels.add.grid[0]: cdiv by zero"),
    (edit("    num_warps: [4, 8]", "    num_warps: [4, 64]"),
     "r.yaml:14:20: kernels.add.num_warps[1]: expected at most 32, got 64"),
    (edit("version: 1.0.0", "version: 1.0.0\nlicense: Apache 2"),
     "r.yaml:3:10: license: 'Apache 2' is not an SPDX license expression (such as Apache-2.0 or MIT): Invalid "
     "license expression: 'Apache 2'"),
    # free text never carries control characters (it reaches METADATA and generated code as data)
    (edit("version: 1.0.0", 'version: 1.0.0\nsummary: "kernels\\nRequires-Dist: evil"'),
     "r.yaml:3:10: summary: expected a single line of printable text; it holds the control character '\\n'"),
    (edit("    triton: add.py:add_kernel", '    triton: add.py:add_kernel\n    doc: "bell\\a"'),
     "r.yaml:7:10: kernels.add.doc: control character '\\x07' in 'bell\\x07': write text without it"),
    # scalar defaults are checked against the argument's type
    (edit("default: numel(out_ptr)", "default: 1.5"),
     "r.yaml:12:45: kernels.add.args.n_elements.default: argument 'n_elements' is i32: cannot convert the default 1.5 to it"),
    (edit("default: numel(out_ptr)", "default: true"),
     "r.yaml:12:45: kernels.add.args.n_elements.default: argument 'n_elements' is i32: its default cannot be true"),
    (edit("default: numel(out_ptr)", "default: 4294967296"),
     "r.yaml:12:45: kernels.add.args.n_elements.default: argument 'n_elements' is i32: the default 4294967296 does not fit in it"),
    (edit('      n_elements: {type: "i32:16", default: numel(out_ptr)}', '      n_elements: {type: bool, default: 1}')
     .replace("extent: n_elements", "extent: 4"),
     "r.yaml:12:41: kernels.add.args.n_elements.default: argument 'n_elements' is a bool: its default must be true "
     "or false, got 1"),
    (edit('      n_elements: {type: "i32:16", default: numel(out_ptr)}', '      n_elements: {type: fp16, default: 7e4}')
     .replace("extent: n_elements", "extent: 4"),
     "r.yaml:12:41: kernels.add.args.n_elements.default: argument 'n_elements' is fp16: the default '7e4' does not "
     "fit in it"),
    (edit('      n_elements: {type: "i32:16", default: numel(out_ptr)}', '      n_elements: {type: "bool:16"}')
     .replace("extent: n_elements", "extent: 4"),
     "r.yaml:12:26: kernels.add.args.n_elements.type: a bool argument cannot carry a hint"),
    (edit('      n_elements: {type: "i32:16", default: numel(out_ptr)}', '      n_elements: {type: i32, optional: true, default: 3}'),
     "r.yaml:12:41: kernels.add.args.n_elements.optional: an optional argument (None: folded into the code) is "
     "passed to the kernel and has no default"),
    (edit("    bucket: pow2", "    bucket: pow2\n    specialize: sometimes"),
     "r.yaml:18:17: kernels.add.specialize: unknown policy 'sometimes' (expected one of: common, none, all)"),
    # what the kernel's source says
    (edit("    constexprs: {BLOCK: [256, 1024]}", "    constexprs: {BLOCK: [256, 1024], NOPE: [1]}"),
     "r.yaml:13:17: kernels.add.constexprs: NOPE is not a tl.constexpr parameter of add.py:add_kernel"),
    (edit("    constexprs: {BLOCK: [256, 1024]}", "    constexprs: {}"),
     "r.yaml:13:17: kernels.add.constexprs: give values for BLOCK (a tl.constexpr of add.py:add_kernel without a default)"),
    (edit('      x_ptr: {type: "*T:16", extent: n_elements}\n      y_ptr: "*T:16"',
          '      y_ptr: "*T:16"\n      x_ptr: {type: "*T:16", extent: n_elements}'),
     "r.yaml:9:7: kernels.add.args: list the kernel's runtime parameters in its order: x_ptr, y_ptr, out_ptr, n_elements (the recipe has y_ptr, x_ptr, out_ptr, n_elements; mark arguments the kernel does not take 'launch_only: true')"),
    (edit("    triton: add.py:add_kernel", "    triton: no_such_module_here.kernels:add_kernel"),
     "r.yaml:6:13: kernels.add.triton: importing no_such_module_here.kernels:add_kernel failed: ModuleNotFoundError: No module named 'no_such_module_here'"),
    (edit("    triton: add.py:add_kernel", "    triton: add.py:BLOCK_DEFAULT"),
     "r.yaml:6:13: kernels.add.triton: add.py has no 'BLOCK_DEFAULT'"),
    # the runtime's fixed sizes (aotpack/limits.py), refused at load
    (edit("    key: [n_elements]", "    key: [" + ", ".join(f"n_elements + {i}" for i in range(9)) + "]"),
     "r.yaml:16:10: kernels.add.key: the key has 9 values; at most 8 (the runtime's limit)"),
    (edit('      out_ptr: "*T:16"\n', '      out_ptr: "*T:16"\n' + "".join(f"      a{i}: {{type: i32, launch_only: true}}\n"
                                                                       for i in range(61))),
     "r.yaml:9:7: kernels.add.args: 65 arguments; a kernel takes at most 64 (the runtime's limit)"),
    (edit("extent: n_elements}", 'extent: "size(x_ptr, 8)"}'),
     "r.yaml:9:51: kernels.add.args.x_ptr.extent: dimension 8 of x_ptr: tensors have 0 to 7"),
    # names a wheel cannot carry, whatever their form
    *[(edit("package: kit", f"package: {name}"),
       f"r.yaml:1:10: package: {name!r} is not a valid package name (lower case letters, digits and _, starting "
       f"with a letter, ending with a letter or digit){f'; {one!r} is one' if one else ''}")
      for name, one in (("__init__", "init"), ("_kit", "kit"), ("kit_", "kit"), ("9kit", None), ("k-it", "k_it"),
                        ("My Kernels", "my_kernels"))],
    # YAML 1.1 reads these words as booleans and nulls: where a name or text is expected, say to quote them
    *[(edit("    args:\n", f"    args:\n      {word}: i32\n"),
       f"r.yaml:9:7: kernels.add.args: expected a name, got {value!r} (YAML reads {word} as {value!r}: write "
       f"'{word}' in quotes)") for word, value in (("yes", True), ("on", True), ("off", False), ("No", False),
                                                  ("~", None), ("null", None))],
    (edit("    num_warps: [4, 8]", "    num_warps: [4, 8]\n    on: 1"),
     "r.yaml:15:5: kernels.add: keys must be strings, got True (YAML reads on as True: write 'on' in quotes)"),
    (edit("package: kit", "package: off"),
     "r.yaml:1:10: package: expected a non-empty string, got False (YAML reads off as False: write 'off' in quotes)"),
    (edit("package: kit", "package: 0x10"),
     "r.yaml:1:10: package: expected a non-empty string, got 16 (YAML reads 0x10 as 16: write '0x10' in quotes)"),
    # a key value keyed twice, however written
    (edit("    key: [n_elements]", "    key: [n_elements, n_elements]"),
     "r.yaml:16:23: kernels.add.key[1]: the key lists n_elements twice ('n_elements'); a value is keyed once"),
    (edit("    key: [n_elements]", "    key: {n: n_elements, m: n_elements}"),
     "r.yaml:16:29: kernels.add.key.m: the key lists n_elements twice ('n'); a value is keyed once"),
    (edit("      - {key: [4096], config: {BLOCK: 256, num_warps: 8}}", "      - {key: [-4096], config: {BLOCK: 256, "
                                                                       "num_warps: 8}}"),
     "r.yaml:20:16: kernels.add.dispatch[0].key[0]: expected an integer >= 0, got -4096"),
    (edit('["cdiv(n_elements, BLOCK)"]', '["0 - 5"]'),
     "r.yaml:15:12: kernels.add.grid[0]: a grid dimension of -5 launches nothing: it must be at least 1"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), CASES, ids=[m.split(": ", 1)[1][:50] for _, m in CASES])
def test_recipe_errors(kernel_dir: Path, text: str, message: str) -> None:
    with pytest.raises(RecipeError) as info:
        parse(text, kernel_dir)
    assert str(info.value) == f"{kernel_dir}/" + message.replace("{dir}", str(kernel_dir))


def test_float_defaults_may_be_infinite_or_nan(kernel_dir: Path) -> None:
    arg = '      n_elements: {type: "i32:16", default: numel(out_ptr)}'
    for text, check in (("-inf", lambda v: v == float("-inf")), (".inf", lambda v: v == float("inf")),
                        (".nan", math.isnan), ("65504.0", lambda v: v == 65504)):  # fmt: skip
        fp16 = edit(arg, f"      n_elements: {{type: fp16, default: {text}}}").replace(
            "extent: n_elements", "extent: 4"
        )
        fp16 = fp16.replace('["cdiv(n_elements, BLOCK)"]', "[1]").split("    key:")[0]
        (k,) = parse(fp16, kernel_dir).kernels
        value = k.arg("n_elements").float_default
        assert value is not None and check(value), text


def test_demo_recipe_loads() -> None:
    demo = recipe.load(Path(__file__).parents[2] / "recipes" / "demo.yaml")
    assert [k.name for k in demo.kernels] == ["add", "softmax", "matmul", "layernorm", "rmsnorm"]
    assert all(len(k.configs) >= 4 for k in demo.kernels)
    assert {k.name: k.targets for k in demo.kernels if k.targets != ("sm_80", "sm_90a")} == {"layernorm": ("sm_90a",)}
    assert demo.kernels[1].arg("n_rows").launch_only


def test_missing_file_is_a_recipe_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"recipe .*nope\.yaml not found"):
        recipe.load(tmp_path / "nope.yaml")


def test_descriptors_required_hints_and_bound_constexprs(kernel_dir: Path) -> None:
    text = edit('      y_ptr: "*T:16"', '      y_ptr: "tensordesc<T[BLOCK, 16]>"')
    text = text.replace(
        '      x_ptr: {type: "*T:16", extent: n_elements}', '      x_ptr: {type: "*T:16!", extent: n_elements}'
    )
    text = text.replace("    constexprs: {BLOCK: [256, 1024]}",
                        "    constexprs: {BLOCK: {values: [256, 1024], equals: n_elements}}")  # fmt: skip
    (k,) = parse(text, kernel_dir).kernels
    y = k.arg("y_ptr")
    assert y.descriptor and y.pointer and y.block == ("BLOCK", 16) and y.hint is None
    assert k.arg("x_ptr").required and k.arg("x_ptr").hint == 16 and not k.arg("out_ptr").required
    assert k.bound == (("BLOCK", expr.parse("n_elements")),)


def test_versions_are_read_as_written_and_normalized(kernel_dir: Path) -> None:
    assert parse(edit("version: 1.0.0", "version: 0.10"), kernel_dir).version == "0.10"  # YAML alone: 0.1
    assert parse(edit("version: 1.0.0", "version: 1.0-RC1"), kernel_dir).version == "1.0rc1"


@pytest.mark.parametrize("jobs", ["0", "-3", "many"])
def test_the_cli_wants_at_least_one_compile_process(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    from aotpack.commands import cli

    with pytest.raises(SystemExit) as info:
        cli.main(["build", "r.yaml", "-j", jobs])
    assert info.value.code == 2
    assert f"expected a number of parallel compiles: a whole number from 1 to 1024 in ASCII digits; got {jobs!r}" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-o", "{file}"], "-o {file}: it is a file, not a folder; give a folder"),
        (["--cache-dir", "{file}"], "--cache-dir {file}: it is a file, not a folder; give a folder"),
        (["--keep-build-dir", "{file}/sub"], "--keep-build-dir {file}/sub: {file} is a file, not a folder"),
        (["--nvcc", "/no/such/nvcc"], "--nvcc /no/such/nvcc: no such executable; give the path of nvcc"),
    ],
)
def test_the_cli_checks_its_folders_and_tools_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    from aotpack.commands import cli

    file = tmp_path / "a-file"
    file.write_text("")
    args = [f.format(file=file) for f in flags]
    assert cli.main(["build", str(tmp_path / "missing.yaml"), *args]) == 2  # before the recipe is even read
    assert f"aotpack: error: {message.format(file=file)}" in capsys.readouterr().err


# Malformed files: every one ends in aotpack's own located error (file:line:col), never a traceback.
MALFORMED = [
    (GOOD.encode().replace(b"kit", b"k\xe9t"), "r.yaml:1:11: the recipe is not UTF-8 text (byte 0xe9)"),
    (GOOD.encode("utf-16"), "r.yaml:1:1: the recipe is not UTF-8 text (byte 0xff)"),
    (GOOD.replace("kit", "k\x07t").encode(), "r.yaml:1:11: control character '\\x07' in the recipe"),
    (b"\x0b" + GOOD.encode(), "r.yaml:1:1: control character '\\x0b' in the recipe"),  # found by the fuzz test
    (GOOD.replace("version: 1.0.0", "version: !!python/name:os.system ''").encode(),
     "r.yaml:2:10: YAML tag 'tag:yaml.org,2002:python/name:os.system' is not allowed in a recipe: write plain values"),
    (GOOD.replace("version: 1.0.0", "version: !custom 1").encode(),
     "r.yaml:2:10: YAML tag '!custom' is not allowed in a recipe: write plain values"),
    (GOOD.replace("    num_warps: [4, 8]", "    num_warps: [4, !!int eight]").encode(),
     "r.yaml:14:20: kernels.add.num_warps[1]: cannot read the value 'eight': invalid literal for int() with base 10: "
     "'eight'"),
    (GOOD.replace("package: kit", "base: &base {package: kit}\n<<: *base").encode(),
     "r.yaml:2:1: YAML merge keys (<<) are not supported: write the keys out"),
    (GOOD.replace("version: 1.0.0", "version: 1.0.0\nsummary: " + "[" * 40 + "]" * 40).encode(),
     "r.yaml:3:41: the recipe nests deeper than 32 levels (aotpack's limits.MAX_YAML_DEPTH)"),
    (GOOD.replace('"cdiv(n_elements, BLOCK)"', '"' + "(" * 40 + "1" + ")" * 40 + '"').encode(),
     "r.yaml:15:45: kernels.add.grid[0]: the expression nests deeper than 32 levels"),
    (GOOD.replace('"cdiv(n_elements, BLOCK)"', '"' + "+".join(["n_elements"] * 3000) + '"').encode(),
     "r.yaml:15:1421: kernels.add.grid[0]: the expression is longer than 256 numbers, names and operators"),
    (GOOD.replace('"cdiv(n_elements, BLOCK)"', "1" + "0" * 5000).encode(),
     "r.yaml:15:12: kernels.add.grid[0]: cannot read the value '1000000000000000000000000000000000000000': Exceeds "
     "the limit (4300 digits) for integer string conversion: value has 5001 digits; use sys.set_int_max_str_digits() "
     "to increase the limit"),
    (GOOD.replace('"cdiv(n_elements, BLOCK)"', '"n_elements * 99999999999999999999"').encode(),
     "r.yaml:15:26: kernels.add.grid[0]: the integer 99999999999999999999 does not fit in 64 bits"),
    # aliases of aliases ("billion laughs"): refused before anything expands them
    (GOOD.replace("version: 1.0.0", "version: 1.0.0\nsummary: x\nx0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))).encode(),
     "r.yaml:4:22: the recipe holds more than 200000 values, each alias counted where it is used (aotpack's "
     "limits.MAX_YAML_VALUES): are aliases repeating aliases?"),
    (GOOD.replace("kernels:", "---\nkernels:").encode(),
     "r.yaml:4:1: invalid YAML: a recipe is one YAML document; this '---' starts another: remove it and what follows"),
    (GOOD.replace("kernels:", "kernels:\n...\n---\nx: 1").encode(),
     "r.yaml:6:1: invalid YAML: a recipe is one YAML document; this '---' starts another: remove it and what follows"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "message"), MALFORMED, ids=[m.split(": ", 1)[1][:40] for _, m in MALFORMED])
def test_malformed_recipes_get_one_located_error(kernel_dir: Path, data: bytes, message: str) -> None:
    path = kernel_dir / "r.yaml"
    path.write_bytes(data)
    with pytest.raises(RecipeError) as info:
        recipe.load(path)
    assert str(info.value) == f"{kernel_dir}/" + message


def test_a_recipe_path_must_be_a_regular_file(kernel_dir: Path) -> None:
    with pytest.raises(RecipeError, match="is not a regular file"):
        recipe.load(kernel_dir)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (b"{not json", "its manifest.json is not valid JSON"),
        (b"[1, 2]", "its manifest.json is not an object"),
        (b'{"package": "x"}', "its manifest lacks what aotpack writes (KeyError: 'version')"),
    ],
)
def test_inspect_reports_a_malformed_manifest_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: bytes, message: str
) -> None:
    import zipfile

    from aotpack.commands import cli

    wheel = tmp_path / "x-1.0-cp39-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("x/manifest.json", manifest)
    assert cli.main(["inspect", str(wheel)]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("aotpack: error: ")


@pytest.mark.parametrize("name", ["__init__", "_kit", "kit_", "9kit", "Kit", "class", "json"])
def test_a_package_name_is_refused_alike_by_new_and_record_before_anything_runs(tmp_path: Path, name: str) -> None:
    import sys

    from aotpack import record
    from aotpack.commands import new
    from aotpack.errors import UsageError

    problem = recipe.package_problem(name)
    assert problem is not None and repr(name) in problem
    with pytest.raises(errors.ScaffoldError) as scaffolded:
        new.scaffold(name, tmp_path / "new")
    assert str(scaffolded.value) == problem and not (tmp_path / "new").exists()
    ran = tmp_path / "ran"
    with pytest.raises(UsageError) as recorded:
        record.record([sys.executable, "-c", f"open({str(ran)!r}, 'w')"], tmp_path / "r.yaml", name)
    assert str(recorded.value) == f"--package {name!r}: {problem}"
    assert not ran.exists() and not (tmp_path / "r.yaml").exists()


@pytest.mark.parametrize("change", ["drop", "add"])
def test_a_cuda_entry_given_another_number_of_arguments_is_refused_at_plan(tmp_path: Path, change: str) -> None:
    """The entry's __global__ declaration in the .cu file says how many arguments it takes (its
    __launch_bounds__(...) and templates notwithstanding): a recipe giving another number is a located error
    before any build, at the recipe's args."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    demo = yaml.safe_load((root / "recipes" / "demo.yaml").read_text())
    kernel = demo["kernels"]["rmsnorm"]
    demo["kernels"] = {"rmsnorm": {**kernel, "cuda": str(root / "examples" / "rmsnorm.cu")}}
    demo["kernels"]["rmsnorm"].pop("tune", None)
    demo.pop("tables", None)
    text = yaml.safe_dump(demo, sort_keys=False)
    assert parse(text, tmp_path).kernels[0].name == "rmsnorm"  # as it is: accepted
    args = dict(demo["kernels"]["rmsnorm"]["args"])
    if change == "drop":
        args.pop(next(n for n, a in args.items() if not (isinstance(a, dict) and a.get("launch_only"))))
    else:
        args["extra"] = "i32"
    demo["kernels"]["rmsnorm"]["args"] = args
    with pytest.raises(RecipeError, match=r"r.yaml:\d+:\d+: kernels.rmsnorm.args: the recipe gives \d+ arguments \(those not launch_only\), "
                                          r"and rmsnorm in rmsnorm.cu takes 5"):  # fmt: skip
        parse(yaml.safe_dump(demo, sort_keys=False), tmp_path)


@pytest.mark.parametrize("name", ["pip", "setuptools", "wheel", "triton", "torch", "aotpack"])
def test_a_package_named_as_a_well_known_distribution_is_refused_unless_it_says_it_replaces_it(
    kernel_dir: Path, name: str
) -> None:
    """Installing the wheel would replace that distribution in the user's environment: refused, located, with
    the way out; ``replaces:`` naming it (spelt any way PEP 503 takes as the same) is a deliberate fork."""
    with pytest.raises(RecipeError) as info:
        parse(edit("package: kit", f"package: {name}"), kernel_dir)
    assert str(info.value) == (
        f"{kernel_dir}/r.yaml:1:10: package: {name!r} is the name of the distribution {name!r}: installing the "
        f"wheel would replace it; choose another name, or, for a deliberate fork, say so with 'replaces: {name}' "
        f"in the recipe (aotpack new --replaces {name})"
    )
    spelt = name.upper() if name != "setuptools" else "SetupTools"
    assert parse(edit("package: kit", f"package: {name}\nreplaces: {spelt}"), kernel_dir).package == name
    with pytest.raises(RecipeError, match="is the name of the distribution"):
        parse(edit("package: kit", f"package: {name}\nreplaces: numpy"), kernel_dir)


def test_a_package_named_as_an_installed_distribution_or_its_module_is_refused(
    kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever this environment has installed, by its normalized name or by a module it installs; an installed
    kernel package aotpack built (an earlier build of this one) is not another's."""
    installed = sorted({str(d.metadata["Name"]) for d in importlib.metadata.distributions()})
    assert "PyYAML" in installed and "ruamel.yaml" in installed
    for package, owner, how in (("pyyaml", "PyYAML", "the name"), ("yaml", "PyYAML", "a module"),
                                ("ruamel_yaml", "ruamel.yaml", "the name"), ("pytest", "pytest", "the name"),
                                ("charset_normalizer", "charset-normalizer", "the name")):  # fmt: skip
        with pytest.raises(RecipeError) as info:
            parse(edit("package: kit", f"package: {package}"), kernel_dir)
        assert f"package: {package!r} is {how} of the distribution {owner!r}, installed in this environment" in str(
            info.value
        ), info.value
        assert parse(edit("package: kit", f"package: {package}\nreplaces: {owner}"), kernel_dir).package == package
    # a module of a distribution that declares no top-level names (no top_level.txt): found by its files
    undeclared = {module: owners[0] for module, owners in importlib.metadata.packages_distributions().items()
                  if module.isidentifier() and not module.startswith("_")
                  and packaging.utils.canonicalize_name(module) != packaging.utils.canonicalize_name(owners[0])
                  and importlib.metadata.distribution(owners[0]).read_text("top_level.txt") is None}  # fmt: skip
    module, owner = sorted(undeclared.items())[0]
    with pytest.raises(RecipeError, match=f"is a module of the distribution {owner!r}, installed"):
        parse(edit("package: kit", f"package: {module}"), kernel_dir)

    class Built:
        metadata: ClassVar = {"Name": "kit"}
        files: ClassVar = ["kit/__init__.py", "kit/manifest.json"]

    monkeypatch.setattr(importlib.metadata, "distributions", lambda: [Built()])
    assert parse(GOOD, kernel_dir).package == "kit", "an earlier build of the package, installed"
    Built.files = ["kit/__init__.py"]
    with pytest.raises(RecipeError, match="'kit' is the name of the distribution 'kit', installed"):
        parse(GOOD, kernel_dir)
