"""The manifest every built wheel carries (``pkg/manifest.json``, ``pkg.__aotpack__``), versioned by its
``schema`` field: its shape as TypedDicts (what ``codegen.python.manifest`` writes), its JSON Schema
(``data/manifest.schema.json``, shipped with aotpack and checked against built wheels in the tests),
and the one reader aotpack's own commands use (``inspect``, ``tune``).

A change of shape is a new ``SCHEMA`` (``aotpack-manifest/N``): the generated package's runtime
(``runtime/aot_kernels.py``, which ships without aotpack) reads only fields the schema declares
(``tests/unit/test_manifest.py`` checks that it does).
"""

from __future__ import annotations

import json
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from .errors import WheelError
from .model import ConstValue, DtypeConst, FunctionConst, Kind

SCHEMA = "aotpack-manifest/2"


# A constexpr's value: plain, or (recorded kernels) null, {"dtype": "fp16"}, {"torch_dtype": "float16"},
# {"tuple": [...]}, {"function": source identity}
ConstJson = Any


def const_json(value: ConstValue) -> ConstJson:
    """A constexpr's value as the manifest holds it (the generated runtime reads it back: aot_kernels._keyed)."""
    if isinstance(value, DtypeConst):
        return {"torch_dtype" if value.torch else "dtype": value.name}
    if isinstance(value, FunctionConst):
        return {"function": value.identity}
    if isinstance(value, tuple):
        return {"tuple": [const_json(v) for v in value]}
    return value


class Arg(TypedDict, total=False):
    name: str  # always there, as are type and kind
    type: str  # as the recipe spells it: '*fp16', 'i32', 'tensordesc<fp16[64, 64]>'
    kind: Kind
    default: str  # an expression or constant, as text
    optional: Literal[True]
    extent: str
    launch_only: Literal[True]


class Rule(TypedDict):
    key: list[int]
    config: str
    arch: str | None
    types: dict[str, str]
    specialization: str | None


class Specialization(TypedDict):
    name: str
    assumes: dict[str, str]  # argument -> what the class assumes of it


class Variant(TypedDict):
    id: str
    target: str
    types: dict[str, str]
    config: str
    specialization: str
    assumes: dict[str, str]
    entry: str
    shared_bytes: int
    static_shared_bytes: int
    num_warps: int
    num_stages: int | None
    constexprs: dict[str, ConstJson]
    image_bytes: int
    image_sha256: str
    compiler: dict[str, str]


class Pruned(TypedDict):
    id: str
    reason: str


class _Kernel(TypedDict):
    source: str
    backend: Literal["triton", "cuda"]
    args: list[Arg]
    types: dict[str, list[str]]
    bindings: list[dict[str, str]]
    grid: list[str]
    key: list[list[str]]  # [name, expression], in order
    bucket: Literal["exact", "pow2"]
    autotune: bool
    mutates: list[str] | None
    default_config: str
    dispatch: list[Rule]
    call_order: list[str]
    specializations: list[Specialization]
    targets: list[str]
    min_driver_cuda: dict[str, str]
    driver_floor_set_by: dict[str, str]
    variants: list[Variant]
    pruned: list[Pruned]


class Function(TypedDict):
    module: str | None  # None: a file beside the recipe (a recording's written-out source, say)
    name: str
    identity: str  # the source identity activate() finds the function's call sites by (aot_kernels.identity)


class LaunchConfig(TypedDict):
    constexprs: dict[str, ConstJson]
    num_warps: int | None
    num_stages: int | None


class Tuned(TypedDict):
    key: list[ConstJson]
    kwargs: dict[str, ConstJson]
    num_warps: int
    num_stages: int


class Kernel(_Kernel, total=False):
    """A kernel; those built with ``launch: triton`` (drop-in launches) add the fields below."""

    launch: Literal["triton"]
    function: Function
    params: list[list[str | bool]]  # [name, is a runtime argument], in the function's order
    configs: list[LaunchConfig]
    options: dict[str, int | bool]
    defaults: dict[str, int | float | bool | str]
    tuned: list[Tuned]


class Manifest(TypedDict):
    schema: str
    package: str
    version: str
    aotpack: str
    toolchain: dict[str, str]
    targets: list[str]
    min_driver_cuda: dict[str, str]
    sources: dict[str, str]
    kernels: dict[str, Kernel]


def dumps(manifest: Manifest) -> str:
    """manifest.json's text: sorted keys, one space indents (the wheel's bytes depend on it)."""
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``SCHEMA`` (``data/manifest.schema.json``)."""
    text = resources.files("aotpack.data").joinpath("manifest.schema.json").read_text()
    return cast(dict[str, Any], json.loads(text))


def read_wheel(wheel: Path) -> Manifest:
    """The manifest of a built wheel; WheelError when it is not an aotpack wheel or is damaged."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.endswith("/manifest.json") and n.count("/") == 1), None)
            if name is None:
                raise WheelError(f"{wheel} has no manifest.json: it was not built by aotpack")
            data = json.loads(zf.read(name))
    except (OSError, zipfile.BadZipFile) as exc:
        raise WheelError(f"cannot read {wheel}: {exc}") from None
    except ValueError as exc:  # not JSON, not UTF-8
        raise WheelError(f"{wheel}: its manifest.json is not valid JSON ({exc}); rebuild the wheel") from None
    if not isinstance(data, dict):
        raise WheelError(f"{wheel}: its manifest.json is not an object; rebuild the wheel")
    return cast(Manifest, data)
