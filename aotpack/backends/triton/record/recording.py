"""``aotpack record``: run a workload under Triton's JIT and write the recipe of what it compiled.

The program runs as a child process with aotpack's agent installed in every Python process of it
(``record_agent.py``: Triton's ``jit_cache_hook``, called before each compile with the signature, constants,
attributes and options, and ``launch_enter_hook``, both chained after hooks already there); each compilation
reaches aotpack as it happens, launch counts and autotuner picks at each process's exit. ``run`` says how the
program ended:

- it exits 0, or is stopped by SIGINT or SIGTERM (aotpack passes them on: how a server ends): the recording is
  merged into the recipe;
- it never starts, exits non-zero or crashes: the recipe is left as it was, what was captured is written
  beside it as ``<recipe>.partial.yaml``, and aotpack fails (RecordError, exit 7) naming the program's status.

The recipe (``recipe_text``) lists each kernel once, as ``launch: triton`` (Triton's launch syntax, see
aot_kernels.Launcher) with exactly the variants seen: types, constexprs (of every kind the JIT takes: numbers,
booleans, strings, None, dtypes, tuples, @triton.jit functions) and options, and the JIT's specialization class
of every argument. A kernel a fresh process could not import by module path is written out beside the recipe
(``kernels/<sha>.py``) and named by that file; the order is deterministic (diff-friendly).

Merging into an existing recipe changes only what the recording adds: targets, kernels, rows and autotuner picks
it lacks (and a recorded kernel's ``types``, ``args`` and ``options`` where a new row needs them, such as a new
dtype). Everything else stays as written (comments, key order, quoting, keys record does not write, kernels
written by hand): ruamel.yaml's round trip edits those nodes, and only the lines it changed replace the file's
(``merged_text``). A row already there is kept as written, its launch count included: the count is what the
recording that added the row saw, and re-recording what a recipe holds leaves the file byte-identical (it is
not written at all).
"""

from __future__ import annotations

import collections
import contextlib
import difflib
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import Comment, CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.representer import RoundTripRepresenter

from .... import facts
from ...._temp import atomic_file, write_file
from ....errors import Location, RecipeError, RecordError, UsageError
from ....recipe import yamlnodes
from ....runtime import aot_kernels
from ... import recipes as recipe
from .. import releases
from . import agent as record_agent
from . import misses as misses_

RUNTIME_FILE = Path(aot_kernels.__file__)


@dataclass(frozen=True, kw_only=True)
class Function:
    """A recorded @triton.jit function: where a build finds it (its module, or the source written out: a file
    name), and its source identity (aot_kernels.identity)."""

    module: str
    qualname: str
    name: str
    identity: str
    source: str | None = None  # the written-out source's file name, when the module is not importable elsewhere

    @property
    def ref(self) -> str:
        """How a recipe names it: ``module:qualname``, or ``kernels/<file>:<name>``."""
        return f"kernels/{self.source}:{self.name}" if self.source else f"{self.module}:{self.qualname}"

    @staticmethod
    def of(described: dict[str, Any]) -> Function:
        return Function(module=str(described["module"]), qualname=str(described["qualname"]),
                        name=str(described.get("name") or described["qualname"].rpartition(".")[2]),
                        identity=str(described["identity"]), source=described.get("source"))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Compilation:
    """One compilation the JIT performed: the function, and what its code was specialized for."""

    function: Function
    params: tuple[tuple[str, bool], ...]  # (name, is a constexpr), in the signature's order
    types: tuple[tuple[str, str], ...]  # runtime arguments: Triton type ('*fp16', 'i32'); '' when folded
    states: tuple[str, ...]  # runtime arguments: 'D', '1', 'N' or ''
    constexprs: tuple[tuple[str, Any], ...]  # values as recipes write them (plain, or tagged: see _recipe_value)
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, Any], ...]  # launch options that change the code, where not Triton's defaults
    arch: int  # compute capability, e.g. 90
    launches: int = 0

    @property
    def ident(self) -> tuple[Any, ...]:
        return (self.function.identity, self.arch, *self.variant)

    @property
    def variant(self) -> tuple[Any, ...]:
        """What a recipe row says of it (the kernel and the targets are said elsewhere)."""
        consts = json.dumps(self.constexprs, sort_keys=True)
        return (self.types, self.states, consts, self.num_warps, self.num_stages, self.options)


_DEFAULT_OPTIONS = aot_kernels.LAUNCH_DEFAULTS  # launch options that select other code, and Triton's defaults


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
        return {"function": Function.of(encoded["function"]).ref}
    if "dtype" in encoded or "torch_dtype" in encoded:
        return dict(encoded)
    raise Unrecordable(
        f"constexpr {where} is a {encoded.get('unknown', '?')} ({encoded.get('repr', '')}), which no "
        "recipe can say: a number, boolean, string, None, dtype, tuple or @triton.jit function can"
    )


