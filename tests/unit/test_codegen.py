"""Generated C and Python checked as text, from fake artifacts (no Triton, compiler or GPU)."""

import ast
import dataclasses
import itertools
import json
import math
import re
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

import pytest

from aotpack import codegen
from aotpack.backends import Artifact, DriverFloor, LaunchNeeds, Pruned, TmaLayout
from aotpack.backends import recipes as recipe
from aotpack.codegen import c as codegen_c
from aotpack.codegen import capi as codegen_capi
from aotpack.codegen import compress
from aotpack.codegen import python as codegen_py
from aotpack.pipeline import native
from aotpack.plan import classes
from aotpack.plan import variants as plan

from ..shared import GOOD


def artifact(v: plan.Variant) -> Artifact:
    return Artifact(
        variant_id=v.id,
        image=v.id.encode(),
        entry="add_kernel",
        shared=1024,
        static_shared=0,
        num_warps=v.config.num_warps or 0,
        registers=40,
        extra_pointer_params=2,
        metadata=(("arch", v.target),),
        driver_floor=FLOORS[v.target],
    )


FLOORS = {
    "sm_80": DriverFloor(12020, "ptxas 12.2 (nvidia-cuda-nvcc-cu12 12.2.140)"),
    "sm_90a": DriverFloor(13000, "ptxas 13.0 (triton 3.9.0, ptxas-blackwell)"),
}


def fake_build(folder: Path, prune: str = "") -> codegen.BuildInput:
    rec = recipe.parse(GOOD, folder / "r.yaml")
    variants = plan.plan_variants(rec)
    outcomes = [
        (v, Pruned(variant_id=v.id, reason="out of registers") if prune and prune in v.id else artifact(v))
        for v in variants
    ]
    kernels = codegen.group(rec, outcomes)
    return codegen.BuildInput(recipe=rec, kernels=kernels, versions=(("triton", "3.9.0"),))


