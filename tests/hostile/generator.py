"""The hostile corpus, generated from the recipe language rather than written case by case.

Each *surface* is a valid base input plus a walk over it: every key path the base holds (and the keys the
loader accepts that the base lacks, found by probing it: ``loader_keys``) gets every mutation kind that
applies, one change per case. Surfaces today:

- ``recipe``: the YAML recipe of each base (Triton, CUDA, recorded ``launch: triton``, with a tuning table);
- ``document``: whole-file changes of the recipe (multi-document, BOM, CRLF, directives, tags, merge keys);
- ``files``: every file a recipe points at (kernel .py, .cu, table, include folder, tuning hooks, the recipe
  itself) made missing, binary, a folder, a FIFO, unreadable, huge, or a symlink out of the project;
- ``table``: the tuning table's JSON (``recipes/tables/*.json``: ``aotpack/recipe/tables.py``);
- ``settings``: ``[tool.aotpack]`` in pyproject.toml and PEP 517 ``-C`` config settings;
- ``cache``, ``inspect``, ``new``, ``record``, ``project`` (the PEP 517 hooks' files) and ``env`` (the variables
  aotpack reads): the other commands, in ``commands.py``.
- ``served`` (``served.py``, not among ``SURFACES``: it needs a built package and the fake driver): every variable
  the runtime reads, with every kind of bad value, in a served program's processes.

A case says what the runner must see: ``invalid`` (a located aotpack error), ``valid`` (exit 0; an equivalent
spelling, with the reason), or ``either`` (the language leaves it open, with the reason: only a traceback,
hang or crash fails it). A surface is a function yielding ``Case``; register it in ``SURFACES``.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .yamltext import BAD_BYTE, M, Raw, at, copy, dotted, edit_entries, emit, encode, replace

ROOT = Path(__file__).resolve().parents[2]
Expect = Literal["invalid", "valid", "either", "served"]


@dataclass(frozen=True)
class Special:
    """A file that is not plain bytes: ``dir``, ``fifo``, ``symlink`` (to ``target``: ``@outside/...`` is the run's
    folder outside every case), ``unreadable`` (mode 000 over ``data``), ``sparse`` (``size`` bytes of NUL),
    ``readonly`` (a folder of mode 555: unwritable for a "non-root" case)."""

    kind: Literal["dir", "fifo", "symlink", "unreadable", "sparse", "readonly"]
    target: str = ""
    data: bytes = b""
    size: int = 0


@dataclass(frozen=True)
class Case:
    id: str  # surface/base/key/mutation: stable, greppable
    surface: str
    base: str
    key: str  # the key path, list indexes and user-chosen names generalized: kernels.*.args.*.type
    mutation: str  # the kind of change: type:int, huge:string, dup:key, file:fifo, ...
    make_files: Callable[[], dict[str, bytes | Special]] = field(repr=False, compare=False)
    expect: Expect = "invalid"
    reason: str = ""  # why a case is valid (or open)
    command: str = "plan"  # plan | pep517 | cli (``argv``)
    target: str = "recipe.yaml"  # the recipe the command reads
    config_settings: dict[str, Any] = field(default_factory=dict)
    line: int | None = None  # the recipe line the change sits on, where it has one
    # what a good error names: the changed line; a file (or the case's folder); ``names`` (an option, a
    # variable); any aotpack error (a recorded program's status)
    locate: Literal["line", "file", "value", "any"] = "line"
    budget: float = 1.0  # seconds: more is a HANG
    needs: str = ""  # "non-root": run with privileges dropped (the runner is root), or skipped where it cannot
    # cli: the command line (``{case}``: the case's folder, ``{outside}``: the run's folder outside every case)
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # variables set (placeholders as argv; "" value: unset)
    may_write: tuple[str, ...] = ()  # paths in the case's folder the command may change (besides out/)
    names: tuple[str, ...] = ()  # locate="value": what a good message names (any of them)
    inject: str = ""  # "full-disk": every write through aotpack's atomic helper fails with ENOSPC; "stdout-full":
    # standard output is /dev/full
    program: str = ""  # a recorded program's file: its own CPU time is added to the budget
    must_say: str = ""  # served: what a line of the program's output starts with (the compilation refused)

    @property
    def program_text(self) -> bytes:
        data = self.files().get(self.program, b"") if self.program else b""
        return data if isinstance(data, bytes) else b""

    def files(self) -> dict[str, bytes | Special]:
        """The case's project: relative path -> content (made on demand: the corpus is large)."""
        return self.make_files()

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "surface": self.surface, "base": self.base, "key": self.key,
                "mutation": self.mutation, "expect": self.expect, "reason": self.reason, "line": self.line}  # fmt: skip


def fixed(files: dict[str, bytes | Special]) -> Callable[[], dict[str, bytes | Special]]:
    return lambda: files


# ---------------------------------------------------------------- the bases: small valid projects


def _read(rel: str) -> bytes:
    return (ROOT / rel).read_bytes()


KERNEL_PY = "kernels/add.py"
TUNING_PY = "kernels/tuning.py"
TUNING_HOOKS = (
    b"def add_inputs(key, types):\n    raise NotImplementedError\n\n\ndef add_reference(args):\n    return []\n"
)

TRITON = {
    "package": "small_kernels", "version": "0.2.0", "summary": "hostile corpus base", "license": "MIT",
    "cuda": "12.2", "triton": "3.9", "targets": ["sm_80", "sm_90a"],
    "kernels": {"add": {
        "triton": "kernels/add.py:add_kernel", "doc": "out = x + y", "types": {"T": ["fp32", "fp16"]},
        "mutates": ["out_ptr"],
        "args": {
            "x_ptr": {"type": "*T:16", "extent": "n_elements", "contiguous": True},
            "y_ptr": {"type": "*T:16", "extent": "n_elements"},
            "out_ptr": "*T:16",
            "n_elements": {"type": "i32:16", "default": "numel(out_ptr)"},
        },
        "constexprs": {"BLOCK": [256, 1024]}, "num_warps": [4], "num_stages": [1],
        "grid": ["cdiv(n_elements, BLOCK)"], "key": ["n_elements"], "bucket": "pow2",
        "default": {"BLOCK": 1024}, "autotune": True, "specialize": "common", "classes": ["DDDD"],
        "options": {"num_ctas": 1, "enable_fp_fusion": True},
        "dispatch": [{"key": [4096], "config": {"BLOCK": 256}, "arch": "sm_90a", "types": {"T": "fp16"}}],
        "tune": {"inputs": "kernels/tuning.py:add_inputs", "reference": "kernels/tuning.py:add_reference",
                 "keys": [[4096], [65536]], "rtol": 0,
                 "sample": {"count": 4, "range": {"n_elements": [16, 4096]}, "seed": 1}, "refine": 8,
                 "validate": 4},
    }},
}  # fmt: skip

DESCRIPTORS = {  # bound constexprs, optional pointers, launch_only and the Triton-only keys of docs/recipe.md
    "package": "desc_kernels", "version": "0.1.0", "targets": ["sm_90a"],
    "kernels": {"add": {
        "triton": "kernels/add.py:add_kernel", "types": {"T": ["fp16"]}, "targets": ["sm_90a"],
        "args": {
            "x_ptr": {"type": "*T:16!", "extent": "n_elements"},
            "y_ptr": {"type": "*T", "extent": "n_elements", "optional": False, "specialize": True},
            "out_ptr": {"type": "*T:16"},
            "n_elements": {"type": "i32", "default": "numel(out_ptr)"},
            "n_rows": {"type": "i64", "default": 1, "launch_only": True},
        },
        "constexprs": {"BLOCK": {"values": [256, 1024], "equals": "min(1024, max(256, next_pow2(n_elements)))"}},
        "num_warps": [4, 8], "num_stages": [1, 3], "grid": ["cdiv(n_elements, BLOCK)", "n_rows", 1],
        "key": {"n": "n_elements"}, "bucket": "exact", "default": {"BLOCK": 1024, "num_warps": 4, "num_stages": 1},
        "options": {"maxnreg": 128, "launch_pdl": False, "launch_cooperative_grid": False},
        "dispatch": [{"key": [4096], "config": {"BLOCK": 256, "num_warps": 8, "num_stages": 3}}],
    }},
}  # fmt: skip