def compilation(event: dict[str, Any]) -> Compilation:
    """A Compilation from an agent's compile event (record_agent.Agent)."""
    function = Function.of(event["function"])
    params = [(str(n), bool(c)) for n, c in event["function"]["params"]]
    signature = event["signature"]
    constants = {tuple(path): value for path, value in event["constants"]}
    attrs = {tuple(path): values for path, values in event["attrs"]}
    types, states, consts = [], [], []
    for index, (name, is_constexpr) in enumerate(params):
        if is_constexpr:
            consts.append((name, _recipe_value(constants.get((index,)), name)))
            continue
        kind = signature.get(name, "")
        if kind == "constexpr":  # folded by the JIT: equal to 1, or None
            value = constants.get((index,))
            types.append((name, ""))
            states.append("1" if value == 1 else "N")
            continue
        divisible = any(a[0] == "tt.divisibility" and a[1] == 16 for a in attrs.get((index,), ()))
        types.append((name, ("*" if kind.startswith("*") else "") + _dtype(kind.lstrip("*"))))
        states.append("D" if divisible else "")
    options = event.get("options") or {}
    kept = tuple((k, options[k]) for k in _DEFAULT_OPTIONS if k in options and options[k] != _DEFAULT_OPTIONS[k])
    return Compilation(
        function=function, params=tuple(params), types=tuple(types), states=tuple(states), constexprs=tuple(consts),
        num_warps=int(event["num_warps"]), num_stages=int(event["num_stages"]), options=kept,
        arch=int(event.get("arch") or 0),
    )  # fmt: skip


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

    compiled: dict[tuple[Any, ...], Compilation] = field(default_factory=dict)
    picks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # identity -> picks
    sources: dict[str, str] = field(default_factory=dict)  # file name -> text
    skipped: dict[str, str] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # a process whose Triton aotpack is not tested with
    _numbers: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)  # (process, number) -> ident
    _launches: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def add(self, event: dict[str, Any], process: str = "") -> None:
        """One event of ``process`` (one the agent wrote, or a report's: read elsewhere, possibly damaged, so one
        that does not hold what its kind says is skipped and said, never raised)."""
        try:
            self._add(event, process)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.skipped[f"an event of {process or 'the program'}"] = f"not one aotpack reads ({exc!r:.100})"

    def _add(self, event: dict[str, Any], process: str) -> None:
        kind = event.get("event")
        self.sources.update(event.get("sources") or {})
        if kind == "compile":
            function = Function.of(event["function"])
            try:
                c = compilation(event)
            except (Unrecordable, ValueError, KeyError, TypeError, AttributeError) as exc:
                self.skipped[function.ref] = str(exc)
                return
            self.compiled.setdefault(c.ident, c)
            self._numbers[(process, int(event.get("number", -1)))] = c.ident
        elif kind == "launches":
            for number, count in (event.get("counts") or {}).items():
                ident = self._numbers.get((process, int(number)))
                if ident is not None:
                    self._launches[ident] = self._launches.get(ident, 0) + int(count)
        elif kind == "picks":
            mine = self.picks.setdefault(Function.of(event["function"]).identity, [])
            mine += [p for p in event.get("picks") or () if p not in mine]
        elif kind == "skipped":
            self.skipped[str(event.get("function"))] = str(event.get("why"))
        elif kind == "refused" and str(event.get("why")) not in self.refused:
            self.refused.append(str(event.get("why")))

    def compilations(self) -> list[Compilation]:
        return [replace(c, launches=self._launches.get(ident, 0)) for ident, c in self.compiled.items()]


def read_events(folder: Path) -> Events:
    """The events every process of a recorded program wrote into ``folder`` (a line each; a process killed
    while writing leaves at most its last line short, which is skipped)."""
    events = Events()
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # as misses.read_reports reads the program's reports
                continue
            if isinstance(event, dict):
                events.add(event, path.stem)
    return events


class Recording:
    """A recording in this process (``recording()``; tests drive its hooks directly): the agent's hooks, each
    event kept in memory."""

    def __init__(self) -> None:
        self.events = Events()
        self.agent = record_agent.Agent(sink=self.events.add)

    def on_compile(self, **hook: Any) -> Any:
        return self.agent.on_compile(**hook)

    def start(self) -> None:
        self.agent.install()

    def stop(self) -> None:
        self.agent.uninstall()
        self.agent.finish()


@contextlib.contextmanager
def recording(path: str | os.PathLike[str] | None = None, package: str = "recorded_kernels") -> Iterator[Recording]:
    """Record what Triton's JIT compiles inside the block, in this process; with ``path``, write (or merge into)
    that recipe on the way out, when anything was compiled."""
    rec = Recording()
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()
        if path is not None and rec.events.compiled:
            write(Path(path), rec.events, package)


# ---------------------------------------------------------------- running the program


@dataclass(frozen=True)
class Outcome:
    """How a recorded program ended: its exit status (negative: the signal that ended it), and whether aotpack
    passed a SIGINT or SIGTERM on to it (a server stopped the way servers are)."""

    status: int
    stopped: bool

    @property
    def ok(self) -> bool:
        return self.status == 0 or (self.stopped and self.status in (-signal.SIGINT, -signal.SIGTERM, 130, 143))


def command(argv: list[str]) -> list[str]:
    """The program to run: ``python`` (or ``python3``) is the interpreter aotpack runs in; anything else is found
    on PATH as the shell would (a console script such as ``vllm`` or ``torchrun``)."""
    if not argv:
        raise RecordError("give the program to record after --, e.g. aotpack record -o r.yaml -- python run.py")
    first = argv[0]
    if first in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    found = shutil.which(first)
    if found is None:
        raise RecordError(f"no such program: {first} (not a file, and not on PATH)")
    return [found, *argv[1:]]


