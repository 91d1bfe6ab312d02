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
(``kernels/<sha>.py``) and named by that file. Merging into an existing recipe keeps its other kernels and adds
up launch counts; the order is deterministic (diff-friendly).
"""

from __future__ import annotations

import contextlib
import json
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

from . import facts, recipe, record_agent, yamlnodes
from . import misses as misses_
from ._temp import atomic_file
from .compilers.triton import releases
from .errors import RecordError, UsageError
from .runtime import aot_kernels

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
        kind = event.get("event")
        self.sources.update(event.get("sources") or {})
        if kind == "compile":
            function = Function.of(event["function"])
            try:
                c = compilation(event)
            except (Unrecordable, ValueError, KeyError, TypeError) as exc:
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
            except ValueError:
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
    agent_dir.mkdir(parents=True)
    shutil.copyfile(record_agent.__file__, agent_dir / "sitecustomize.py")
    shutil.copyfile(RUNTIME_FILE, agent_dir / "_aotpack_kernels.py")
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
    the recipe was written."""

    events: Events
    misses: list[misses_.Miss]
    written: bool


def record(argv: list[str], out: Path, package: str, widen: dict[str, list[Any]] | None = None) -> Summary:
    """Run the program recorded and merge what it compiled into the recipe ``out`` (module docstring: the
    outcomes). Class misses of aotpack packages it ran come back too (``AOTPACK_REPORT``)."""
    problem = recipe.package_problem(package)
    if problem is not None:  # the name of a new recipe's package: refused before the program runs
        raise UsageError(f"--package {package}: {problem}")
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
        partial = out.with_name(out.name.removesuffix(".yaml").removesuffix(".yml") + ".partial.yaml")
        if events.compiled:
            write(partial, events, package, merge=False)
        kept = f"; what it compiled ({len(events.compiled)} compilations) is in {partial}" if events.compiled else ""
        raise RecordError(f"the recorded program {_status(outcome.status)}: {out} is left as it was{kept}")
    if events.compiled:
        write(out, events, package, widen=widen)
    return Summary(events=events, misses=reported, written=bool(events.compiled))


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
    name, sep, values = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageError(f"--widen {text!r}: expected NAME=VALUES, e.g. bs=1,2,4,8 or bs=1..256:pow2")
    ranged = re.fullmatch(r"(-?[0-9]{1,18})\.\.(-?[0-9]{1,18})(:pow2)?", values)
    found: list[int | float | bool | str]
    if ranged:
        low, high, pow2 = int(ranged[1]), int(ranged[2]), bool(ranged[3])
        if pow2 and low <= 0:
            raise UsageError(f"--widen {text!r}: a range of powers of two starts above 0")
        found = [1 << e for e in range(low.bit_length() - 1, high.bit_length()) if low <= 1 << e <= high] if pow2 \
            else list(range(low, high + 1)) if high - low < MAX_WIDEN else []  # fmt: skip
    else:
        found = [_widen_value(v, text) for v in values.split(",")]
    if not found or len(found) > MAX_WIDEN:
        raise UsageError(f"--widen {text!r}: give between 1 and {MAX_WIDEN} values")
    return name, list(dict.fromkeys(found))


def _widen_value(text: str, whole: str) -> int | float | bool | str:
    text = text.strip()
    if re.fullmatch(r"-?[0-9]{1,18}", text):
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text) if re.fullmatch(r"-?[0-9.]+([eE][-+]?[0-9]+)?", text) else text
    except ValueError:
        raise UsageError(f"--widen {whole!r}: {text!r} is not a value") from None


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
          widen: dict[str, list[Any]] | None = None) -> None:  # fmt: skip
    """Write the recipe of a recording to ``path``, merged into what is there (``widen``: constexprs given sets
    of values), with the sources it names written out beside it (``kernels/``; each file atomically)."""
    existing = existing_recipe(path) if merge else None
    compiled = events.compilations()
    for name in sorted({c.function.source for c in compiled if c.function.source} | _function_sources(compiled)):
        if name in events.sources:
            (path.parent / "kernels").mkdir(exist_ok=True)
            with atomic_file(path.parent / "kernels" / name) as f:
                f.write(events.sources[name].encode())
    text = recipe_text(compiled, events.picks, existing, package, widen or {}, dropped=events.skipped)
    with atomic_file(path) as f:
        f.write(text.encode())