CUDA = {
    "package": "cuda_kernels", "version": "0.1.0", "targets": ["sm_80", "sm_90a"],
    "kernels": {"rmsnorm": {
        "cuda": "kernels/rmsnorm.cu", "entry": "rmsnorm<{T}, {BLOCK}>", "types": {"T": ["fp16", "fp32"]},
        "mutates": ["out"],
        "args": {
            "out": {"type": "*T:16", "extent": "n_rows * n_cols", "contiguous": True},
            "x": {"type": "*T:16", "extent": "n_rows * n_cols", "contiguous": True},
            "weight": {"type": "*T:16", "extent": "n_cols"},
            "eps": "fp32",
            "n_cols": {"type": "i32:16", "default": "size(x, 1)"},
            "n_rows": {"type": "i32", "default": "size(x, 0)", "launch_only": True},
        },
        "defines": {"BLOCK": [128, 256]}, "grid": ["n_rows"], "block": ["BLOCK"], "shared": 0,
        "gencode": ["sm_80", "sm_90a"], "include_dirs": ["include"], "nvcc_flags": ["-lineinfo"],
        "key": ["n_cols"], "default": {"BLOCK": 256}, "dispatch": [{"key": [1024], "config": {"BLOCK": 128}}],
    }},
}  # fmt: skip

RECORDED = {
    "package": "recorded_kernels", "version": "0.1.0", "targets": ["sm_90a"],
    "kernels": {"add_kernel": {
        "triton": "kernels/add.py:add_kernel", "launch": "triton", "types": {"T": ["fp32", "fp16"]},
        "args": {"x_ptr": "*T", "y_ptr": "*T", "out_ptr": "*T", "n_elements": "i32"},
        "options": {"num_ctas": 1},
        "variants": [
            {"types": {"T": "fp32"}, "config": {"BLOCK": 1024, "num_warps": 4, "num_stages": 3}, "class": "DDDD",
             "launches": 2},
            {"types": {"T": "fp16"}, "config": {"BLOCK": [256, 512], "num_warps": 8, "num_stages": 1},
             "class": "DDD_", "launches": 1},
        ],
        "autotuned": [{"key": [4096], "config": {"BLOCK": 1024, "num_warps": 4, "num_stages": 3}}],
    }},
}  # fmt: skip

TABLE_PATH = "tables/small_kernels.sm_90a.json"
TABLE = {
    "format": "aotpack-tuning-table/1", "package": "small_kernels", "arch": "sm_90a", "device": "NVIDIA H100",
    "driver_cuda": "13.0", "date": "2026-11-22",
    "kernels": {"add": [{"key": [4096], "types": {"T": "fp32"}, "config": "BLOCK=256,w4,s1",
                         "specialization": "hinted", "median_us": {"BLOCK=256,w4,s1": 4.5}, "rejected": {}}]},
}  # fmt: skip
WITH_TABLE = {**TRITON, "tables": [TABLE_PATH]}


@dataclass(frozen=True)
class Base:
    name: str
    tree: dict[str, Any]
    files: Callable[[], dict[str, bytes | Special]]  # what the recipe points at


def _triton_files() -> dict[str, bytes | Special]:
    return {KERNEL_PY: _read("examples/add.py"), TUNING_PY: TUNING_HOOKS}


def _table_files() -> dict[str, bytes | Special]:
    return {**_triton_files(), TABLE_PATH: json.dumps(TABLE, indent=1).encode()}


def _cuda_files() -> dict[str, bytes | Special]:
    return {"kernels/rmsnorm.cu": _read("examples/rmsnorm.cu"), "include": Special("dir")}


BASES = {
    b.name: b
    for b in (
        Base("triton", TRITON, _triton_files),
        Base("descriptors", DESCRIPTORS, _triton_files),
        Base("cuda", CUDA, _cuda_files),
        Base("recorded", RECORDED, lambda: {KERNEL_PY: _read("examples/add.py")}),
        Base("table", WITH_TABLE, _table_files),
    )
}


def base_files(base: Base, tree: Any = None, text: bytes | None = None) -> tuple[dict[str, bytes | Special], dict]:
    body, lines = emit(M.of(base.tree) if tree is None else tree)
    return {**base.files(), "recipe.yaml": encode(body) if text is None else text}, lines


# ---------------------------------------------------------------- what a change means: the rules

# Paths whose keys the user chooses (a kernel's name, an argument's, a constexpr's): their names are mutated too.
NAMED = ("kernels", "kernels.*.args", "kernels.*.constexprs", "kernels.*.defines", "kernels.*.types",
         "kernels.*.key")  # fmt: skip

