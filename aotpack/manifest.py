"""The manifest every built wheel carries (``pkg/manifest.json``, ``pkg.__aotpack__``), versioned by its
``schema`` field: its shape as TypedDicts (what ``codegen.python.manifest`` writes), its JSON Schema
(``data/manifest.schema.json``, shipped with aotpack and checked against built wheels in the tests),
and the one reader aotpack's own commands use (``inspect``, ``tune``).

A change of shape is a new ``SCHEMA`` (``aotpack-manifest/N``): the generated package's runtime
(``runtime/_aotpack_runtime.py``, which ships without aotpack) reads only fields the schema declares
(``tests/unit/test_manifest.py`` checks that it does).
"""

from __future__ import annotations

import functools
import json
import lzma
import types
import typing
import zipfile
import zlib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from . import model, selection, values
from .errors import WheelError, printable
from .limits import MAX_DIGITS, MAX_MANIFEST_BYTES, MAX_MANIFEST_DEPTH, MAX_WHEEL_BYTES
from .model import ConstValue, DtypeConst, FunctionConst, Kind

SCHEMA = "aotpack-manifest/3"


# A constexpr's value: plain, or (recorded kernels) null, {"dtype": "fp16"}, {"torch_dtype": "float16"},
# {"tuple": [...]}, {"function": source identity}
ConstJson = Any


def const_json(value: ConstValue) -> ConstJson:
    """A constexpr's value as the manifest holds it (the generated runtime reads it back: _aotpack_runtime._keyed)."""
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
    blocks_per_sm: int  # resident at once on one multiprocessor of the target (0: not known)
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
    identity: str  # the source identity activate() finds the function's call sites by (_aotpack_identity.identity)


class LaunchConfig(TypedDict):
    constexprs: dict[str, ConstJson]
    num_warps: int | None
    num_stages: int | None


class Tuned(TypedDict):
    key: list[ConstJson]
    kwargs: dict[str, ConstJson]
    num_warps: int
    num_stages: int


class HeldOut(TypedDict):
    points: int
    median: float
    worst: float
    worst_key: list[int]
    over: int  # keys past 1.05x


class _Selection(TypedDict):
    neighbours: int  # 0: the nearest table row's config
    scale: float  # the power of the work ratio (0: times not scaled)
    tiles: list[str]  # "M/BLOCK_M grid", "K/BLOCK_K loop"
    held_out: HeldOut
    nearest: HeldOut


class Selection(_Selection, total=False):
    occupancy: dict[str, int]  # config label: programs per multiprocessor in a wave (only configs in waves)
    own_occupancy: bool  # programs in waves of each variant's blocks_per_sm (present: true)
    drawn: bool  # held_out is at keys tune: validate: drew as calls are, not over the table's folds (present: true)
    fixed: int  # a program's cost besides its loops, in elements of their tiles (absent: work is their trips)


class Kernel(_Kernel, total=False):
    """A kernel; those built with ``launch: triton`` (drop-in launches) add the fields below, those whose tables
    measured enough keys their dispatcher's rule (aotpack/selection.py) with its held-out error."""

    selection: Selection

    launch: Literal["triton"]
    function: Function
    params: list[list[str | bool]]  # [name, is a runtime argument], in the function's order
    configs: list[LaunchConfig]
    options: dict[str, int | bool]
    defaults: dict[str, int | float | bool | str]
    tuned: list[Tuned]


class CacheEntry(TypedDict):
    """A Triton cache entry the wheel ships (``<package>/_triton_cache/<key>/<files>``): a kernel another caller
    of triton.compile (Inductor) compiled when the program was recorded."""

    name: str
    key: str
    files: list[str]
    triton: str
    target: str


class _InductorSet(TypedDict):
    digest: str
    torch: str
    size: int


class InductorSet(_InductorSet, total=False):
    """torch.compile's caches one process of the recorded program saved, which the wheel ships
    (``<package>/_inductor_cache/<digest>.bin`` and ``.json``, and ``<sha256>.cpp`` for each C++ kernel's shared
    object) and ``activate()`` loads."""

    cpp_kernels: int  # Inductor's C++ kernels its graphs call for
    cpp_objects: int  # the shared objects of theirs it holds (built for the recording's CPU and Python)


class _Manifest(TypedDict):
    schema: str
    package: str
    version: str
    aotpack: str
    toolchain: dict[str, str]
    targets: list[str]
    min_driver_cuda: dict[str, str]
    sources: dict[str, str]
    kernels: dict[str, Kernel]