def existing_recipe(path: Path) -> dict[str, Any] | None:
    """The recipe a recording merges into (None where there is none yet), checked where merging reads it: a
    malformed one is a located RecipeError before anything runs or is written."""
    if not path.exists():
        return None
    text = yamlnodes.read_text(path, "recipe")
    with contextlib.suppress(yaml.YAMLError):
        if yaml.safe_load(text) is None:
            return None  # empty, or only comments: nothing to merge into
    for key, node, _ in yamlnodes.parse(text, path, "recipe").items():
        if key == "targets":
            node.sequence()
        for _, kernel, _ in node.items() if key == "kernels" else ():
            fields = {k: v for k, v, _ in kernel.items()} if kernel.is_mapping() else {}
            if "launch" in fields:  # a recorded kernel (one written by hand is kept as it is)
                _check_recorded(fields)
    loaded = yaml.safe_load(text)
    return loaded if isinstance(loaded, dict) else None


def _check_recorded(fields: dict[str, yamlnodes.Node]) -> None:
    mappings = [fields[name] for name in ("args", "options") if name in fields]
    for row in fields["variants"].sequence() if "variants" in fields else ():
        parts = row.mapping((), required=("config", "class"))
        parts["class"].string()
        mappings += [parts[name] for name in ("config", "types") if name in parts]
        config = {k: v for k, v, _ in parts["config"].items()}
        for counted in [config.get("num_warps"), config.get("num_stages"), parts.get("launches")]:
            if counted is not None:
                counted.integer(minimum=0)
    for mapping in mappings:
        list(mapping.items())
    if "autotuned" in fields:
        fields["autotuned"].sequence()


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
    """The recipe (YAML text) of these compilations, merged into ``existing`` (a loaded recipe); what the recipe
    cannot say goes into ``dropped`` (what -> why)."""
    base = existing or {}
    kernels: dict[str, Any] = dict(base.get("kernels") or {})
    by_source = {str(v.get("triton")): n for n, v in kernels.items() if isinstance(v, dict) and v.get("launch")}
    targets = set(base.get("targets") or ())
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
        merged: dict[tuple[Any, ...], Compilation] = {}
        for c in [*(_compilations(old) if old else ()), *group]:  # one row twice (or per arch): add up launches
            same = merged.get(c.variant)
            merged[c.variant] = replace(c, launches=c.launches + (same.launches if same else 0))
        rows = widened(list(merged.values()), widen or {})
        widened_rows = [c for c in rows if any(isinstance(v, list) for _, v in c.constexprs)]
        rows = [c for c in rows if c in widened_rows or not any(_covers(w, c) for w in widened_rows)]
        picked = [p for p in (old or {}).get("autotuned") or () if p not in tuned[source]] + tuned[source]
        kernels[name] = _kernel(source, rows, picked, {} if dropped is None else dropped)
        by_source[source] = name
    out = {
        "package": base.get("package", package),
        "version": str(base.get("version", "0.1.0")),
        "summary": base.get("summary", "Kernels recorded from a running workload by aotpack record"),
        "targets": sorted(targets),
        "kernels": {n: kernels[n] for n in sorted(kernels)},
    }
    return _dump(out)


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
        lines.append(f"  {_flow(name)}:")
        for key, value in kernel.items():
            if key in ("variants", "autotuned") and isinstance(value, list):
                lines.append(f"    {key}:")
                lines += [f"      - {_flow(row)}" for row in value]
            else:
                lines.append(f"    {key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()