# (key glob, mutation glob, expect, reason): the first match wins; unmatched changes are invalid. A key glob
# names a generalized path (``kernels.*.num_warps``); ``*`` also matches dots.
RULES: list[tuple[str, str, Expect, str]] = [
    # changes that keep the recipe's meaning
    ("*", "yaml:anchor", "valid", "an anchor on a value changes nothing"),
    ("*", "yaml:flow-to-quoted", "valid", "a quoted scalar is the same string"),
    ("*", "yaml:tag-str", "either", "!!str is a plain tag: valid where a string is expected"),
    # optional keys whose absence another key of the base depends on: refused there, rightly
    ("kernels.*.num_stages", "delete:optional", "either", "the base's default names a stage count the grid then lacks"),
    ("kernels.*.variants[*].types", "delete:optional", "either", "a kernel with type variables names them per row"),
    ("table.kernels.*[*].types", "delete:optional", "either", "a kernel with type variables names them per row"),
    ("table.kernels.*[*].types", "empty", "either", "a kernel with type variables names them per row"),
    ("kernels.*.grid", "dup:entry", "either", "a grid of three dimensions has no room for a fourth"),
    ("kernels.*.num_warps", "delete:optional", "either", "the base's dispatch names a warp count the grid then lacks"),
    ("kernels.*.default.num_warps", "delete:optional", "either", "the rest of the default may match two configs"),
    ("kernels.*.dispatch[*].config.num_warps", "delete:optional", "either", "the rest may match two configs"),
    ("table.kernels.*[*]", "empty", "invalid", "a row with no key and config"),
    ("table.kernels.*[*].key", "empty", "invalid", "a key of no values"),
    ("table.kernels.*[*].types.*", "delete:optional", "invalid", "the row names no type for the kernel's variable"),
    ("*", "delete:optional", "valid", "an optional key left out"),
    ("package", "type:str", "either", "'zz' is a package name (a tuning table may be for another)"),
    ("kernels.*.key", "type:map", "either", "a named constant key"),
    ("kernels.*.key*", "negative", "either", "a constant key"),
    ("kernels.*.tune.keys", "many:items", "either", "a key tuned many times"),
    ("tables", "empty", "valid", "no tables"),
    ("kernels.*.nvcc_flags", "type:str", "valid", "one flag"),
    ("kernels.*.nvcc_flags", "huge:string", "either", "nvcc judges a flag at build"),
    ("kernels.*.variants[*].launches", "delete:required", "valid", "the launch count is optional"),
    ("kernels.*.variants[*].config.BLOCK", "control:*", "invalid", "a control character in a constexpr string"),
    ("kernels.*.variants[*].config.BLOCK", "*", "either", "a recorded constexpr may be any plain value"),
    ("kernels.*.autotuned[*].key*", "control:*", "invalid", "a control character in a key string"),
    ("kernels.*.autotuned[*].key*", "*", "either", "a recorded key may hold any plain values"),
    ("kernels.*.args.*.default", "delete:required", "valid", "without its default the argument is required"),
    ("kernels.*.args.*.launch_only", "delete:required", "either", "a CUDA kernel's parameters are nvcc's to check"),
    ("kernels.*.targets", "delete:required", "valid", "the recipe's targets serve"),
    ("targets", "delete:required", "either", "every kernel may name its own targets"),
    ("kernels.*.*", "empty", "either", "an empty optional list or mapping"),
    ("kernels.*.dispatch[*].types", "empty", "valid", "a row for every type"),
    # lists that take a single value for a one-item list
    ("targets", "list:scalar", "valid", "targets: sm_80 is targets: [sm_80]"),
    ("kernels.*", "list:scalar", "either", "the key takes a lone value for a one-item list"),
    ("tables", "list:scalar", "valid", "tables: one.json is tables: [one.json]"),
    # types a key takes besides its own
    ("version", "type:int", "valid", "7 is a version"),
    ("version", "type:float", "valid", "1.5 is a version"),
    ("version", "huge:int", "valid", "a long number is a version (PEP 440 puts no bound on it)"),
    ("version", "yaml11:*", "invalid", "yes/on read as booleans, no version"),
    ("cuda", "type:int", "either", "a CUDA major alone"),
    ("triton", "type:int", "either", "a Triton major alone"),
    ("triton", "type:float", "either", "1.5 as a release"),
    ("kernels.*.grid", "type:int", "valid", "grid: 7 is a constant one-dimensional grid"),
    ("kernels.*.grid", "huge:int", "either", "a constant grid past what a launch takes"),
    ("kernels.*.grid[*]", "type:int", "valid", "a constant grid dimension"),
    ("kernels.*.grid[*]", "huge:int", "either", "a constant grid past what a launch takes"),
    ("kernels.*.block[*]", "type:int", "valid", "a constant block size"),
    ("kernels.*.block", "type:int", "valid", "block: 7 is a constant block size"),
    ("kernels.*.shared", "type:int", "valid", "7 bytes of dynamic shared memory"),
    ("kernels.*.shared", "huge:int", "either", "shared memory past the target's: pruned at build"),
    ("kernels.*.key", "type:int", "either", "a constant key"),
    ("kernels.*.key[*]", "type:int", "either", "a constant key expression"),
    ("kernels.*.key.*", "type:int", "either", "a constant key expression"),
    ("kernels.*.args.*.extent", "type:int", "valid", "a constant extent"),
    ("kernels.*.args.*.extent", "huge:int", "either", "an extent past memory: the runtime checks calls"),
    ("kernels.*.args.*.default", "type:int", "valid", "a constant default"),
    ("kernels.*.args.*.default", "negative", "valid", "a negative default of a signed type"),
    ("kernels.*.args.*.default", "type:float", "either", "a float default of an integer argument"),
    ("kernels.*.constexprs.*.equals", "type:int", "either", "a constant bound"),
    ("kernels.*.constexprs.*", "type:int", "either", "a single constexpr value"),
    ("kernels.*.constexprs.*", "type:float", "either", "a float constexpr value"),
    ("kernels.*.constexprs.*", "type:str", "either", "a string constexpr value"),
    ("kernels.*.constexprs.*", "type:bool", "either", "a boolean constexpr value"),
    ("kernels.*.constexprs.*", "huge:int", "either", "a large constexpr value"),
    ("kernels.*.constexprs.*", "negative", "either", "a negative constexpr value"),
    ("kernels.*.constexprs.*", "list:scalar", "either", "a single constexpr value"),
    ("kernels.*.constexprs.*[*]", "type:*", "either", "a constexpr takes any plain value"),
    ("kernels.*.constexprs.*[*]", "huge:int", "either", "a large constexpr value"),
    ("kernels.*.constexprs.*[*]", "negative", "either", "a negative constexpr value"),
    ("kernels.*.constexprs.*.values[*]", "type:*", "either", "a constexpr takes any plain value"),
    ("kernels.*.defines.*", "type:*", "either", "a define takes a value"),
    ("kernels.*.defines.*", "huge:int", "either", "a large define"),
    ("kernels.*.defines.*", "negative", "either", "a negative define"),
    ("kernels.*.defines.*", "list:scalar", "either", "a single define value"),
    ("kernels.*.defines.*[*]", "*", "either", "a define takes any plain value: nvcc judges it at build"),
    ("kernels.*.variants[*].config.num_stages", "type:int", "valid", "7 stages"),
    ("kernels.*.variants[*].config.num_stages", "huge:int", "either", "a stage count: Triton judges it"),
    ("kernels.*.variants[*].config.num_*", "type:*", "invalid", ""),
    ("kernels.*.variants[*].config.*", "type:*", "either", "a recorded constexpr may be any plain value"),
    ("kernels.*.variants[*].config.*", "huge:int", "either", "a large constexpr value"),
    ("kernels.*.variants[*].config.*", "negative", "either", "a negative constexpr value"),
    ("kernels.*.variants[*].config.*[*]", "*", "either", "a widened constexpr value"),
    ("kernels.*.variants[*].launches", "huge:int", "valid", "a launch count is any count"),
    ("kernels.*.autotuned[*].key[*]", "type:*", "either", "a recorded key value may be any plain value"),
    ("kernels.*.autotuned[*].key[*]", "huge:int", "either", "a recorded key value"),
    ("kernels.*.autotuned[*].key[*]", "negative", "either", "a recorded key value"),
    ("kernels.*.autotuned[*].config.BLOCK", "*", "either", "a recorded constexpr may be any plain value"),
    ("kernels.*.num_stages", "type:int", "either", "num_stages: 7 is num_stages: [7] (the default may name another)"),
    ("kernels.*.num_stages", "huge:int", "either", "a stage count: Triton judges it at build"),
    ("kernels.*.num_stages[*]", "type:int", "valid", "7 stages"),
    ("kernels.*.num_stages[*]", "huge:int", "either", "a stage count: Triton judges it at build"),
    ("kernels.*.options.maxnreg", "type:int", "either", "7 registers: ptxas judges it at build"),
    ("kernels.*.options.maxnreg", "huge:int", "either", "a register bound past the hardware's"),
    ("kernels.*.options.num_ctas", "type:int", "either", "7 CTAs per cluster: Triton judges it at build"),
    ("kernels.*.options.num_ctas", "huge:int", "either", "a cluster past the hardware's"),
    ("kernels.*.options.*", "yaml11:yes", "either", "YAML 1.1 reads yes as true"),
    ("kernels.*.options.*", "yaml11:on", "either", "YAML 1.1 reads on as true"),
    ("kernels.*.options.*", "yaml11:no", "either", "YAML 1.1 reads no as false"),
    ("kernels.*.options.*", "yaml11:off", "either", "YAML 1.1 reads off as false"),
    ("kernels.*.tune.rtol", "type:int", "valid", "an integer tolerance"),
    ("kernels.*.tune.rtol", "type:float", "valid", "a float tolerance"),
    ("kernels.*.tune.rtol", "huge:int", "valid", "a huge tolerance"),
    ("kernels.*.tune.keys[*][*]", "huge:int", "either", "a key value past i64: the tuner judges it"),
    ("kernels.*.tune.sample.range.*", "delete:required", "valid", "a dimension without a range draws from 1 to 8192"),
    ("kernels.*.tune.sample.seed", "huge:int", "valid", "any integer seeds the draw"),
    ("kernels.*.variants[*].launches", "type:int", "valid", "a launch count"),
    ("kernels.*.dispatch[*].key[*]", "type:int", "valid", "another key value"),
    ("kernels.*.dispatch[*].key[*]", "huge:int", "either", "a key value past i64: the dispatcher compares i64"),
    ("kernels.*.dispatch[*].key[*]", "negative", "either", "a negative key value"),
    ("kernels.*.dispatch[*].key", "type:int", "valid", "key: 7 is key: [7]"),
    ("kernels.*.dispatch[*].key", "huge:int", "either", "a key value past i64"),
    ("kernels.*.dispatch[*].key", "negative", "either", "a negative key value"),
    ("kernels.*.tune.keys[*]", "type:int", "valid", "a one-value key"),
    ("kernels.*.tune.keys[*]", "huge:int", "either", "a key value past i64: the tuner judges it"),
    ("kernels.*.autotuned[*].config.num_*", "type:int", "valid", "a count"),
    ("kernels.*.autotuned[*].config.num_*", "huge:int", "either", "a count: Triton judges it"),
    ("kernels.*.variants[*].config.num_stages", "type:int", "valid", "7 stages"),
    ("kernels.*.variants[*].config.num_stages", "huge:int", "either", "a stage count: Triton judges it"),
    ("kernels.*.variants[*].config.num_warps", "type:int", "invalid", "7 is no power of two"),
    ("kernels.*.grid", "dup:entry", "valid", "a grid of two equal dimensions"),
    ("kernels.*.block", "dup:entry", "either", "a block of two equal dimensions: its size is checked per variant"),
    ("kernels.*.key", "dup:entry", "either", "a key naming one value twice"),
    ("kernels.*.mutates", "dup:entry", "valid", "a pointer named twice is still written"),
    ("kernels.*.classes", "dup:entry", "valid", "a class named twice is built once"),
    ("kernels.*.nvcc_flags", "dup:entry", "either", "nvcc takes a flag twice"),
    ("kernels.*.include_dirs", "dup:entry", "valid", "a folder named twice"),
    ("kernels.*.tune.keys", "dup:entry", "either", "a key tuned twice"),
    ("tables", "dup:entry", "either", "a table applied twice"),
    ("kernels.*.args.*.contiguous", "yaml11:*", "either", "YAML 1.1 booleans"),
    ("kernels.*.args.*.optional", "yaml11:*", "either", "YAML 1.1 booleans"),
    ("kernels.*.args.*.launch_only", "yaml11:*", "either", "YAML 1.1 booleans"),
    ("kernels.*.args.*.specialize", "yaml11:*", "either", "YAML 1.1 booleans"),
    ("kernels.*.autotune", "yaml11:*", "either", "YAML 1.1 booleans"),
    ("kernels.*.nvcc_flags[*]", "type:str", "either", "nvcc judges a flag at build"),
    ("kernels.*.nvcc_flags", "list:scalar", "valid", "one flag"),
    ("kernels.*.nvcc_flags[*]", "huge:string", "either", "nvcc judges a flag at build"),
    ("kernels.*.nvcc_flags[*]", "yaml11:*", "invalid", "a boolean is no flag"),
    ("kernels.*.nvcc_flags[*]", "negative", "invalid", ""),
    ("kernels.*.doc", "huge:string", "valid", "a long doc"),
    ("kernels.*.doc", "type:str", "valid", "another doc"),
    ("summary", "huge:string", "either", "a 100 000-character summary"),
    ("summary", "type:str", "valid", "another summary"),
    ("kernels.*.key.*", "type:str", "invalid", ""),
    ("kernels.*.entry", "type:str", "either", 'an extern "C" name: nvcc judges it at build'),
    ("kernels.*.entry", "huge:string", "either", 'a long extern "C" name: nvcc judges it at build'),
    ("kernels.*.variants[*].launches", "negative", "invalid", ""),
    ("kernels.*.variants", "many:items", "invalid", "the same variant listed many times"),
    # names the user chooses: another identifier is another name, and the recipe stays consistent only
    # where nothing else refers to it
    ("kernels", "name:other", "either", "another kernel name: a tuning table may hold rows for the old one"),
    (
        "kernels",
        "name:reserved",
        "either",
        "'stream' is reserved for arguments, not kernels (a table may name the old)",
    ),
    ("kernels.*.args", "name:underscore", "either", "a private-looking argument name"),
    ("kernels.*.args", "name:dunder", "either", "a dunder argument name"),
    ("kernels", "name:huge", "either", "a 5000-character kernel name"),
    ("kernels.*.key", "name:*", "either", "a key's name is free text"),
    ("kernels.*.key", "dup:name", "invalid", ""),
    ("kernels.*.key", "name:int", "either", "a key's name is free text (7 is read as '7')"),
    ("kernels.*.key", "name:bool", "either", "a key's name is free text"),
    ("kernels.*.key", "name:null", "either", "a key's name is free text"),
    ("kernels.*.key", "name:float", "either", "a key's name is free text"),
    # the PEP 517 settings
    ("settings.jobs", "type:int", "valid", "7 compile processes"),
    ("settings.jobs", "huge:int", "either", "a huge number of processes"),
    ("settings.cuda", "type:int", "either", "a CUDA major alone"),
    ("settings.cuda", "type:float", "either", "1.5 as a CUDA release"),
    ("settings.triton", "type:int", "either", "a Triton major alone"),
    ("settings.triton", "type:float", "either", "1.5 as a Triton release"),
    ("settings.triton", "*:value:empty", "either", "an empty release: the default one"),
    ("settings.*", "delete:optional", "valid", "an optional setting left out"),
    ("settings.strict", "type:bool", "valid", "a boolean setting"),
    ("settings.cache", "type:bool", "valid", "a boolean setting"),
    ("settings.line-info", "type:bool", "valid", "a boolean setting"),
    ("settings.*", "C:same", "valid", "the same value as a config setting"),
    # the tuning table
    ("table.median_us", "*", "either", "timings are informational"),
    ("table.median_us.*", "*", "either", "timings are informational"),
    ("table.rejected", "*", "either", "rejections are informational"),
    ("table.rejected.*", "*", "either", "rejections are informational"),
    ("table.device", "type:str", "valid", "another device name"),
    ("table.device", "huge:string", "either", "a long device name"),
    ("table.date", "type:str", "either", "the date is informational"),
    ("table.date", "huge:string", "either", "the date is informational"),
    ("table.driver_cuda", "type:str", "either", "the driver is informational"),
    ("table.driver_cuda", "huge:string", "either", "the driver is informational"),
    ("table.*", "json:dup-key", "either", "JSON's duplicate keys: the last wins"),
    ("table.kernels.*[*].key[*]", "type:int", "either", "another key value: a row for another bucket"),
    ("table.kernels.*[*].key[*]", "huge:int", "either", "a key value past i64"),
    ("table.kernels.*[*].key[*]", "negative", "either", "a negative key value"),
    ("table.kernels.*[*].specialization", "type:str", "either", "a class name the recipe may not build"),
    ("table.kernels.*[*].specialization", "huge:string", "either", "a class name the recipe does not build"),
    ("table.kernels.*[*].specialization", "delete:optional", "valid", "a row for any class"),
    ("table.kernels.*[*].specialization", "type:null", "valid", "null: any class"),
    ("table.kernels.*[*].median_us", "delete:optional", "valid", "timings are informational"),
    ("table.kernels.*[*].rejected", "delete:optional", "valid", "rejections are informational"),
    ("table.kernels.*[*].types", "delete:optional", "invalid", "the kernel has a type variable"),
    ("table.kernels.*[*].median_us*", "*", "either", "timings are informational"),
    ("table.kernels.*[*].rejected*", "*", "either", "rejections are informational"),
    ("table.kernels", "type:map", "invalid", ""),
    ("table.kernels", "empty", "valid", "a table with no rows"),
    ("table.kernels.*", "empty", "valid", "a kernel with no rows"),
    ("table.kernels.*", "dup:entry", "either", "a row given twice"),
    ("table.kernels.*", "many:items", "either", "a row given many times"),
]


