"""Recording a program: run as a child process with aotpack's agent installed in every Python process of it
(``agent.py``: Triton's ``jit_cache_hook``, called before each compile with the signature, constants, attributes
and options, and ``launch_enter_hook``, both chained after hooks already there); each compilation reaches aotpack
as it happens, launch counts and autotuner picks at each process's exit. ``run`` says how the program ended, and
``record`` does what that ending asks:

- it exits 0, or is stopped by SIGINT or SIGTERM (aotpack passes them on: how a server ends): the recording is
  merged into the recipe;
- it never starts, exits non-zero or crashes: the recipe is left as it was, what was captured is written
  beside it as ``<recipe>.partial.yaml``, and aotpack fails (RecordError, exit 7) naming the program's status.

``recording()`` records in this process instead (tests drive its hooks directly).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from .._temp import write_file
from ..backends import recipes as recipe
from ..backends.triton import releases
from ..errors import AotpackError, OutputError, RecipeError, RecordError, UsageError
from ..runtime import AGENT, PYTHON_FILES, RECORDING_PACKAGE, _aotpack_env
from ..runtime import _aotpack_agent as record_agent
from ..runtime import _aotpack_inductor as inductor
from ..values import Widened
from ..words import plural
from . import misses as misses_
from .events import Events, read_events
from .existing import existing_recipe
from .write import write

log = logging.getLogger("aotpack")

RUNTIME = Path(record_agent.__file__).parent
# the first module every Python process of the recorded program imports: it starts the agent, from the runtime's
# package beside it (_aotpack_agent.main)
SITECUSTOMIZE = f"""\"\"\"aotpack record's agent, in each Python process of the recorded program.\"\"\"
import os
from {RECORDING_PACKAGE} import _aotpack_agent

