"""What the agent reports, typed: each line the agent writes (``agent.py``) read into one frozen event of its
kind, and the events of a recording gathered into compilations, launch counts and autotuner picks (``Events``).

The agent runs inside the recorded program, where aotpack may not be installed, so it writes plain JSON
objects (and a package activated with ``fallback="jit"`` reports its compilations in the same form, written
by the runtime); this module is the one reader of that form, as the agent and the runtime write it:

- ``compile``: a compilation as it happens (``_aotpack_jit.payload``, numbered by the agent, with the text of
  each written-out source the first time an event needs it);
- ``launches``: at exit, how often each compilation (by its number) was launched;
- ``picks``: at exit, what an ``@triton.autotune`` around a function chose, per key;
- ``cached``: a kernel ``triton.compile`` returned to a caller other than the JIT (Inductor), whose Triton
  cache entry the agent copied into ``<events>/triton-cache/<key>/`` (``Cached``);
- ``skipped``: a hook that failed, and why; ``refused``: a process whose Triton aotpack is not tested with;
  ``triton``: the Triton release a process runs (the recipe's ``triton:``).

The events come from another process, possibly damaged: one that does not hold what its kind says is skipped
and said (``Events.skipped``), never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import facts
from ..backends.triton import releases
from ..limits import MAX_DIGITS
from ..recipe.triton_cache import FILE, KEY
from ..runtime._aotpack_agent import ENTRIES, INDUCTOR
from ..runtime._aotpack_runtime import LAUNCH_DEFAULTS
from ..states import ANY, DIV16, NONE, ONE, State

# a JSON value as the agent writes it
Json = None | bool | int | float | str | list["Json"] | dict[str, "Json"]
Indices = tuple[int, ...]  # where a value sits among the function's parameters (Triton's constants and attrs)
# what a recipe row says of a compilation: types, states, constexprs (as JSON), warps, stages, options
Row = tuple[tuple[tuple[str, str], ...], tuple[str, ...], str, int, int, tuple[tuple[str, Json], ...]]
Ident = tuple[str, int, Row]  # a compilation: its function's identity, its arch, its row


@dataclass(frozen=True, kw_only=True)
class Function:
    """A recorded @triton.jit function: where a build finds it (its module, or the source written out: a file
    name), and its source identity (_aotpack_identity.identity)."""

    module: str
    qualname: str
    name: str
    identity: str
    source: str | None = None  # the written-out source's file name, when the module is not importable elsewhere

    @property
    def ref(self) -> str:
        """How a recipe names it: ``module:qualname``, or ``kernels/<file>:<name>``."""
        return f"kernels/{self.source}:{self.name}" if self.source else self.module_ref

    @property
    def module_ref(self) -> str:
        """``module:qualname``: how a recipe recorded before its source was written out may name it."""
        return f"{self.module}:{self.qualname}"

    @staticmethod
    def from_json(described: Mapping[str, Any]) -> Function:
        """From ``_aotpack_source.describe``'s form."""
        source = described.get("source")
        if source is not None and not (isinstance(source, str) and is_file_name(source)):
            raise TypeError(f"a function's source is not a file name in kernels/: {source!r:.50}")
        module, qualname = str(described["module"]), str(described["qualname"])
        name = str(described.get("name") or qualname.rpartition(".")[2])
        if not module or len(module) > 200 or not module.isprintable() or any(c in module for c in " /\\:"):
            raise ValueError(f"a function's module is not a module's name: {module!r:.80}")  # (any a program gives)
        if not all(part.isidentifier() or part == "<locals>" for part in qualname.split(".")):
            raise ValueError(f"a function's qualified name is not Python's: {qualname!r:.80}")
        if not name.isidentifier():
            raise ValueError(f"a function's name is not an identifier: {name!r:.80}")
        return Function(module=module, qualname=qualname, name=name, identity=str(described["identity"]),
                        source=source)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Compile:
    """A compilation the JIT performed, as Triton's ``jit_cache_hook`` described it."""

    number: int  # in its process: what launch counts refer to
    function: Function
    params: tuple[tuple[str, bool], ...]  # (name, is a constexpr), in the signature's order
    signature: dict[str, str]  # parameter -> Triton's type ('*fp16', 'i32', 'constexpr')
    constants: dict[Indices, Json]  # the constexprs and folded arguments, encoded (_aotpack_jit.encode)
    attrs: dict[Indices, tuple[tuple[Json, Json], ...]]  # an argument's attributes: ('tt.divisibility', 16)
    num_warps: int
    num_stages: int
    options: dict[str, Json]
    arch: int  # compute capability, e.g. 90; 0 where the hook did not say
    sources: dict[str, str]  # file name -> text of written-out sources first named here

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Compile:
        """A compile event; one whose function reads but whose compilation does not is Unreadable (said under
        the function's name)."""
        sources = _sources(event)
        function = Function.from_json(event["function"])
        number = int(event.get("number", -1))
        try:
            return Compile(
                number=number, function=function,
                params=tuple((str(n), bool(c)) for n, c in event["function"]["params"]),
                signature={str(name): _text(kind) for name, kind in event["signature"].items()},
                constants={_indices(path): value for path, value in event["constants"]},
                attrs={_indices(path): tuple(_attribute(a) for a in values) for path, values in event["attrs"]},
                options=dict(event.get("options") or {}), num_warps=int(event["num_warps"]),
                num_stages=int(event["num_stages"]), arch=int(event.get("arch") or 0), sources=sources,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Unreadable(function.ref, str(exc)) from None


def _attribute(attr: Any) -> tuple[Json, Json]:
    """One attribute of an argument, a (name, value) pair; any other shape is a ValueError (unreadable)."""
    name, value = attr
    return (name, value)


@dataclass(frozen=True, kw_only=True)
class Launches:
    """At a process's exit: how often each of its compilations was launched."""

    counts: dict[int, int]  # compile number -> launches

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Launches:
        return Launches(counts={int(number): int(count) for number, count in (event.get("counts") or {}).items()})


@dataclass(frozen=True, kw_only=True)
class Picks:
    """At a process's exit: what an @triton.autotune around a function picked (``_aotpack_tuners.picks``)."""

    function: Function
    picks: tuple[Json, ...]  # {key: [...], config: {...}}, as the recipe's autotuned: writes them
    sources: dict[str, str]

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Picks:
        sources = _sources(event)
        return Picks(function=Function.from_json(event["function"]), picks=tuple(event.get("picks") or ()),
                     sources=sources)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A hook that failed on a function (the program went on)."""

    function: str
    why: str

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Skipped:
        return Skipped(function=str(event.get("function")), why=str(event.get("why")))


@dataclass(frozen=True, kw_only=True)
class Refused:
    """A process that runs a Triton release aotpack is not tested with: it recorded nothing."""

    why: str

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Refused:
        return Refused(why=str(event.get("why")))


@dataclass(frozen=True, kw_only=True)
class Triton:
    """The Triton release a process of the program runs: the recording is that release's code."""

    version: str

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Triton:
        version = event["version"]
        if not isinstance(version, str) or not _RELEASE.fullmatch(version):
            raise ValueError(f"a Triton release is X.Y.Z, not {version!r:.40}")
        if releases.minor(version) not in releases.SUPPORTED:  # the agent records nothing under such a release
            raise ValueError(f"Triton {version} is not a release aotpack is tested with ({releases.tested()})")
        return Triton(version=version)


_RELEASE = re.compile(r"\d{1,4}\.\d{1,4}(\.\d{1,4})?")  # what a recipe's triton: takes (a local tag is no release)


@dataclass(frozen=True, kw_only=True)
class Cached:
    """A kernel ``triton.compile`` returned to a caller other than the JIT (Inductor under torch.compile, a
    DSL): its Triton cache entry, copied by the agent, by Triton's cache key (the folder's name) and its files;
    or a module Triton built with a C compiler (its name the file's, its target ``host``)."""

    name: str
    key: str
    files: tuple[str, ...]
    triton: str  # the release that compiled it
    target: str  # backend:arch, e.g. cuda:90; host: a module

    @staticmethod
    def from_json(event: Mapping[str, Any]) -> Cached:
        key, files = str(event["key"]), tuple(str(f) for f in event["files"])
        if not KEY.fullmatch(key):
            raise ValueError(f"{key!r:.80} is not a Triton cache key")
        module = files == (event["name"],) and files[0].endswith(".so")  # a launcher, the driver's utilities
        if not all(FILE.fullmatch(f) for f in files) or not (module or f"{event['name']}.json" in files):
            raise ValueError(f"not an entry's files: {files!r:.200}")
        return Cached(name=str(event["name"]), key=key, files=files, triton=str(event["triton"]),
                      target=str(event["target"]))  # fmt: skip


def _compiled_elsewhere(event: Mapping[str, Any]) -> Skipped:
    """A kernel Triton compiled outside its JIT while a package was active with ``fallback="jit"``
    (_aotpack_guard): said, not recorded."""
    why = (
        "Triton compiled it outside its JIT (Inductor under torch.compile, or another caller of triton.compile): "
        "aotpack records what the JIT compiles"
    )
    return Skipped(function=str(event.get("name")), why=why)


Event = Compile | Launches | Picks | Skipped | Refused | Triton | Cached
READERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {  # by the kind an event's "event" names
    "triton": Triton.from_json, "cached": Cached.from_json,
    "compile": Compile.from_json, "launches": Launches.from_json, "picks": Picks.from_json,
    "skipped": Skipped.from_json, "refused": Refused.from_json, "compiled": _compiled_elsewhere,
}  # fmt: skip


class Unreadable(ValueError):
    """A compile event whose function reads, but not what it compiled: skipped under the function's name."""

    def __init__(self, function: str, why: str) -> None:
        super().__init__(why)
        self.function = function


def read_event(event: Mapping[str, Any]) -> Event | None:
    """The event a JSON object of the agent is (None: a kind this aotpack does not know); KeyError, TypeError,
    ValueError or AttributeError where it does not hold what its kind says."""
    reader = READERS.get(str(event.get("event")))
    return None if reader is None else reader(event)


def _sources(event: Mapping[str, Any]) -> dict[str, str]:
    sources = dict(event.get("sources") or {})
    if not all(isinstance(name, str) and isinstance(text, str) for name, text in sources.items()):
        raise TypeError("its sources are not texts by file name")
    for name in sources:  # written into kernels/ (write.py): a name that leaves it is no event of the agent's
        if not is_file_name(name):
            raise TypeError(f"a written-out source's name is not a file name in kernels/: {name!r:.50}")
    return sources


def is_file_name(name: str) -> bool:
    """A written-out source's name as a recording may hold it: one file of ``kernels/``, a ``.py`` (no folder, no
    hidden or special name, nothing a terminal or a file system treats otherwise)."""
    return (0 < len(name) <= 128 and name.endswith(".py") and not name.startswith((".", "-"))
            and all(c.isascii() and (c.isalnum() or c in "._-") for c in name))  # fmt: skip


# a descriptor's block as Triton's signature spells it (tensordesc<fp16[128, 64]>): plain numbers
_BLOCK = re.compile(r"tensordesc<\w+\[(?P<block>[^\]]*)\]")


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r:.50} is not a type's name")
    block = _BLOCK.match(value)
    if block and not all(d.isascii() and d.isdigit() and len(d) <= MAX_DIGITS
                         for d in (d.strip() for d in block["block"].split(","))):  # fmt: skip
        raise ValueError(f"{value!r:.60} is not a tensor descriptor's type (its block: numbers of at most "
                         f"{MAX_DIGITS} digits)")  # fmt: skip
    return value