def test_kernel_tables(kernel_dir):
    text = codegen_c.kernels_c(fake_build(kernel_dir))
    # jit_states: what the JIT keys it on (a bit set of states); shape_use: how much of its shape the binding reads
    assert (
        'static const aot_param add_params[] = {\n  {.name = "x_ptr", .kind = AOT_ARG_PTR, .dtype = -1, .typevar = 0, '
        ".hint = 16, .required = 0, .launch_only = 0, .has_default = 0, .contiguous = 0, .desc_rank = 0, "
        ".optional = 0, .jit_states = 1 << AOT_SPEC_DIV16 | 1 << AOT_SPEC_ANY, .shape_use = AOT_SHAPE_SPAN},"
    ) in text
    assert (
        '  {.name = "n_elements", .kind = AOT_ARG_I32, .dtype = -1, .typevar = -1, .hint = 16, .required = 0, '
        ".launch_only = 0, .has_default = 1, .contiguous = 0, .desc_rank = 0, .optional = 0, "
        ".jit_states = 1 << AOT_SPEC_ONE | 1 << AOT_SPEC_DIV16 | 1 << AOT_SPEC_ANY, .shape_use = AOT_SHAPE_NONE},\n};"
    ) in text
    assert "static const int8_t add_bindings[] = {13, 11};" in text  # fp32, fp16 codes from dtypes.json
    assert (
        'static const aot_target add_targets[] = {\n  {.id = "sm_80", .capability = 80, .specific = 0, .ptx = 0},\n'
        '  {.id = "sm_90a", .capability = 90, .specific = 1, .ptx = 0},\n};'
    ) in text
    assert "static const int64_t add_consts[] = {256, 256, 1024, 1024};" in text
    assert (
        "static const aot_rule add_rules[] = {\n  {.target = -1, .binding = -1, .spec = -1, .order = 0, .config = 1, "
        ".key = {4096}, .key_log2 = NULL, .us_log2 = NULL, .work_log2 = NULL},\n};"
    ) in text
    # the row serves every target and binding: a block of it in each one's span (2 targets x 2 bindings)
    block = "{.spec = -1, .first = 0, .end = 1}"
    assert f"static const aot_rule_block add_rule_blocks[] = {{{', '.join([block] * 4)}}};" in text
    assert "static const int32_t add_rule_spans[] = {0, 1, 1, 2, 2, 3, 3, 4};" in text
    # [binding][config][target] -> per class, most specialized first: the typical classes (n_elements a multiple
    # of 16 or not) and the floor for every config; each argument given up alone for the configs the dispatcher
    # picks (the row's BLOCK=256,w8 and the default BLOCK=1024,w4: configs 1 and 2)
    assert (
        "static const int add_variant_of[] = {\n  0, 1, -1, -1, -1, 2,\n  36, 37, -1, -1, -1, 38,\n"
        "  3, 4, 5, 6, 7, 8,\n  39, 40, 41, 42, 43, 44,\n  9, 10, 11, 12, 13, 14,\n"
    ) in text
    d, a = "AOT_SPEC_DIV16", "AOT_SPEC_ANY"
    specs = [d, d, d, d, d, d, d, a, a, d, d, d, d, a, d, d, d, d, a, d, a, a, a, a]
    assert "static const uint8_t add_specs[] = {" + ", ".join(specs) + "};" in text
    assert 'static const char *const add_spec_names[] = {"DDDD", "DDD_", "_DDD", "D_DD", "DD_D", "____"};' in text
    assert "static const int8_t add_call_order[] = {0, 1, 2, 3};" in text
    assert (
        "static void add_grid(aot_call *x, const int64_t *c, int64_t grid[3]) {\n  (void)x;\n  (void)c;\n"
        "  (void)grid;\n  grid[0] = aot_cdiv(x, x->i[3], c[0]);\n  grid[1] = INT64_C(1);\n"
        "  grid[2] = INT64_C(1);\n}"
    ) in text
    assert "  if (!(x->given & (UINT64_C(1) << 3))) x->i[3] = aot_numel(x, 2);" in text
    assert "  out[0] = x->i[3];\n  out[1] = 0;" in text
    # each variant's image: its block (the kernel's sm_80 images first), offset, size and CRC-32; 12 blocks per
    # multiprocessor of an sm_80 (4 warps of 40 registers: 65536 // (4 * 1280))
    build = fake_build(kernel_dir)
    rows = [(v, art) for v, art in build.kernels[0].variants if v.target == "sm_80"]
    first, second = rows[0][1].image, rows[1][1].image
    assert (
        '{.id = "add/T=fp32,BLOCK=256,w4,s3/sm_80/DDDD", .binding = 0, .config = 0, .target = 0, .spec = 0, '
        f".block = &block_0, .offset = 0, .raw_size = 37, .crc32 = UINT32_C({zlib.crc32(first)}), "
        '.entry = "add_kernel", .shared = 1024, .static_shared = 0, .num_warps = 4, .blocks = 12, .extra_ptrs = 2, '
        ".folded = UINT64_C(0), .min_driver = 12020, .scratch = {0, 1}, .profile_scratch = {0, 1}, .num_ctas = 1, "
        ".cooperative = 0, .pdl = 0, .tma = NULL}" in text
    )
    assert f'.id = "{rows[1][0].id}", ' in text
    assert (
        f".block = &block_0, .offset = 37, .raw_size = {len(second)}, .crc32 = UINT32_C({zlib.crc32(second)})" in text
    )
    # the shipped block is LZ4: a token with 15+ literals, then the first image's bytes
    head = text.split("static const unsigned char block_0_data[] =\n  ")[1][:40]
    assert head.startswith('"\\xf') and "\\x61\\x64\\x64\\x2f" in head  # "add/"
    assert "static const aot_block block_0 = {.data = block_0_data, .size = " in text and "block_1 = " in text