class Manifest(_Manifest, total=False):
    triton_cache: list[CacheEntry]  # where the recipe has triton_cache:
    inductor_cache: list[InductorSet]  # where the recipe has inductor_cache:


def dumps(manifest: Manifest) -> str:
    """manifest.json's text: sorted keys, one space indents (the wheel's bytes depend on it)."""
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``SCHEMA`` (``data/manifest.schema.json``)."""
    text = resources.files("aotpack.data").joinpath("manifest.schema.json").read_text()
    return cast(dict[str, Any], json.loads(text))


def read_wheel(wheel: Path) -> Manifest:
    """The manifest of a built wheel; WheelError when it is not an aotpack wheel, is damaged, or is past a bound
    of limits.py (a wheel aotpack did not build costs at most MAX_WHEEL_BYTES of disk reads and
    MAX_MANIFEST_BYTES of memory)."""
    data = _manifest_bytes(wheel)
    try:
        manifest = json.loads(data, parse_int=functools.partial(_number, wheel))
        deep = values.json_depth(manifest) > MAX_MANIFEST_DEPTH
    except RecursionError:  # nested past what Python can read: past the bound too
        deep = True
    except ValueError as exc:  # not JSON, not UTF-8
        raise WheelError(f"{wheel}: its manifest.json is not valid JSON ({exc}); rebuild the wheel") from None
    if deep:
        raise WheelError(f"{wheel}: its manifest.json nests deeper than {MAX_MANIFEST_DEPTH} levels "
                         "(limits.MAX_MANIFEST_DEPTH): aotpack did not write it; rebuild the wheel")  # fmt: skip
    if not isinstance(manifest, dict):
        raise WheelError(f"{wheel}: its manifest.json is not an object; rebuild the wheel")
    return cast(Manifest, manifest)


def _manifest_bytes(wheel: Path) -> bytes:
    """manifest.json's bytes, read from a regular file of at most MAX_WHEEL_BYTES, at most MAX_MANIFEST_BYTES of
    them whatever its header says (a zip bomb is not unpacked past them)."""
    try:
        opened, found = values.open_regular(wheel)
    except OSError as exc:
        raise WheelError(f"cannot read {wheel}: {exc.strerror or exc}; give the path of a wheel") from None
    with opened:
        if found.st_size > MAX_WHEEL_BYTES:
            raise WheelError(f"{wheel} has {found.st_size} bytes, more than a wheel aotpack reads "
                             f"({MAX_WHEEL_BYTES}, limits.MAX_WHEEL_BYTES)")  # fmt: skip
        try:
            with zipfile.ZipFile(opened) as zf:
                twice = next((n for n, c in Counter(i.filename for i in zf.infolist()).items() if c > 1), None)
                if twice is not None:  # pip and zipfile take the last of them: a check reading one would lie
                    raise WheelError(f"{wheel} holds {printable(twice)!r} more than once: a wheel holds each name "
                                     "once; rebuild it")  # fmt: skip
                info = next((i for i in zf.infolist() if i.filename.endswith("/manifest.json")
                             and i.filename.count("/") == 1), None)  # fmt: skip
                if info is None:
                    raise WheelError(f"{wheel} has no manifest.json: it was not built by aotpack")
                data = b""
                if info.file_size <= MAX_MANIFEST_BYTES:
                    with zf.open(info) as member:
                        data = member.read(MAX_MANIFEST_BYTES + 1)
        except NotImplementedError as exc:  # a compression method zipfile lacks
            raise WheelError(f"{wheel}: its manifest.json is packed in a way Python cannot unpack ({exc}); rebuild "
                             "the wheel") from None  # fmt: skip
        except RuntimeError:  # encrypted: zipfile asks for a password
            raise WheelError(f"{wheel}: its manifest.json is encrypted, which a wheel never is; rebuild it") from None
        except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error, lzma.LZMAError) as exc:
            raise WheelError(f"cannot read {wheel}: it is not a whole zip file ({exc}); rebuild the wheel") from None
    if info.file_size > MAX_MANIFEST_BYTES or len(data) > MAX_MANIFEST_BYTES:
        raise WheelError(f"{wheel}: its {printable(info.filename)} unpacks to more than {MAX_MANIFEST_BYTES} bytes "
                         "(limits.MAX_MANIFEST_BYTES): aotpack did not write it; rebuild the wheel")  # fmt: skip
    return data


def _number(wheel: Path, text: str) -> int:
    """A whole number of the manifest, of at most MAX_DIGITS digits (int() refuses past 4300, slowly)."""
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise WheelError(f"{wheel}: its manifest.json holds a number of {len(text.lstrip('-'))} digits, more than "
                         f"{MAX_DIGITS} (limits.MAX_DIGITS): aotpack did not write it; rebuild the wheel")  # fmt: skip
    return int(text)


def type_problem(value: object, shape: object = Manifest, where: str = "") -> str | None:
    """Where ``value`` (a manifest read from a wheel) is not of the type ``shape`` (this module's TypedDicts)
    says, and what it is instead: "kernels.add.variants[0].target: a number, not text"; None where every field
    present is (a field missing is for the reader: an older manifest may lack one)."""
    origin, args = typing.get_origin(shape), typing.get_args(shape)
    if shape is Any:
        return None
    if typing.is_typeddict(shape):
        if not isinstance(value, dict):
            return _mistyped(where, value, "an object")
        hints = typing.get_type_hints(shape)
        for name, field in hints.items():
            if name in value:
                found = type_problem(value[name], field, f"{where}.{name}" if where else name)
                if found is not None:
                    return found
        return None
    if origin in (typing.Union, types.UnionType):
        problems = [type_problem(value, a, where) for a in args]
        return None if None in problems else _mistyped(where, value, " or ".join(map(_wanted, args)))
    if origin is Literal:
        return None if value in args else _mistyped(where, value, _wanted(shape))
    if origin is list:
        if not isinstance(value, list):
            return _mistyped(where, value, "a list")
        return next((p for i, v in enumerate(value) if (p := type_problem(v, args[0], f"{where}[{i}]"))), None)
    if origin is dict:
        if not isinstance(value, dict):
            return _mistyped(where, value, "an object")
        return next((p for k, v in value.items() if (p := type_problem(v, args[1], f"{where}.{k}"))), None)
    if shape is float and isinstance(value, int) and not isinstance(value, bool):
        return None
    if isinstance(shape, type) and isinstance(value, shape) and (shape is bool or not isinstance(value, bool)):
        return None
    return _mistyped(where, value, _wanted(shape))


def _wanted(shape: object) -> str:
    """A type of ``type_problem``'s, in words."""
    origin = typing.get_origin(shape)
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(shape))
    if origin is list:
        return "a list"
    if origin is dict or typing.is_typeddict(shape):
        return "an object"
    named: dict[object, str] = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
                                type(None): "null"}  # fmt: skip
    return named.get(shape, "a value")