def _indices(path: Iterable[object]) -> Indices:
    given = tuple(path)
    out = tuple(i for i in given if isinstance(i, int))
    if len(out) != len(given):
        raise TypeError(f"{path!r:.50} is not a list of parameter indices")
    return out


# ---------------------------------------------------------------- what a recording saw


@dataclass(frozen=True, kw_only=True)
class Compilation:
    """One compilation the JIT performed: the function, and what its code was specialized for."""

    function: Function
    params: tuple[tuple[str, bool], ...]  # (name, is a constexpr), in the signature's order
    # runtime arguments: Triton type ('*fp16', 'i32', 'tensordesc<fp16[64, 64]>'); '' when folded
    types: tuple[tuple[str, str], ...]
    states: tuple[str, ...]  # runtime arguments: 'D', '1', 'N' or ''
    constexprs: tuple[tuple[str, Any], ...]  # values as recipes write them (plain, or tagged: see _recipe_value)
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, Json], ...]  # launch options that change the code, where not Triton's defaults
    arch: int  # compute capability, e.g. 90
    launches: int = 0

    @property
    def ident(self) -> Ident:
        return (self.function.identity, self.arch, self.variant)

    @property
    def variant(self) -> Row:
        """What a recipe row says of it (the kernel and the targets are said elsewhere)."""
        consts = json.dumps(self.constexprs, sort_keys=True)
        return (self.types, self.states, consts, self.num_warps, self.num_stages, self.options)