def test_launch_needs_are_tabled_per_variant(kernel_dir):
    build = fake_build(kernel_dir)
    needs = LaunchNeeds(scratch=(512, 128), profile_scratch=(64, 8), num_ctas=2, cooperative=True, pdl=True,
                        tma=(TmaLayout(box=(128, 64), swizzle=3, elem_type=6, elem_size=2),))  # fmt: skip
    first, art = build.kernels[0].variants[0]
    kernels = (dataclasses.replace(build.kernels[0], variants=((first, dataclasses.replace(art, needs=needs)),)),)
    text = codegen_c.kernels_c(dataclasses.replace(build, kernels=kernels))
    assert (
        "static const aot_tma add_tma_0[] = "
        "{{.box = {128, 64}, .rank = 2, .swizzle = 3, .elem_type = 6, .elem_size = 2}};"
    ) in text
    assert (
        ".scratch = {512, 128}, .profile_scratch = {64, 8}, .num_ctas = 2, .cooperative = 1, .pdl = 1, "
        ".tma = add_tma_0}," in text
    )


def test_pruned_variants_leave_holes_the_dispatcher_skips(kernel_dir):
    build = fake_build(kernel_dir, prune="BLOCK=256,w4,s3/sm_80/DDDD")
    text = codegen_c.kernels_c(build)
    assert "static const int add_variant_of[] = {\n  -1, 0, -1, -1, -1, 1," in text
    assert [v.id for v, _ in build.kernels[0].pruned] == [
        "add/T=fp32,BLOCK=256,w4,s3/sm_80/DDDD", "add/T=fp16,BLOCK=256,w4,s3/sm_80/DDDD"]  # fmt: skip