def run(argv: list[str], folder: Path, extra_env: dict[str, str] | None = None) -> Outcome:
    """Run the program with the agent in every Python process of it, its events written into ``folder /
    "events"``; SIGINT and SIGTERM sent to aotpack go on to the program."""
    cmd = command(argv)
    agent_dir = folder / "agent"
    write_file(agent_dir / "sitecustomize.py", Path(record_agent.__file__).read_bytes())
    write_file(agent_dir / "_aotpack_kernels.py", RUNTIME_FILE.read_bytes())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(agent_dir), env.get("PYTHONPATH")]))
    env[record_agent.ENV_DIR] = str(folder / "events")
    env[record_agent.ENV_TESTED] = ",".join(f"{a}.{b}" for a, b in releases.SUPPORTED)
    env.update(extra_env or {})
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as exc:
        raise RecordError(f"could not start {cmd[0]}: {exc.strerror}") from None
    stopped = False

    def pass_on(signum: int, _frame: Any) -> None:
        nonlocal stopped
        stopped = True
        child.send_signal(signum)

    previous = {s: signal.signal(s, pass_on) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return Outcome(status=status, stopped=stopped)


@dataclass(frozen=True)
class Summary:
    """What ``record`` did: the events, the class misses the program's aotpack packages reported, and whether
    the recipe was written (not where it held every row already)."""

    events: Events
    misses: list[misses_.Miss]
    written: bool


def record(argv: list[str], out: Path, package: str, widen: dict[str, list[Any]] | None = None) -> Summary:
    """Run the program recorded and merge what it compiled into the recipe ``out`` (module docstring: the
    outcomes). Class misses of aotpack packages it ran come back too (``AOTPACK_REPORT``)."""
    check_package(package)
    existing_recipe(out)  # a malformed recipe fails before the program runs
    with tempfile.TemporaryDirectory(prefix="aotpack-record-") as tmp:
        folder = Path(tmp)
        outcome = run(argv, folder, {"AOTPACK_REPORT": str(folder / "reports")})
        events = read_events(folder / "events") if (folder / "events").is_dir() else Events()
        # class misses of the aotpack packages it ran (what they let the JIT compile, the agent saw too)
        reported = misses_.read_reports([folder / "reports"]).misses if (folder / "reports").is_dir() else []
    if events.refused:  # the program ran with a Triton aotpack is not tested with: nothing was recorded
        raise RecordError(f"{events.refused[0]}; {out} is left as it was")
    if not outcome.ok:
        raise RecordError(f"the recorded program {_status(outcome.status)}: {out} is left as it was"
                          f"{_keep_partial(out, events, package)}")  # fmt: skip
    try:
        written = bool(events.compiled) and write(out, events, package, widen=widen)
    except (RecordError, RecipeError) as exc:  # the recipe changed during the run, or cannot take these rows
        raise type(exc)(f"{exc}{_keep_partial(out, events, package)}") from None
    return Summary(events=events, misses=reported, written=written)


def check_package(package: str) -> None:
    """The name of a new recipe's package (``--package``): refused before anything runs or is written."""
    problem = recipe.package_problem(package)
    if problem is not None:
        raise UsageError(f"--package {package!r}: {problem}")


def _keep_partial(out: Path, events: Events, package: str) -> str:
    """What a recording that cannot be merged captured, written beside ``out`` as ``<out>.partial.yaml``; the
    words that say so (none when nothing was compiled)."""
    if not events.compiled:
        return ""
    partial = out.with_name(out.name.removesuffix(".yaml").removesuffix(".yml") + ".partial.yaml")
    write(partial, events, package, merge=False)
    return f"; what it compiled ({len(events.compiled)} compilations) is in {partial}"


def _status(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"


# ---------------------------------------------------------------- widening


MAX_WIDEN = 4096  # values one --widen may give


def parse_widen(text: str) -> tuple[str, list[int | float | bool | str]]:
    """``NAME=VALUES`` of ``--widen``: VALUES a comma-separated list (``1,2,4,8``), a range of integers
    (``1..64``), or of powers of two (``1..256:pow2``). UsageError says what is wrong."""
    shown = text if len(text) <= 60 else f"{text[:60]}..."  # what messages quote of it
    name, sep, values = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageError(f"--widen {shown!r}: expected NAME=VALUES, e.g. bs=1,2,4,8 or bs=1..256:pow2")
    ranged = re.fullmatch(r"(-?[0-9]{1,18})\.\.(-?[0-9]{1,18})(:pow2)?", values)
    found: list[int | float | bool | str]
    if ranged:
        low, high, pow2 = int(ranged[1]), int(ranged[2]), bool(ranged[3])
        if pow2 and low <= 0:
            raise UsageError(f"--widen {shown!r}: a range of powers of two starts above 0")
        found = [1 << e for e in range(low.bit_length() - 1, high.bit_length()) if low <= 1 << e <= high] if pow2 \
            else list(range(low, high + 1)) if high - low < MAX_WIDEN else []  # fmt: skip
    else:
        found = [_widen_value(v, shown) for v in values.split(",")]
    if not found or len(found) > MAX_WIDEN:
        raise UsageError(f"--widen {shown!r}: give between 1 and {MAX_WIDEN} values")
    return name, list({(type(v), v): v for v in found}.values())  # 1 and true are two values


def _widen_value(text: str, whole: str) -> int | float | bool | str:
    """One value of ``--widen``: a whole number of i64, a finite number, true/false, or a string of printable
    characters (a constexpr Triton takes as text)."""
    text = text.strip()
    if re.fullmatch(r"-?[0-9]+", text):
        if len(text.lstrip("-")) > 18:
            raise UsageError(f"--widen {whole!r}: {text[:30]!r}... is past a 64-bit integer")
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[0-9.]+([eE][-+]?[0-9]+)?", text):
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"--widen {whole!r}: {text[:30]!r} is not a finite number")
        return number
    if not text or not text.isprintable():
        raise UsageError(f"--widen {whole!r}: {text!r} is not a value (a number, true, false or printable text)")
    return text


def widened(compiled: list[Compilation], widen: dict[str, list[Any]]) -> list[Compilation]:
    """Each compilation with a widened constexpr takes the set of values (a list: the recipe builds their
    product); compilations that a widened one covers are folded into it (their launches added)."""
    out: dict[tuple[Any, ...], Compilation] = {}
    for c in compiled:
        consts = dict(c.constexprs)
        for name, values in widen.items():
            if name in consts:
                have = consts[name] if isinstance(consts[name], list) else [consts[name]]
                consts[name] = sorted(dict.fromkeys([*have, *values]), key=lambda v: (str(type(v)), v))
        c = replace(c, constexprs=tuple(consts.items()))
        same = out.get(c.variant)
        out[c.variant] = replace(c, launches=c.launches + (same.launches if same else 0))
    return list(out.values())


# ---------------------------------------------------------------- the recipe


def write(path: Path, events: Events, package: str, merge: bool = True,
          widen: dict[str, list[Any]] | None = None) -> bool:  # fmt: skip
    """Write the recipe of a recording to ``path``, merged into what is there (``widen``: constexprs given sets
    of values), with the sources it names written out beside it (``kernels/``; each file atomically). False:
    the recipe already held all of it, and was not written."""
    existing = existing_recipe(path) if merge else None
    compiled = events.compilations()
    for name in sorted({c.function.source for c in compiled if c.function.source} | _function_sources(compiled)):
        source = path.parent / "kernels" / name
        if name in events.sources and not (source.is_file() and source.read_bytes() == events.sources[name].encode()):
            source.parent.mkdir(exist_ok=True)
            with atomic_file(source) as f:
                f.write(events.sources[name].encode())
    dropped, widen = events.skipped, widen or {}
    if existing is None or existing.data is None:  # a new recipe (under the comments of an empty file)
        lines = (existing.text if existing else "").splitlines(keepends=True)
        kept = "".join(line for line in lines if line.lstrip().startswith("#"))
        text: str | None = kept + recipe_text(compiled, events.picks, None, package, widen, dropped=dropped)
    else:
        text = merged_text(existing, path, recipe_data(compiled, events.picks, existing.data, package, widen, dropped))
    if text is None:
        return False
    with atomic_file(path) as f:
        f.write(text.encode())
    return True


@dataclass(frozen=True)
class Existing:
    """The recipe a recording merges into: its text, its data (None: it holds only comments), how it indents
    (mapping, sequence, the dash's offset), which the lines a merge adds take, and its round-trip document
    (ruamel.yaml's; ``merged_text`` edits it)."""

    text: str
    data: dict[str, Any] | None
    indents: tuple[int, int, int]
    doc: Any = None


def existing_recipe(path: Path) -> Existing | None:
    """The recipe a recording merges into (None where there is none yet), checked by the loader and where merging
    reads it: a malformed one is a located RecipeError before anything runs or is written, and before ruamel.yaml
    reads it."""
    if not path.exists():
        return None
    text = yamlnodes.read_text(path, "recipe")
    if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        return Existing(text=text, data=None, indents=_INDENTS)  # nothing to merge into
    root = yamlnodes.parse(text, path, "recipe")
    top = {key: node for key, node, _ in root.items()}
    for target in top["targets"].sequence(allow_scalar=True) if "targets" in top else ():
        target.string()
    for kernel in top["kernels"].mapping(()).values() if "kernels" in top else ():
        fields = kernel.mapping(()) if kernel.is_mapping() else {}
        if "launch" in fields:  # a recorded kernel (one written by hand is kept as it is)
            _check_recorded(fields)
    recipe.from_nodes(root, path)  # anything else the loader refuses is refused here, located, as `plan` says it
    indents = _indents(root.node)
    doc = _load(_round_trip(indents), text, path)  # what the merge reads it with
    return Existing(text=text, data=yaml.safe_load(text), indents=indents, doc=doc)


def _check_recorded(fields: dict[str, yamlnodes.Node]) -> None:
    """What merging reads of a recorded kernel, with located errors where it cannot."""
    args = fields["args"].mapping(()) if "args" in fields else {}
    for kind in args.values():
        kind.string()
    for option in (fields["options"].mapping(()) if "options" in fields else {}).values():
        option.scalar()
    for row in fields["variants"].sequence() if "variants" in fields else ():
        parts = row.mapping((), required=("config", "class"))
        for name, value in parts["config"].mapping(()).items():
            if name in ("num_warps", "num_stages"):
                value.integer(minimum=0)
            else:
                _check_value(value)
        for dtype in (parts["types"].mapping(()) if "types" in parts else {}).values():
            dtype.string()
        if "launches" in parts:
            parts["launches"].integer(minimum=0)
        letters = parts["class"].string()
        if len(letters) != len(args):
            raise parts["class"].fail(f"{letters!r} has {len(letters)} letters; expected one per argument of args "
                                      f"({len(args)}: {', '.join(args) or 'none'})")  # fmt: skip
    for pick in fields["autotuned"].sequence() if "autotuned" in fields else ():
        _check_value(pick)


def _check_value(node: yamlnodes.Node) -> None:
    """A value as recipes write constexprs and picks: values, lists, and mappings keyed by names."""
    if node.is_mapping():
        for value in node.mapping(()).values():
            _check_value(value)
    elif node.is_sequence():
        for item in node.sequence():
            _check_value(item)
    else:
        node.scalar()


_INDENTS = (2, 4, 2)  # how _dump indents: mappings by 2, a list's items by 4 with the dash at 2


def _indents(root: yaml.Node) -> tuple[int, int, int]:
    """How a file indents (mapping, sequence, dash offset, as ruamel.yaml counts them), from its first nested
    block mapping and its first block list below the top level (rows; _dump writes the top level's lists
    otherwise), else the top level's; as _dump does where it has none."""
    mapping = -1
    found: dict[bool, tuple[int, int]] = {}  # (sequence, offset) of the top level's list, and one below it (True)
    stack, seen = [root], set()
    while stack and (mapping < 0 or True not in found):
        node = stack.pop()
        if id(node) in seen or isinstance(node, yaml.ScalarNode):
            continue
        seen.add(id(node))
        pairs = node.value if isinstance(node, yaml.MappingNode) else [(None, item) for item in node.value]
        for key, value in pairs:
            if key is not None and not isinstance(value, yaml.ScalarNode) and not value.flow_style and value.value:
                column = key.start_mark.column
                if isinstance(value, yaml.MappingNode) and mapping < 0:
                    mapping = value.value[0][0].start_mark.column - column
                elif isinstance(value, yaml.SequenceNode):
                    offset = value.start_mark.column - column
                    sequence = max(value.value[0].start_mark.column - column, offset + 2)
                    found.setdefault(node is not root, (sequence, offset))
            stack.append(value)
    sequence, offset = found.get(True) or found.get(False) or _INDENTS[1:]
    return mapping if mapping > 0 else _INDENTS[0], sequence, offset


def _function_sources(compiled: list[Compilation]) -> set[str]:
    """The written-out files that constexprs name (functions passed to kernels)."""
    out: set[str] = set()

    def visit(value: Any) -> None:
        ref = value.get("function") if isinstance(value, dict) else None
        if isinstance(ref, str) and ref.startswith("kernels/"):
            out.add(ref.split("/", 1)[1].partition(":")[0])
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    for c in compiled:
        for _, value in c.constexprs:
            visit(value)
    return out


def recipe_text(compiled: list[Compilation], picks: dict[str, list[dict[str, Any]]],
                existing: dict[str, Any] | None = None, package: str = "recorded_kernels",
                widen: dict[str, list[Any]] | None = None, dropped: dict[str, str] | None = None) -> str:  # fmt: skip
    """The recipe (YAML text, as a new file has it) of these compilations, merged into ``existing`` (a loaded
    recipe); what the recipe cannot say goes into ``dropped`` (what -> why)."""
    return _dump(recipe_data(compiled, picks, existing, package, widen, dropped))


def recipe_data(compiled: list[Compilation], picks: dict[str, list[dict[str, Any]]],
                existing: dict[str, Any] | None = None, package: str = "recorded_kernels",
                widen: dict[str, list[Any]] | None = None,
                dropped: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The recipe of these compilations as data, merged into ``existing`` (a loaded recipe): the rows of a
    kernel the recording has too stay as they are (their launch counts included)."""
    base = existing or {}
    kernels: dict[str, Any] = dict(base.get("kernels") or {})
    by_source = {str(v.get("triton")): n for n, v in kernels.items() if isinstance(v, dict) and v.get("launch")}
    targets = set(_listed(base.get("targets")))
    groups: dict[str, list[Compilation]] = {}
    tuned: dict[str, list[dict[str, Any]]] = {}
    for c in compiled:
        source = c.function.ref
        groups.setdefault(source, []).append(c)
        tuned[source] = picks.get(c.function.identity, [])
        if c.arch:
            targets.add(_target(c.arch))
    for source, group in sorted(groups.items()):
        name = by_source.get(source) or _kernel_name(source.rpartition(":")[2], set(kernels))
        old = kernels.get(name) if isinstance(kernels.get(name), dict) else None
        kept = {c.variant: c for c in _compilations(old)} if old is not None else {}
        fresh: dict[tuple[Any, ...], Compilation] = {}
        for c in group:  # one row twice (per arch): launches added up
            same = fresh.get(c.variant)
            fresh[c.variant] = replace(c, launches=c.launches + (same.launches if same else 0))
        recorded, now = [str(n) for n in (old or {}).get("args") or ()], [n for n, _ in group[0].types]
        if kept and recorded != now:
            raise RecordError(
                f"kernel {name} of the recipe was recorded with the arguments ({', '.join(recorded)}); "
                f"{source} now takes ({', '.join(now)}): delete kernel {name} from the "
                "recipe (or record into another recipe) and record again"
            )
        rows = widened([*kept.values(), *(c for v, c in fresh.items() if v not in kept)], widen or {})
        widened_rows = [c for c in rows if any(isinstance(v, list) for _, v in c.constexprs)]
        rows = [c for c in rows if c in widened_rows or not any(_covers(w, c) for w in widened_rows)]
        picked = list((old or {}).get("autotuned") or ())  # a key picked already keeps its pick, as a row does
        seen = {_tuned_key(p) for p in picked}
        for pick in tuned[source]:  # (an autotuner times anew each run, and may pick another config for a key)
            if _tuned_key(pick) not in seen:
                seen.add(_tuned_key(pick))
                picked.append(pick)
        kernels[name] = _kernel(source, rows, picked, {} if dropped is None else dropped)
        by_source[source] = name
    return {
        "package": base.get("package", package),
        "version": str(base.get("version", "0.1.0")),
        "summary": base.get("summary", "Kernels recorded from a running workload by aotpack record"),
        "targets": sorted(targets),
        "kernels": {n: kernels[n] for n in sorted(kernels)},
    }


def _covers(wide: Compilation, c: Compilation) -> bool:
    """Whether a widened row's product holds compilation ``c``."""
    if (wide.types, wide.states, wide.num_warps, wide.num_stages, wide.options) != (
        c.types,
        c.states,
        c.num_warps,
        c.num_stages,
        c.options,
    ):
        return False
    mine = dict(c.constexprs)
    return all(mine.get(n) in v if isinstance(v, list) else mine.get(n) == v for n, v in wide.constexprs)


def _target(arch: int) -> str:
    name = f"sm_{arch}"
    return f"{name}a" if name not in facts.archs() or not facts.archs()[name].triton else name


def _kernel_name(function: str, taken: set[str]) -> str:
    base = function.split(".")[-1].lstrip("_") or "kernel"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


_MERGED = Function(module="", qualname="", name="", identity="")  # rows of an earlier recording


def _compilations(kernel: dict[str, Any]) -> list[Compilation]:
    """The compilations an earlier recording wrote as a kernel's variants (to merge a new one in)."""
    args = kernel.get("args") or {}
    out = []
    for row in kernel.get("variants") or ():
        binding = row.get("types") or {}
        config = dict(row["config"])
        warps, stages = int(config.pop("num_warps", 4)), int(config.pop("num_stages", 3))
        letters = str(row["class"])
        types = []
        for (name, kind), letter in zip(args.items(), letters, strict=False):
            dtype = str(kind).lstrip("*")
            dtype = binding.get(dtype, dtype)
            types.append((name, "" if letter in "1N" else ("*" if str(kind).startswith("*") else "") + dtype))
        out.append(Compilation(
            function=_MERGED, params=(), types=tuple(types),
            states=tuple("" if ch == "_" else ch for ch in letters), constexprs=tuple(config.items()),
            num_warps=warps, num_stages=stages, options=tuple((kernel.get("options") or {}).items()), arch=0,
            launches=int(row.get("launches", 0)),
        ))  # fmt: skip
    return out


def _kernel(source: str, group: list[Compilation], picks: list[dict[str, Any]], dropped: dict[str, str]) -> Any:
    """A `launch: triton` kernel of the recipe from one function's compilations."""
    runtime = [n for n, _ in group[0].types]
    # a pointer argument's dtype per compilation; arguments whose columns agree share a type variable
    columns: dict[str, tuple[str, ...]] = {}
    scalar: dict[str, str] = {}
    for index, name in enumerate(runtime):
        kinds = [c.types[index][1] for c in group]
        known = [k for k in kinds if k]
        if any(k.startswith("*") for k in known) or any(c.states[index] == "N" for c in group):
            fill = next((k for k in known if k.startswith("*")), "*i8")  # always None: any pointer type serves
            columns[name] = tuple((k or fill)[1:] for k in kinds)
        else:
            scalar[name] = max(set(known), key=known.count) if known else "i32"
    typevars: dict[tuple[str, ...], str] = {}
    for col in columns.values():
        if len(set(col)) > 1 and col not in typevars:
            typevars[col] = "T" if not typevars else f"T{len(typevars)}"
    args = {}
    for name in runtime:
        if name in columns:
            col = columns[name]
            args[name] = "*" + (typevars[col] if col in typevars else col[0])
        else:
            args[name] = scalar[name]
    types = {var: sorted(set(col)) for col, var in typevars.items()}
    rows = {}
    for i, c in enumerate(group):
        other = [(n, c.types[j][1]) for j, n in enumerate(runtime)
                 if c.types[j][1] and not c.types[j][1].startswith("*") and c.types[j][1] != scalar.get(n)]  # fmt: skip
        if other:  # a scalar the JIT typed otherwise here (an i64 past i32's range): one type per argument
            config = ", ".join(f"{k}={v!r}" for k, v in c.constexprs)
            dropped[f"{source} ({config or 'no constexprs'}, num_warps={c.num_warps})"] = (
                ", ".join(f"{n} was {t}" for n, t in other) + " here, " + ", ".join(f"{scalar[n]} in the kernel's "
                "other variants" for n, _ in other[:1]) + ": a recipe kernel takes one type per scalar argument; "
                "record this call into a recipe of its own")  # fmt: skip
            continue
        row: dict[str, Any] = {}
        if typevars:
            row["types"] = {var: col[i] for col, var in typevars.items()}
        row["config"] = {**dict(c.constexprs), "num_warps": c.num_warps, "num_stages": c.num_stages}
        row["class"] = "".join(s or "_" for s in c.states)
        row["launches"] = c.launches
        rows[_row_key(row)] = row
    kernel: dict[str, Any] = {"triton": source, "launch": "triton"}
    if types:
        kernel["types"] = types
    kernel["args"] = args
    options = dict(group[0].options)
    if options:
        kernel["options"] = options
    kernel["variants"] = [rows[k] for k in sorted(rows)]
    if picks:
        unique = {json.dumps(p, sort_keys=True, default=str): p for p in picks}
        kernel["autotuned"] = [unique[k] for k in sorted(unique)]
    return kernel


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps([row.get("types"), row.get("config"), row.get("class")], sort_keys=True, default=str)


def _dump(recipe: dict[str, Any]) -> str:
    """YAML with one line per variant and per autotuner pick (diff-friendly)."""
    head = {k: v for k, v in recipe.items() if k != "kernels"}
    lines = ["# Written by aotpack record: the kernels a workload ran under Triton's JIT, each variant as the",
             "# JIT compiled it (types, constexprs and options, and its class: per argument D = 16-divisible or",
             "# aligned, 1 = equal to 1, N = None, _ = nothing). Build it with: aotpack build <this file>",
             yaml.safe_dump(head, sort_keys=False, width=1 << 16).rstrip(), "kernels:"]  # fmt: skip
    for name, kernel in recipe["kernels"].items():
        lines += _kernel_lines(name, kernel)
    return "\n".join(lines) + "\n"


def _kernel_lines(name: str, kernel: dict[str, Any]) -> list[str]:
    lines = [f"  {_flow(name)}:"]
    for key, value in kernel.items():
        if key in ("variants", "autotuned") and isinstance(value, list):
            lines.append(f"    {key}:")
            lines += [f"      - {_flow(row)}" for row in value]
        else:
            lines.append(f"    {key}: {_flow(value)}")
    return lines


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()


# ---------------------------------------------------------------- merging into a recipe as it is written


_TOP_ORDER = ("package", "version", "summary", "targets", "kernels")  # where _dump writes them
_KERNEL_ORDER = ("triton", "launch", "types", "args", "options", "variants", "autotuned")


def merged_text(existing: Existing, path: Path, wanted: dict[str, Any]) -> str | None:
    """``existing``'s text with what ``wanted`` (recipe_data of it and a recording) adds: the targets, kernels,
    rows and autotuner picks it lacks, and a recorded kernel's types, args and options where new rows change
    them. The rest stays as written: ruamel.yaml's round trip changes only those nodes, and only the lines it
    changed replace the file's (``_splice``). None: the recipe holds it all already."""
    assert existing.data is not None and existing.doc is not None
    rt, doc = _round_trip(existing.indents), existing.doc
    before = _render(rt, doc)
    if _said(before) != json.dumps(existing.data, default=str):  # what merging takes of ruamel.yaml's lines
        raise RecordError(f"{path}: ruamel.yaml, which merges a recording into it, would write some of it as "
                          "saying something else; record into another recipe (-o) and merge the two by "
                          "hand")  # fmt: skip
    new = _Verbatim(existing.text)
    if not _merge(new, doc, existing.data, wanted):
        return None
    after = new.fill(_render(rt, doc))
    try:
        intended = _said(after)
    except yaml.YAMLError as exc:  # aotpack's own edit broke it: a bug, said as such
        raise RecordError(f"merging into {path} would make it unreadable ({exc}); it is left unchanged") from None
    text = _splice(existing.text, before, after)
    with contextlib.suppress(yaml.YAMLError):
        if _said(text) == intended:
            return text
    return after  # the file's lines and ruamel.yaml's do not fit together: its rendering whole


def _said(text: str) -> str:
    """What a YAML text says, as aotpack reads it (PyYAML), comparable (NaN equal to NaN)."""
    return json.dumps(yaml.safe_load(text), default=str)


class _Number(str):
    """A number as the file writes it: ruamel.yaml writes numbers it reads anew (a float can lose its last
    digit, ``010`` is 10 to it and 8 to PyYAML), this as written."""

    tag: str | None = None


class _Constructor(RoundTripConstructor):
    def number(self, node: ScalarNode) -> _Number:
        out = _Number(node.value)
        out.tag = node.tag
        return out


class _Representer(RoundTripRepresenter):
    def number(self, data: _Number) -> ScalarNode:
        return self.represent_scalar(data.tag, str(data))


for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    _Constructor.add_constructor(_tag, _Constructor.number)
_Representer.add_representer(_Number, _Representer.number)


def _round_trip(indents: tuple[int, int, int]) -> YAML:
    rt = YAML(typ="rt")
    rt.Constructor, rt.Representer = _Constructor, _Representer
    rt.preserve_quotes = True
    rt.width = 1 << 16  # no line wrapping: a row is a line
    mapping, sequence, offset = indents
    rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    return rt


def _load(rt: YAML, text: str, path: Path) -> Any:
    """The round-trip document of a recipe yamlnodes has read (so within its bounds, aliases counted)."""
    try:
        return rt.load(text)
    except RuamelError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = Location(str(path), mark.line + 1, mark.column + 1) if mark else None
        problem = getattr(exc, "problem", None) or exc
        raise RecipeError(f"ruamel.yaml, which aotpack record merges with, cannot read this: {problem}; correct "
                          "it here", where) from None  # fmt: skip


def _render(rt: YAML, doc: Any) -> str:
    out = io.StringIO()
    rt.dump(doc, out)
    return out.getvalue()


def _merge(new: _Verbatim, doc: CommentedMap, data: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Change the round-trip document ``doc`` (loaded as ``data``) into what ``wanted`` says where it adds to
    it; whether anything changed."""
    changed = False  # package, version, summary and every other key it does not add to stay as written
    targets = [t for t in wanted["targets"] if t not in _listed(data.get("targets"))]
    if targets and (doc.get("targets") is None or isinstance(doc.get("targets"), str)):  # none yet, or one alone
        _put(doc, "targets", new(wanted["targets"]), _TOP_ORDER)
    elif targets:
        seq, _ = _own(doc, "targets", False)
        keys = [str(t) for t in seq]
        for target in targets:
            _insert(seq, keys, target, target)
    old = data.get("kernels") or {}
    if doc.get("kernels") is None:
        _put(doc, "kernels", CommentedMap(), _TOP_ORDER)
    kernels, shared = _own(doc, "kernels", False)
    keys = [str(k) for k in kernels]
    for name, kernel in wanted["kernels"].items():
        if name not in old:
            _insert(kernels, keys, name, (name, new.kernel(kernel)))
            changed = True
        elif isinstance(old[name], dict) and old[name].get("launch"):  # recorded; one written by hand is as it is
            changed |= _merge_kernel(new, kernels, name, old[name], kernel, shared)
    return changed or bool(targets)


def _merge_kernel(new: _Verbatim, kernels: CommentedMap, name: str, old: dict[str, Any], want: dict[str, Any],
                  shared: bool) -> bool:  # fmt: skip
    """Give a recorded kernel the rows and picks ``want`` adds (its types, args and options with them); a row
    already there stays as written, launch count included, unless new rows rename its type variables."""
    rows = old.get("variants") or []
    have = [_ident(old, row) for row in rows]
    wanted = {_ident(want, row): row for row in want["variants"]}
    added = [row for ident, row in wanted.items() if ident not in have]
    gone = [i for i, ident in enumerate(have) if ident not in wanted]  # what a widened row now covers
    picked = [_pick_key(p) for p in old.get("autotuned") or ()]
    picks = [p for p in want.get("autotuned") or () if _pick_key(p) not in picked]
    if not (added or gone or picks):
        return False
    node, shared = _own(kernels, name, shared)
    for key in ("types", "args", "options"):
        if key in want and want[key] != old.get(key):
            _put(node, key, new(want[key]), _KERNEL_ORDER)
        elif key not in want and key in node:
            del node[key]
    if added or gone:
        if node.get("variants") is None:
            _put(node, "variants", CommentedSeq(), _KERNEL_ORDER)
        seq, _ = _own(node, "variants", shared)
        keys = [_row_key(row) for row in rows]
        for i, ident in enumerate(have):
            if ident in wanted and wanted[ident].get("types") != rows[i].get("types"):
                seq[i], keys[i] = new(wanted[ident]), _row_key(wanted[ident])
        for i in reversed(gone):
            del seq[i], keys[i]
        for row in added:
            _insert(seq, keys, _row_key(row), new(row))
    if picks:
        if node.get("autotuned") is None:
            _put(node, "autotuned", CommentedSeq(), _KERNEL_ORDER)
        seq, _ = _own(node, "autotuned", shared)
        for pick in picks:
            _insert(seq, picked, _pick_key(pick), new(pick))
    return True


def _ident(kernel: dict[str, Any], row: dict[str, Any]) -> tuple[Any, ...]:
    """What a row of a recorded kernel compiles, whatever its type variables are named."""
    return _compilations({"args": kernel.get("args"), "variants": [row]})[0].variant[:-1]


def _tuned_key(pick: Any) -> str:
    """The autotuner key a pick is for (one pick per key)."""
    return json.dumps(pick.get("key") if isinstance(pick, dict) else pick, sort_keys=True, default=str)


def _pick_key(pick: Any) -> str:
    return json.dumps(pick, sort_keys=True, default=str)


def _insert(into: CommentedSeq | CommentedMap, keys: list[str], key: str, item: Any) -> None:
    """Into a list or mapping in the order _dump writes (``keys``: its entries' keys): before the first entry
    whose key sorts after ``key`` (``item``: a mapping's (key, value))."""
    at = next((i for i, k in enumerate(keys) if k > key), len(keys))
    if isinstance(into, CommentedMap):
        into.insert(at, *item)
    else:
        into.insert(at, item)
    keys.insert(at, key)


def _listed(value: Any) -> list[Any]:
    """A list the recipe may write as its one value (``targets: sm_90a``)."""
    return [value] if isinstance(value, str) else list(value or ())


def _put(mapping: CommentedMap, key: str, value: Any, order: tuple[str, ...]) -> None:
    """``mapping[key] = value``; a new key goes before the first key ``order`` puts after it."""
    if key in mapping:
        mapping[key] = value
        return
    later = [i for i, k in enumerate(mapping) if k in order and order.index(k) > order.index(key)]
    mapping.insert(later[0] if later else len(mapping), key, value)


def _own(parent: CommentedMap, key: str, shared: bool) -> tuple[Any, bool]:
    """``parent[key]``, to change: where an anchor shares it (its own, or a parent's), a copy that takes its
    place, so that the change does not reach the aliases; and whether it was shared."""
    node = parent[key]
    if not shared and node.anchor.value is None:
        return node, False
    mine = type(node)(node)
    node.copy_attributes(mine, memo={})
    mine.yaml_set_anchor(None)
    setattr(node, Comment.attrib, Comment())  # its comments stay where they are written
    parent[key] = mine
    return mine, True


class _Verbatim:
    """What a merge adds, written as _dump writes it (flow style; PyYAML's quoting and numbers, which aotpack
    reads with): in the round-trip document a placeholder stands for each value, and ``fill`` writes the
    values in after ruamel.yaml has laid it out (it would write them as YAML 1.2 does, a float can lose its
    last digit)."""

    def __init__(self, text: str) -> None:
        self.prefix = "aotpack_merged_"
        while self.prefix in text:
            self.prefix += "_"
        self.values: list[str] = []

    def __call__(self, value: Any) -> str:
        self.values.append(_flow(value))
        return f"{self.prefix}{len(self.values) - 1}x"

    def kernel(self, kernel: dict[str, Any]) -> CommentedMap:
        """A kernel laid out as _dump does: a line per key, and per variant and autotuner pick."""
        listed = ("variants", "autotuned")
        return CommentedMap((key, CommentedSeq(map(self, value)) if key in listed and isinstance(value, list)
                             else self(value)) for key, value in kernel.items())  # fmt: skip

    def fill(self, rendered: str) -> str:
        return re.sub(re.escape(self.prefix) + r"(\d+)x", lambda m: self.values[int(m[1])], rendered)


def _splice(text: str, before: str, after: str) -> str:
    """A three-way merge of lines: the file (``text``) and ruamel.yaml's rendering of the merged document
    (``after``), over its rendering of the document as loaded (``before``). A stretch the merge changed takes
    ``after``'s lines, every other keeps the file's: ruamel.yaml writes some of what it leaves alone otherwise
    than the file (a flow list over several lines, ``null``, another indentation), and only where such a line
    touches a change does the stretch take ruamel.yaml's lines."""
    base = before.splitlines(keepends=True)
    versions = [(text if text.endswith("\n") else text + "\n").splitlines(keepends=True), after.splitlines(True)]
    changes = [collections.deque(op[1:] for op in difflib.SequenceMatcher(None, base, lines, autojunk=False)
                                 .get_opcodes() if op[0] != "equal") for lines in versions]  # fmt: skip
    shift = [0, 0]  # how far each version's lines run ahead of ``base``'s
    out: list[str] = []
    copied = 0  # ``base``'s lines up to here are in ``out``
    while changes[0] or changes[1]:
        low = high = min(side[0][0] for side in changes if side)
        taken: list[list[tuple[int, int, int, int]]] = [[], []]
        while any(side and side[0][0] <= high for side in changes):  # changes that overlap or touch: one stretch
            for side, chunk in zip(changes, taken, strict=True):
                while side and side[0][0] <= high:
                    chunk.append(side.popleft())
                    high = max(high, chunk[-1][1])
        out += versions[0][copied + shift[0] : low + shift[0]]
        grown = [sum((j2 - j1) - (i2 - i1) for i1, i2, j1, j2 in chunk) for chunk in taken]
        which = 1 if taken[1] else 0
        out += versions[which][low + shift[which] : high + shift[which] + grown[which]]
        shift = [shift[0] + grown[0], shift[1] + grown[1]]
        copied = high
    return "".join(out + versions[0][copied + shift[0] :])