_DEFAULT_OPTIONS = LAUNCH_DEFAULTS  # launch options that select other code, and Triton's defaults


class Unrecordable(ValueError):
    """A compilation whose constexprs hold a value no recipe can say (the message says which)."""


def _recipe_value(encoded: Any, where: str) -> Any:
    """A constexpr's value as a recipe writes it, from the agent's encoding: plain values, ``{dtype: fp16}``,
    ``{torch_dtype: float16}``, ``{tuple: [...]}``, ``{function: "module:name"}`` (or a written-out file)."""
    if not isinstance(encoded, dict):
        return encoded
    if "tuple" in encoded:
        return {"tuple": [_recipe_value(v, where) for v in encoded["tuple"]]}
    if "function" in encoded:
        return {"function": Function.from_json(encoded["function"]).ref}
    if "dtype" in encoded or "torch_dtype" in encoded:
        return dict(encoded)
    raise Unrecordable(
        f"constexpr {where} is a {encoded.get('unknown', '?')} ({encoded.get('repr', '')}), which no "
        "recipe can say: a number, boolean, string, None, dtype, tuple or @triton.jit function can"
    )


def compilation(event: Compile) -> Compilation:
    """The Compilation a compile event says."""
    types: list[tuple[str, str]] = []
    states: list[State] = []
    consts = []
    for index, (name, is_constexpr) in enumerate(event.params):
        if is_constexpr:
            consts.append((name, _recipe_value(event.constants.get((index,)), name)))
            continue
        kind = event.signature.get(name, "")
        if kind == "constexpr":  # folded by the JIT: equal to 1, or None
            value = event.constants.get((index,))
            types.append((name, ""))
            states.append(ONE if value == 1 else NONE)
            continue
        if kind.startswith("tensordesc"):  # a host TensorDescriptor: the JIT keys it on its type alone
            types.append((name, descriptor_type(kind, name)))
            states.append(ANY)
            continue
        divisible = any(a[0] == "tt.divisibility" and a[1] == 16 for a in event.attrs.get((index,), ()))
        types.append((name, ("*" if kind.startswith("*") else "") + _dtype(kind.lstrip("*"))))
        states.append(DIV16 if divisible else ANY)
    options = event.options
    kept = tuple((k, options[k]) for k in _DEFAULT_OPTIONS if k in options and options[k] != _DEFAULT_OPTIONS[k])
    return Compilation(
        function=event.function, params=event.params, types=tuple(types), states=tuple(states),
        constexprs=tuple(consts), num_warps=event.num_warps, num_stages=event.num_stages, options=kept,
        arch=event.arch,
    )  # fmt: skip