_aotpack_agent.main(os.path.dirname(os.path.abspath(__file__)))
"""
RUNS = 3  # how often record runs a program at most: again while a run changes torch.compile's profile (_again)


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


@dataclass(frozen=True, kw_only=True)
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
        raise UsageError("give the program to record after --, e.g. aotpack record -o r.yaml -- python run.py")
    first = argv[0]
    if first in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    found = shutil.which(first)
    if found is None:
        path = Path(first)
        if path.is_file() and not os.access(path, os.X_OK):
            hint = f"-- python {first}" if first.endswith(".py") else f"chmod +x {first} first"
            raise RecordError(f"program {first} is a file that is not executable: record `{hint}`")
        if path.is_file():  # (the shell runs a file here only by a path: ./prog)
            raise RecordError(f"no such program on PATH: {first}; give ./{first} to run the file here")
        raise RecordError(f"no such program: {first} (not a file, and not on PATH)")
    return [found, *argv[1:]]


def run(argv: list[str], folder: Path, extra_env: dict[str, str] | None = None) -> Outcome:
    """Run the program with the agent in every Python process of it, its events written into ``folder /
    "events"``; SIGINT and SIGTERM sent to aotpack go on to the program."""
    cmd = command(argv)
    agent_dir = folder / "agent"
    write_file(agent_dir / "sitecustomize.py", SITECUSTOMIZE)
    write_file(agent_dir / RECORDING_PACKAGE / "__init__.py", "")
    for name in (*PYTHON_FILES, AGENT):  # the runtime's modules, under the names they have everywhere
        write_file(agent_dir / RECORDING_PACKAGE / name, (RUNTIME / name).read_bytes())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(agent_dir), env.get("PYTHONPATH")]))
    env[_aotpack_env.RECORD_DIR] = str(folder / "events")
    # Triton's cache manager in every process of the program: what any caller of triton.compile compiled or
    # found is copied into the recording, also where the agent does not run (_aotpack_guard.Recorder)
    if env.get(_aotpack_env.TRITON_MANAGER):
        env[_aotpack_env.RECORDED_MANAGER] = env[_aotpack_env.TRITON_MANAGER]
    env[_aotpack_env.TRITON_MANAGER] = f"{RECORDING_PACKAGE}._aotpack_guard:Recorder"
    # and an empty Inductor cache: a graph it holds already brings its kernels' Triton files back itself (its
    # bundle, written into Triton's cache), so that triton.compile is never called for them and they go unrecorded
    env["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor-cache")
    # under a job id, without which Dynamo keeps no profile of the sizes that changed (_aotpack_inductor)
    if not (env.get("TORCH_COMPILE_JOB_ID") or env.get("TORCH_COMPILE_STICKY_PGO_KEY")):
        env["TORCH_COMPILE_JOB_ID"] = inductor.JOB_ID
    env[_aotpack_env.RECORD_TESTED] = ",".join(f"{a}.{b}" for a, b in releases.SUPPORTED)
    env.update(extra_env or {})
    return run_child(cmd, env)


def run_child(cmd: list[str], env: dict[str, str]) -> Outcome:
    """Run ``cmd`` in ``env``, passing on SIGINT and SIGTERM sent to aotpack (how a server is stopped)."""
    log.debug("$ %s", shlex.join(cmd))  # (-v)
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as exc:
        raise RecordError(f"could not start {cmd[0]}: {exc.strerror}") from None
    stopped = False

    def pass_on(signum: int, _frame: FrameType | None) -> None:
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


@dataclass(frozen=True, kw_only=True)
class Summary:
    """What ``record`` did: the events, the class misses the program's aotpack packages reported, whether
    the recipe was written (not where it held every row already), and how often the program ran."""

    events: Events
    misses: list[misses_.Miss]
    written: bool
    runs: int = 1


def record(
    argv: list[str], out: Path, package: str, widen: dict[str, list[Widened]] | None = None, runs: int = RUNS
) -> Summary:
    """Run the program recorded and merge what it compiled into the recipe ``out`` (module docstring: the
    outcomes). Class misses of aotpack packages it ran come back too (``AOTPACK_REPORT``). A program whose run
    changed Dynamo's profile is run again, up to ``runs`` times in all (``_again``)."""
    check_package(package)
    existing_recipe(out)  # a malformed recipe fails before the program runs
    with tempfile.TemporaryDirectory(prefix="aotpack-record-") as tmp:  # (the cache entries copied from it)
        folder = Path(tmp)
        number, profile = 0, _profile(folder)
        while True:
            number += 1
            outcome = run(argv, folder, {_aotpack_env.REPORT: str(folder / "reports"),
                                         _aotpack_env.RECORD_RUN: str(number)})  # fmt: skip
            before, profile = profile, _profile(folder)  # (what the next run starts with)
            if not (outcome.ok and _again(folder, before != profile, outcome, number, runs)):
                break
            # what the next run saves of torch.compile's caches is what a served process uses: the graphs it
            # finds and those it compiles, and the profile as it is now (an earlier run's would replace it)
            shutil.rmtree(folder / "events" / record_agent.INDUCTOR)
        events = read_events(folder / "events") if (folder / "events").is_dir() else Events()
        # class misses of the aotpack packages it ran (what they let the JIT compile, the agent saw too)
        reported = misses_.read_reports([folder / "reports"]).misses if (folder / "reports").is_dir() else []
        if events.refused:  # the program ran with a Triton aotpack is not tested with: nothing was recorded
            raise RecordError(f"{events.refused[0]}; {out} is left as it was")
        if not outcome.ok:
            again = f" (run {number}: an earlier run changed torch.compile's profile)" if number > 1 else ""
            raise RecordError(f"the recorded program {_status(outcome.status)}{again}: {out} is left as it was"
                              f"{_keep_partial(out, events, package)}")  # fmt: skip
        try:
            written = bool(events.compiled or events.cached or events.inductor) and write(out, events, package,
                                                                                         widen=widen)  # fmt: skip
        except (RecordError, RecipeError, UsageError) as exc:  # the recipe changed during the run, or cannot take
            # these rows, or --widen names no constexpr they take
            raise type(exc)(f"{exc}{_keep_partial(out, events, package)}") from None
        except OSError as exc:  # its folder cannot take it (read-only, full, not a folder, an immutable file)
            raise OutputError(exc.errno, exc.strerror or str(exc), str(exc.filename or out),
                              _keep_partial(out, events, package)) from None  # fmt: skip
    return Summary(events=events, misses=reported, written=written, runs=number)