def _glob(pattern: str) -> str:
    """A key glob for fnmatch: ``[*]`` (any list item, as keys are written) is literal there, ``*`` any text."""
    return pattern.replace("[*]", "\0").replace("[", "[[]").replace("\0", "[[]*[]]")


def expectation(key: str, mutation: str) -> tuple[Expect, str]:
    for key_glob, mutation_glob, expect, reason in RULES:
        if fnmatch.fnmatchcase(key, _glob(key_glob)) and fnmatch.fnmatchcase(mutation, mutation_glob):
            return expect, reason
    return "invalid", ""


def general(path: tuple[Any, ...], tree: Any = None) -> str:
    """``kernels.add.args.x_ptr.type`` -> ``kernels.*.args.*.type``: user-chosen names and indexes starred."""
    parts: list[Any] = []
    for part in path:
        named = isinstance(part, str) and any(fnmatch.fnmatchcase(_strip(tuple(parts)), g) for g in NAMED)
        parts.append("*" if named else (0 if isinstance(part, int) else part))
    return _strip(tuple(parts))


def _strip(parts: tuple[Any, ...]) -> str:
    return dotted(parts).replace("[0]", "[*]")


# ---------------------------------------------------------------- the mutations of one value

DEEP, VERY_DEEP = 40, 3000
HUGE_STRING = "z" * 100_000
MANY = 20_000


def _nest(depth: int) -> Raw:
    return Raw("[" * depth + "1" + "]" * depth)


def _bomb(levels: int = 9, width: int = 9) -> Raw:
    """A billion laughs: each level a list of ``width`` aliases of the level below (9^9 leaves)."""
    parts = ["&b0 [" + ", ".join(["lol"] * width) + "]"]
    parts += [f"&b{i} [" + ", ".join([f"*b{i - 1}"] * width) + "]" for i in range(1, levels)]
    return Raw("[" + ", ".join(parts) + "]")


TYPE_VALUES: dict[str, Any] = {
    "type:int": 7, "type:str": "zz", "type:list": ["zz"], "type:map": M([("zz", 7)]), "type:bool": True,
    "type:null": None, "type:float": 1.5,
}  # fmt: skip