_DESCRIPTOR = re.compile(r"tensordesc<(?P<dtype>[^\[>,]+)\[(?P<block>[\d, ]+)\](?P<rest>.*)>")


def descriptor_type(kind: str, name: str) -> str:
    """A descriptor argument's type as recipes write it, ``tensordesc<bf16[64, 128]>``, from what the JIT's
    signature says of a host ``TensorDescriptor`` (Triton 3.6 and 3.9 write exactly that form). A layout after
    the block (``tensordesc<bf16[64, 128],#shared>``: Gluon's descriptors) is one aotpack cannot encode: a
    ValueError that says so."""
    m = _DESCRIPTOR.fullmatch(kind)
    if m is None:
        raise ValueError(f"argument {name} is a tensor descriptor of a form aotpack does not read ({kind!r:.80})")
    if m["rest"].strip():
        raise ValueError(f"argument {name} is a tensor descriptor with the layout {m['rest'].lstrip(', ')!r:.80}, "
                         "which aotpack cannot encode (it encodes a host TensorDescriptor's tiled map)")  # fmt: skip
    block = ", ".join(d.strip() for d in m["block"].split(","))
    return f"tensordesc<{_dtype(m['dtype'].strip())}[{block}]>"


def _dtype(triton_name: str) -> str:
    """aotpack's name of a type in Triton's signature ('fp16', 'i32'; Triton's booleans are 'u1' or 'i1')."""
    known = facts.dtypes()
    if triton_name in known:
        return triton_name
    for name, d in known.items():
        if d.triton_name == triton_name:
            return name
    raise ValueError(f"type {triton_name!r} has no aotpack dtype")