def _profile(folder: Path) -> dict[str, bytes]:
    """Dynamo's profile as the recorded program left it (its "PGO" code state: which sizes changed, kept in
    Inductor's cache folder, which ``run`` makes the recording's own), file by file."""
    dynamo = folder / "inductor-cache" / "dynamo"
    return {p.name: p.read_bytes() for p in sorted(dynamo.glob("code_state_*.pkl"))} if dynamo.is_dir() else {}


def _again(folder: Path, changed: bool, outcome: Outcome, number: int, runs: int) -> bool:
    """Whether to run the program again: its run saved torch.compile's caches and ``changed`` Dynamo's profile.
    A process served later starts with the profile as the run left it, and compiles each frame as that says
    from its first call: not always a graph the run compiled, which started with less (sizes it gave one symbol
    because they were equal get one each once the profile marks them: a Llama's attention mask and input ids in
    generate(); H200, torch 2.11, 2026-11-27). The next run starts as a served process does. A server stopped by
    a signal is not started again; nor is a run past ``runs``: said."""
    sets = folder / "events" / record_agent.INDUCTOR
    if not changed or not any(sets.glob("*.json")):
        return False
    if outcome.stopped or number >= runs:
        if outcome.stopped:
            why, fix = "it was stopped", "record a program that ends by itself (a server's warm-up requests)"
        else:
            why, fix = f"it ran {plural(runs, 'time')} (--runs)", "record it with a larger --runs"
        log.warning("run %d of the program changed torch.compile's profile of which sizes change, and %s: a served "
                    "process may compile graphs this recording does not hold; %s", number, why, fix)  # fmt: skip
        return False
    log.info("run %d of the program changed torch.compile's profile of which sizes change: running it again, "
             "as a served process starts, to record the graphs it then compiles (run %d of at most %d)", number,
             number + 1, runs)  # fmt: skip
    return True


def check_package(package: str) -> None:
    """The name of a new recipe's package (``--package``): refused before anything runs or is written."""
    problem = recipe.package_problem(package)
    if problem is not None:
        raise UsageError(f"--package {package!r}: {problem}")


def _keep_partial(out: Path, events: Events, package: str) -> str:
    """What a recording that cannot be merged captured (the JIT's compilations, Triton cache entries), written
    beside ``out`` as ``<out>.partial.yaml``, or where that cannot be written either, into a folder of its own
    in the system's temporary folder (kept); the words that say where (none when nothing was recorded)."""
    if not (events.compiled or events.cached or events.inductor):
        return ""
    partial = out.with_name(out.name.removesuffix(".yaml").removesuffix(".yml") + ".partial.yaml")
    try:
        write(partial, events, package, merge=False, check=False)  # (kept as recorded, whatever the build says)
    except (OSError, AotpackError) as beside:  # (a name too long, a folder that takes nothing)
        try:
            partial = Path(tempfile.mkdtemp(prefix="aotpack-recording-")) / "recipe.yaml"
            write(partial, events, package, merge=False, check=False)
        except (OSError, AotpackError) as exc:
            return f"; what it recorded could not be kept ({beside}; {exc})"
    cached = f", {plural(len(events.cached), 'Triton cache entry', 'Triton cache entries')}" if events.cached else ""
    if events.inductor:
        cached += f", torch.compile's caches of {plural(len(events.inductor), 'process', 'processes')}"
    return f"; what it recorded ({plural(len(events.compiled), 'compilation')}{cached}) is in {partial}"


def _status(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"