def value_mutations(value: Any, in_list: bool = False) -> Iterator[tuple[str, Any, float]]:
    """(mutation, new value, budget) for a value: wrong types, empty, huge, negative, hostile text, YAML."""
    native = _tag(value)
    for name, v in TYPE_VALUES.items():
        if name != f"type:{native}" or native == "str":  # a string gets another string: "zz"
            yield name, v, 1.0
    yield "empty", {"str": "", "list": [], "map": M()}.get(native, Raw("")), 1.0
    if not in_list:  # `key:` and nothing: null
        yield "empty:value", Raw(""), 1.0
    yield "negative", -1, 1.0
    yield "negative:huge", -(2**70), 1.0
    yield "huge:int", 10**30, 1.0
    yield "huge:int-digits", Raw("9" * 5000), 1.0  # past Python's int-to-str digit limit
    yield "huge:string", HUGE_STRING, 2.0
    yield "huge:deep", _nest(DEEP), 1.0
    yield "huge:very-deep", _nest(VERY_DEEP), 2.0
    yield "many:items", [value if native not in ("list", "map") else 1] * MANY, 3.0
    text = value if isinstance(value, str) and value else "zz"
    yield "bytes:non-utf8", text + BAD_BYTE, 1.0
    yield "control:nul", Raw(text + "\x00"), 1.0
    yield "control:bell", Raw(text + "\x07"), 1.0
    yield "control:escaped-nul", text + "\x00", 1.0  # "\u0000" in a quoted string: passes the line check
    yield "control:escaped-esc", text + "\x1b[2J", 1.0
    yield "control:line-separator", text + "\u2028", 1.0
    yield "control:nel", text + "\x85", 1.0
    for word in ("yes", "no", "on", "off"):
        yield f"yaml11:{word}", Raw(word), 1.0
    yield "yaml:anchor", Raw("&here " + _flow(value)), 1.0
    yield "yaml:alias-undefined", Raw("*nowhere"), 1.0
    yield "yaml:alias-recursive", Raw("&loop [*loop]"), 1.0
    yield "yaml:alias-bomb", _bomb(), 1.0
    yield "yaml:tag-python", Raw("!!python/object/apply:os.system ['true']"), 1.0
    yield "yaml:tag-custom", Raw("!local " + _flow(value)), 1.0
    yield "yaml:tag-binary", Raw("!!binary aGVsbG8="), 1.0
    yield "yaml:tag-timestamp", Raw("2001-12-14"), 1.0
    yield "yaml:tag-set", Raw("!!set {a, b}"), 1.0
    if native == "str" and "\n" not in value:
        yield "yaml:tag-str", Raw("!!str " + json.dumps(value)), 1.0
        yield "yaml:flow-to-quoted", Raw("'" + value.replace("'", "''") + "'"), 1.0
    if native == "list" and len(value) == 1 and _tag(value[0]) in ("str", "int"):
        yield "list:scalar", value[0], 1.0
    if native == "list" and value:
        yield "dup:entry", [*value, value[0]], 1.0


def _flow(value: Any) -> str:
    from .yamltext import flow

    return flow(value)


def _tag(value: Any) -> str:
    if isinstance(value, M):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if value is None:
        return "null"
    return "str"


def name_mutations(name: str) -> Iterator[tuple[str, Any]]:
    """(mutation, new key) for a name the user chose."""
    yield "name:other", "other_name"
    yield "name:int", Raw("7")
    yield "name:float", Raw("1.5")
    yield "name:bool", Raw("true")
    yield "name:null", Raw("~")
    yield "name:list", Raw("? [a, b]")
    yield "name:empty", Raw('""')
    yield "name:keyword", "class"
    yield "name:reserved", "stream"
    yield "name:dunder", "__init__"
    yield "name:underscore", "_private"
    yield "name:huge", "k" * 5000
    yield "name:non-utf8", name + BAD_BYTE
    yield "name:nul", Raw(name + "\x00")
    yield "name:escaped-nul", name + "\x00"
    yield "name:space", name + " x"
    yield "name:unicode", name + "é"
    for word in ("yes", "no", "on", "off"):
        yield f"name:yaml11-{word}", Raw(word)


# ---------------------------------------------------------------- the recipe surface