@dataclass
class Events:
    """What a recording saw: compilations (with launch counts), autotuner picks, the written-out sources,
    and what could not be recorded (function -> why)."""

    compiled: dict[Ident, Compilation] = field(default_factory=dict)
    picks: dict[str, list[Json]] = field(default_factory=dict)  # identity -> picks
    sources: dict[str, str] = field(default_factory=dict)  # file name -> text
    skipped: dict[str, str] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # a process whose Triton aotpack is not tested with
    tritons: set[str] = field(default_factory=set)  # the Triton releases the program's processes ran
    cached: dict[str, Cached] = field(default_factory=dict)  # cache entries of other callers' kernels, by key
    entries: Path | None = None  # the folder the agent copied them into (<key>/<files>)
    inductor: tuple[Path, ...] = ()  # torch.compile's caches each process saved (<digest>.bin, beside its .json)
    _numbers: dict[tuple[str, int], Ident] = field(default_factory=dict)  # (process, number) -> ident
    _launches: dict[Ident, int] = field(default_factory=dict)

    def add(self, event: Mapping[str, Any], process: str = "") -> None:
        """One event of ``process`` (a JSON object the agent wrote, or a report's: read elsewhere, possibly
        damaged, so one that does not hold what its kind says is skipped and said, never raised)."""
        try:
            read = read_event(event)
        except Unreadable as exc:
            self.skipped[exc.function] = str(exc)
            return
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.skipped[f"an event of {process or 'the program'}"] = f"not one aotpack reads ({exc!r:.100})"
            return
        if read is not None:
            self._add(read, process)

    def _add(self, event: Event, process: str) -> None:
        if isinstance(event, Compile):
            self.sources.update(event.sources)
            try:
                c = compilation(event)
            except (Unrecordable, ValueError, KeyError, TypeError, AttributeError) as exc:
                self.skipped[event.function.ref] = str(exc)
                return
            self.compiled.setdefault(c.ident, c)
            self._numbers[(process, event.number)] = c.ident
        elif isinstance(event, Launches):
            for number, count in event.counts.items():
                ident = self._numbers.get((process, number))
                if ident is not None:
                    self._launches[ident] = self._launches.get(ident, 0) + count
        elif isinstance(event, Picks):
            self.sources.update(event.sources)
            mine = self.picks.setdefault(event.function.identity, [])
            mine += [p for p in event.picks if p not in mine]
        elif isinstance(event, Skipped):
            self.skipped[event.function] = event.why
        elif isinstance(event, Triton):
            self.tritons.add(event.version)
        elif isinstance(event, Cached):
            self.cached.setdefault(event.key, event)
        elif event.why not in self.refused:
            self.refused.append(event.why)

    def compilations(self) -> list[Compilation]:
        return [replace(c, launches=self._launches.get(ident, 0)) for ident, c in self.compiled.items()]


def read_events(folder: Path) -> Events:
    """The events every process of a recorded program wrote into ``folder`` (a line each; a process killed
    while writing leaves at most its last line short, which is skipped)."""
    events = Events(entries=folder / ENTRIES)
    sets = folder / INDUCTOR
    if sets.is_dir():  # (a set's .json is written after its .bin: a process killed between leaves no set)
        events.inductor = tuple(p.with_suffix(".bin") for p in sorted(sets.glob("*.json")))
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # as misses.read_reports reads the program's reports
                continue
            if isinstance(event, dict):
                events.add(event, path.stem)
    return events