def test_module_and_stubs(kernel_dir):
    build = fake_build(kernel_dir)
    docs = {"add": codegen_py.docstring(build.kernels[0])}
    module = codegen_c.module_c(build, docs)
    assert (
        '"add($module, x_ptr, y_ptr, out_ptr, n_elements=None, *, stream=None, variant=None)\\012--\\012\\012' in module
    )
    assert "PyMODINIT_FUNC PyInit__native(void) {" in module
    stubs = codegen_py.init_pyi(build)
    assert (
        "    def __call__(self, x_ptr: Pointer, y_ptr: Pointer, out_ptr: Pointer, n_elements: Optional[int] = None, "
        '*, stream: Any = None, variant: Optional[str] = None) -> None:\n        """The add kernel.'
    ) in stubs
    assert "add: _add" in stubs
    # the docstrings an IDE shows: the kernel's, and each function's as the generated __init__.py has it
    tree, init = ast.parse(stubs), ast.parse(codegen_py.init_py(build))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__call__")
    assert ast.get_docstring(call) == docs["add"]
    said = {n.name: ast.get_docstring(n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    meant = {n.name: ast.get_docstring(n) for n in init.body if isinstance(n, ast.FunctionDef) and n.name in said}
    assert said["activate"] and said == {name: meant.get(name) for name in said}
    compile(codegen_py.init_py(build), "__init__.py", "exec")
    assert "Key: n_elements (pow2 buckets); dispatch table: 1 row; default config BLOCK=1024,w4,s3" in docs["add"]


def test_manifest(kernel_dir):
    m = codegen_py.manifest(fake_build(kernel_dir), "0.1.0")
    add = m["kernels"]["add"]
    assert m["package"] == "kit" and m["targets"] == ["sm_80", "sm_90a"]
    assert add["source"] == "add.py:add_kernel"
    assert add["args"][3] == {"name": "n_elements", "type": "i32:16", "kind": "int", "default": "numel(out_ptr)"}
    assert add["specializations"] == [
        {"name": "DDDD", "assumes": {"x_ptr": "D", "y_ptr": "D", "out_ptr": "D", "n_elements": "D"}},
        {"name": "DDD_", "assumes": {"x_ptr": "D", "y_ptr": "D", "out_ptr": "D"}},
        {"name": "_DDD", "assumes": {"y_ptr": "D", "out_ptr": "D", "n_elements": "D"}},
        {"name": "D_DD", "assumes": {"x_ptr": "D", "out_ptr": "D", "n_elements": "D"}},
        {"name": "DD_D", "assumes": {"x_ptr": "D", "y_ptr": "D", "n_elements": "D"}},
        {"name": "____", "assumes": {}},
    ]
    assert add["min_driver_cuda"] == {"sm_80": "12.2", "sm_90a": "13.0"}
    assert add["driver_floor_set_by"] == {"sm_80": "ptxas 12.2 (nvidia-cuda-nvcc-cu12 12.2.140)",
                                          "sm_90a": "ptxas 13.0 (triton 3.9.0, ptxas-blackwell)"}  # fmt: skip
    assert len(add["variants"]) == 72 and add["pruned"] == []  # 2 targets x 2 types x (4 configs x 3 + 2 x 3)
    assert add["dispatch"] == [
        {"key": [4096], "config": "BLOCK=256,w8,s3", "arch": None, "types": {}, "specialization": None}
    ]


def test_native_command_is_planned_as_data(tmp_path):
    build = native.NativeBuild(sources=(tmp_path / "a.c",), include_dirs=(tmp_path,), output=tmp_path / "m.so")
    assert build.command(("zigcc",)) == (
        "zigcc", "-target", "x86_64-linux-gnu.2.17", "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra",
        "-Werror", "-g0", "-fvisibility=hidden", "-ffp-contract=off", "-DPy_LIMITED_API=0x03090000", f"-I{tmp_path}", "-o",
        str(tmp_path / "m.so"), str(tmp_path / "a.c"), "-ldl", "-lpthread", "-lm",
    )  # fmt: skip


@pytest.mark.parametrize(("data", "literal"), [(b"", '""'), (b"\x00\xff", '"\\x00\\xff"')])
def test_c_bytes(data, literal):
    assert codegen_c.c_bytes(data) == literal


def test_float_defaults_are_c_constants(tmp_path):
    values = (float("-inf"), float("inf"), float("nan"), 1e-06, -2.5, 65504.0)
    prints = "".join(f'  printf("%.17g\\n", {codegen_c.c_double(v)});\n' for v in values)
    (tmp_path / "d.c").write_text(f"#include <stdio.h>\nint main(void) {{\n{prints}  return 0;\n}}\n")
    subprocess.run([sys.executable, "-m", "ziglang", "cc", "-std=c11", "-Wall", "-Werror", "-o", str(tmp_path / "d"),
                    str(tmp_path / "d.c")], check=True)  # fmt: skip
    printed = [float(line) for line in subprocess.run([tmp_path / "d"], capture_output=True, text=True).stdout.split()]
    assert len(printed) == len(values)
    assert all(math.isnan(p) if math.isnan(v) else p == v for p, v in zip(printed, values, strict=True))


def test_manifest_keeps_the_key_order(kernel_dir):
    import json

    text = GOOD.replace("    key: [n_elements]", "    key: {z: n_elements, a: 2 * n_elements}").replace(
        "      - {key: [4096], config: {BLOCK: 256, num_warps: 8}}",
        "      - {key: [4096, 1], config: {BLOCK: 256, num_warps: 8}}",
    )
    rec = recipe.parse(text, kernel_dir / "r.yaml")
    variants = plan.plan_variants(rec)
    outcomes = [(v, artifact(v)) for v in variants]
    kernels = codegen.group(rec, outcomes)
    text = codegen_py.manifest_json(codegen.BuildInput(recipe=rec, kernels=kernels, versions=()), "0")
    assert json.loads(text)["kernels"]["add"]["key"] == [["z", "n_elements"], ["a", "(2 * n_elements)"]]


def test_a_row_for_a_hint_level_serves_each_class_of_that_level(kernel_dir):
    """A table row may name a hint level (tables tuned before classes were per argument do): 'hinted' serves
    every class in which each hinted argument holds its hint, whatever the others (y_ptr has no hint)."""
    text = GOOD.replace('      y_ptr: "*T:16"', '      y_ptr: "*T"')
    rec = recipe.parse(text, kernel_dir / "r.yaml")
    (kernel,) = rec.kernels
    kernel = dataclasses.replace(kernel, rules=tuple(dataclasses.replace(r, specialization="hinted")
                                                     for r in kernel.rules))  # fmt: skip
    rec = dataclasses.replace(rec, kernels=(kernel,))
    variants = plan.plan_variants(rec)
    specs = classes.specs(kernel)
    assert [(s.name, s.level) for s in specs] == [("DDDD", "hinted"), ("DDD_", "safe"), ("_DDD", "safe"),
                                                  ("D_DD", "hinted"), ("DD_D", "safe"), ("____", "safe")]  # fmt: skip
    kernels = codegen.group(rec, [(v, artifact(v)) for v in variants])
    where = compress.Placement(block=0, offset=0, size=1, crc32=0)
    text = codegen_c.kernel_c(kernels[0], "kit", {v.id: ("block_0", where) for v in variants})
    assert (
        "static const aot_rule add_rules[] = {\n"
        "  {.target = -1, .binding = -1, .spec = 0, .order = 0, .config = 1, .key = {4096}, .key_log2 = NULL, "
        ".us_log2 = NULL, .work_log2 = NULL},\n"
        "  {.target = -1, .binding = -1, .spec = 3, .order = 1, .config = 1, .key = {4096}, .key_log2 = NULL, "
        ".us_log2 = NULL, .work_log2 = NULL},\n};"
    ) in text
    # the kernel's row count is the expanded one; each class's rows a block, in every target and binding's span
    assert "  .nrules = 2,\n  .rules = add_rules,\n" in text
    blocks = "{.spec = 0, .first = 0, .end = 1}, {.spec = 3, .first = 1, .end = 2}"
    assert f"static const aot_rule_block add_rule_blocks[] = {{{', '.join([blocks] * 4)}}};" in text


def _fields(body: str) -> list[str]:
    """The field names of a struct's body, in order."""
    names = []
    for declaration in filter(None, (d.strip() for d in body.split(";"))):
        pointer_to_function = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", declaration)
        declarators = [pointer_to_function[1]] if pointer_to_function else declaration.split(",")
        names += [re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", d)[0] for d in declarators]
    return names


def _uncommented(c_text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", c_text, flags=re.S)


def _structs() -> dict[str, list[str]]:
    """Every struct the generated C can initialize, by the name its declarations use, with its fields in order:
    the runtime header's, and the method and module definitions of Python's headers (module.c fills them)."""
    header = _uncommented((Path(codegen_c.__file__).parents[1] / "runtime" / "aot_runtime.h").read_text())
    found = {m[2]: _fields(m[1]) for m in re.finditer(r"typedef struct\s*\w*\s*\{([^{}]*)\}\s*(\w+);", header)}
    python = Path(sysconfig.get_paths()["include"])
    for name in ("methodobject.h", "moduleobject.h"):
        if (python / name).is_file():
            text = _uncommented((python / name).read_text())
            found |= {m[1]: _fields(m[2]) for m in re.finditer(r"^struct (\w+) \{([^{}]*)\};", text, flags=re.M)}
    return found


def _braced(text: str, start: int) -> str:
    """The brace-enclosed initializer that opens at text[start], quoted strings skipped."""
    depth, quoted = 0, False
    for i in range(start, len(text)):
        if text[i] == '"' and text[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and text[i] in "{}":
            depth += 1 if text[i] == "{" else -1
            if depth == 0:
                return text[start : i + 1]
    raise AssertionError(f"unbalanced braces at {text[start : start + 80]!r}")


def _top_level(initializer: str) -> list[tuple[int, str]]:
    """The characters of a braced initializer at its top level (inside its own braces, outside nested ones and
    quotes), with their positions."""
    out, depth, quoted = [], 0, False
    for i, char in enumerate(initializer):
        if char == '"' and initializer[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and char in "{}":
            depth += 1 if char == "{" else -1
        elif not quoted and depth == 1:
            out.append((i, char))
    return out


def _elements(initializer: str) -> list[str]:
    """The items of an array's braced initializer."""
    cuts = [0] + [i for i, char in _top_level(initializer) if char == ","] + [len(initializer) - 1]
    items = (initializer[a + 1 : b].strip() for a, b in itertools.pairwise(cuts))
    return [item for item in items if item]


def _initializer_names(initializer: str) -> list[str]:
    """The fields a struct's braced initializer names at its top level, in order."""
    names = []
    for i, char in _top_level(initializer):
        if char == "." and initializer[:i].rstrip()[-1:] in ("{", ","):
            names.append(re.match(r"\.(\w+) = ", initializer[i:])[1])  # type: ignore[index]
    return names


# a declaration with a braced initializer, not of a pointer: (type, name, array brackets)
_DECLARATION = re.compile(
    r"^[ \t]*(?:(?:static|const|AOT_API|struct)\s+)*(\w+)\s+(\w+)\s*(\[[^\]]*\])?\s*=\s*(?=\{)", re.M
)


def test_every_struct_initializer_is_designated_naming_every_field(kernel_dir):
    """Every struct the generated C initializes (kernels, variants, parameters, TMA layouts, dispatch rows,
    targets, image blocks, errors, the module's methods and definition) names each field of its struct, in the
    struct's order: a value swapped in the generator cannot land in the wrong field unnoticed. The structs and
    their fields are read from the headers, and a struct initializer is told by its shape: a single value in
    braces, or an array of braced items."""
    build = fake_build(kernel_dir)
    needs = LaunchNeeds(tma=(TmaLayout(box=(128, 64), swizzle=3, elem_type=6, elem_size=2),))
    first, art = build.kernels[0].variants[0]
    kernels = (dataclasses.replace(build.kernels[0], variants=((first, dataclasses.replace(art, needs=needs)),)),)
    build = dataclasses.replace(build, kernels=kernels)
    docs = {"add": codegen_py.docstring(build.kernels[0])}
    structs = _structs()
    checked = set()
    for text in (codegen_c.kernels_c(build), codegen_c.module_c(build, docs), codegen_capi.capi_c(build)):
        for match in _DECLARATION.finditer(text):
            struct, name, array = match.groups()
            initializer = _braced(text, match.end())
            items = _elements(initializer) if array is not None else [initializer]
            if array is not None and not items[0].startswith("{"):
                continue  # an array of numbers
            assert struct in structs, (struct, name)
            checked.add(struct)
            for item in items:
                assert _initializer_names(item) == structs[struct], (struct, name, item)
        # whatever the scan missed: a struct of the headers declared with a value
        declared = {s for s in structs if re.search(rf"\b{s}\s+\w+\s*(\[[^\]]*\])?\s*=", text)}
        assert declared <= checked, declared - checked
    assert {"aot_kernel", "aot_variant", "aot_rule", "aot_block", "aot_error", "PyMethodDef"} <= checked, checked


HOSTILE = [
    '"""; import os; os.system("echo pwned")  #',
    "*/ int evil; /*",
    "back\\slash \\N{BULLET} \\x41 ??/ trigraph ??=",
    "quote \" and 'single' and é and 中文",
]


def _c_unescape(literal: str) -> str:
    """Read a C string literal as a compiler would (the escapes c_string emits)."""
    assert literal[0] == literal[-1] == '"'
    body, out, i = literal[1:-1], bytearray(), 0
    while i < len(body):
        if body[i] == "\\":
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            assert body[i] not in '"?' and 0x20 <= ord(body[i]) < 0x7F, body[i]
            out.append(ord(body[i]))
            i += 1
    return out.decode()


@pytest.mark.parametrize("text", HOSTILE)
def test_recipe_text_is_data_in_every_generated_language(kernel_dir, text):
    assert _c_unescape(codegen_c.c_string(text)) == text
    rec = recipe.parse(
        GOOD.replace("version: 1.0.0", f"version: 1.0.0\nsummary: {json.dumps(text)}"), kernel_dir / "r.yaml"
    )
    build = dataclasses.replace(fake_build(kernel_dir), recipe=rec)
    source = codegen_py.init_py(build)
    module = ast.parse(source)
    assert (ast.get_docstring(module, clean=False) or "").startswith(text + "\n")
    assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and n.names[0].name == "os" and n.lineno < 3
                   for n in module.body)  # fmt: skip
    docs = {"add": text}
    assert text not in codegen_capi.capi_h(build, docs), "C comments carry no recipe text"
    assert codegen_c.c_string(text) in codegen_c.module_c(dataclasses.replace(build), docs)


def test_each_target_and_binding_reads_only_the_rows_that_may_serve_it(kernel_dir):
    """rule_spans: per (target, binding), [first, end) of rule_blocks, each block the rows of one target, binding
    and class (each -1: any) in table order: the blocks of a span hold every row that may serve the target and
    binding (its own, or any) and no other, each row once in the rules; a row keeps its place in the table
    (``order``: ties go to the earlier, in whatever order the dispatcher reads)."""
    from aotpack.model import Rule

    (kernel,) = recipe.parse(GOOD, kernel_dir / "r.yaml").kernels
    config = kernel.configs[0]
    specs = classes.specs(kernel)

    def row(arch, dtype, n, spec):
        return Rule(key=(n,), config=config, arch=arch, types=(("T", dtype),) if dtype else None,
                    specialization=spec, median_us=(), where=kernel.where)  # fmt: skip

    inline = kernel.rules  # one row for any target, binding and class
    names = [s.name for s in specs]
    table = tuple(row("sm_90a", t, n, c) for t in ("fp32", "fp16") for n in (1024, 2048, 4096) for c in names[:3])
    old = tuple(row("sm_80", "fp16", n, names[-1]) for n in (1024, 2048))
    any_type = (row("sm_90a", None, 512, names[1]), row(None, "fp16", 256, None))
    kernel = dataclasses.replace(kernel, rules=(*table, *inline, *old, *any_type))
    _, served = codegen_c._rule_rows(codegen.KernelBuild(kernel=kernel, variants=(), pruned=(), min_driver={}), specs)
    rows, blocks, spans = codegen_c._blocks(kernel, served)
    assert sorted(r.text for r in rows) == sorted(r.text for r in served)  # each row once
    assert len(spans) == 2 * 2 * 2  # targets (sm_80, sm_90a) x bindings (fp32, fp16)
    for t, b in itertools.product(range(2), range(2)):
        first, end = spans[2 * (2 * t + b) : 2 * (2 * t + b) + 2]
        read = [rows[i] for _, a, z in blocks[first:end] for i in range(a, z)]
        assert sorted(r.text for r in read) == sorted(r.text for r in served if r.target in (t, -1)
                                                        and r.binding in (b, -1))  # fmt: skip
        scores = []
        for spec, a, z in blocks[first:end]:  # a block's rows share target, binding and class: the score bound
            assert {(r.target, r.binding, r.spec) for r in rows[a:z]} == {(rows[a].target, rows[a].binding, spec)}
            assert [served.index(r) for r in rows[a:z]] == sorted(served.index(r) for r in rows[a:z])
            scores.append((rows[a].target >= 0) * 8 + (rows[a].binding >= 0) * 4 + (spec >= 0))  # the runtime's
        assert scores == sorted(scores, reverse=True)  # the rows that score most first
    for place, r in enumerate(served):
        assert f".order = {place}," in r.text
