"""CUDA's part of a recipe (``recipe.readers.KernelReader``): its keys, and what only a CUDA kernel has: its
.cu file and entry (a name or a template), the defines of its config grid, include folders and nvcc flags,
its gencode targets, the thread block and dynamic shared memory of a launch, and the entry's parameter
count read from the .cu file."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ... import expr, facts
from ...errors import RecipeError
from ...model import Arg, ConstValue, CudaLaunch, Kernel, Source, TritonKernel
from ...recipe import fields as _fields
from ...recipe import yamlnodes
from ...recipe.kernel import kernel_targets
from ...recipe.readers import Grid, Jit, KernelEntry
from ...recipe.yamlnodes import Node
from ...states import SpecRule

TITLE = "CUDA"
KEYS: tuple[str, ...] = ("cuda", "entry", "defines", "block", "shared", "include_dirs", "nvcc_flags", "gencode")
SOURCE = "a .cu file"
RECIPE_KEYS: tuple[str, ...] = ()  # the recipe's 'cuda:' is the driver every kernel needs, not this backend's
SPECIALIZATION = SpecRule(jit=False, recorded=False, by_level=True)  # hint levels, and which optionals are None

_GENCODE = re.compile(r"^arch=compute_(?P<arch>\d+a?),code=(?P<code>(?:sm|compute)_\d+a?)$")


def release(top: Mapping[str, Node]) -> str | None:
    return None  # nvcc is found on the build host (or given), not pinned by the recipe


def claim(entry: KernelEntry) -> Kernel | None:
    return None


def source(entry: KernelEntry) -> Source:
    """The .cu file, read now (the build reads it as text: its entry points) with its own location."""
    k = entry.keys
    if "entry" not in k:
        raise entry.node.fail("a CUDA kernel needs 'entry': its __global__ function (or template instantiation)")
    node = k["cuda"]
    file = _fields.path(node, entry.root)
    if not file.exists():
        raise node.fail(f"CUDA source {node.string()!r} not found (looked for {file})")
    try:
        yamlnodes.read_text(file, "CUDA source", "MAX_SOURCE_BYTES")
    except RecipeError as exc:
        raise node.fail(str(exc)) from None
    return Source(path=file, module=None, function="")


def targets(entry: KernelEntry) -> tuple[str, ...]:
    """Its 'gencode' (nvcc's spelling, and PTX targets) or its 'targets', else the recipe's."""
    k = entry.keys
    if "gencode" not in k:
        return kernel_targets(entry)
    if "targets" in k:
        raise k["gencode"].fail("give 'gencode' or 'targets', not both")
    known = list(facts.archs())
    return kernel_targets(entry, _fields.targets(k["gencode"], [f"compute_{a[3:]}" for a in known], _gencode))


def _gencode(item: Node, text: str) -> str:
    """A target as nvcc's -gencode spells it ('arch=compute_90a,code=sm_90a'), as the target it builds."""
    m = _GENCODE.match(text)
    if text.startswith("arch=") and "," not in text:
        raise item.fail(f"{text!r} is half of an nvcc gencode: YAML splits an unquoted 'arch=...,code=...' "
                        "inside [ ] at its comma; write it in quotes")  # fmt: skip
    if m:
        code_arch = m["code"].split("_")[1]
        if code_arch != m["arch"]:
            raise item.fail(f"{text!r}: aotpack builds each code for its own arch; use "
                            f"'arch=compute_{code_arch},code={m['code']}'")  # fmt: skip
        return m["code"]
    return text


def fields(entry: KernelEntry, source: Source) -> CudaFields:
    return CudaFields(entry=entry, source=source)


@dataclass(frozen=True, kw_only=True)
class CudaFields:
    """A CUDA kernel's own fields (``recipe.readers.KernelFields``)."""

    entry: KernelEntry
    source: Source

    @property
    def grid_key(self) -> str:
        return "defines"

    @property
    def dtype_constexprs(self) -> bool:
        return False

    @property
    def autotuner_key(self) -> tuple[str, ...]:
        return ()

    @property
    def autotune_problem(self) -> str | None:
        return None

    @property
    def specialize_problem(self) -> str | None:
        return "'specialize' is for Triton kernels (CUDA kernels use hints)"

    def jit(
        self, args: list[Arg], grid: Grid, bound_nodes: list[tuple[str, Node]], dtype_consts: list[tuple[str, str]]
    ) -> Jit:
        """The arguments as given: descriptors and optional arguments are Triton's."""
        for arg in args:
            if arg.descriptor:
                raise RecipeError(f"kernels.{self.entry.name}.args.{arg.name}: tensor descriptors are for Triton "
                                  "kernels", arg.where)  # fmt: skip
            if arg.optional:
                raise RecipeError(f"kernels.{self.entry.name}.args.{arg.name}: optional arguments are for Triton "
                                  "kernels", arg.where)  # fmt: skip
        return Jit(args=tuple(args))

    def warps_and_stages(self) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        return (None,), (None,)  # the recipe gives the block shape

    def launch(
        self, check: Callable[[expr.Expr], None], typevars: set[str], defines: tuple[str, ...], args: Sequence[Arg]
    ) -> CudaLaunch:
        launch = _cuda_launch(self.entry.keys, self.entry.root, check, typevars, defines)
        _check_cuda_arity(self.entry.keys["args"], launch.entry, self.source, args)
        return launch

    def triton(
        self, fixed: tuple[tuple[str, ConstValue], ...], dtype_constexprs: tuple[tuple[str, str], ...]
    ) -> TritonKernel | None:
        return None


def _cuda_launch(
    k: dict[str, Node],
    root: Path,
    check: Callable[[expr.Expr], None],
    typevars: set[str],
    defines: tuple[str, ...],
) -> CudaLaunch:
    entry = k["entry"].string()
    try:
        fields = list(string.Formatter().parse(entry))
    except ValueError as exc:  # a lone { or }
        raise k["entry"].fail(f"{entry!r} is not a template: {exc} (write {{{{ and }}}} for braces)") from None
    for _, field_name, spec, conversion in fields:
        if field_name is not None and (spec or conversion):
            written = f"{field_name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}"
            raise k["entry"].fail(f"{{{written}}}: a placeholder is a plain name, as {{{field_name}}}")
        if field_name is not None and field_name not in typevars and field_name not in defines:
            known = ", ".join(sorted(typevars | set(defines))) or "none"
            raise k["entry"].fail(f"unknown placeholder {{{field_name}}} (type variables and defines: {known})")
    if "block" not in k:
        raise k["entry"].fail("a CUDA kernel needs 'block': 1 to 3 expressions for the thread block")
    block_nodes = k["block"].sequence(allow_scalar=True)
    if not 1 <= len(block_nodes) <= 3:
        raise k["block"].fail(f"expected 1 to 3 block expressions, got {len(block_nodes)}")
    block = [_fields.expression(b, check) for b in block_nodes]
    values = [_fields.constant(b, n) for b, n in zip(block, block_nodes, strict=True)] + [1] * (3 - len(block_nodes))
    block += [expr.Num(1)] * (3 - len(block_nodes))
    fixed = [v for v in values if v is not None]
    if fixed and (min(fixed) < 1 or (len(fixed) == 3 and not fixed[0] * fixed[1] * fixed[2] <= 1024)):
        shown = ", ".join("(per call)" if v is None else str(v) for v in values)
        raise k["block"].fail(f"a block has 1 to 1024 threads, each dimension at least 1; got [{shown}]")
    shared = _fields.expression(k["shared"], check) if "shared" in k else expr.Num(0)
    shared_bytes = _fields.constant(shared, k["shared"]) if "shared" in k else 0
    if shared_bytes is not None and shared_bytes < 0:
        raise k["shared"].fail(f"dynamic shared memory is a number of bytes >= 0, got {shared_bytes}")
    includes, flags = _nvcc_inputs(k, root)
    return CudaLaunch(
        entry=entry, include_dirs=tuple(includes), nvcc_flags=tuple(flags), block=(block[0], block[1], block[2]),
        shared=shared,
    )  # fmt: skip


def _check_cuda_arity(node: Node, entry: str, source: Source, args: Sequence[Arg]) -> None:
    """The recipe's arguments (those not launch_only) against the parameters of the entry's ``__global__``
    declarations in the .cu file, where all of them take one number: a mismatch is the recipe's error, said here
    rather than by nvcc at build time. An entry declared elsewhere (an include, a macro) or overloaded is left to
    the build's check (the wrapper's static_assert)."""
    assert source.path is not None
    name = entry.partition("<")[0].strip().rpartition("::")[2]
    text = yamlnodes.read_text(source.path, "CUDA source", "MAX_SOURCE_BYTES")  # read (and bounded) by source
    declared = re.finditer(rf"__global__[^;{{}}]*?\b{re.escape(name)}\s*\(", text)  # to the name; not past a body
    counts = {_parameter_count(text, m.end()) for m in declared}
    counts.discard(None)
    given = sum(1 for a in args if not a.launch_only)
    if len(counts) == 1 and given not in counts:
        (takes,) = counts
        raise node.fail(f"the recipe gives {given} arguments (those not launch_only), and {name} in "
                        f"{source.path.name} takes {takes}: list its parameters in order, and mark arguments it does "
                        "not take 'launch_only: true'")  # fmt: skip


def _parameter_count(text: str, start: int) -> int | None:
    """The number of parameters of the list that opens just before ``start`` (commas outside brackets), or None
    where the list does not end within the file's next 64 KiB."""
    depth, commas, seen = 0, 0, False
    for ch in text[start : start + (64 << 10)]:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            if depth == 0 and ch == ")":
                return 0 if not seen else commas + 1
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
        if not ch.isspace():
            seen = True
    return None


def _nvcc_inputs(k: dict[str, Node], root: Path) -> tuple[list[Path], list[str]]:
    """``include_dirs`` (folders relative to the recipe) and ``nvcc_flags`` (none that aotpack sets)."""
    includes = []
    for item in k["include_dirs"].sequence(allow_scalar=True) if "include_dirs" in k else ():
        folder = _fields.path(item, root)
        if not folder.is_dir():
            raise item.fail(f"include directory {item.string()!r} not found (looked for {folder})")
        includes.append(folder)
    flags: list[str] = []
    for item in k["nvcc_flags"].sequence(allow_scalar=True) if "nvcc_flags" in k else ():
        flag = item.string()
        if flag.split("=")[0] in ("-gencode", "-arch", "--gpu-architecture", "-code", "-o", "-cubin", "-ptx"):
            raise item.fail(f"{flag!r} is set by aotpack; list targets under 'gencode'")
        flags.append(flag)
    return includes, flags
