"""Tables of facts shipped as package data (GPU targets, element types), checked when loaded."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal


@dataclass(frozen=True, kw_only=True)
class Arch:
    name: str
    capability: int
    specific: bool
    triton: bool
    family: str
    min_driver_cuda: int
    max_shared: int  # bytes of shared memory a block may opt in to
    sm_warps: int  # warps resident on one multiprocessor, at most
    sm_blocks: int  # blocks resident on one multiprocessor, at most
    sm_shared: int  # bytes of shared memory of one multiprocessor that blocks may hold

    def blocks_per_sm(self, registers: int, warps: int, shared: int) -> int:
        """How many blocks of a kernel fit on one multiprocessor at once, as the driver's occupancy calculator
        counts them: by warps; by registers (a warp's rounded up to SM_REGISTER_UNIT, warps placed in the
        SM_PARTITIONS quarters of SM_REGISTERS); by shared memory (each block's plus BLOCK_RESERVED_SHARED,
        rounded up to SM_SHARED_UNIT); 0 where a block needs more than one holds."""
        if registers < 0 or warps <= 0 or shared < 0:
            return 0
        per_warp = -(-registers * 32 // SM_REGISTER_UNIT) * SM_REGISTER_UNIT
        quarter = SM_REGISTERS // SM_PARTITIONS
        by_registers = quarter // per_warp * SM_PARTITIONS // warps if per_warp else self.sm_blocks
        by_shared = self.sm_shared // (-(-(shared + BLOCK_RESERVED_SHARED) // SM_SHARED_UNIT) * SM_SHARED_UNIT)
        return max(0, min(self.sm_warps // warps, by_registers, by_shared, self.sm_blocks))


SM_REGISTERS = 65536  # 32-bit registers of one multiprocessor (every arch of archs.json)
SM_REGISTER_UNIT = 256  # registers are allocated per warp in units of this many
SM_PARTITIONS = 4  # a multiprocessor's quarters: each holds a quarter of its registers and whole warps
SM_SHARED_UNIT = 128  # bytes: shared memory is allocated per block in units of this many
BLOCK_RESERVED_SHARED = 1024  # bytes of shared memory the system holds per resident block (sm_80 and newer)


@dataclass(frozen=True, kw_only=True)
class Target:
    """A build target as the runtime sees it: machine code for one arch, or PTX (``compute_XX``)
    that the driver compiles at load time for that arch or any newer one."""

    name: str
    arch: Arch
    ptx: bool


PYTHON_FLOOR = (3, 9)  # the oldest Python a kernel wheel takes: its tag (cp39-abi3), its Requires-Python floor
ABI3_TAG = f"cp{PYTHON_FLOOR[0]}{PYTHON_FLOOR[1]}-abi3"
REQUIRES_PYTHON = f">={PYTHON_FLOOR[0]}.{PYTHON_FLOOR[1]}"

CUDA_VERSION = re.compile(r"(\d+)\.(\d)")


def cuda_version(text: str) -> int:
    """A CUDA release as written ("12.2") in the driver API's encoding (1000*major + 10*minor);
    ValueError when it is not one."""
    m = CUDA_VERSION.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a CUDA version (such as 12.2)")
    return int(m[1]) * 1000 + int(m[2]) * 10


def cuda_text(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def target(name: str) -> Target:
    ptx = name.startswith("compute_")
    return Target(name=name, arch=archs()["sm_" + name[len("compute_") :] if ptx else name], ptx=ptx)


@dataclass(frozen=True, kw_only=True)
class DType:
    name: str
    code: int
    size: int
    torch: str
    typestr: str | None
    scalar: bool
    c: str | None
    cuda: str  # the CUDA C++ type, for CUDA template entries
    dlpack: list[int] | None  # DLPack [type code, bits]
    value: Literal["int", "float", "bool"]  # what a scalar of this type holds
    arg: str | None = None  # scalars: the runtime's aot_arg_kind (how the value is checked and packed)
    triton: str | None = None  # the name in Triton signatures, where it differs

    @property
    def triton_name(self) -> str:
        return self.triton or self.name


def _load(name: str) -> dict[str, Any]:
    text = resources.files("aotpack").joinpath("data").joinpath(name).read_text()
    table: dict[str, Any] = json.loads(text)
    table.pop("_doc", None)
    return table


@cache
def archs() -> dict[str, Arch]:
    table = {name: Arch(name=name, **fields) for name, fields in _load("archs.json").items()}
    for arch in table.values():
        expected = f"sm_{arch.capability}{'a' if arch.specific else ''}"
        if arch.name != expected:
            raise AssertionError(f"archs.json: {arch.name} does not match its capability ({expected})")
    return table


@cache
def dtypes() -> dict[str, DType]:
    table = {}
    for code, (name, fields) in enumerate(_load("dtypes.json").items()):
        fields.setdefault("c", None)
        dtype = DType(name=name, code=code, **fields)
        if dtype.scalar != (dtype.c is not None) or dtype.scalar != (dtype.arg is not None):
            raise AssertionError(f"dtypes.json: {name}: a scalar type needs its C type and runtime kind, and only it")
        if dtype.value not in ("int", "float", "bool"):
            raise AssertionError(f"dtypes.json: {name}: value must be int, float or bool")
        table[name] = dtype
    return table