def _mistyped(where: str, value: object, wanted: str) -> str:
    found = {dict: "an object", list: "a list", str: "text", bool: "true or false", int: "a whole number",
             float: "a number", type(None): "null"}.get(type(value), type(value).__name__)  # fmt: skip
    return f"{where or '(the manifest)'}: {found}, not {wanted}"


def selection_of(kernel: model.Kernel) -> Selection | None:
    """The rule and its held-out error as the manifest holds them (None: no table measured enough keys)."""
    sel, names = kernel.selection, [n for n, _ in kernel.key]
    if sel.held_out is None or sel.nearest is None:
        return None

    def held(h: model.HeldOut) -> HeldOut:
        return {"points": h.points, "median": round(h.median, 4), "worst": round(h.worst, 4),
                "worst_key": list(h.worst_key), "over": h.over}  # fmt: skip

    tiles = [f"{names[t.dim]}/{t.constexpr} {'loop' if t.loop else 'grid'}" for t in sel.tiles]
    out: Selection = {"neighbours": sel.neighbours, "scale": sel.scale, "tiles": tiles,
                      "held_out": held(sel.held_out), "nearest": held(sel.nearest)}  # fmt: skip
    if sel.occupancy:
        out["occupancy"] = {c.label: o for c, o in zip(kernel.configs, sel.occupancy, strict=True) if o}
    if sel.own_occupancy:
        out["own_occupancy"] = True
    if sel.fixed:
        out["fixed"] = sel.fixed
    if sel.drawn:
        out["drawn"] = True
    return out


def blocks_of(built: Manifest, kernel: model.Kernel) -> dict[selection.Group, tuple[int, ...]]:
    """The kernel's variants' blocks per multiprocessor as a built wheel's manifest gives them (those a build
    fits the kernel's rule with: fitting.choose); none for a kernel it lacks."""
    labels = [c.label for c in kernel.configs]
    variants = built["kernels"][kernel.name]["variants"] if kernel.name in built["kernels"] else []
    return selection.blocks([((v["target"], tuple(sorted(v["types"].items())), v["specialization"]),
                              labels.index(v["config"]), v.get("blocks_per_sm", 0))
                             for v in variants if v["config"] in labels], len(labels))  # fmt: skip