def _walk(tree: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) of the tree, depth first, lists by their first item only (the others are alike)."""
    if isinstance(tree, M):
        for k, v in tree.pairs:
            yield (*path, k), v
            yield from _walk(v, (*path, k))
    elif isinstance(tree, list) and tree:
        yield (*path, 0), tree[0]
        yield from _walk(tree[0], (*path, 0))


OPTIONAL_KEYS = {
    "summary", "license", "cuda", "triton", "targets", "tables",
    "kernels.*.doc", "kernels.*.types", "kernels.*.mutates", "kernels.*.constexprs", "kernels.*.num_warps",
    "kernels.*.num_stages", "kernels.*.bucket", "kernels.*.default", "kernels.*.autotune", "kernels.*.specialize",
    "kernels.*.classes", "kernels.*.options", "kernels.*.dispatch", "kernels.*.tune", "kernels.*.shared",
    "kernels.*.include_dirs", "kernels.*.nvcc_flags", "kernels.*.options.*", "kernels.*.args.*.extent",
    "kernels.*.args.*.contiguous", "kernels.*.args.*.optional", "kernels.*.args.*.specialize",
    "kernels.*.tune.reference", "kernels.*.tune.rtol", "kernels.*.tune.sample", "kernels.*.tune.refine", "kernels.*.tune.validate",
    "kernels.*.tune.sample.range", "kernels.*.tune.sample.seed", "kernels.*.tune.keys", "kernels.*.dispatch[*].arch", "kernels.*.autotuned",
    "kernels.*.variants[*].launches", "kernels.*.variants[*].config.num_warps",
    "kernels.*.variants[*].config.num_stages", "kernels.*.autotuned[*].config.num_*", "kernels.*.gencode",
}  # fmt: skip
# keys the rest of the base refers to: leaving them out is an error even though the key is optional
REFERRED = {"kernels.*.types", "kernels.*.constexprs", "kernels.*.defines", "targets", "kernels.*.args.*.default",
            "kernels.*.launch_only", "kernels.*.tune.sample"}  # fmt: skip


def _optional(base: str, key: str) -> bool:
    if key in REFERRED or (key.endswith(".default") and "args" in key):
        return False
    if base == "cuda" and key == "targets":
        return True  # the kernel's gencode covers it
    if base == "cuda" and key == "kernels.*.gencode":
        return True  # the recipe's targets cover it
    if key == "kernels.*.dispatch[*].arch" or key.startswith("kernels.*.dispatch[*].types"):
        return True
    if base == "triton" and key == "kernels.*.key":
        return False  # dispatch and tune need it
    return any(fnmatch.fnmatchcase(key, g) for g in OPTIONAL_KEYS)


# names whose wheel would replace a distribution: well-known ones, installed ones (by name, by a module they
# install: PyYAML's yaml), the standard library's
SHADOWED = ("triton", "torch", "aotpack", "pip", "setuptools", "wheel", "pytest", "numpy", "yaml", "ruamel_yaml",
            "charset_normalizer", "json")  # fmt: skip


def recipe_surface() -> Iterator[Case]:
    for base in BASES.values():
        tree = M.of(base.tree)
        _, lines = emit(tree)
        for path, value in _walk(tree):
            key = general(path, tree)
            line = lines.get(path)
            mk = _maker("recipe", base, key, line, dotted(path))
            for mutation, new, budget in value_mutations(value, in_list=isinstance(path[-1], int)):
                yield mk(mutation, lambda path=path, new=new, tree=tree: replace(tree, path, new), budget)
            if isinstance(path[-1], str):  # a mapping entry: the key itself
                yield from _key_cases(mk, base, tree, path, key)
        yield from _unknown_keys(base, tree, lines)


def _key_cases(mk: Callable[..., Case], base: Base, tree: M, path: tuple[Any, ...], key: str) -> Iterator[Case]:
    name = path[-1]
    optional = _optional(base.name, key)
    yield mk("delete:optional" if optional else "delete:required", lambda: edit_entries(tree, path, lambda k, v: []))
    yield mk("dup:key", lambda: edit_entries(tree, path, lambda k, v: [(k, v), (k, v)]))
    parent = general(path[:-1], tree)
    if not any(fnmatch.fnmatchcase(parent, g) for g in NAMED):  # a near-miss of a fixed key
        yield mk("unknown:typo", lambda: edit_entries(tree, path, lambda k, v: [(k, v), (_typo(k), v)]))
    if any(fnmatch.fnmatchcase(parent, g) for g in NAMED):
        for mutation, new in name_mutations(name):
            yield mk(mutation, lambda new=new: edit_entries(tree, path, lambda k, v: [(new, v)]), 1.0, parent)
        yield mk("dup:name", lambda: edit_entries(tree, path, lambda k, v: [(k, v), (k, copy(v))]), 1.0, parent)


def _typo(key: str) -> str:
    return key[:-1] if len(key) > 2 else key + "x"


def _unknown_keys(base: Base, tree: M, lines: dict) -> Iterator[Case]:
    """An unknown key in every fixed-key mapping of the base."""
    for path, value in [((), tree), *_walk(tree)]:
        if not isinstance(value, M):
            continue
        key = general(path, tree) if path else "(top)"
        if any(fnmatch.fnmatchcase(key, g) for g in NAMED) or key.endswith("config") or key.endswith(".types"):
            continue
        new = copy(tree)
        at(new, path).pairs.append(("zz_unknown", 1))
        mk = _maker("recipe", base, key, lines.get(path), dotted(path) or "(top)")
        yield mk("unknown:key", lambda new=new: new)


def _maker(surface: str, base: Base, key: str, line: int | None, concrete: str) -> Callable[..., Case]:
    seen: dict[str, int] = {}

    def make(mutation: str, tree: Callable[[], M], budget: float = 1.0, rule_key: str | None = None) -> Case:
        expect, reason = expectation(rule_key or key, mutation)
        if rule_key is not None and expect == "invalid" and mutation == "name:other":
            expect, reason = "either", "another name: valid where nothing refers to the old one"
        n = seen.get(mutation, 0)
        seen[mutation] = n + 1
        suffix = f"#{n}" if n else ""
        ident = f"{surface}/{base.name}/{concrete}/{'name!' if rule_key else ''}{mutation}{suffix}"
        return Case(id=ident, surface=surface, base=base.name, key=key, mutation=mutation,
                    make_files=lambda: base_files(base, tree())[0],
                    expect=expect, reason=reason, line=line, budget=budget)  # fmt: skip

    return make


# ---------------------------------------------------------------- whole-document changes


def document_surface() -> Iterator[Case]:
    base = BASES["triton"]
    text = emit(M.of(base.tree))[0]
    changes: list[tuple[str, bytes, Expect, str]] = [
        ("multi:second-document", encode(text + "---\npackage: other\n"), "invalid", ""),
        ("multi:empty-second", encode(text + "---\n"), "invalid", "two documents, the second empty"),
        ("multi:start-marker", encode("---\n" + text), "valid", "one document with an explicit start"),
        ("multi:end-marker", encode(text + "...\n"), "valid", "one document with an explicit end"),
        ("multi:first-empty", encode("---\n---\n" + text), "invalid", ""),
        ("bom", b"\xef\xbb\xbf" + encode(text), "valid", "a UTF-8 byte order mark"),
        ("crlf", encode(text.replace("\n", "\r\n")), "valid", "Windows line ends"),
        ("cr-only", encode(text.replace("\n", "\r")), "either", "old Mac line ends"),
        ("utf16", text.encode("utf-16"), "invalid", ""),
        ("latin1-comment", encode(text) + b"# caf\xe9\n", "invalid", "not UTF-8"),
        ("empty", b"", "invalid", ""),
        ("only-comment", b"# nothing\n", "invalid", ""),
        ("only-whitespace", b"   \n\n", "invalid", ""),
        ("scalar-root", b"just text\n", "invalid", ""),
        ("list-root", b"- package\n", "invalid", ""),
        ("null-root", b"~\n", "invalid", ""),
        ("tab-indent", encode(text.replace("\n  ", "\n\t")), "invalid", ""),
        ("trailing-nul", encode(text) + b"\x00", "invalid", ""),
        ("directive-yaml11", encode("%YAML 1.1\n---\n" + text), "valid", "the YAML 1.1 directive"),
        ("directive-yaml12", encode("%YAML 1.2\n---\n" + text), "either", "PyYAML reads 1.x"),
        ("directive-yaml2", encode("%YAML 2.0\n---\n" + text), "invalid", ""),
        ("directive-tag", encode("%TAG !e! tag:example.com,2000:\n---\n" + text), "valid", "an unused %TAG"),
        ("merge-key", encode(text.replace("kernels:\n  add:\n", "kernels:\n  add:\n    <<: {doc: x}\n")),
         "invalid", "merge keys are refused"),
        ("anchored-kernel", encode(text.replace("  add:\n", "  add: &k\n", 1)), "valid", "an anchor"),
        ("alias-kernel", encode(text.replace("  add:\n", "  add: &k\n", 1) + "  add2: *k\n"), "either",
         "a second kernel, an alias of the first"),
        ("alias-bomb-top", encode(text + f"zz_bomb: {_bomb().text}\n"), "invalid", ""),
        ("alias-bomb-deep", encode(text + f"zz_bomb: {_bomb(12, 6).text}\n"), "invalid", ""),
        ("huge-file", encode(text + "#" + "x" * (5 << 20) + "\n"), "invalid", "past MAX_BYTES"),
        ("huge-comment-under-limit", encode(text + "#" + "x" * (3 << 20) + "\n"), "valid", "a long comment"),
        ("many-lines", encode(text + "\n" * 200_000), "valid", "blank lines"),
        ("long-line-flow", encode(text.replace("num_stages: [1]", "num_stages: [" + "1, " * 0 + "1]")), "valid",
         "the same list"),
        ("deep-flow", encode(text + "zz: " + "[" * 100_000 + "]" * 100_000 + "\n"), "invalid", ""),
        ("deep-block", encode(text + "".join(f"{' ' * i}k{i}:\n" for i in range(1000))), "invalid", ""),
        ("unterminated-quote", encode(text.replace('"small_kernels"', '"small_kernels')), "invalid", ""),
        ("unterminated-flow", encode(text.replace('"cdiv(n_elements, BLOCK)"]', '"cdiv(n_elements, BLOCK)"')),
         "invalid", ""),
        ("quoted-keys", encode(text.replace("package:", '"package":', 1)), "valid", "a quoted key"),
        ("complex-key", encode(text + "? [a]\n: 1\n"), "invalid", ""),
        *((f"package-shadows-{name}", encode(text.replace('"small_kernels"', f'"{name}"', 1)), "invalid",
           "the wheel would replace a distribution") for name in SHADOWED),
        ("package-fork-replaces", encode(text.replace('"small_kernels"', '"triton"\nreplaces: Triton', 1)), "valid",
         "a deliberate fork says what it replaces"),
        ("package-fork-replaces-other", encode(text.replace('"small_kernels"', '"triton"\nreplaces: torch', 1)),
         "invalid", "the fork names another distribution than the one its name takes"),
    ]  # fmt: skip
    for mutation, data, expect, reason in changes:
        files, _ = base_files(base, text=data)
        budget = 3.0 if mutation.startswith(("huge", "many", "deep")) else 1.0
        yield Case(id=f"document/triton/{mutation}", surface="document", base="triton", key="(file)",
                   mutation=mutation, make_files=fixed(files), expect=expect, reason=reason,
                   budget=budget, locate="file" if mutation == "huge-file" else "line")  # fmt: skip


# ---------------------------------------------------------------- files a recipe points at


def file_mutations(original: bytes | Special) -> Iterator[tuple[str, bytes | Special | None, Expect, str, str]]:
    """(mutation, replacement or None for missing, expect, reason, needs)."""
    folder = isinstance(original, Special) and original.kind == "dir"
    yield "file:missing", None, "invalid", "", ""
    yield "file:fifo", Special("fifo"), "invalid", "", ""
    yield "file:symlink-dangling", Special("symlink", target="@outside/no-such-file"), "invalid", "", ""
    yield "file:symlink-loop", Special("symlink", target="."), "invalid", "a link to its own folder", ""
    yield "file:symlink-dev-zero", Special("symlink", target="/dev/zero"), "invalid", "", ""
    if folder:
        yield "file:a-file", b"not a folder\n", "invalid", "", ""
        yield "file:symlink-outside", Special("symlink", target="@outside/include"), "valid", \
            "plan reads folders anywhere (an sdist refuses them)", ""  # fmt: skip
        yield "file:unreadable", Special("unreadable", data=b""), "either", "nvcc reads it at build", "non-root"
        return
    yield "file:directory", Special("dir"), "invalid", "", ""
    yield "file:empty", b"", "invalid", "", ""
    yield "file:binary", bytes(range(256)) * 4, "invalid", "", ""
    yield "file:non-utf8", b"# caf\xe9\n" + (original if isinstance(original, bytes) else b""), "invalid", "", ""
    yield "file:nul-bytes", b"\x00" * 64, "invalid", "", ""
    yield "file:unreadable", Special("unreadable", data=original if isinstance(original, bytes) else b""), \
        "invalid", "", "non-root"  # fmt: skip
    yield "file:sparse-huge", Special("sparse", size=8 << 30), "invalid", "8 GiB of NUL", ""
    yield "file:symlink-outside", Special("symlink", target="@outside/copy"), "valid", \
        "plan reads files anywhere (an sdist refuses them)", ""  # fmt: skip


POINTED = {  # base -> the files its recipe points at (and what reads them at plan time)
    "triton": (KERNEL_PY, TUNING_PY),
    "cuda": ("kernels/rmsnorm.cu", "include"),
    "recorded": (KERNEL_PY,),
    "table": (TABLE_PATH,),
}
_NOT_READ_AT_PLAN = {  # files `aotpack plan` names but does not open: their contents are the build's business
    "kernels/rmsnorm.cu": "nvcc reads the .cu at build; plan only checks it is a file",
    TUNING_PY: "aotpack tune imports the hooks on a GPU host; plan only checks the file",
}


def files_surface() -> Iterator[Case]:
    for base_name, pointed in POINTED.items():
        base = BASES[base_name]
        tree = M.of(base.tree)
        files, lines = base_files(base)
        for rel in pointed:
            line = _line_naming(lines, tree, rel)
            for mutation, new, expect, reason, needs in file_mutations(files[rel]):
                if rel in _NOT_READ_AT_PLAN and mutation in ("file:empty", "file:binary", "file:non-utf8",
                                                             "file:nul-bytes", "file:unreadable",
                                                             "file:sparse-huge"):  # fmt: skip
                    expect, reason = "either", _NOT_READ_AT_PLAN[rel]
                if mutation == "file:symlink-outside":  # a copy of the same file, beyond the project
                    new = Special("symlink", target=f"@outside/pointed/{rel}")
                changed = {k: v for k, v in files.items() if k != rel}
                if new is not None:
                    changed[rel] = new
                yield Case(id=f"files/{base_name}/{rel}/{mutation}", surface="files", base=base_name, key=rel,
                           mutation=mutation, make_files=fixed(changed), expect=expect, reason=reason, line=line,
                           needs=needs,                            budget=2.0)  # fmt: skip
    # the recipe file itself: no lines to point at, so a good error names the file
    base = BASES["triton"]
    files, _ = base_files(base)
    for mutation, new, expect, reason, needs in file_mutations(files["recipe.yaml"]):
        if mutation == "file:symlink-outside":
            new = Special("symlink", target="@outside/recipe.yaml")
            expect, reason = "either", "the recipe's folder is the link's (kernels resolve beside the target)"
        changed = {k: v for k, v in files.items() if k != "recipe.yaml"}
        if new is not None:
            changed["recipe.yaml"] = new
        yield Case(id=f"files/triton/recipe.yaml/{mutation}", surface="files", base="triton", key="recipe.yaml",
                   mutation=mutation, make_files=fixed(changed), expect=expect, reason=reason, locate="file",
                   needs=needs,                    budget=2.0)  # fmt: skip


def _line_naming(lines: dict, tree: M, rel: str) -> int | None:
    for path, value in _walk(tree):
        if isinstance(value, str) and value.split(":")[0] == rel:
            return lines.get(path)
    return None


# ---------------------------------------------------------------- the tuning table's JSON


def _json_walk(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k), v
            yield from _json_walk(v, (*path, k))
    elif isinstance(value, list) and value:
        yield (*path, 0), value[0]
        yield from _json_walk(value[0], (*path, 0))


def _json_set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = json.loads(json.dumps(doc))
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def _json_del(doc: Any, path: tuple[Any, ...]) -> Any:
    out = json.loads(json.dumps(doc))
    node = out
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return out


_MARK = "\x00MARK\x00"  # a placeholder replaced by raw JSON text after dumping


def _json_text(doc: Any, raw: str | None = None) -> bytes:
    text = json.dumps(doc, indent=1)
    if raw is not None:
        text = text.replace(json.dumps(_MARK), raw)
    return text.encode("utf-8", "surrogateescape")


def _json_key(path: tuple[Any, ...]) -> str:
    parts: list[Any] = []
    for i, part in enumerate(path):
        if path[:i] == ("kernels",) and isinstance(part, str):
            part = "*"
        elif isinstance(part, str) and i >= 2 and path[i - 1] in ("median_us", "rejected"):
            part = "*"
        parts.append(part)
    return "table." + dotted(tuple(parts)).replace("[0]", "[*]")


def table_surface() -> Iterator[Case]:
    base = BASES["table"]
    files, lines = base_files(base)
    line = lines.get(("tables", 0))
    values: list[tuple[str, Any, str | None]] = [
        ("type:int", 7, None), ("type:str", "zz", None), ("type:list", ["zz"], None), ("type:map", {"zz": 7}, None),
        ("type:bool", True, None), ("type:null", None, None), ("type:float", 1.5, None),
        ("negative", -1, None), ("huge:int", 10**30, None), ("huge:int-digits", _MARK, "9" * 5000),
        ("huge:string", HUGE_STRING, None), ("huge:deep", _MARK, "[" * 40 + "]" * 40),
        ("huge:very-deep", _MARK, "[" * 100_000 + "]" * 100_000), ("json:nan", _MARK, "NaN"),
        ("json:infinity", _MARK, "-Infinity"), ("bytes:non-utf8", "zz" + BAD_BYTE, None),
        ("control:raw-nul", _MARK, '"zz\x00"'), ("control:escaped-nul", "zz\x00", None),
        ("bytes:lone-surrogate", _MARK, '"\\ud800"'),
    ]  # fmt: skip

    def case(mutation: str, key: str, data: bytes, budget: float = 2.0) -> Case:
        expect, reason = expectation(key, mutation)
        return Case(id=f"table/table/{key}/{mutation}", surface="table", base="table", key=key, mutation=mutation,
                    make_files=lambda: {**files, TABLE_PATH: data}, expect=expect, reason=reason, line=line,
                    budget=budget)  # fmt: skip

    for path, value in _json_walk(TABLE):
        key = _json_key(path)
        for mutation, new, raw in values:
            if mutation == f"type:{_jtag(value)}" and mutation != "type:str":
                continue
            yield case(mutation, key, _json_text(_json_set(TABLE, path, new), raw))
        if isinstance(value, dict):
            yield case("empty", key, _json_text(_json_set(TABLE, path, {})))
        if isinstance(value, list):
            yield case("empty", key, _json_text(_json_set(TABLE, path, [])))
            yield case("dup:entry", key, _json_text(_json_set(TABLE, path, [*value, value[0]])))
            yield case("many:items", key, _json_text(_json_set(TABLE, path, [value[0]] * MANY)), 3.0)
        if isinstance(path[-1], str):
            kind = "delete:required" if key.rsplit(".", 1)[-1] in ("format", "package", "arch", "key", "config",
                                                                     "device", "driver_cuda", "date") else \
                "delete:optional"  # fmt: skip
            yield case(kind, key, _json_text(_json_del(TABLE, path)))
            text = _json_text(TABLE).decode()
            needle = f'"{path[-1]}": '
            if text.count(needle) == 1:  # a duplicate key, written by hand: JSON's last one wins
                dup = text.replace(needle, f"{needle}{json.dumps(value)},\n {needle}", 1)
                yield case("json:dup-key", key, dup.encode())
    for mutation, data in (("json:empty", b""), ("json:truncated", _json_text(TABLE)[:-20]),
                           ("json:top-list", b"[]"), ("json:bom", b"\xef\xbb\xbf" + _json_text(TABLE)),
                           ("json:utf16", json.dumps(TABLE).encode("utf-16")),
                           ("json:trailing-garbage", _json_text(TABLE) + b"\n}{"),
                           ("json:other-package", _json_text(_json_set(TABLE, ("package",), "other"))),
                           ("json:other-arch", _json_text(_json_set(TABLE, ("arch",), "sm_80"))),
                           ("json:not-a-target", _json_text(_json_set(TABLE, ("arch",), "sm_86"))),
                           ("json:unknown-arch", _json_text(_json_set(TABLE, ("arch",), "sm_1000"))),
                           ("json:unknown-kernel", _json_text(_json_set(TABLE, ("kernels",), {"nope": []})))):  # fmt: skip
        rule: dict[str, tuple[Expect, str]] = {
            "json:bom": ("either", "a byte order mark before JSON"),
            "json:other-arch": ("valid", "sm_80 is a target of the kernel too"),
        }
        expect, reason = rule.get(mutation, ("invalid", ""))
        yield Case(id=f"table/table/(file)/{mutation}", surface="table", base="table", key="(file)",
                   mutation=mutation, make_files=fixed({**files, TABLE_PATH: data}), expect=expect,
                   reason=reason, line=line, budget=2.0)  # fmt: skip


def _jtag(value: Any) -> str:
    return {dict: "map", list: "list", bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), "null")


# ---------------------------------------------------------------- [tool.aotpack] and -C settings

SETTINGS = {"recipe": "recipe.yaml", "jobs": 2, "cuda": "12.2", "strict": False, "cache": True, "line-info": False,
            "triton": "3.9", "quiet": False, "platform": "linux_x86_64"}  # fmt: skip
SETTING_KINDS = {"recipe": "str", "jobs": "int", "cuda": "str", "strict": "bool", "cache": "bool",
                 "line-info": "bool", "triton": "str", "quiet": "bool", "platform": "str"}  # fmt: skip


def _toml_value(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + "}"
    raise TypeError(value)


def pyproject(settings: dict[str, Any], extra: str = "") -> bytes:
    body = "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in settings.items())
    text = ('[build-system]\nrequires = ["aotpack"]\nbuild-backend = "aotpack.build_meta"\n\n'
            f"[project]\nname = \"small-kernels\"\nversion = \"0.2.0\"\n\n[tool.aotpack]\n{body}{extra}")  # fmt: skip
    return text.encode("utf-8", "surrogateescape")


SETTING_VALUES: dict[str, list[tuple[str, Any, Any]]] = {  # mutation, TOML value, -C text (None: none)
    "recipe": [("value:missing-file", "nope.yaml", "nope.yaml"), ("value:a-folder", "kernels", "kernels"),
               ("value:absolute-outside", "/etc/hostname", "/etc/hostname"), ("value:fifo", "fifo.yaml", None)],
    "jobs": [("value:zero", 0, "0"), ("value:negative", -1, "-1"), ("value:words", "many", "many"),
             ("value:float-text", None, "1.5"), ("value:huge", 10**18, str(10**18))],
    "cuda": [("value:old", "11.8", "11.8"), ("value:words", "twelve", "twelve"), ("value:empty", "", "")],
    "triton": [("value:unknown", "2.0", "2.0"), ("value:words", "latest", "latest"), ("value:empty", "", "")],
    "strict": [("value:words", "maybe", "maybe"), ("value:yes", "yes", "yes")],
    "cache": [("value:words", "maybe", "maybe"), ("value:int", 1, None)],
    "line-info": [("value:words", "maybe", "maybe")],
    "quiet": [("value:words", "maybe", "maybe"), ("value:int", 1, None), ("value:empty", "", "")],
}  # fmt: skip


def settings_surface() -> Iterator[Case]:
    base = BASES["triton"]
    files, _ = base_files(base)

    def case(
        key: str,
        mutation: str,
        toml: bytes,
        config: dict[str, Any],
        expect: Expect | None = None,
        reason: str = "",
        extra: dict[str, bytes | Special] | None = None,
    ) -> Case:
        if expect is None:
            expect, reason = expectation(f"settings.{key}", mutation)
        return Case(id=f"settings/triton/{key}/{mutation}", surface="settings", base="triton", key=f"settings.{key}",
                    mutation=mutation, make_files=lambda: {**files, "pyproject.toml": toml, **(extra or {})},
                    expect=expect,
                    reason=reason, command="pep517", target="pyproject.toml", config_settings=config,
                    locate="file", budget=2.0)  # fmt: skip

    yield case("(all)", "base", pyproject(SETTINGS), {}, "valid", "the base project")
    for key, value in SETTINGS.items():
        for mutation, new in TYPE_VALUES.items():
            if (mutation == f"type:{SETTING_KINDS[key]}" and SETTING_KINDS[key] != "str") or new is None:
                continue
            toml_new = dict(new.pairs) if isinstance(new, M) else new
            yield case(key, mutation, pyproject({**SETTINGS, key: toml_new}), {})
        for mutation, toml_new, c_text in SETTING_VALUES.get(key, []):
            extra: dict[str, bytes | Special] | None = (
                {"fifo.yaml": Special("fifo")} if mutation == "value:fifo" else None
            )
            if toml_new is not None:
                yield case(key, f"toml:{mutation}", pyproject({**SETTINGS, key: toml_new}), {}, extra=extra)
            if c_text is not None:
                yield case(key, f"C:{mutation}", pyproject(SETTINGS), {key: c_text})
        yield case(key, "C:same", pyproject(SETTINGS), {key: str(value).lower() if isinstance(value, bool) else
                                                        str(value)})  # fmt: skip
        yield case(key, "C:list", pyproject(SETTINGS), {key: [str(value), str(value)]})
        yield case(key, "C:huge", pyproject(SETTINGS), {key: HUGE_STRING})
        yield case(key, "C:nul", pyproject(SETTINGS), {key: "a\x00b"})
        yield case(key, "toml:non-utf8", pyproject({**SETTINGS, key: Raw('"zz' + BAD_BYTE + '"')}), {})
        yield case(key, "toml:dup-key", pyproject(SETTINGS, extra=f"{json.dumps(key)} = {_toml_value(value)}\n"), {})
        if key != "recipe":
            yield case(key, "delete:optional", pyproject({k: v for k, v in SETTINGS.items() if k != key}), {})
    yield case("recipe", "delete:required", pyproject({k: v for k, v in SETTINGS.items() if k != "recipe"}), {})
    yield case("(unknown)", "toml:unknown-key", pyproject({**SETTINGS, "job": 2}), {})
    yield case("(unknown)", "C:unknown-key", pyproject(SETTINGS), {"job": "2"})
    yield case("(table)", "toml:not-a-table", pyproject({}).replace(b"[tool.aotpack]\n", b"tool.aotpack = 7\n"), {})
    yield case("(table)", "toml:invalid", pyproject(SETTINGS) + b"= = =\n", {})
    yield case("(table)", "toml:deep", pyproject(SETTINGS, extra="deep = " + "[" * 5000 + "]" * 5000 + "\n"), {})
    yield case("(file)", "pyproject:missing", b"", {}, "invalid", "no pyproject.toml")
    yield case("(file)", "pyproject:binary", bytes(range(256)), {})


# ---------------------------------------------------------------- the loader's own key sets


def loader_keys() -> dict[str, tuple[str, ...]]:
    """The keys the loader accepts in each fixed-key mapping of the bases, read off its own "unknown key"
    message (so the generator follows the loader as it changes, whatever its internals)."""
    import re
    import tempfile

    from aotpack.backends import recipes as recipe
    from aotpack.errors import RecipeError

    out: dict[str, tuple[str, ...]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for base in BASES.values():
            tree = M.of(base.tree)
            for rel, data in base.files().items():
                p = Path(tmp, base.name, rel)
                p.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(data, bytes):
                    p.write_bytes(data)
                else:
                    p.mkdir(exist_ok=True)
            for path, value in [((), tree), *_walk(tree)]:
                if not isinstance(value, M):
                    continue
                key = general(path, tree) if path else "(top)"
                if any(fnmatch.fnmatchcase(key, g) for g in NAMED):
                    continue
                new = copy(tree)
                at(new, path).pairs.append(("qqqqqqqqqqqq", 1))
                try:
                    recipe.parse(emit(new)[0], Path(tmp, base.name, "recipe.yaml"))
                except RecipeError as exc:
                    m = re.search(r"unknown key 'qqqqqqqqqqqq'[^(]*\((?:expected one of|it takes)?:? ?([^)]*)\)",
                                  str(exc))  # fmt: skip
                    if m:
                        out[f"{base.name}:{key}"] = tuple(k.strip() for k in m.group(1).split(","))
                except Exception:
                    pass
    return out


def uncovered() -> dict[str, list[str]]:
    """Keys the loader accepts in a mapping that the bases never hold there (so no case mutates them)."""
    gaps: dict[str, list[str]] = {}
    held: dict[str, set[str]] = {}
    for base in BASES.values():
        tree = M.of(base.tree)
        for path, value in [((), tree), *_walk(tree)]:
            if isinstance(value, M):
                key = general(path, tree) if path else "(top)"
                held.setdefault(key, set()).update(str(k) for k, _ in value.pairs)
    for where, keys in loader_keys().items():
        key = where.split(":", 1)[1]
        missing = sorted(set(keys) - held.get(key, set()))
        if missing:
            gaps[where] = missing
    return gaps


# ---------------------------------------------------------------- all of it

SURFACES: dict[str, Callable[[], Iterator[Case]]] = {
    "recipe": recipe_surface, "document": document_surface, "files": files_surface, "table": table_surface,
    "settings": settings_surface,
}  # fmt: skip


def _commands() -> None:
    from . import commands  # the other commands' surfaces (issue 36), which build on this module's bases

    SURFACES.update(commands.SURFACES)


_commands()


def generate(surfaces: tuple[str, ...] = tuple(SURFACES)) -> list[Case]:
    cases: list[Case] = []
    seen: set[str] = set()
    for name in surfaces:
        for case in SURFACES[name]():
            if case.id in seen:
                raise AssertionError(f"two cases named {case.id}")
            seen.add(case.id)
            cases.append(case)
    return cases
